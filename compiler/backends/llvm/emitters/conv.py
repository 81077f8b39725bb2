"""Conv and ConvTranspose emitters. A constant float32 filter is packed at compile time into a blob
appended to the constant region, and the strategy follows the shape:
- padded-shift-gemm (stride-1 convs): one GEMM over the zero-padded pixel grid, im2col rows are
  shifted contiguous rows (vector copies), pixel columns in L2-sized chunks;
- pixel-rows-gemm (7x7-stage convs, few-channel stems): pixels as GEMM rows, output channels on
  the vector lanes, then a transpose into NCHW;
- otherwise kernels/conv.py (gemm-1x1, implicit-gemm, depthwise-direct).
A runtime filter uses a direct loop nest; ConvTranspose is a direct scatter loop.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from llvmlite import ir

from compiler.backends.llvm.emitters.common import (
    F32,
    Arg,
    Call,
    EmitContext,
    Emitted,
    c64,
    entry_alloca,
    gep,
    loop,
    register,
    unsupported,
)
from compiler.backends.llvm.emitters.elementwise import fused_activation, kernel_activation
from compiler.backends.llvm.kernels.common import in_range
from compiler.backends.llvm.kernels.conv import emit_conv2d, pack_conv_weights
from compiler.graph.types import ElemKind

#: Pixels per chunk of the im2col pixel-rows conv (patch rows + GEMM output stay in L2).
PIXROWS_CHUNK = 448

#: Strategy emit_conv2d chose for a kernel key (shared kernels report it too).
_STRATEGY: dict[tuple, str] = {}


def _packed(weights: np.ndarray, C: int, K: int, group: int) -> tuple[np.ndarray, str]:
    depthwise = C == group and K % group == 0
    if depthwise and C // group == 1 and K // group <= 2:
        return np.ascontiguousarray(weights, dtype=np.float32).ravel(), "depthwise-direct"
    return pack_conv_weights(weights, group), "gemm"


@register("conv")
def emit_conv(ctx: EmitContext, ins: Any) -> Emitted:
    out, x, w, bias = (v for v, _ in ins.operands)
    if not all(v.type.elem == ElemKind.F32 for v in (out, x, w, bias)):
        raise unsupported(ins, "conv of non-float32")
    if ctx.may_alias(out, x):
        raise unsupported(ins, "conv output overlaps its input")
    at = ins.attrs
    N, C, H, W = x.type.shape
    K, _, R, S = w.type.shape
    act, act_args = at["activation"], at["act_args"]
    kact = kernel_activation(act, act_args)
    data = ctx.constant_data(w)
    calls: list[Call]
    if data is not None and _use_pixel_rows(x.type.shape, w.type.shape, out.type.shape, at):
        return _emit_pixel_rows(ctx, ins, out, x, w, bias, data, kact, act, act_args)
    if data is not None and _use_shift(x.type.shape, w.type.shape, at):
        return _emit_shift_gemm(ctx, ins, out, x, w, bias, data, kact, act, act_args)
    if data is not None:
        packed, strat = _packed(data, C, K, at["group"])
        key = (
            "conv",
            N,
            C,
            H,
            W,
            K,
            R,
            S,
            at["strides"],
            at["pads"],
            at["dilations"],
            at["group"],
            kact,
        )
        name = ctx.sink.kernels.get(key)
        if name is None:
            kern = emit_conv2d(
                ctx.sink.module,
                ctx.sink.fresh_name("conv"),
                N=N,
                C=C,
                H=H,
                W=W,
                K=K,
                R=R,
                S=S,
                weights=data.astype(np.float32),
                stride=tuple(at["strides"]),
                pad=tuple(at["pads"]),
                dilation=tuple(at["dilations"]),
                group=at["group"],
                bias=True,
                activation=kact,
            )
            name = ctx.sink.adopt(key, kern.fn)
            _STRATEGY[key] = kern.strategy
        strat = _STRATEGY.get(key, strat)
        blob = ctx.sink.blob(packed, key=("conv", w.name, at["group"]))
        calls = [Call(name, [Arg(value=x), Arg(blob=blob), Arg(value=out), Arg(value=bias)])]
        return Emitted(calls, strat)
    return Emitted([_direct_conv(ctx, ins, out, x, w, bias)], "direct")


def _use_pixel_rows(xs, ws, os_, at) -> bool:
    """Small images (the 7x7 stages): pixels as GEMM rows, output channels along the vector lanes.

    With few pixels the channel-rows GEMM wastes most of its NR-wide pixel panels; swapping the
    roles fills every lane and streams the packed filter once.
    """
    npix = os_[2] * os_[3]
    if at["group"] == 1 and ws[1] <= 4 and 32 <= ws[0] <= 128:  # stems: few input channels
        return True
    return at["group"] == 1 and npix <= 64 and ws[0] >= 64 and ws[1] * ws[2] * ws[3] >= 64


def _emit_pixel_rows(
    ctx: EmitContext,
    ins: Any,
    out: Any,
    x: Any,
    w: Any,
    bias: Any,
    data: np.ndarray,
    kact: Any,
    act: str,
    act_args: tuple,
) -> Emitted:
    """out^T[pix, K] = im2col^T[pix, C*R*S] @ W^T[C*R*S, K] (+ bias, activation), then transpose.

    The im2col rows are materialised in a scratch buffer (or read in place for a 1x1 stride-1
    conv); W^T is packed at compile time into the GEMM's B panels.
    """
    from compiler.backends.llvm.kernels.common import scratch
    from compiler.backends.llvm.kernels.gemm import (
        GemmOperands,
        emit_gemm_body,
        gemm_config,
        pack_b_constant,
        strided_a,
    )

    at = ins.attrs
    N, C, H, W = x.type.shape
    K, _, R, S = w.type.shape
    _, _, OH, OW = out.type.shape
    npix = OH * OW
    crs = C * R * S
    sh, sw = at["strides"]
    pt, pl = at["pads"][0], at["pads"][1]
    dh, dw = at["dilations"]
    pointwise = R == S == 1 and (sh, sw) == (1, 1) and tuple(at["pads"]) == (0, 0, 0, 0)
    cfg = gemm_config()
    packed = pack_b_constant(data.reshape(K, crs), transpose_b=True)
    blob = ctx.sink.blob(packed, key=("convT-rows", w.name))
    calls = []
    key = ("conv-pixrows", N, C, H, W, K, R, S, at["strides"], at["pads"], at["dilations"], kact)
    name = ctx.sink.kernels.get(key)
    if name is None:
        module = ctx.sink.module
        name = ctx.sink.fresh_name("convpx")
        fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [ir.PointerType()] * 4), name)
        for a in fn.args:
            a.add_attribute("noalias")
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        px, pw, po, pb = fn.args
        # im2col convs go in chunks of `tr` output rows (<= ~PIXROWS_CHUNK pixels), so the
        # chunk's patch rows and GEMM output stay in L2 between im2col, GEMM and transpose.
        tr = OH if pointwise else max(1, min(OH, PIXROWS_CHUNK // OW))
        cbuf = scratch(module, f"{name}.c", tr * OW * K)
        abuf = None if pointwise else scratch(module, f"{name}.a", tr * OW * crs)

        def b_addr(bb, jp, k):
            from compiler.backends.llvm.kernels.common import add, mul

            return gep(bb, pw, add(bb, mul(bb, jp, crs * cfg.nr), mul(bb, k, cfg.nr)), F32)

        with loop(b, 0, N, 1, "n") as n:
            xn = gep(b, px, b.mul(n, c64(C * H * W)), F32)
            on = gep(b, po, b.mul(n, c64(K * npix)), F32)

            def chunk(oh0: ir.Value, nrows: int) -> None:
                m = nrows * OW
                if pointwise:
                    a_addr = strided_a(xn, 1, H * W)
                else:
                    _im2col_rows(b, xn, abuf, oh0, nrows, C, H, W, R, S, OW, sh, sw, pt, pl, dh, dw)
                    a_addr = strided_a(abuf, crs)
                ops = GemmOperands(
                    a_addr=a_addr,
                    b_addr=b_addr,
                    c_base=cbuf,
                    c_stride=K,
                    bias_row=pb,
                    activation=kact,
                )
                emit_gemm_body(b, cfg, m, K, crs, ops)
                # out[n, k, oh0*OW + j] = C[j, k]
                _transpose_out(b, cbuf, gep(b, on, b.mul(oh0, c64(OW)), F32), m, npix, K)

            nfull, rest = divmod(OH, tr)
            if nfull == 1:
                chunk(c64(0), tr)
            elif nfull:
                with loop(b, 0, nfull * tr, tr, "ohc") as oh0:
                    chunk(oh0, tr)
            if rest:
                chunk(c64(nfull * tr), rest)
        b.ret_void()
        name = ctx.sink.adopt(key, fn)
    calls.append(Call(name, [Arg(value=x), Arg(blob=blob), Arg(value=out), Arg(value=bias)]))
    return Emitted(calls, "pixel-rows-gemm")


def _transpose_out(
    b: ir.IRBuilder, cbuf: ir.Value, on: ir.Value, m: int, ostride: int, K: int
) -> None:
    """on[k*ostride + p] = cbuf[p, k] for p < m, in blocks of TP pixels: each block's K x TP
    reads stay in L1 and every output row gets TP contiguous stores."""
    TP = 16
    nfull = m // TP * TP
    if nfull:
        with loop(b, 0, nfull, TP, "tp") as p0, loop(b, 0, K, 1, "tk") as k:
            src = gep(b, cbuf, b.add(b.mul(p0, c64(K)), k), F32)
            dst = gep(b, on, b.add(b.mul(k, c64(ostride)), p0), F32)
            for j in range(TP):
                b.store(b.load(gep(b, src, j * K, F32), typ=F32), gep(b, dst, j, F32))
    if nfull < m:
        with loop(b, 0, K, 1, "tkr") as k, loop(b, nfull, m, 1, "tpr") as p:
            v = b.load(gep(b, cbuf, b.add(b.mul(p, c64(K)), k), F32), typ=F32)
            b.store(v, gep(b, on, b.add(b.mul(k, c64(ostride)), p), F32))


def _tap_chunks(S: int) -> list[tuple[int, int]]:
    """(offset, width) vector pieces covering S contiguous taps (overlapping at the end)."""
    if S < 4:
        return [(s_, 1) for s_ in range(S)]
    v = 8 if S >= 8 else 4
    offs = list(range(0, S - v + 1, v))
    if offs[-1] + v < S:
        offs.append(S - v)
    return [(o, v) for o in offs]


def _im2col_rows(
    b: ir.IRBuilder,
    xn: ir.Value,
    abuf: ir.Value,
    oh0: ir.Value,
    nrows: int,
    C: int,
    H: int,
    W: int,
    R: int,
    S: int,
    OW: int,
    sh: int,
    sw: int,
    pt: int,
    pl: int,
    dh: int,
    dw: int,
) -> None:
    """im2col^T rows of output rows oh0 .. oh0+nrows-1: abuf[(oh-oh0)*OW + ow][c*R*S + r*S + s]
    = x[c, oh*sh + r*dh - pt, ow*sw + s*dw - pl], zeros in the padding.

    Output columns whose taps are all inside the row (and dw == 1) copy each (c, r) tap row with
    unchecked vector loads/stores (a whole-row select zeroes padded rows); only the few border
    columns use per-element checks.
    """
    crs = C * R * S
    ow_lo = min(OW, max(0, -(-pl // sw)))
    ow_hi = max(ow_lo, min(OW, (W - 1 - (S - 1) * dw + pl) // sw + 1))
    chunks = _tap_chunks(S) if dw == 1 else [(s_, 1) for s_ in range(S)]
    with loop(b, 0, nrows, 1, "oh") as ohl:
        oh = b.add(oh0, ohl)
        rows = []
        for r in range(R):
            ih = b.add(b.mul(oh, c64(sh)), c64(r * dh - pt))
            okh = in_range(b, ih, H)
            ihc = b.select(okh, ih, c64(0))
            rows.append((okh, b.mul(ihc, c64(W))))

        def channels(body) -> None:
            if C <= 4:
                for c in range(C):
                    body(c64(c))
            else:
                with loop(b, 0, C, 1, "c") as c:
                    body(c)

        def checked(lo: int, hi: int) -> None:
            if lo >= hi:
                return
            with loop(b, lo, hi, 1, "owc") as ow:
                row = gep(b, abuf, b.mul(b.add(b.mul(ohl, c64(OW)), ow), c64(crs)), F32)

                def body(c: ir.Value) -> None:
                    xc = gep(b, xn, b.mul(c, c64(H * W)), F32)
                    for r, (okh, hoff) in enumerate(rows):
                        for s_ in range(S):
                            iw = b.add(b.mul(ow, c64(sw)), c64(s_ * dw - pl))
                            ok = b.and_(
                                okh,
                                in_range(b, iw, W),
                            )
                            idx = b.select(ok, b.add(hoff, iw), c64(0))
                            v = b.load(gep(b, xc, idx, F32), typ=F32)
                            v = b.select(ok, v, ir.Constant(F32, 0.0))
                            b.store(
                                v,
                                gep(b, row, b.add(b.mul(c, c64(R * S)), c64(r * S + s_)), F32),
                            )

                channels(body)

        checked(0, ow_lo)
        if ow_lo < ow_hi:
            with loop(b, ow_lo, ow_hi, 1, "owi") as ow:
                row = gep(b, abuf, b.mul(b.add(b.mul(ohl, c64(OW)), ow), c64(crs)), F32)
                iw0 = b.sub(b.mul(ow, c64(sw)), c64(pl))

                def body(c: ir.Value) -> None:
                    xc = gep(b, xn, b.add(b.mul(c, c64(H * W)), iw0), F32)
                    dst_c = gep(b, row, b.mul(c, c64(R * S)), F32)
                    for r, (okh, hoff) in enumerate(rows):
                        src = gep(b, xc, hoff, F32)
                        for off, v in chunks:
                            ty = F32 if v == 1 else ir.VectorType(F32, v)
                            val = b.load(gep(b, src, off * dw, F32), typ=ty, align=4)
                            zero = ir.Constant(ty, 0.0 if v == 1 else [0.0] * v)
                            val = b.select(okh, val, zero)
                            b.store(val, gep(b, dst_c, r * S + off, F32), align=4)

                channels(body)
        checked(ow_hi, OW)


def _use_shift(xs, ws, at) -> bool:
    return (
        at["group"] == 1
        and tuple(at["strides"]) == (1, 1)
        and tuple(at["dilations"]) == (1, 1)
        and ws[2] * ws[3] > 1
        and xs[2] * xs[3] > 64
        and ws[0] >= 4
    )


#: Pixel columns per GEMM chunk of the padded-shift conv (its packed B block stays in L2).
SHIFT_NC = 512


def _emit_shift_gemm(
    ctx: EmitContext,
    ins: Any,
    out: Any,
    x: Any,
    w: Any,
    bias: Any,
    data: np.ndarray,
    kact: Any,
    act: str,
    act_args: tuple,
) -> Emitted:
    """Stride-1 conv as one GEMM over the zero-padded input's pixel grid.

    On the padded grid (Hp x Wp), tap (r, s) of output pixel p reads input pixel p + r*Wp + s:
    every im2col row is a contiguous shifted row of the padded input, so B panels are packed
    with vector copies. The GEMM computes OH x Wp columns per channel (the Wp - OW extra
    columns are dropped by the final crop). Columns go in chunks of SHIFT_NC.
    """
    from compiler.backends.llvm.kernels.common import scratch
    from compiler.backends.llvm.kernels.gemm import (
        GemmOperands,
        emit_gemm_body,
        gemm_config,
        pack_a_constant,
        panel_a,
    )

    at = ins.attrs
    N, C, H, W = x.type.shape
    K, _, R, S = w.type.shape
    _, _, OH, OW = out.type.shape
    pt, pl, pb_, pr = at["pads"]
    Hp, Wp = H + pt + pb_, W + pl + pr
    crs = C * R * S
    ngrid = OH * Wp
    cfg = gemm_config()
    nr, vw = cfg.nr, cfg.vw
    packed = pack_a_constant(np.asarray(data, dtype=np.float32).reshape(K, crs), cfg.mr).ravel()
    blob = ctx.sink.blob(packed, key=("conv-shift", w.name))
    key = ("conv-shift", N, C, H, W, K, R, S, at["pads"], kact)
    name = ctx.sink.kernels.get(key)
    if name is None:
        module = ctx.sink.module
        name = ctx.sink.fresh_name("convsh")
        fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [ir.PointerType()] * 4), name)
        for a in fn.args:
            a.add_attribute("noalias")
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        px, pw, po, pbias = fn.args
        xpad = scratch(module, f"{name}.xpad", C * Hp * Wp + 2 * nr)
        cbuf = scratch(module, f"{name}.c", K * ngrid)
        kc = min(cfg.kc, crs)
        nc_full = min(SHIFT_NC, ngrid)
        npan_max = -(-nc_full // nr)
        bbuf = scratch(module, f"{name}.b", npan_max * kc * nr)
        with loop(b, 0, N, 1, "n") as n:
            xn = gep(b, px, b.mul(n, c64(C * H * W)), F32)
            # Zero-padded copy of the image (the padding is zero from the start: only the
            # interior is ever written).
            with loop(b, 0, C, 1, "pc") as c, loop(b, 0, H, 1, "ph") as h:
                src = gep(b, xn, b.add(b.mul(c, c64(H * W)), b.mul(h, c64(W))), F32)
                dst = gep(
                    b,
                    xpad,
                    b.add(b.mul(c, c64(Hp * Wp)), b.add(b.mul(h, c64(Wp)), c64(pt * Wp + pl))),
                    F32,
                )
                with loop(b, 0, W, 1, "pw") as i:
                    b.store(b.load(gep(b, src, i, F32), typ=F32), gep(b, dst, i, F32))

            def chunk(n0: ir.Value, ncols: int) -> None:
                npf, ntail = divmod(ncols, nr)

                def fill(bb: ir.IRBuilder, buf: ir.Value, pc: ir.Value, kcv: ir.Value) -> None:
                    with loop(bb, 0, kcv, 1, "bk") as kk:
                        k = bb.add(pc, kk)
                        c = bb.udiv(k, c64(R * S))
                        rs = bb.urem(k, c64(R * S))
                        off = bb.add(
                            bb.mul(c, c64(Hp * Wp)),
                            bb.add(bb.mul(bb.udiv(rs, c64(S)), c64(Wp)), bb.urem(rs, c64(S))),
                        )
                        src = gep(bb, xpad, bb.add(off, n0), F32)
                        dst = gep(bb, buf, bb.mul(kk, c64(nr)), F32)
                        vty = ir.VectorType(F32, vw)
                        if npf:
                            with loop(bb, 0, npf, 1, "bj") as jp:
                                s0 = gep(bb, src, bb.mul(jp, c64(nr)), F32)
                                d0 = gep(bb, dst, bb.mul(jp, c64(kc * nr)), F32)
                                for v in range(nr // vw):
                                    bb.store(
                                        bb.load(gep(bb, s0, v * vw, F32), typ=vty, align=4),
                                        gep(bb, d0, v * vw, F32),
                                        align=4,
                                    )
                        for j in range(ntail):
                            bb.store(
                                bb.load(gep(bb, src, npf * nr + j, F32), typ=F32),
                                gep(bb, dst, npf * kc * nr + j, F32),
                            )

                def b_addr(bb: ir.IRBuilder, jp: Any, k: Any) -> ir.Value:
                    kl = (
                        k
                        if kc == crs
                        else bb.urem(k if isinstance(k, ir.Value) else c64(k), c64(kc))
                    )
                    jpv = jp if isinstance(jp, ir.Value) else c64(jp)
                    return gep(
                        bb, bbuf, bb.add(bb.mul(jpv, c64(kc * nr)), bb.mul(kl, c64(nr))), F32
                    )

                def b_pack(bb: ir.IRBuilder, pc: ir.Value, kcv: ir.Value) -> None:
                    fill(bb, bbuf, pc, kcv)

                ops = GemmOperands(
                    a_addr=panel_a(pw, crs, cfg.mr),
                    b_addr=b_addr,
                    c_base=gep(b, cbuf, n0, F32),
                    c_stride=ngrid,
                    b_pack=b_pack,
                    bias_col=pbias,
                    activation=kact,
                )
                emit_gemm_body(b, cfg, K, ncols, crs, ops)

            nfull, rest = divmod(ngrid, nc_full)
            if nfull:
                with loop(b, 0, nfull * nc_full, nc_full, "nch") as n0:
                    chunk(n0, nc_full)
            if rest:
                chunk(c64(nfull * nc_full), rest)
            # Crop the grid's valid columns into the NCHW output.
            on = gep(b, po, b.mul(n, c64(K * OH * OW)), F32)
            with loop(b, 0, K, 1, "ck") as k, loop(b, 0, OH, 1, "ch") as oh:
                src = gep(b, cbuf, b.add(b.mul(k, c64(ngrid)), b.mul(oh, c64(Wp))), F32)
                dst = gep(b, on, b.add(b.mul(k, c64(OH * OW)), b.mul(oh, c64(OW))), F32)
                with loop(b, 0, OW, 1, "cw") as i:
                    b.store(b.load(gep(b, src, i, F32), typ=F32), gep(b, dst, i, F32))
        b.ret_void()
        name = ctx.sink.adopt(key, fn)
    calls = [Call(name, [Arg(value=x), Arg(blob=blob), Arg(value=out), Arg(value=bias)])]
    return Emitted(calls, "padded-shift-gemm")


def _direct_conv(ctx: EmitContext, ins: Any, out: Any, x: Any, w: Any, bias: Any) -> Call:
    at = ins.attrs
    N, C, H, W = x.type.shape
    K, Cg, R, S = w.type.shape
    _, _, OH, OW = out.type.shape
    g = at["group"]
    Kg = K // g
    sh, sw = at["strides"]
    pt, pl = at["pads"][0], at["pads"][1]
    dh, dw = at["dilations"]
    act, act_args = at["activation"], at["act_args"]
    key = (
        "dconv",
        x.type.shape,
        w.type.shape,
        out.type.shape,
        at["strides"],
        at["pads"],
        at["dilations"],
        g,
        act,
        tuple(act_args),
    )

    def build(fn: ir.Function, b: ir.IRBuilder) -> None:
        px, pw, po, pb = fn.args
        with loop(b, 0, N, 1, "n") as n, loop(b, 0, K, 1, "k") as k:
            gi = b.udiv(k, c64(Kg))
            bv = b.load(gep(b, pb, k, F32), typ=F32)
            with loop(b, 0, OH, 1, "oh") as oh, loop(b, 0, OW, 1, "ow") as ow:
                acc_slot = entry_alloca(b, F32)
                b.store(bv, acc_slot)
                with loop(b, 0, Cg, 1, "c") as c:
                    cin = b.add(b.mul(gi, c64(Cg)), c)
                    xbase = b.mul(b.add(b.mul(n, c64(C)), cin), c64(H * W))
                    wbase = b.mul(b.add(b.mul(k, c64(Cg)), c), c64(R * S))
                    for r in range(R):
                        ih = b.add(b.mul(oh, c64(sh)), c64(r * dh - pt))
                        okh = in_range(b, ih, H)
                        for s in range(S):
                            iw = b.add(b.mul(ow, c64(sw)), c64(s * dw - pl))
                            ok = b.and_(
                                okh,
                                in_range(b, iw, W),
                            )
                            idx = b.select(ok, b.add(xbase, b.add(b.mul(ih, c64(W)), iw)), c64(0))
                            xv = b.load(gep(b, px, idx, F32), typ=F32)
                            xv = b.select(ok, xv, ir.Constant(F32, 0.0))
                            wv = b.load(gep(b, pw, b.add(wbase, c64(r * S + s)), F32), typ=F32)
                            b.store(b.fadd(b.load(acc_slot, typ=F32), b.fmul(xv, wv)), acc_slot)
                o = b.add(
                    b.mul(b.add(b.mul(n, c64(K)), k), c64(OH * OW)), b.add(b.mul(oh, c64(OW)), ow)
                )
                v = fused_activation(b, b.load(acc_slot, typ=F32), act, act_args)
                b.store(v, gep(b, po, o, F32))

    name = ctx.sink.kernel(key, 4, build, "dconv")
    return Call(name, [Arg(value=x), Arg(value=w), Arg(value=out), Arg(value=bias)])


@register("convtranspose")
def emit_conv_transpose(ctx: EmitContext, ins: Any) -> Emitted:
    out, x, w, bias = (v for v, _ in ins.operands)
    if not all(v.type.elem == ElemKind.F32 for v in (out, x, w, bias)):
        raise unsupported(ins, "conv-transpose of non-float32")
    if ctx.may_alias(out, x):
        raise unsupported(ins, "output overlaps the input")
    at = ins.attrs
    N, C, H, W = x.type.shape
    _, Kg, R, S = w.type.shape
    _, K, OH, OW = out.type.shape
    g = at["group"]
    Cg = C // g
    sh, sw = at["strides"]
    pt, pl = at["pads"][0], at["pads"][1]
    dh, dw = at["dilations"]
    key = (
        "convT",
        x.type.shape,
        w.type.shape,
        out.type.shape,
        at["strides"],
        at["pads"],
        at["dilations"],
        g,
    )

    def build(fn: ir.Function, b: ir.IRBuilder) -> None:
        px, pw, po, pb = fn.args
        # out = bias, then scatter-accumulate every input pixel times its filter taps.
        with loop(b, 0, N, 1, "n") as n, loop(b, 0, K, 1, "k") as k:
            bv = b.load(gep(b, pb, k, F32), typ=F32)
            base = b.mul(b.add(b.mul(n, c64(K)), k), c64(OH * OW))
            with loop(b, 0, OH * OW, 1, "p") as p:
                b.store(bv, gep(b, po, b.add(base, p), F32))
        with loop(b, 0, N, 1, "n2") as n, loop(b, 0, C, 1, "c") as c:
            gi = b.udiv(c, c64(Cg))
            with loop(b, 0, H, 1, "h") as h, loop(b, 0, W, 1, "w") as wi:
                xv = b.load(
                    gep(
                        b,
                        px,
                        b.add(
                            b.mul(b.add(b.mul(n, c64(C)), c), c64(H * W)),
                            b.add(b.mul(h, c64(W)), wi),
                        ),
                        F32,
                    ),
                    typ=F32,
                )
                with loop(b, 0, Kg, 1, "kg") as kg:
                    k = b.add(b.mul(gi, c64(Kg)), kg)
                    obase = b.mul(b.add(b.mul(n, c64(K)), k), c64(OH * OW))
                    wbase = b.mul(b.add(b.mul(c, c64(Kg)), kg), c64(R * S))
                    for r in range(R):
                        oh = b.add(b.mul(h, c64(sh)), c64(r * dh - pt))
                        okh = in_range(b, oh, OH)
                        for s in range(S):
                            ow = b.add(b.mul(wi, c64(sw)), c64(s * dw - pl))
                            ok = b.and_(
                                okh,
                                in_range(b, ow, OW),
                            )
                            oidx = b.select(ok, b.add(obase, b.add(b.mul(oh, c64(OW)), ow)), c64(0))
                            wv = b.load(gep(b, pw, b.add(wbase, c64(r * S + s)), F32), typ=F32)
                            optr = gep(b, po, oidx, F32)
                            cur = b.load(optr, typ=F32)
                            b.store(b.select(ok, b.fadd(cur, b.fmul(xv, wv)), cur), optr)

    name = ctx.sink.kernel(key, 4, build, "convT")
    return Emitted(
        [Call(name, [Arg(value=x), Arg(value=w), Arg(value=out), Arg(value=bias)])], "direct"
    )


__all__ = ["emit_conv", "emit_conv_transpose"]
