"""Pooling: MaxPool, AvgPool (window loops with compile-time divisor tables, onnxruntime's
count rules from the reference kernel), GlobalAvgPool and GlobalMaxPool.
"""

from __future__ import annotations

import math
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
    compute_type,
    const,
    gep,
    load_elem,
    loop,
    register,
    storage_type,
    store_elem,
    unsupported,
)
from compiler.backends.llvm.emitters.elementwise import fmax_nan, imax
from compiler.backends.llvm.kernels.common import clamp, load_vec, store_vec, vec
from compiler.backends.llvm.kernels.window import Axis, split_columns
from compiler.backends.llvm.target import vector_width_f32
from compiler.graph.types import ElemKind


def _geometry(x_shape, attrs, dil):
    from compiler.kernels.reference_nn import _pool_geometry

    return _pool_geometry(np.empty(x_shape, dtype=np.float32), attrs, dil)


def _avg_counts(h: int, w: int, attrs: dict, oh: int, ow: int, extra) -> np.ndarray:
    from compiler.kernels.reference_nn import _pad_nchw, _windows

    pads = attrs["pads"]
    kh, kw = attrs["kernel"]
    sh, sw = attrs["strides"]
    pt, pl, pb, pr = pads
    if attrs["count_include_pad"]:
        mask = np.zeros((h + pt + pb + extra[0], w + pl + pr + extra[1]), dtype=np.float32)
        mask[: h + pt + pb, : w + pl + pr] = 1
    else:
        mask = _pad_nchw(np.ones((1, 1, h, w), dtype=np.float32), pads, 0.0, extra)[0, 0]
    counts = _windows(mask[None, None], kh, kw, sh, sw, 1, 1, oh, ow).sum(axis=(4, 5))[0, 0]
    return np.maximum(counts, 1).astype(np.float32)


@register("maxpool", "avgpool")
def emit_pool(ctx: EmitContext, ins: Any) -> Emitted:
    out, x = (v for v, _ in ins.operands)
    at = ins.attrs
    is_max = ins.kind == "maxpool"
    elem = x.type.elem
    if not is_max and not elem.is_float:
        raise unsupported(ins, "average pooling of integers")
    N, C, H, W = x.type.shape
    _, _, OH, OW = out.type.shape
    dil = tuple(at.get("dilations", (1, 1))) if is_max else (1, 1)
    kh, kw = at["kernel"]
    sh, sw = at["strides"]
    pt, pl = at["pads"][0], at["pads"][1]
    dh, dw = dil
    counts = None
    if not is_max:
        oh_, ow_, extra = _geometry(x.type.shape, at, dil)
        counts = _avg_counts(H, W, at, OH, OW, extra)
    if is_max and elem in _SEPARABLE and _separable_ok(x.type.shape, OH, OW, at, dil):
        return _emit_separable_max(ctx, out, x, at)
    key = (
        ins.kind,
        x.type.shape,
        out.type.shape,
        at["kernel"],
        at["strides"],
        at["pads"],
        dil,
        elem,
        counts.tobytes() if counts is not None else b"",
    )
    ety = storage_type(elem)
    cty = compute_type(elem)
    if is_max:
        low = -math.inf if elem.is_float else int(np.iinfo(elem.np_dtype).min)
    unsigned = elem.is_unsigned

    rows_ax = Axis(H, OH, kh, sh, pt, dh)
    cols_ax = Axis(W, OW, kw, sw, pl, dw)
    # Output columns whose whole window is inside the row need no column checks (vectorisable).
    ow_lo, ow_hi = cols_ax.interior()

    def build(fn: ir.Function, b: ir.IRBuilder) -> None:
        po, px = fn.args
        ctab = ctx.sink.global_table(counts, "cnt") if counts is not None else None
        ident = const(cty, low) if is_max else const(cty, 0.0)

        def combine(cur, v):
            if is_max:
                return fmax_nan(b, cur, v) if elem.is_float else imax(b, cur, v, unsigned)
            return b.fadd(cur, v)

        with loop(b, 0, N * C, 1, "nc") as nc, loop(b, 0, OH, 1, "oh") as oh:
            xb = gep(b, px, b.mul(nc, c64(H * W)), ety)
            orow = gep(b, po, b.add(b.mul(nc, c64(OH * OW)), b.mul(oh, c64(OW))), ety)
            rows = []
            for r in range(kh):
                ok, ih = rows_ax.tap(b, oh, r)
                rows.append((ok, gep(b, xb, b.mul(ih, c64(W)), ety)))

            def finish(ow, acc):
                if ctab is not None:
                    cnt = b.load(gep(b, ctab, b.add(b.mul(oh, c64(OW)), ow), F32), typ=F32)
                    acc = b.fdiv(acc, cnt if acc.type == F32 else b.fpext(cnt, acc.type))
                store_elem(b, acc, gep(b, orow, ow, ety), elem)

            def cols(ow: ir.Value, checked: bool) -> None:
                taps = [
                    cols_ax.tap(b, ow, t) if checked else (None, cols_ax.coord(b, ow, t))
                    for t in range(kw)
                ]
                acc = ident
                for ok_r, xrow in rows:
                    for ok_c, iw in taps:
                        ok = ok_r if ok_c is None else b.and_(ok_r, ok_c)
                        v = load_elem(b, gep(b, xrow, iw, ety), elem)
                        acc = b.select(ok, combine(acc, v), acc)
                finish(ow, acc)

            split_columns(
                b, ow_lo, ow_hi, OW, lambda ow: cols(ow, True), lambda ow: cols(ow, False)
            )

    name = ctx.sink.kernel(key, 2, build, ins.kind)
    return Emitted([Call(name, [Arg(value=out), Arg(value=x)])], "window")


