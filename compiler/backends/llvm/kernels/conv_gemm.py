"""The GEMM-based conv kernels of the strategy table (kernels/conv.py), and the filter packings
they read: ``implicit-gemm`` / ``gemm-1x1`` (output channels as GEMM rows; B panels packed at
run time from the image by im2col, or read in place from the image's channel rows for 1x1),
``pixel-rows-gemm`` (pixels as GEMM rows) and ``padded-shift-gemm`` (one
GEMM over the zero-padded pixel grid). Each body is ``body(b, shape, cfg, ptrs, activation)``.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from llvmlite import ir

from compiler.backends.llvm.kernels.common import (
    F32,
    Activation,
    Int,
    add,
    gep,
    i64,
    loop,
    mul,
)
from compiler.backends.llvm.kernels.gemm import (
    GemmConfig,
    GemmOperands,
    emit_gemm_body,
    gemm_config,
    pack_a_constant,
    pack_b_constant,
    panel_a,
    runtime_packed_b,
    strided_a,
)
from compiler.backends.llvm.kernels.parallel import scratch
from compiler.backends.llvm.kernels.window import ConvPtrs, ConvShape, split_columns

#: Pixels per chunk of the pixel-rows conv (its patch rows and GEMM output stay in L2).
PIXROWS_CHUNK = 448

#: Pixel columns per GEMM chunk of the padded-shift conv (its packed B block stays in L2).
SHIFT_NC = 512


# -- filter packings ----------------------------------------------------------------------------


def pack_conv_weights(w: np.ndarray, group: int, isa: str | None = None) -> np.ndarray:
    """[K, C/group, R, S] -> per group, the GEMM's MR-row A panels (see ``pack_a_constant``)."""
    cfg = gemm_config(isa)
    k = w.shape[0]
    kg = k // group
    w2 = np.asarray(w, dtype=np.float32).reshape(group, kg, -1)
    return np.concatenate([pack_a_constant(w2[g], cfg.mr).ravel() for g in range(group)])


def pack_a(w: np.ndarray, s: ConvShape, cfg: GemmConfig) -> np.ndarray:
    """The filter as the MR-row A panels of each group's GEMM."""
    return pack_conv_weights(w, s.group, cfg.isa)


def pack_b_rows(w: np.ndarray, s: ConvShape, cfg: GemmConfig) -> np.ndarray:
    """W^T[C*R*S, K] in the GEMM's NR-wide B panels (pixel rows x output channels)."""
    return pack_b_constant(w.reshape(s.K, -1), transpose_b=True, isa=cfg.isa)


# -- implicit GEMM and 1x1 GEMM: out[Kg, pixels] = Wg[Kg, Cg*R*S] @ im2col(Xg) -----------------


def _im2col_fill(cfg: GemmConfig, s: ConvShape, x: ir.Value):
    """Gather rows [pc, pc+kc) of the im2col matrix (rows c*R*S + r*S + s) into B panels."""
    kc_cap = min(cfg.kc, s.Cg * s.R * s.S)
    nr = cfg.nr
    rows, cols = s.rows, s.cols
    zero = ir.Constant(F32, 0.0)

    def fill(b: ir.IRBuilder, buf: ir.Value, pc: ir.Value, kcv: ir.Value) -> None:
        with loop(b, 0, kcv, 1, "ck") as kk:
            kg = b.add(pc, kk)
            c = b.udiv(kg, i64(s.R * s.S))
            rs = b.urem(kg, i64(s.R * s.S))
            r = b.udiv(rs, i64(s.S))
            t = b.urem(rs, i64(s.S))
            xc = gep(b, x, mul(b, c, s.H * s.W))
            iw0 = cols.offset_of(b, t)
            lo, hi = cols.span_of(b, iw0)  # output columns whose tap t is inside the row
            dst_k = gep(b, buf, mul(b, kk, nr))
            with loop(b, 0, s.OH, 1, "oh") as oh:
                row_ok, ih = rows.tap(b, oh, r)
                xrow = gep(b, xc, mul(b, ih, s.W))
                nrow = mul(b, oh, s.OW)

                def put(ow: ir.Value, val: ir.Value) -> None:
                    n = b.add(nrow, ow)
                    jp = b.lshr(n, i64(int(math.log2(nr))))
                    lane = b.and_(n, i64(nr - 1))
                    b.store(val, gep(b, dst_k, b.add(mul(b, jp, kc_cap * nr), lane)), align=4)

                def inner(ow: ir.Value) -> None:
                    v = b.load(gep(b, xrow, b.add(mul(b, ow, cols.stride), iw0)), typ=F32, align=4)
                    put(ow, b.select(row_ok, v, zero))

                split_columns(b, lo, hi, s.OW, lambda ow: put(ow, zero), inner)

    return fill


