"""The GEMM-based conv kernels of the strategy table (kernels/conv.py), and the filter packings
they read: ``implicit-gemm`` / ``gemm-1x1`` (output channels as GEMM rows; B panels packed at
run time from the image by im2col, or read in place from the image's channel rows for 1x1),
``pixel-rows-gemm`` (pixels as GEMM rows) and ``padded-shift-gemm`` (one
GEMM over the zero-padded pixel grid). Each body is ``body(b, shape, cfg, ptrs, epilogue)``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace

import numpy as np
from llvmlite import ir

import compiler.backends.llvm.kernels.gemm as _gemm
from compiler.backends.llvm.kernels.common import (
    F32,
    I64,
    PTR,
    Epilogue,
    Int,
    add,
    folded,
    gep,
    i64,
    int_array,
    load_vec,
    loop,
    mul,
    smin,
    store_vec,
    transpose_square,
    vector_runs,
)
from compiler.backends.llvm.kernels.direct import copy_padded, strided_vector
from compiler.backends.llvm.kernels.gemm import (
    AAddr,
    GemmConfig,
    GemmOperands,
    Split,
    emit_gemm_body,
    conv_gemm_config,
    pack_a_constant,
    pack_b_constant,
    panel_a,
    prefetch,
    runtime_packed_b,
    strided_a,
)
from compiler.backends.llvm.kernels.parallel import (
    ELEMENT_WORK,
    parallel_loop,
    scratch,
    shared_scratch,
    thread_scratch,
    work_chunks,
)
from compiler.backends.llvm.kernels.window import ConvPtrs, ConvShape, split_columns

#: Pixels per chunk of the pixel-rows conv (its patch rows and GEMM output stay in L2).
PIXROWS_CHUNK = 448

#: Pixel columns per GEMM chunk of the padded-shift conv (its packed B block stays in L2).
SHIFT_NC = 512


# -- filter packings ----------------------------------------------------------------------------


def pack_conv_weights(
    w: np.ndarray, group: int, isa: str | None = None, cfg: GemmConfig | None = None
) -> np.ndarray:
    """[K, C/group, R, S] -> per group, the GEMM's MR-row A panels (see ``pack_a_constant``)."""
    cfg = cfg or conv_gemm_config(isa)
    k = w.shape[0]
    kg = k // group
    w2 = np.asarray(w, dtype=np.float32).reshape(group, kg, -1)
    return np.concatenate([pack_a_constant(w2[g], cfg.mr).ravel() for g in range(group)])


def pack_a(w: np.ndarray, s: ConvShape, cfg: GemmConfig) -> np.ndarray:
    """The filter as the MR-row A panels of each group's GEMM."""
    return pack_conv_weights(w, s.group, cfg=cfg)