#: Output columns per vector of the separable max-pool's column pass.
_PV = 16
#: Element kinds the separable max-pool runs on: float32, and bytes (int8 quantized values,
#: whose max is exact in any order).
_SEPARABLE = (ElemKind.F32, ElemKind.I8, ElemKind.U8)


def _separable_ok(xs, OH: int, OW: int, at: dict, dil) -> bool:
    """The separable max-pool clamps out-of-range rows onto the nearest input row (a duplicate
    inside the same window) and pads columns with -inf: valid when every window overlaps the
    input in both dimensions and there is no dilation."""
    _, _, H, W = xs
    kh, kw = at["kernel"]
    sh, sw = at["strides"]
    pt, pl = at["pads"][0], at["pads"][1]
    if tuple(dil) != (1, 1) or kh * kw < 2:
        return False
    rows_ok = all(0 <= o * sh - pt + kh - 1 and o * sh - pt <= H - 1 for o in range(OH))
    cols_ok = all(0 <= o * sw - pl + kw - 1 and o * sw - pl <= W - 1 for o in range(OW))
    return rows_ok and cols_ok


def _emit_separable_max(ctx: EmitContext, out: Any, x: Any, at: dict) -> Emitted:
    """Max-pool (float32 or bytes) as a row pass then a column pass, both vectorised along
    the width.

    Per output row: vbuf[pl + iw] = max over the window's rows of x[ih, iw] (rows outside the
    input are clamped onto the nearest input row, which lies in the same window), then
    out[ow] = max over s of vbuf[ow*sw + s] (vbuf's padding columns hold -inf, or the type's
    least value). Strided columns are picked from wide loads with a shuffle. The float max
    propagates NaN like numpy.
    """
    from compiler.backends.llvm.kernels.parallel import scratch

    elem = x.type.elem
    F = storage_type(elem)
    is_float = elem == ElemKind.F32
    unsigned = elem.is_unsigned
    align = 4 if is_float else 1
    N, C, H, W = x.type.shape
    _, _, OH, OW = out.type.shape
    if is_float and W <= REGISTER_POOL_VECTORS * vector_width_f32():
        return _emit_register_max(ctx, out, x, at)  # float32 rows only
    kh, kw = at["kernel"]
    sh, sw = at["strides"]
    pt, pl = at["pads"][0], at["pads"][1]
    key = ("maxpool-sep", x.type.shape, out.type.shape, (kh, kw), (sh, sw), (pt, pl), elem)
    wn = (OW - 1) * sw + kw  # vbuf columns the column pass reads
    wc = min(W, wn - pl)  # input columns the row pass writes
    nbuf = wn + _PV * sw + 16

    def build(fn: ir.Function, b: ir.IRBuilder) -> None:
        po, px = fn.args
        vbuf = scratch(fn.module, f"{fn.name}.v", nbuf)  # nbuf floats: room for bytes too
        least = -math.inf if is_float else int(np.iinfo(elem.np_dtype).min)
        with loop(b, 0, nbuf, 1, "vi") as i:
            b.store(const(F, least), gep(b, vbuf, i, F))
        vrow = gep(b, vbuf, pl, F)

        def vmax(vals):
            acc = vals[0]
            for v in vals[1:]:
                acc = fmax_nan(b, acc, v) if is_float else imax(b, acc, v, unsigned)
            return acc

        def wide(lo_end: int, width: int, body) -> None:
            """body(i, width) over [0, lo_end) in vectors of `width` (narrower ones on a row
            shorter than that: 8 + 8 on 14-wide rows, 4 + 4 on 7-wide ones); the tail is one
            overlapping vector (idempotent stores) or scalars when lo_end < 2."""
            while width > 1 and lo_end < width:
                width //= 2
            if lo_end >= width and width > 1:
                nfull = lo_end // width * width
                with loop(b, 0, nfull, width, "wv") as i:
                    body(i, width)
                if nfull < lo_end:
                    body(c64(lo_end - width), width)
            elif lo_end > 0:
                with loop(b, 0, lo_end, 1, "ws") as i:
                    body(i, 1)

        with loop(b, 0, N * C, 1, "nc") as nc, loop(b, 0, OH, 1, "oh") as oh:
            xb = gep(b, px, b.mul(nc, c64(H * W)), F)
            orow = gep(b, po, b.add(b.mul(nc, c64(OH * OW)), b.mul(oh, c64(OW))), F)
            ih0 = b.sub(b.mul(oh, c64(sh)), c64(pt))
            rows = []
            for r in range(kh):
                ih = b.add(ih0, c64(r))
                ihc = clamp(b, ih, 0, H - 1)
                rows.append(gep(b, xb, b.mul(ihc, c64(W)), F))

            def row_pass(i, width):
                ty = F if width == 1 else ir.VectorType(F, width)
                vals = [b.load(gep(b, rp, i, F), typ=ty, align=align) for rp in rows]
                b.store(vmax(vals), gep(b, vrow, i, F), align=align)

            wide(wc, _PV, row_pass)

            def col_pass(i, width):
                base = b.mul(i, c64(sw))
                vals = []
                for s_ in range(kw):
                    src = gep(b, vbuf, b.add(base, c64(s_)), F)
                    if width == 1:
                        vals.append(b.load(src, typ=F))
                    elif sw == 1:
                        vals.append(b.load(src, typ=ir.VectorType(F, width), align=align))
                    else:
                        v = b.load(src, typ=ir.VectorType(F, width * sw), align=align)
                        vals.append(
                            b.shuffle_vector(
                                v,
                                ir.Constant(v.type, None),
                                ir.Constant(
                                    ir.VectorType(ir.IntType(32), width),
                                    [j * sw for j in range(width)],
                                ),
                            )
                        )
                b.store(vmax(vals), gep(b, orow, i, F), align=align)

            wide(OW, _PV, col_pass)

    name = ctx.sink.kernel(key, 2, build, "maxpool")
    return Emitted([Call(name, [Arg(value=out), Arg(value=x)])], "separable")