def gemm_body(
    b: ir.IRBuilder,
    s: ConvShape,
    cfg: GemmConfig,
    p: ConvPtrs,
    activation: Activation,
    *,
    pointwise: bool,
) -> None:
    """Per image and group, one GEMM whose B panels are packed at run time: plain row copies of
    the image for ``gemm-1x1`` (``pointwise``), im2col gathers for ``implicit-gemm``."""
    cg, kgr = s.Cg, s.Kg
    kgemm = cg * s.R * s.S
    npix, hw = s.npix, s.H * s.W
    gw = math.ceil(kgr / cfg.mr) * cfg.mr * kgemm  # floats of packed weights per group
    # The B packer reads the current image/group input through xg_slot (set in the loops below).
    xg_slot = b.alloca(ir.PointerType(), name="xg")

    def fill_any(bb: ir.IRBuilder, buf: ir.Value, pc: ir.Value, kcv: ir.Value) -> None:
        _im2col_fill(cfg, s, bb.load(xg_slot, typ=ir.PointerType()))(bb, buf, pc, kcv)

    # gemm-1x1: the image's channel rows are B's rows already, read in place (measured 1.3-3x
    # faster than packing them first on few-channel convs, the same on wide ones).
    direct = pointwise
    if not direct:
        b_addr, b_pack = runtime_packed_b(b.module, b.function.name, cfg, npix, kgemm, fill_any)
    with loop(b, 0, s.N, 1, "n") as n, loop(b, 0, s.group, 1, "g") as g:
        xg = gep(b, p.x, b.add(mul(b, n, s.C * hw), mul(b, g, cg * hw)))
        b.store(xg, xg_slot)
        og = gep(b, p.out, b.add(mul(b, n, s.K * npix), mul(b, g, kgr * npix)))
        if direct:

            def b_addr(bb: ir.IRBuilder, jp: Int, k: Int, xg: ir.Value = xg) -> ir.Value:
                return gep(bb, xg, add(bb, mul(bb, k, hw), mul(bb, jp, cfg.nr)))

            b_pack = None
        ops = GemmOperands(
            a_addr=panel_a(gep(b, p.w, mul(b, g, gw)), kgemm, cfg.mr),
            b_addr=b_addr,
            c_base=og,
            c_stride=npix,
            b_pack=b_pack,
            b_exact=direct,
            bias_col=gep(b, p.bias, mul(b, g, kgr)) if p.bias is not None else None,
            activation=activation,
        )
        emit_gemm_body(b, cfg, kgr, npix, kgemm, ops)


# -- pixel rows: out^T[pix, K] = im2col^T[pix, C*R*S] @ W^T[C*R*S, K], then a transpose ---------