def pack_b_rows(w: np.ndarray, s: ConvShape, cfg: GemmConfig) -> np.ndarray:
    """W^T[C*R*S, K] in the GEMM's NR-wide B panels (pixel rows x output channels)."""
    return pack_b_constant(w.reshape(s.K, -1), transpose_b=True, cfg=cfg)


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
                    jp = b.udiv(n, i64(nr))  # NR need not be a power of two
                    lane = b.urem(n, i64(nr))
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
    ep: Epilogue,
    *,
    pointwise: bool,
) -> None:
    """Per image and group, one GEMM whose B panels are packed at run time: plain row copies of
    the image for ``gemm-1x1`` (``pointwise``), im2col gathers for ``implicit-gemm``."""
    kgr = s.Kg
    # A shared 1x1 kernel (``p.cin``) takes its input channels, GEMM's K, as an argument.
    assert p.cin is None or (pointwise and s.group == 1)
    cg: Int = s.Cg if p.cin is None else p.cin
    kgemm: Int = mul(b, cg, s.R * s.S) if p.cin is None else p.cin
    npix, hw = s.npix, s.H * s.W
    gw = mul(b, kgemm, math.ceil(kgr / cfg.mr) * cfg.mr)  # floats of packed weights per group
    c_hw: Int = s.C * hw if p.cin is None else mul(b, p.cin, hw)
    cg_hw: Int = cg * hw if p.cin is None else c_hw
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
        xg = gep(b, p.x, add(b, mul(b, n, c_hw), mul(b, g, cg_hw)))
        b.store(xg, xg_slot)
        og = gep(b, p.out, b.add(mul(b, n, s.K * npix), mul(b, g, kgr * npix)))
        wg = gep(b, p.w, mul(b, g, gw))
        bg = gep(b, p.bias, mul(b, g, kgr)) if p.bias is not None else None

        def operands(vals: list[ir.Value]) -> GemmOperands:
            """The GEMM over (this kernel's, or a parallel chunk's copies of) the group's
            filter, input, output, pixels, plane size, K and bias (the sizes are values in a
            shared chunk, ``gemm.SHARED_CHUNKS``)."""
            wv, xv, ov = vals[:3]
            npx, hwv, kgv = (folded(v) for v in vals[3:6])
            if direct:

                def b_in_place(bb: ir.IRBuilder, jp: Int, k: Int) -> ir.Value:
                    return gep(bb, xv, add(bb, mul(bb, k, hwv), mul(bb, jp, cfg.nr)))

            # A run-time K: a shared 1x1 kernel's argument, or a shared chunk's value.
            k_run = None if isinstance(kgv, int) else kgv
            return GemmOperands(
                a_addr=panel_a(wv, kgv, cfg.mr),
                b_addr=b_in_place if direct else b_addr,
                c_base=ov,
                c_stride=npx,
                b_pack=None if direct else b_pack,
                b_exact=direct,
                a_packed=True,
                bias_col=vals[6] if bg is not None else None,
                accumulate=ep.accumulate,
                activation=ep.activation,
                k_run=k_run,
            )

        captures = [wg, xg, og, i64(npix), i64(hw), i64(kgemm)] + ([bg] if bg is not None else [])
        # A shared kernel's chunks follow the K it stands for (see ``shared_cin``).
        kstat = s.Cg * s.R * s.S
        if p.cin is not None:  # K, the kernel's argument, is captured as kgemm
            kstat = shared_cin(s.C, cfg)
        ntiles = -(-kgr // cfg.mr) * -(-npix // cfg.nr)
        key = ("conv-gemm", direct, bg is not None, ep.accumulate, ep.activation)
        split = Split(
            work_chunks(kgr * npix * kstat, ntiles), captures, operands, prefer="m", key=key
        )
        emit_gemm_body(b, cfg, kgr, npix, kstat, operands(captures), split)


def shared_cin(C: int, cfg: GemmConfig) -> int:
    """The input channels a shared 1x1 GEMM kernel is emitted for, standing for every C that
    shares it: one K block (C <= KC) or more, and C's power of two (the parallel chunks, which
    follow the work, are those of this C; the results do not depend on them)."""
    if C <= cfg.kc:
        return min(cfg.kc, 1 << (C.bit_length() - 1))
    return max(cfg.kc + 1, 1 << (C.bit_length() - 1))


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
    b: ir.IRBuilder, s: ConvShape, xn: ir.Value, abuf: ir.Value, oh0: ir.Value, nrows: Int
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


#: ``_transpose_out`` moves blocks of vw x vw floats through a register transpose.
VECTOR_TRANSPOSE = True


def _transpose_out(
    b: ir.IRBuilder,
    cbuf: ir.Value,
    on: ir.Value,
    m: int,
    ostride: int,
    K: int,
    ep: Epilogue | None = None,
    vw: int = 0,
) -> None:
    """on[k*ostride + p] = cbuf[p, k] for p < m, in blocks of TP pixels: each block's K x TP
    reads stay in L1 and every output row gets TP contiguous stores; through ``ep`` when given
    (an accumulating conv: the GEMM ran without the epilogue)."""

    def put(v: ir.Value, ptr: ir.Value) -> None:
        if ep is None:
            b.store(v, ptr)
        else:
            ep.store(b, v, ptr)

    TP = 16
    nfull = m // TP * TP
    vw = vw if VECTOR_TRANSPOSE else 0
    kv = K // vw * vw if vw and TP % vw == 0 else 0
    if nfull and kv:
        # Blocks of vw pixels x vw channels: vw vector loads (a pixel's channels), a transpose
        # in registers, vw vector stores (a channel's pixels), instead of vw * vw scalar loads
        # and stores; channels past the last whole vector below.
        vt = ir.VectorType(F32, vw)
        with loop(b, 0, nfull, vw, "tpv") as p0, loop(b, 0, kv, vw, "tkv") as k0:
            src = gep(b, cbuf, b.add(b.mul(p0, i64(K)), k0))
            rows = [b.load(gep(b, src, j * K), typ=vt, align=4) for j in range(vw)]
            cols = transpose_square(b, rows)
            dst = gep(b, on, b.add(b.mul(k0, i64(ostride)), p0))
            for j, v in enumerate(cols):
                at = gep(b, dst, j * ostride)
                if ep is None:
                    store_vec(b, v, at, vw)
                else:
                    ep.store(b, v, at, vw)
    if nfull and kv < K:
        with loop(b, 0, nfull, TP, "tp") as p0, loop(b, kv, K, 1, "tk") as k:
            src = gep(b, cbuf, b.add(b.mul(p0, i64(K)), k))
            dst = gep(b, on, b.add(b.mul(k, i64(ostride)), p0))
            if ep is not None and ep.accumulate and _gemm.PREFETCH_TRANSPOSE_ROWS:
                ahead = gep(b, dst, _gemm.PREFETCH_TRANSPOSE_ROWS * ostride)
                prefetch(b, ahead)
                prefetch(b, gep(b, ahead, TP - 1))
            for j in range(TP):
                put(b.load(gep(b, src, j * K), typ=F32), gep(b, dst, j))
    if nfull < m:
        with loop(b, 0, K, 1, "tkr") as k, loop(b, nfull, m, 1, "tpr") as p:
            v = b.load(gep(b, cbuf, b.add(b.mul(p, i64(K)), k)), typ=F32)
            put(v, gep(b, on, b.add(b.mul(k, i64(ostride)), p)))


def pixel_rows_body(
    b: ir.IRBuilder, s: ConvShape, cfg: GemmConfig, p: ConvPtrs, ep: Epilogue
) -> None:
    """The im2col rows go to a scratch buffer (read in place for a 1x1 stride-1 conv), in chunks
    of ``tr`` output rows (<= ~PIXROWS_CHUNK pixels) so the chunk's patch rows and GEMM output
    stay in L2 between im2col, GEMM and transpose; W^T comes packed (``pack_b_rows``)."""
    module, name = b.module, b.function.name
    K, OH, OW, npix = s.K, s.OH, s.OW, s.npix
    pointwise = s.pointwise
    # A shared 1x1 kernel (``p.cin``) takes its input channels, GEMM's K, as an argument.
    assert p.cin is None or (pointwise and s.group == 1)
    crs: Int = s.C * s.R * s.S if p.cin is None else p.cin
    kstat = s.C * s.R * s.S if p.cin is None else shared_cin(s.C, cfg)
    tr = OH if pointwise else max(1, min(OH, PIXROWS_CHUNK // OW))
    # Both written in full by each chunk before they are read (the patch rows by im2col, the
    # GEMM's output tile by its first K block): shared by the pixel-rows convs of one size.
    cbuf = shared_scratch(module, "pixrows.c", tr * OW * K)
    abuf = None if pointwise else shared_scratch(module, "pixrows.a", tr * OW * crs)

    nfull, rest = divmod(OH, tr)
    nchunks = nfull + (1 if rest else 0)
    has_bias = p.bias is not None

    def operands(
        w: ir.Value, bias: ir.Value | None, a_addr: AAddr, c_base: ir.Value, crs_v: Int, k_v: Int
    ) -> GemmOperands:
        """The GEMM of a chunk over packed W^T ``w``: A at ``a_addr``, C at ``c_base``, K =
        ``crs_v`` (a run-time K, a shared 1x1 kernel's or a shared chunk's, is ``k_run``) and
        N = ``k_v`` output channels."""
        k_run = None if isinstance(crs_v, int) else crs_v

        def b_addr(bb: ir.IRBuilder, jp: Int, k: Int) -> ir.Value:
            return gep(bb, w, add(bb, mul(bb, jp, mul(bb, crs_v, cfg.nr)), mul(bb, k, cfg.nr)))

        return GemmOperands(
            a_addr=a_addr,
            b_addr=b_addr,
            c_base=c_base,
            c_stride=k_v,
            bias_row=bias,
            activation=None if ep.accumulate else ep.activation,
            k_run=k_run,
        )

    def chunk(bb: ir.IRBuilder, tid: ir.Value, vals: list[ir.Value], oh0: ir.Value, nrows: int):
        """Output rows oh0 .. oh0+nrows-1: im2col, GEMM, transpose, in the thread's buffers.
        A lone chunk spreads its GEMM's output-channel panels over the pool instead."""
        xn, on = vals[:2]
        m = nrows * OW
        gcfg = replace(cfg, mr=fit_mr(m, cfg.mr)) if FIT_MR else cfg
        cb = thread_scratch(bb, cbuf, tid)
        if abuf is None:
            a_src, a_addr = None, strided_a(xn, 1, s.H * s.W)
        elif nchunks == 1:
            # The lone chunk's GEMM is spread over the pool: so is its im2col, by output rows
            # (serial, it was the 7x7 stage's part that a second thread did not share).
            a_src = abuf
            rper = -(-nrows // work_chunks(nrows * OW * kstat * ELEMENT_WORK, nrows))

            def rows_chunk(rb: ir.IRBuilder, i: ir.Value, _t: ir.Value, v: list[ir.Value]) -> None:
                r0 = rb.mul(i, i64(rper))
                count = rb.sub(smin(rb, rb.add(r0, i64(rper)), nrows), r0)
                dst = gep(rb, abuf, rb.mul(r0, i64(OW * kstat)))
                _im2col_rows(rb, s, v[0], dst, rb.add(v[1], r0), count)

            parallel_loop(bb, -(-nrows // rper), [xn, oh0], rows_chunk, "im2col")
            a_addr = strided_a(a_src, crs)
        else:
            a_src = thread_scratch(bb, abuf, tid)
            _im2col_rows(bb, s, xn, a_src, oh0, nrows)
            a_addr = strided_a(a_src, crs)
        w, bias = vals[2], vals[3] if has_bias else None
        crs_here = vals[-1] if p.cin is not None else crs  # this function's copy of C
        split = None
        if nchunks == 1:
            # Thread 0's buffers are globals the chunks of the split can use as they are; they,
            # A's strides and the sizes go in as values, so that the chunks of convs of one
            # structure are one function (``gemm.SHARED_CHUNKS``).
            a_base, a_sm, a_sk = (xn, 1, s.H * s.W) if abuf is None else (abuf, crs_here, 1)
            caps = [w, cbuf, a_base] + [i64(x) for x in (a_sm, a_sk, crs_here, K)]
            caps += [bias] if bias is not None else []

            def split_ops(v: list[ir.Value]) -> GemmOperands:
                sm, sk, crs_v, k_v = (folded(x) for x in v[3:7])
                a = strided_a(v[2], sm, sk)
                return operands(v[0], v[7] if has_bias else None, a, v[1], crs_v, k_v)

            tiles = -(-m // gcfg.mr) * -(-K // cfg.nr)
            key = ("pixel-rows", has_bias, ep.accumulate, ep.activation, cfg)
            split = Split(work_chunks(m * K * kstat, tiles), caps, split_ops, key=key)
        emit_gemm_body(bb, gcfg, m, K, kstat, operands(w, bias, a_addr, cb, crs_here, K), split)
        # out[n, k, oh0*OW + j] = C[j, k]
        # out[n, k, oh0*OW + j] = C[j, k] (+ out, then the activation, when accumulating)
        dst = gep(bb, on, bb.mul(oh0, i64(OW)))
        _transpose_out(bb, cb, dst, m, npix, K, ep if ep.accumulate else None, cfg.vw)

    def row_chunk(bb: ir.IRBuilder, i: ir.Value, tid: ir.Value, vals: list[ir.Value]) -> None:
        if not rest:
            chunk(bb, tid, vals, bb.mul(i, i64(tr)), tr)
            return
        if not nfull:
            chunk(bb, tid, vals, i64(0), rest)
            return
        with bb.if_else(bb.icmp_signed("<", i, i64(nfull))) as (full, last):
            with full:
                chunk(bb, tid, vals, bb.mul(i, i64(tr)), tr)
            with last:
                chunk(bb, tid, vals, i64(nfull * tr), rest)

    with loop(b, 0, s.N, 1, "n") as n:
        chw = s.C * s.H * s.W if p.cin is None else b.mul(p.cin, i64(s.H * s.W))
        xn = gep(b, p.x, b.mul(n, i64(chw)))
        on = gep(b, p.out, b.mul(n, i64(K * npix)))
        captures = [xn, on, p.w] + ([p.bias] if has_bias else [])
        captures += [p.cin] if p.cin is not None else []
        parallel_loop(b, nchunks, captures, row_chunk, "rows")


def fit_mr(m: int, mr: int) -> int:
    """The register tile's rows for a GEMM of ``m`` rows: ``mr``, or one or two fewer when
    those divide ``m`` in no more tiles (a 7x7 plane's 49 pixel rows: 7 tiles of 7 rows, not
    6 of 8 and a 1-row tail tile that runs at its FMA latency)."""
    if m % mr == 0:
        return mr
    for r in (mr - 1, mr - 2):
        if r >= 2 and m % r == 0 and -(-m // r) <= -(-m // mr):
            return r
    return mr


FIT_MR = True


# -- padded shift: a stride-1 conv as one GEMM over the zero-padded pixel grid ----------------


def shift_geometry(s: ConvShape) -> tuple[int, int, list[tuple[int, int]], list[int]]:
    """(Hq, Wq, phases, offsets) of the padded-shift conv: the padded image (Hp x Wp) is split
    into stride phases of Hq x Wq pixels (phase (a, b) holds padded pixels (i*sh + a, j*sw + b);
    only the phases some tap reads, in ``phases``); ``offsets[r*S + t]`` is where tap (r, t) of
    grid column 0 reads, in floats from channel 0's first phase (channel c adds c * stride)."""
    (sh, sw), (dh, dw) = s.stride, s.dilation
    pt, pl, pb, pr = s.pad
    hq, wq = -(-(s.H + pt + pb) // sh), -(-(s.W + pl + pr) // sw)
    if sh == sw == 1:
        # Rows share their padding columns: a tap past a row's right edge reads the next
        # row's left padding (zero as well), so a row is W + max(pl, pr) floats, not
        # W + pl + pr (a 28x28 3x3 conv: 29 grid columns per output row, not 30). It still
        # holds a whole output row.
        wq = max(s.W + max(pl, pr), s.OW)
    taps = [(r * dh, t * dw) for r in range(s.R) for t in range(s.S)]
    phases = sorted({(y % sh, x % sw) for y, x in taps})
    offsets = [phases.index((y % sh, x % sw)) * hq * wq + (y // sh) * wq + x // sw for y, x in taps]
    return hq, wq, phases, offsets


def padded_shift_body(
    b: ir.IRBuilder, s: ConvShape, cfg: GemmConfig, p: ConvPtrs, ep: Epilogue
) -> None:
    """The image zero-padded and split into its stride phases (kernels/window.py's geometry, see
    ``shift_geometry``; stride 1: one phase, the padded image): tap (r, t) of output pixel
    (oh, ow) reads phase pixel (oh + r*dh // sh, ow + t*dw // sw) of one phase, so on the grid
    of OH x Wq columns every im2col row is a contiguous run of a phase image. The GEMM reads its
    B panels there in place (a table gives each row's start) and computes OH x Wq columns per
    output channel; the crop keeps OW of each Wq. Columns go in chunks of SHIFT_NC; the GEMM's
    channel tiles spread over the thread pool.
    """
    module, name = b.module, b.function.name
    C, H, W, K, R, S, OH, OW = s.C, s.H, s.W, s.K, s.R, s.S, s.OH, s.OW
    (sh, sw) = s.stride
    pt, pl = s.pad[0], s.pad[1]
    hq, wq, phases, offsets = shift_geometry(s)
    plane = hq * wq
    cstride = len(phases) * plane  # floats per channel of the phase images
    crs = C * R * S
    ngrid = OH * wq
    nr, vw = cfg.nr, cfg.vw
    # Cropped columns read past their row, the last ones past the images: slack behind.
    xph = scratch(module, f"{name}.xph", C * cstride + max(offsets) + 2 * nr)
    cbuf = scratch(module, f"{name}.c", K * ngrid)
    # Per GEMM row k = c*R*S + r*S + t: where its run starts (c * cstride + offsets[r*S + t]).
    koff = np.array([c * cstride + o for c in range(C) for o in offsets], dtype=np.int64)
    table = ir.GlobalVariable(module, ir.ArrayType(I64, crs), f"{name}.rows")
    table.initializer = int_array(I64, koff.tolist())
    table.global_constant = True
    table.linkage = "internal"
    table.type = PTR  # opaque: the chunks' context holds a plain pointer, whatever C*R*S is
    # Whole NR panels per chunk (a chunk's last panel is a narrower, slower tile).
    nc_full = min(max(nr, SHIFT_NC // nr * nr), ngrid)
    nfull, rest = divmod(ngrid, nc_full)
    has_bias = p.bias is not None
    if sh * sw > 1:  # a zero-padded row, deinterleaved into the phase rows
        # The image row lands at pl (masked tail); the phase rows read whole vectors of sw
        # strided lanes, the last up to sw * (vw - 1) + sw - 1 floats past Wq * sw.
        rowbuf = scratch(module, f"{name}.row", max(W + pl, -(-wq // vw) * vw * sw) + vw * sw)

    def fill_phases(
        b: ir.IRBuilder, xn: ir.Value, c_lo: ir.Value, c_hi: ir.Value, tid: ir.Value
    ) -> None:
        """Channels [c_lo, c_hi) of the image into the phase images (the padding is zero from
        the start: only pixels of the image are ever written)."""
        if sh * sw == 1:
            with loop(b, c_lo, c_hi, 1, "pc") as c:
                copy_padded(
                    b,
                    gep(b, xn, b.mul(c, i64(H * W))),
                    gep(b, xph, b.mul(c, i64(plane))),
                    s,
                    vw,
                    pitch=wq,
                )
            return
        row = thread_scratch(b, rowbuf, tid)
        with loop(b, c_lo, c_hi, 1, "pc") as c, loop(b, 0, H, 1, "ph") as h:
            src = gep(b, xn, b.add(b.mul(c, i64(H * W)), b.mul(h, i64(W))))
            vector_runs(
                b,
                W,
                vw,
                lambda j0, valid: store_vec(
                    b,
                    load_vec(b, gep(b, src, j0), vw, valid),
                    gep(b, row, add(b, j0, pl)),
                    vw,
                    valid,
                ),
                "prow",
            )
            hp = b.add(h, i64(pt))
            a, i = b.urem(hp, i64(sh)), b.udiv(hp, i64(sh))
            chan = gep(b, xph, b.mul(c, i64(cstride)))
            for k, (pa, pb_) in enumerate(phases):
                with b.if_then(b.icmp_unsigned("==", a, i64(pa))):
                    dst = gep(b, chan, b.add(i64(k * plane), b.mul(i, i64(wq))))

                    def phase_run(j0: Int, valid: int, dst: ir.Value = dst, pb_: int = pb_) -> None:
                        src = gep(b, row, add(b, mul(b, j0, sw), pb_))
                        v = strided_vector(b, src, vw, sw, valid)
                        store_vec(b, v, gep(b, dst, j0), vw, valid)

                    vector_runs(b, wq, vw, phase_run, "pq")

    # The fill is a copy: spread over the pool by channels, as the crop is (a serial fill was
    # the part of every 3x3 conv that two threads did not share).
    cgroups = work_chunks(C * H * W * ELEMENT_WORK, C)
    cper = -(-C // cgroups)

    def fill_chunk(bb: ir.IRBuilder, i: ir.Value, tid: ir.Value, vals: list[ir.Value]) -> None:
        c0 = bb.mul(i, i64(cper))
        fill_phases(bb, vals[0], c0, smin(bb, bb.add(c0, i64(cper)), C), tid)

    def operands(v: list[ir.Value]) -> GemmOperands:
        """The GEMM of a column chunk over (c_base, filter, first column, row table, phase
        images[, bias]): the kernel's values or a parallel chunk's copies. The table and the
        images come in as values, not as this kernel's globals, so that two convs over the same
        grid (a stride-1 and a stride-2 3x3 conv of 15 grid columns) get the same chunk code,
        which codegen then compiles once (``merge_identical_functions``)."""
        cbase, w, col0, rows, images = v[:5]
        crs_v, ngrid_v = folded(v[5]), folded(v[6])

        def b_addr(bb: ir.IRBuilder, jp: Int, k: Int) -> ir.Value:
            start = bb.load(gep(bb, rows, k, I64), typ=I64)
            return gep(bb, images, add(bb, bb.add(start, col0), mul(bb, jp, nr)))

        return GemmOperands(
            a_addr=panel_a(w, crs_v, cfg.mr),
            b_addr=b_addr,
            c_base=cbase,
            c_stride=ngrid_v,
            bias_col=v[7] if has_bias else None,
            activation=None if ep.accumulate else ep.activation,
            b_exact=True,
            a_packed=True,
        )

    def chunk(n0: ir.Value, ncols: int) -> None:
        """Grid columns n0 .. n0+ncols-1 of every output channel into cbuf."""
        vals = [gep(b, cbuf, n0), p.w, n0, table, xph, i64(crs), i64(ngrid)]
        vals += [p.bias] if has_bias else []
        tiles = -(-K // cfg.mr) * -(-ncols // nr)
        key = ("padded-shift", has_bias, ep.accumulate, ep.activation, cfg)
        split = Split(work_chunks(K * ncols * crs, tiles), vals, operands, prefer="m", key=key)
        emit_gemm_body(b, cfg, K, ncols, crs, operands(vals), split)

    kgroups = work_chunks(K * OH * OW * ELEMENT_WORK, K)  # the crop: a copy, by channels
    kper = -(-K // kgroups)

    def crop(bb: ir.IRBuilder, i: ir.Value, tid: ir.Value, vals: list[ir.Value]) -> None:
        """The grid's valid columns of channels [i*kper, ...) into the NCHW output."""
        on = vals[0]
        k0 = bb.mul(i, i64(kper))
        with loop(bb, k0, smin(bb, bb.add(k0, i64(kper)), K), 1, "ck") as k:
            with loop(bb, 0, OH, 1, "ch") as oh:
                src = gep(bb, cbuf, bb.add(bb.mul(k, i64(ngrid)), bb.mul(oh, i64(wq))))
                dst = gep(bb, on, bb.add(bb.mul(k, i64(OH * OW)), bb.mul(oh, i64(OW))))

                def run(j0: Int, valid: int, src: ir.Value = src, dst: ir.Value = dst) -> None:
                    v = load_vec(bb, gep(bb, src, j0), vw, valid)
                    if ep.accumulate:  # the sum post-op, then the activation the GEMM left out
                        ep.store(bb, v, gep(bb, dst, j0), vw, valid)
                    else:
                        store_vec(bb, v, gep(bb, dst, j0), vw, valid)

                vector_runs(bb, OW, vw, run, "cw")

    with loop(b, 0, s.N, 1, "n") as n:
        parallel_loop(b, cgroups, [gep(b, p.x, b.mul(n, i64(C * H * W)))], fill_chunk, "fill")
        if nfull:
            with loop(b, 0, nfull * nc_full, nc_full, "nch") as n0:
                chunk(n0, nc_full)
        if rest:
            chunk(i64(nfull * nc_full), rest)
        on = gep(b, p.out, b.mul(n, i64(K * OH * OW)))
        parallel_loop(b, kgroups, [on], crop, "crop")


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