#: Input rows up to this many of the target's vectors are max-pooled in registers
#: (``_emit_register_max``): 128 floats with AVX-512, where it measured 1.2-2.5x faster than the
#: row buffer on 7- to 112-wide rows (ResNet's stem pool: 160 -> 136 us, onnxruntime 144).
REGISTER_POOL_VECTORS = 8
#: Output planes of at most this many rows are max-pooled with their rows unrolled (each input
#: row loaded once): 7x7 planes ~15% faster; unrolling Inception's 14- and 28-row planes too
#: gained ~8% on them but multiplied the pools' IR by 10 (+0.35 s of LLVM time).
UNROLL_POOL_ROWS = 8


def _emit_register_max(ctx: EmitContext, out: Any, x: Any, at: dict) -> Emitted:
    """The separable max-pool of rows that fit in registers (``REGISTER_POOL_VECTORS``).

    Per output row: the max of the window's input rows, a row of host vectors (the last one a
    masked load; rows clamped as in ``_emit_separable_max``), then for each output vector and
    column tap t one two-source shuffle of that row, lane j taking column j*sw + t - pl or -inf
    outside the row, and one (masked) store. Planes of at most ``UNROLL_POOL_ROWS`` output rows
    are unrolled: each input row is loaded once per channel and the row indices are constants.
    The row-buffer version stored each row max and read it back at odd offsets
    (store-forwarding stalls: 1.3-4x onnxruntime's time on 7- to 56-wide planes). The same
    maxima in the same order: results identical to it."""
    N, C, H, W = x.type.shape
    _, _, OH, OW = out.type.shape
    kh, kw = at["kernel"]
    sh, sw = at["strides"]
    pt, pl = at["pads"][0], at["pads"][1]
    vw = vector_width_f32()
    key = ("maxpool-reg", x.type.shape, out.type.shape, (kh, kw), (sh, sw), (pt, pl), vw)
    pieces_in = [min(vw, W - j) for j in range(0, W, vw)]
    pieces_out = [min(vw, OW - j) for j in range(0, OW, vw)]
    span = vw
    while span < W:
        span *= 2  # the concatenated row: a power of two of vectors
    i32 = ir.IntType(32)
    masks = []  # [output vector][tap]
    for j in range(0, OW, vw):
        per_tap = []
        for t in range(kw):
            cols = [ow * sw + t - pl if ow < OW else -1 for ow in range(j, j + vw)]
            idx = [c if 0 <= c < W else span for c in cols]  # span: the first lane of -inf
            per_tap.append(ir.Constant(ir.VectorType(i32, vw), idx))
        masks.append(per_tap)

    def build(fn: ir.Function, b: ir.IRBuilder) -> None:
        po, px = fn.args
        ninf = ir.Constant(vec(span), [-math.inf] * span)

        def vmax(vals):
            acc = vals[0]
            for v in vals[1:]:
                acc = fmax_nan(b, acc, v)
            return acc

        def load_row(ptr: ir.Value) -> list[ir.Value]:
            return [load_vec(b, gep(b, ptr, j * vw, F32), vw, n) for j, n in enumerate(pieces_in)]

        def out_row(orow: ir.Value, rows: list[list[ir.Value]]) -> None:
            vs = [vmax([r[j] for r in rows]) for j in range(len(pieces_in))]
            while len(vs) > 1:  # concatenate pairwise into one <span x float>
                if len(vs) % 2:
                    vs.append(ir.Constant(vs[0].type, None))
                vs = [
                    b.shuffle_vector(a, c, ir.Constant(ir.VectorType(i32, 2 * a.type.count),
                                                       list(range(2 * a.type.count))))
                    for a, c in zip(vs[::2], vs[1::2])
                ]
            v = vs[0]
            for j, n in enumerate(pieces_out):
                taps = [b.shuffle_vector(v, ninf, m) for m in masks[j]]
                store_vec(b, vmax(taps), gep(b, orow, j * vw, F32), vw, n)

        with loop(b, 0, N * C, 1, "nc") as nc:
            xb = gep(b, px, b.mul(nc, c64(H * W)), F32)
            ob = gep(b, po, b.mul(nc, c64(OH * OW)), F32)
            if OH <= UNROLL_POOL_ROWS:
                loaded: dict[int, list[ir.Value]] = {}

                def row(ih: int) -> int:
                    ih = min(max(ih, 0), H - 1)
                    if ih not in loaded:
                        loaded[ih] = load_row(gep(b, xb, ih * W, F32))
                    return ih

                for oh in range(OH):
                    ihs = dict.fromkeys(row(oh * sh - pt + r) for r in range(kh))
                    out_row(gep(b, ob, oh * OW, F32), [loaded[ih] for ih in ihs])
            else:
                with loop(b, 0, OH, 1, "oh") as oh:
                    ih0 = b.sub(b.mul(oh, c64(sh)), c64(pt))
                    rows = []
                    for r in range(kh):
                        ihc = clamp(b, b.add(ih0, c64(r)), 0, H - 1)
                        rows.append(load_row(gep(b, xb, b.mul(ihc, c64(W)), F32)))
                    out_row(gep(b, ob, b.mul(oh, c64(OW)), F32), rows)

    name = ctx.sink.kernel(key, 2, build, "maxpool")
    return Emitted([Call(name, [Arg(value=out), Arg(value=x)])], "separable")


__all__ = ["emit_pool"]