# -- pixel rows: out^T[pix, K] = im2col^T[pix, C*R*S] @ W^T[C*R*S, K], then a transpose ---------


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
    b: ir.IRBuilder, s: ConvShape, xn: ir.Value, abuf: ir.Value, oh0: ir.Value, nrows: int
) -> None:
    """im2col^T rows of output rows oh0 .. oh0+nrows-1: abuf[(oh-oh0)*OW + ow][c*R*S + r*S + t]
    = x[c, row tap r of oh, column tap t of ow], zeros in the padding.

    Interior columns (every tap inside the row; with dilation 1) copy each (c, r) tap row with
    unchecked vector loads/stores (a whole-row select zeroes padded rows); only the few border
    columns test each tap.
    """
    C, H, W, R, S, OW = s.C, s.H, s.W, s.R, s.S, s.OW
    crs = C * R * S
    cols = s.cols
    lo, hi = cols.interior()
    chunks = _tap_chunks(S) if cols.dilation == 1 else [(t, 1) for t in range(S)]
    zero = ir.Constant(F32, 0.0)
    with loop(b, 0, nrows, 1, "oh") as ohl:
        oh = b.add(oh0, ohl)
        rows = []
        for r in range(R):
            okh, ih = s.rows.tap(b, oh, r)
            rows.append((okh, b.mul(ih, i64(W))))

        def channels(body: Callable[[ir.Value], None]) -> None:
            if C <= 4:
                for c in range(C):
                    body(i64(c))
            else:
                with loop(b, 0, C, 1, "c") as c:
                    body(c)

        def patch_row(ow: ir.Value) -> ir.Value:
            return gep(b, abuf, b.mul(b.add(b.mul(ohl, i64(OW)), ow), i64(crs)))

        def border(ow: ir.Value) -> None:
            row = patch_row(ow)
            taps = [cols.tap(b, ow, t) for t in range(S)]

            def body(c: ir.Value) -> None:
                xc = gep(b, xn, b.mul(c, i64(H * W)))
                for r, (okh, hoff) in enumerate(rows):
                    for t, (okw, iw) in enumerate(taps):
                        ok = b.and_(okh, okw)
                        v = b.load(gep(b, xc, b.add(hoff, iw)), typ=F32)
                        dst = gep(b, row, b.add(b.mul(c, i64(R * S)), i64(r * S + t)))
                        b.store(b.select(ok, v, zero), dst)

            channels(body)

        def inner(ow: ir.Value) -> None:
            row = patch_row(ow)
            iw0 = cols.coord(b, ow, 0)

            def body(c: ir.Value) -> None:
                xc = gep(b, xn, b.add(b.mul(c, i64(H * W)), iw0))
                dst_c = gep(b, row, b.mul(c, i64(R * S)))
                for r, (okh, hoff) in enumerate(rows):
                    src = gep(b, xc, hoff)
                    for off, v in chunks:
                        ty = F32 if v == 1 else ir.VectorType(F32, v)
                        val = b.load(gep(b, src, off * cols.dilation), typ=ty, align=4)
                        vzero = ir.Constant(ty, 0.0 if v == 1 else [0.0] * v)
                        b.store(b.select(okh, val, vzero), gep(b, dst_c, r * S + off), align=4)

            channels(body)

        split_columns(b, lo, hi, OW, border, inner, "owc")


def _transpose_out(
    b: ir.IRBuilder, cbuf: ir.Value, on: ir.Value, m: int, ostride: int, K: int
) -> None:
    """on[k*ostride + p] = cbuf[p, k] for p < m, in blocks of TP pixels: each block's K x TP
    reads stay in L1 and every output row gets TP contiguous stores."""
    TP = 16
    nfull = m // TP * TP
    if nfull:
        with loop(b, 0, nfull, TP, "tp") as p0, loop(b, 0, K, 1, "tk") as k:
            src = gep(b, cbuf, b.add(b.mul(p0, i64(K)), k))
            dst = gep(b, on, b.add(b.mul(k, i64(ostride)), p0))
            for j in range(TP):
                b.store(b.load(gep(b, src, j * K), typ=F32), gep(b, dst, j))
    if nfull < m:
        with loop(b, 0, K, 1, "tkr") as k, loop(b, nfull, m, 1, "tpr") as p:
            v = b.load(gep(b, cbuf, b.add(b.mul(p, i64(K)), k)), typ=F32)
            b.store(v, gep(b, on, b.add(b.mul(k, i64(ostride)), p)))


