"""Data movement: copy, insert/extract tensor, transpose, slice, broadcast, tile, concat, pad,
resize, gather, reshape. Index maps that are affine per dim become one strided-copy loop nest;
per-dim maps that are not (pad modes, resize) use index/weight tables computed at compile time
from the reference semantics.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from llvmlite import ir

from compiler.backends.llvm.emitters.common import (
    F64,
    I64,
    Arg,
    Call,
    EmitContext,
    Emitted,
    c64,
    collapse,
    compute_type,
    const,
    contiguous_strides,
    gep,
    int_of_size,
    linear,
    load_elem,
    loop,
    loop_nest,
    register,
    storage_type,
    store_elem,
    unsupported,
)
from compiler.backends.llvm.kernels.common import clamp, transpose_square
from compiler.lir.instructions import Kind
from compiler.memory.regions import ALIGNMENT


def strided_copy(
    ctx: EmitContext,
    dst: Any,
    src: Any,
    shape: Sequence[int],
    dst_strides: Sequence[int],
    src_strides: Sequence[int],
    dst_off: int = 0,
    src_off: int = 0,
) -> Call | None:
    """dst[dst_off + i.dst_strides] = src[src_off + i.src_strides] for i over `shape` (elements)."""
    if any(n == 0 for n in shape):
        return None
    size = dst.type.elem.itemsize
    ety = int_of_size(size)
    cshape, (ds, ss) = collapse(shape, [dst_strides, src_strides])
    overlap = ctx.may_alias(dst, src)
    key = ("copy", tuple(cshape), tuple(ds), tuple(ss), size, overlap)

    def build(fn: ir.Function, b: ir.IRBuilder) -> None:
        d, s = fn.args
        if overlap:
            # Stage through a scratch buffer: the interpreter's copy-then-write semantics.
            n = math.prod(cshape)
            buf = ctx.sink.module.get_unique_name("stage")
            aty = ir.ArrayType(ety, n)
            g = ir.GlobalVariable(ctx.sink.module, aty, buf)
            g.initializer = ir.Constant(aty, None)
            g.linkage = "internal"
            g.align = ALIGNMENT
            cs = contiguous_strides(cshape)

            def body1(ivs):
                v = b.load(gep(b, s, linear(b, ivs, ss), ety), typ=ety)
                b.store(v, gep(b, g, linear(b, ivs, cs), ety))

            def body2(ivs):
                v = b.load(gep(b, g, linear(b, ivs, cs), ety), typ=ety)
                b.store(v, gep(b, d, linear(b, ivs, ds), ety))

            loop_nest(b, cshape, body1, "s")
            loop_nest(b, cshape, body2, "t")
            return

        tile = _transpose_axes(cshape, ds, ss, size)
        if tile is not None:
            _tiled_transpose(b, d, s, cshape, ds, ss, *tile)
            return

        def body(ivs):
            v = b.load(gep(b, s, linear(b, ivs, ss), ety), typ=ety)
            b.store(v, gep(b, d, linear(b, ivs, ds), ety))

        loop_nest(b, cshape, body)

    name = ctx.sink.kernel(key, 2, build, "copy", (not overlap, not overlap))
    return Call(
        name, [Arg(value=dst, offset=dst_off * size), Arg(value=src, offset=src_off * size)]
    )


#: Copies that transpose two axes (the destination's contiguous axis read with a stride, another
#: axis contiguous in the source: attention's K^T) move square tiles of the host's vector width
#: through registers: a vector load per source row piece, a butterfly of two-source shuffles,
#: a vector store per destination row piece (a scalar loop read one element per stride).
TILED_TRANSPOSE = True


def _transpose_axes(
    shape: Sequence[int], ds: Sequence[int], ss: Sequence[int], size: int
) -> tuple[int, int] | None:
    """(the source's contiguous axis, the vector width) when ``_tiled_transpose`` applies to a
    collapsed copy, else None."""
    from compiler.backends.llvm.target import vector_width_f32

    if not TILED_TRANSPOSE or size != 4 or len(shape) < 2 or ds[-1] != 1 or ss[-1] == 1:
        return None
    vw = vector_width_f32()
    p = next((i for i in range(len(shape) - 1) if ss[i] == 1), None)
    if p is None or vw < 4 or min(shape[p], shape[-1]) < vw // 2:
        return None
    return p, vw


def _tiled_transpose(
    b: ir.IRBuilder,
    d: ir.Value,
    s: ir.Value,
    shape: Sequence[int],
    ds: Sequence[int],
    ss: Sequence[int],
    p: int,
    t: int,
) -> None:
    """dst[i.ds] = src[i.ss] over ``shape`` where axis -1 is contiguous in dst and axis ``p`` in
    src: t x t tiles (t = vector lanes of 32-bit elements, moved as integers: the bits are
    copied), the partial tiles at the ends of both axes with masked loads and stores."""
    from compiler.backends.llvm.kernels.common import masked_load_call, masked_store_call

    i32 = ir.IntType(32)
    vt = ir.VectorType(i32, t)
    zero = ir.Constant(vt, [0] * t)
    n_i, n_j = shape[p], shape[-1]
    outer = [k for k in range(len(shape) - 1) if k != p]

    def tile(sbase: ir.Value, dbase: ir.Value, it: int, jt: int) -> None:
        rows = []
        for jj in range(t):
            if jj >= jt:
                rows.append(zero)
                continue
            ptr = gep(b, sbase, c64(jj * ss[-1]), i32)
            if it == t:
                rows.append(b.load(ptr, typ=vt, align=4))
            else:
                rows.append(masked_load_call(b, ptr, vt, it, zero, 4))
        rows = transpose_square(b, rows)
        for ii in range(it):
            ptr = gep(b, dbase, c64(ii * ds[p]), i32)
            if jt == t:
                b.store(rows[ii], ptr, align=4)
            else:
                masked_store_call(b, rows[ii], ptr, jt, 4)

    def over_tiles(ivs: list[ir.Value]) -> None:
        so = linear(b, ivs, [ss[k] for k in outer])
        do = linear(b, ivs, [ds[k] for k in outer])
        full_i, full_j = n_i - n_i % t, n_j - n_j % t

        def at(i0: ir.Value, j0: ir.Value, it: int, jt: int) -> None:
            sb = gep(b, s, b.add(so, b.add(i0, b.mul(j0, c64(ss[-1])))), i32)
            db = gep(b, d, b.add(do, b.add(b.mul(i0, c64(ds[p])), j0)), i32)
            tile(sb, db, it, jt)

        def row_of_tiles(i0: ir.Value, it: int) -> None:
            if full_j:
                with loop(b, 0, full_j, t, "tj") as j0:
                    at(i0, j0, it, t)
            if n_j % t:
                at(i0, c64(full_j), it, n_j % t)

        if full_i:
            with loop(b, 0, full_i, t, "ti") as i0:
                row_of_tiles(i0, t)
        if n_i % t:
            row_of_tiles(c64(full_i), n_i % t)

    loop_nest(b, [shape[k] for k in outer], over_tiles, "to")


def _emitted(*calls: Call | None, strategy: str = "strided-copy") -> Emitted:
    return Emitted([c for c in calls if c is not None], strategy)


def _ops(ins: Any) -> tuple[Any, list[Any]]:
    return ins.operands[0][0], [v for v, _ in ins.operands[1:]]


@register(Kind.COPY, "reshape")
def emit_copy(ctx: EmitContext, ins: Any) -> Emitted:
    dst, (src,) = _ops(ins)
    if dst.type.numel != src.type.numel or dst.type.elem != src.type.elem:
        raise unsupported(ins, f"copy between {src.type} and {dst.type}")
    n = dst.type.numel
    return _emitted(strided_copy(ctx, dst, src, [n], [1], [1]))


@register(Kind.EXTRACT)
def emit_extract(ctx: EmitContext, ins: Any) -> Emitted:
    dst, (src,) = _ops(ins)
    ss = contiguous_strides(src.type.shape)
    off = sum(o * s for o, s in zip(ins.attrs["offsets"], ss))
    return _emitted(
        strided_copy(ctx, dst, src, dst.type.shape, contiguous_strides(dst.type.shape), ss, 0, off)
    )


@register(Kind.INSERT)
def emit_insert(ctx: EmitContext, ins: Any) -> Emitted:
    dst, (src,) = _ops(ins)
    ds = contiguous_strides(dst.type.shape)
    off = sum(o * s for o, s in zip(ins.attrs["offsets"], ds))
    axis, count = ins.attrs["axis"], ins.attrs["count"]
    shape = list(src.type.shape)
    n_ax = shape[axis] if shape else 1
    return _emitted(
        strided_copy(
            ctx,
            dst,
            src,
            [count] + shape,
            [n_ax * (ds[axis] if ds else 1)] + list(ds),
            [0] + list(contiguous_strides(shape)),
            off,
            0,
        )
    )


@register("concat")
def emit_concat(ctx: EmitContext, ins: Any) -> Emitted:
    dst, srcs = _ops(ins)
    rank = dst.type.rank
    axis = ins.attrs["axis"] % rank
    ds = contiguous_strides(dst.type.shape)
    calls = []
    pos = 0
    for s in srcs:
        calls.append(
            strided_copy(
                ctx, dst, s, s.type.shape, ds, contiguous_strides(s.type.shape), pos * ds[axis], 0
            )
        )
        pos += s.type.shape[axis]
    return _emitted(*calls)


@register("transpose")
def emit_transpose(ctx: EmitContext, ins: Any) -> Emitted:
    dst, (src,) = _ops(ins)
    ss = contiguous_strides(src.type.shape)
    perm = ins.attrs["perm"]
    return _emitted(
        strided_copy(
            ctx, dst, src, dst.type.shape, contiguous_strides(dst.type.shape), [ss[p] for p in perm]
        )
    )


@register("slice")
def emit_slice(ctx: EmitContext, ins: Any) -> Emitted:
    dst, (src,) = _ops(ins)
    if dst.type.numel == 0:
        return Emitted([], "empty")
    ss = contiguous_strides(src.type.shape)
    off = sum(s * st for s, st in zip(ins.attrs["starts"], ss))
    strides = [st * step for st, step in zip(ss, ins.attrs["steps"])]
    return _emitted(
        strided_copy(
            ctx, dst, src, dst.type.shape, contiguous_strides(dst.type.shape), strides, 0, off
        )
    )


@register("broadcast")
def emit_broadcast(ctx: EmitContext, ins: Any) -> Emitted:
    from compiler.backends.llvm.emitters.common import broadcast_strides

    dst, (src,) = _ops(ins)
    return _emitted(
        strided_copy(
            ctx,
            dst,
            src,
            dst.type.shape,
            contiguous_strides(dst.type.shape),
            broadcast_strides(src.type.shape, dst.type.shape),
        )
    )


@register("tile")
def emit_tile(ctx: EmitContext, ins: Any) -> Emitted:
    dst, (src,) = _ops(ins)
    reps = ins.attrs["repeats"]
    ds = contiguous_strides(dst.type.shape)
    ss = contiguous_strides(src.type.shape)
    shape, dstr, sstr = [], [], []
    for r, n, d_st, s_st in zip(reps, src.type.shape, ds, ss):
        shape += [r, n]
        dstr += [n * d_st, d_st]
        sstr += [0, s_st]
    return _emitted(strided_copy(ctx, dst, src, shape, dstr, sstr))


# -- table-driven gathers (pad modes, resize) ----------------------------------------------------

_INVALID = -(1 << 40)


def table_gather(
    ctx: EmitContext, ins: Any, dst: Any, src: Any, tables: list[np.ndarray], fill: float
) -> Call:
    """dst[i] = src[sum_d T_d[i_d]], or `fill` when any T_d[i_d] is negative (out of the input)."""
    elem = dst.type.elem
    shape = dst.type.shape
    key = ("tgather", tuple(shape), elem, tuple(t.tobytes() for t in tables), float(fill))

    def build(fn: ir.Function, b: ir.IRBuilder) -> None:
        d, s = fn.args
        globs = [ctx.sink.global_table(np.asarray(t, dtype=np.int64), "ptab") for t in tables]
        os_ = contiguous_strides(shape)
        cty = compute_type(elem)

        def body(ivs):
            off = c64(0)
            for g, iv in zip(globs, ivs):
                off = b.add(off, b.load(gep(b, g, iv, I64), typ=I64))
            ok = b.icmp_signed(">=", off, c64(0))
            safe = b.select(ok, off, c64(0))
            v = load_elem(b, gep(b, s, safe, storage_type(elem)), elem)
            v = b.select(ok, v, const(cty, fill))
            store_elem(b, v, gep(b, d, linear(b, ivs, os_), storage_type(elem)), elem)

        nest_full(b, shape, body)

    return Call(ctx.sink.kernel(key, 2, build, "tgather"), [Arg(value=dst), Arg(value=src)])


def nest_full(b: ir.IRBuilder, shape: Sequence[int], body) -> None:
    """Loop nest that keeps size-1 dims as constant 0 indices (tables index every dim)."""
    loop_nest(b, list(shape), body)


@register("pad")
def emit_pad(ctx: EmitContext, ins: Any) -> Emitted:
    from compiler.kernels.reference import KERNELS

    dst, (src,) = _ops(ins)
    r = src.type.rank
    pads = ins.attrs["pads"]
    mode = ins.attrs["mode"]
    ss = contiguous_strides(src.type.shape)
    tables = []
    for d in range(r):
        n = src.type.shape[d]
        ar = np.arange(n, dtype=np.int64)
        attrs = {"pads": (pads[d], pads[d + r]), "mode": mode, "value": -1.0}
        t = KERNELS["Pad"]([ar], attrs)[0].astype(np.int64)
        tables.append(np.where(t < 0, _INVALID, t * ss[d]))
    return Emitted([table_gather(ctx, ins, dst, src, tables, ins.attrs["value"])], "table")


@register("resize")
def emit_resize(ctx: EmitContext, ins: Any) -> Emitted:
    from compiler.kernels.reference_nn import _axis_taps, axis_unchanged

    dst, (src,) = _ops(ins)
    at = dict(ins.attrs)
    ss = contiguous_strides(src.type.shape)
    idx_tabs: list[np.ndarray] = []
    w_tabs: list[np.ndarray | None] = []
    for ax, (i, o) in enumerate(zip(src.type.shape, dst.type.shape)):
        # The reference kernel's rule for axes it leaves alone, then its taps.
        if axis_unchanged(i, o, at, ax):
            idx_tabs.append(np.arange(o, dtype=np.int64)[:, None])
            w_tabs.append(None)
            continue
        idx, wts = _axis_taps(o, i, at, ax)
        idx_tabs.append(np.asarray(idx, dtype=np.int64))
        w_tabs.append(None if idx.shape[1] == 1 else np.asarray(wts, dtype=np.float64))
    fill = float(at["extrapolation_value"])
    if all(w is None for w in w_tabs):
        # Indices -1 (outside a tf_crop_and_resize box) read as the extrapolation value.
        tables = [np.where(t[:, 0] < 0, _INVALID, t[:, 0] * st) for t, st in zip(idx_tabs, ss)]
        return Emitted([table_gather(ctx, ins, dst, src, tables, fill)], "table")
    outside = [t[:, 0] < 0 for t in idx_tabs]
    idx_tabs = [np.maximum(t, 0) for t in idx_tabs]
    if not dst.type.elem.is_float:
        raise unsupported(ins, "linear/cubic resize of integers")
    elem = dst.type.elem
    shape = dst.type.shape
    key = (
        "resize",
        tuple(shape),
        elem,
        tuple(t.tobytes() for t in idx_tabs),
        tuple(w.tobytes() if w is not None else b"" for w in w_tabs),
        tuple(ss),
        tuple(m.tobytes() for m in outside),
        fill,
    )

    def build(fn: ir.Function, b: ir.IRBuilder) -> None:
        d, s = fn.args
        gi = [ctx.sink.global_table(t * st, "ridx") for t, st in zip(idx_tabs, ss)]
        gw = [ctx.sink.global_table(w, "rw") if w is not None else None for w in w_tabs]
        go = [ctx.sink.global_table(m.astype(np.int64), "rout") for m in outside]
        taps = [t.shape[1] for t in idx_tabs]
        os_ = contiguous_strides(shape)

        def body(ivs):
            combos: list[tuple[int, ...]] = [()]
            for t in taps:
                combos = [c + (k,) for c in combos for k in range(t)]
            acc = const(F64, 0.0)
            per_axis = []
            for ax, iv in enumerate(ivs):
                offs, ws = [], []
                for k in range(taps[ax]):
                    pos = b.add(b.mul(iv, c64(taps[ax])), c64(k))
                    offs.append(b.load(gep(b, gi[ax], pos, I64), typ=I64))
                    ws.append(
                        b.load(gep(b, gw[ax], pos, F64), typ=F64) if gw[ax] is not None else None
                    )
                per_axis.append((offs, ws))
            for combo in combos:
                off = c64(0)
                w = None
                for ax, k in enumerate(combo):
                    offs, ws = per_axis[ax]
                    off = b.add(off, offs[k])
                    if ws[k] is not None:
                        w = ws[k] if w is None else b.fmul(w, ws[k])
                v = load_elem(b, gep(b, s, off, storage_type(elem)), elem)
                v = v if v.type == F64 else b.fpext(v, F64)
                acc = b.fadd(acc, v if w is None else b.fmul(v, w))
            res = acc if compute_type(elem) == F64 else b.fptrunc(acc, compute_type(elem))
            for ax, iv in enumerate(ivs):
                if outside[ax].any():
                    out = b.load(gep(b, go[ax], iv, I64), typ=I64)
                    bad = b.icmp_signed("!=", out, c64(0))
                    res = b.select(bad, const(res.type, fill), res)
            store_elem(b, res, gep(b, d, linear(b, ivs, os_), storage_type(elem)), elem)

        loop_nest(b, list(shape), body)

    return Emitted(
        [Call(ctx.sink.kernel(key, 2, build, "resize"), [Arg(value=dst), Arg(value=src)])], "taps"
    )


@register("gather")
def emit_gather(ctx: EmitContext, ins: Any) -> Emitted:
    dst, (data, idx) = _ops(ins)
    ax = ins.attrs["axis"] % max(data.type.rank, 1)
    dshape = data.type.shape
    pre = math.prod(dshape[:ax])
    n = dshape[ax]
    post = math.prod(dshape[ax + 1 :])
    ni = idx.type.numel
    elem = data.type.elem
    ety = int_of_size(elem.itemsize)
    iety = storage_type(idx.type.elem)
    key = ("gather", pre, n, post, ni, elem.itemsize, idx.type.elem)
    if dst.type.numel == 0:
        return Emitted([], "empty")

    def build(fn: ir.Function, b: ir.IRBuilder) -> None:
        o, dp, ip = fn.args
        with loop(b, 0, pre, 1, "p") as p, loop(b, 0, ni, 1, "j") as j:
            k = b.load(gep(b, ip, j, iety), typ=iety)
            if iety != I64:
                k = b.sext(k, I64)
            k = b.select(b.icmp_signed("<", k, c64(0)), b.add(k, c64(n)), k)
            k = clamp(b, k, 0, n - 1)
            src_base = b.add(b.mul(p, c64(n * post)), b.mul(k, c64(post)))
            dst_base = b.add(b.mul(p, c64(ni * post)), b.mul(j, c64(post)))
            with loop(b, 0, post, 1, "q") as q:
                v = b.load(gep(b, dp, b.add(src_base, q), ety), typ=ety)
                b.store(v, gep(b, o, b.add(dst_base, q), ety))

    return Emitted(
        [
            Call(
                ctx.sink.kernel(key, 3, build, "gather"),
                [Arg(value=dst), Arg(value=data), Arg(value=idx)],
            )
        ],
        "loop",
    )


__all__ = ["strided_copy", "table_gather"]