def pixel_rows_body(
    b: ir.IRBuilder, s: ConvShape, cfg: GemmConfig, p: ConvPtrs, activation: Activation
) -> None:
    """The im2col rows go to a scratch buffer (read in place for a 1x1 stride-1 conv), in chunks
    of ``tr`` output rows (<= ~PIXROWS_CHUNK pixels) so the chunk's patch rows and GEMM output
    stay in L2 between im2col, GEMM and transpose; W^T comes packed (``pack_b_rows``)."""
    module, name = b.module, b.function.name
    K, OH, OW, npix = s.K, s.OH, s.OW, s.npix
    crs = s.C * s.R * s.S
    pointwise = s.pointwise
    tr = OH if pointwise else max(1, min(OH, PIXROWS_CHUNK // OW))
    cbuf = scratch(module, f"{name}.c", tr * OW * K)
    abuf = None if pointwise else scratch(module, f"{name}.a", tr * OW * crs)

    def b_addr(bb: ir.IRBuilder, jp: Int, k: Int) -> ir.Value:
        return gep(bb, p.w, add(bb, mul(bb, jp, crs * cfg.nr), mul(bb, k, cfg.nr)))

    with loop(b, 0, s.N, 1, "n") as n:
        xn = gep(b, p.x, b.mul(n, i64(s.C * s.H * s.W)))
        on = gep(b, p.out, b.mul(n, i64(K * npix)))

        def chunk(oh0: ir.Value, nrows: int) -> None:
            m = nrows * OW
            if abuf is None:
                a_addr = strided_a(xn, 1, s.H * s.W)
            else:
                _im2col_rows(b, s, xn, abuf, oh0, nrows)
                a_addr = strided_a(abuf, crs)
            ops = GemmOperands(
                a_addr=a_addr,
                b_addr=b_addr,
                c_base=cbuf,
                c_stride=K,
                bias_row=p.bias,
                activation=activation,
            )
            emit_gemm_body(b, cfg, m, K, crs, ops)
            # out[n, k, oh0*OW + j] = C[j, k]
            _transpose_out(b, cbuf, gep(b, on, b.mul(oh0, i64(OW))), m, npix, K)

        nfull, rest = divmod(OH, tr)
        if nfull == 1:
            chunk(i64(0), tr)
        elif nfull:
            with loop(b, 0, nfull * tr, tr, "ohc") as oh0:
                chunk(oh0, tr)
        if rest:
            chunk(i64(nfull * tr), rest)


# -- padded shift: a stride-1 conv as one GEMM over the zero-padded pixel grid ----------------


def padded_shift_body(
    b: ir.IRBuilder, s: ConvShape, cfg: GemmConfig, p: ConvPtrs, activation: Activation
) -> None:
    """On the padded grid (Hp x Wp), tap (r, t) of output pixel q reads input pixel q + r*Wp + t:
    every im2col row is a contiguous shifted row of the padded input, so B panels are packed
    with vector copies. The GEMM computes OH x Wp columns per channel (the Wp - OW extra
    columns are dropped by the final crop). Columns go in chunks of SHIFT_NC.
    """
    module, name = b.module, b.function.name
    C, H, W, K, R, S, OH, OW = s.C, s.H, s.W, s.K, s.R, s.S, s.OH, s.OW
    pt, pl, pb_, pr = s.pad
    Hp, Wp = H + pt + pb_, W + pl + pr
    crs = C * R * S
    ngrid = OH * Wp
    nr, vw = cfg.nr, cfg.vw
    # The crop's dropped columns of the last row read up to S - 1 floats past the grid.
    xpad = scratch(module, f"{name}.xpad", C * Hp * Wp + max(2 * nr, S))
    cbuf = scratch(module, f"{name}.c", K * ngrid)
    kc = min(cfg.kc, crs)
    nc_full = min(SHIFT_NC, ngrid)
    npan_max = -(-nc_full // nr)
    bbuf = scratch(module, f"{name}.b", npan_max * kc * nr)
    vty = ir.VectorType(F32, vw)
    with loop(b, 0, s.N, 1, "n") as n:
        xn = gep(b, p.x, b.mul(n, i64(C * H * W)))
        # Zero-padded copy of the image (the padding is zero from the start: only the
        # interior is ever written).
        with loop(b, 0, C, 1, "pc") as c, loop(b, 0, H, 1, "ph") as h:
            src = gep(b, xn, b.add(b.mul(c, i64(H * W)), b.mul(h, i64(W))))
            dst = gep(
                b, xpad, b.add(b.mul(c, i64(Hp * Wp)), b.add(b.mul(h, i64(Wp)), i64(pt * Wp + pl)))
            )
            with loop(b, 0, W, 1, "pw") as i:
                b.store(b.load(gep(b, src, i), typ=F32), gep(b, dst, i))

        def chunk(n0: ir.Value, ncols: int) -> None:
            npf, ntail = divmod(ncols, nr)

            def b_pack(bb: ir.IRBuilder, pc: ir.Value, kcv: ir.Value) -> None:
                with loop(bb, 0, kcv, 1, "bk") as kk:
                    k = bb.add(pc, kk)
                    c = bb.udiv(k, i64(R * S))
                    rs = bb.urem(k, i64(R * S))
                    off = bb.add(
                        bb.mul(c, i64(Hp * Wp)),
                        bb.add(bb.mul(bb.udiv(rs, i64(S)), i64(Wp)), bb.urem(rs, i64(S))),
                    )
                    src = gep(bb, xpad, bb.add(off, n0))
                    dst = gep(bb, bbuf, bb.mul(kk, i64(nr)))
                    if npf:
                        with loop(bb, 0, npf, 1, "bj") as jp:
                            s0 = gep(bb, src, bb.mul(jp, i64(nr)))
                            d0 = gep(bb, dst, bb.mul(jp, i64(kc * nr)))
                            for v in range(nr // vw):
                                val = bb.load(gep(bb, s0, v * vw), typ=vty, align=4)
                                bb.store(val, gep(bb, d0, v * vw), align=4)
                    for j in range(ntail):
                        bb.store(
                            bb.load(gep(bb, src, npf * nr + j), typ=F32),
                            gep(bb, dst, npf * kc * nr + j),
                        )

            def b_addr(bb: ir.IRBuilder, jp: Int, k: Int) -> ir.Value:
                kl = k if kc == crs else bb.urem(i64(k), i64(kc))
                return gep(
                    bb, bbuf, bb.add(bb.mul(i64(jp), i64(kc * nr)), bb.mul(i64(kl), i64(nr)))
                )

            ops = GemmOperands(
                a_addr=panel_a(p.w, crs, cfg.mr),
                b_addr=b_addr,
                c_base=gep(b, cbuf, n0),
                c_stride=ngrid,
                b_pack=b_pack,
                bias_col=p.bias,
                activation=activation,
            )
            emit_gemm_body(b, cfg, K, ncols, crs, ops)

        nfull, rest = divmod(ngrid, nc_full)
        if nfull:
            with loop(b, 0, nfull * nc_full, nc_full, "nch") as n0:
                chunk(n0, nc_full)
        if rest:
            chunk(i64(nfull * nc_full), rest)
        # Crop the grid's valid columns into the NCHW output.
        on = gep(b, p.out, b.mul(n, i64(K * OH * OW)))
        with loop(b, 0, K, 1, "ck") as k, loop(b, 0, OH, 1, "ch") as oh:
            src = gep(b, cbuf, b.add(b.mul(k, i64(ngrid)), b.mul(oh, i64(Wp))))
            dst = gep(b, on, b.add(b.mul(k, i64(OH * OW)), b.mul(oh, i64(OW))))
            with loop(b, 0, OW, 1, "cw") as i:
                b.store(b.load(gep(b, src, i), typ=F32), gep(b, dst, i))


__all__ = [
    "PIXROWS_CHUNK",
    "SHIFT_NC",
    "gemm_body",
    "pack_a",
    "pack_b_rows",
    "pack_conv_weights",
    "padded_shift_body",
    "pixel_rows_body",
]
