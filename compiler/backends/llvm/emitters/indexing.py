"""Indexing and scan instructions of the ops in compiler/graph/ops_extra.py: gatherelements,
gathernd, scatternd, scatterelements, argtopk, cumsum; and a plain-loop matmul for the element
kinds the GEMM kernels do not take (float64 and integers: exact in their own precision).

Run-time indices are normalised (negative ones count from the end) and clamped into their dim,
so a bad index reads or writes inside the tensor instead of past it (the interpreters raise).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from llvmlite import ir

from compiler.backends.llvm.emitters.common import (
    I64,
    Arg,
    Call,
    EmitContext,
    Emitted,
    broadcast_strides,
    c64,
    compute_type,
    const,
    contiguous_strides,
    entry_alloca,
    gep,
    int_of_size,
    is_nan,
    linear,
    load_elem,
    loop,
    loop_nest,
    register,
    storage_type,
    store_elem,
)
from compiler.backends.llvm.emitters.elementwise import SCALAR
from compiler.backends.llvm.emitters.tensor import strided_copy
from compiler.backends.llvm.kernels.common import clamp
from compiler.graph.types import NUMERIC_KINDS, ElemKind


def _ops(ins: Any) -> tuple[Any, list[Any]]:
    return ins.operands[0][0], [v for v, _ in ins.operands[1:]]


def _index(b: ir.IRBuilder, ptr: ir.Value, off: ir.Value, elem: ElemKind, n: int) -> ir.Value:
    """The index at ptr[off] as i64: negative counts from the end, clamped into [0, n)."""
    k = b.load(gep(b, ptr, off, storage_type(elem)), typ=storage_type(elem))
    if k.type != I64:
        k = b.sext(k, I64)
    k = b.select(b.icmp_signed("<", k, c64(0)), b.add(k, c64(n)), k)
    return clamp(b, k, 0, max(n - 1, 0))


def _call(ctx: EmitContext, key: Any, values: Sequence[Any], build, prefix: str) -> Call:
    name = ctx.sink.kernel(key, len(values), build, prefix)
    return Call(name, [Arg(value=v) for v in values])


def _copy_all(ctx: EmitContext, dst: Any, src: Any) -> Call | None:
    n = dst.type.numel
    return strided_copy(ctx, dst, src, [n], [1], [1])


def _update(b: ir.IRBuilder, dst: ir.Value, src: ir.Value, elem: ElemKind, red: str) -> None:
    """*dst = *src, or *dst combined with *src by the scatter reduction."""
    new = load_elem(b, src, elem)
    if red != "none":
        new = SCALAR[red](b, [load_elem(b, dst, elem), new], [elem, elem], elem, {})
    store_elem(b, new, dst, elem)


@register("gatherelements")
def emit_gather_elements(ctx: EmitContext, ins: Any) -> Emitted:
    out, (data, idx) = _ops(ins)
    if out.type.numel == 0:
        return Emitted([], "empty")
    ax = ins.attrs["axis"] % data.type.rank
    ds = contiguous_strides(data.type.shape)
    shape = idx.type.shape
    size = data.type.elem.itemsize
    ety = int_of_size(size)
    n = data.type.shape[ax]
    key = ("gatherel", shape, data.type.shape, ax, size, idx.type.elem)

    def build(fn: ir.Function, b: ir.IRBuilder) -> None:
        po, pd, pi = fn.args
        os_ = contiguous_strides(shape)
        rest = [0 if d == ax else s for d, s in enumerate(ds)]

        def body(ivs):
            off = linear(b, ivs, os_)
            k = _index(b, pi, off, idx.type.elem, n)
            src = b.add(linear(b, ivs, rest), b.mul(k, c64(ds[ax])))
            v = b.load(gep(b, pd, src, ety), typ=ety)
            b.store(v, gep(b, po, off, ety))

        loop_nest(b, list(shape), body)

    return Emitted([_call(ctx, key, [out, data, idx], build, "gatherel")], "loop")


@register("gathernd")
def emit_gather_nd(ctx: EmitContext, ins: Any) -> Emitted:
    out, (data, idx) = _ops(ins)
    if out.type.numel == 0:
        return Emitted([], "empty")
    bd = ins.attrs["batch_dims"]
    dshape = data.type.shape
    q = idx.type.shape[-1]
    nb = math.prod(dshape[:bd])
    m = math.prod(idx.type.shape[bd:-1])
    tail = math.prod(dshape[bd + q :])
    ds = contiguous_strides(dshape)
    batch_stride = math.prod(dshape[bd:])
    size = data.type.elem.itemsize
    ety = int_of_size(size)
    key = ("gathernd", dshape, idx.type.shape, bd, size, idx.type.elem)

    def build(fn: ir.Function, b: ir.IRBuilder) -> None:
        po, pd, pi = fn.args
        with loop(b, 0, nb, 1, "bt") as j, loop(b, 0, m, 1, "i") as i:
            row = b.add(b.mul(j, c64(m)), i)
            src = b.mul(j, c64(batch_stride))
            for t in range(q):
                k = _index(b, pi, b.add(b.mul(row, c64(q)), c64(t)), idx.type.elem, dshape[bd + t])
                src = b.add(src, b.mul(k, c64(ds[bd + t])))
            dst = b.mul(row, c64(tail))
            with loop(b, 0, tail, 1, "e") as e:
                v = b.load(gep(b, pd, b.add(src, e), ety), typ=ety)
                b.store(v, gep(b, po, b.add(dst, e), ety))

    return Emitted([_call(ctx, key, [out, data, idx], build, "gathernd")], "loop")


@register("scatternd")
def emit_scatter_nd(ctx: EmitContext, ins: Any) -> Emitted:
    out, (data, idx, upd) = _ops(ins)
    if out.type.numel == 0:
        return Emitted([], "empty")
    red = ins.attrs["reduction"]
    dshape = data.type.shape
    q = idx.type.shape[-1]
    m = math.prod(idx.type.shape[:-1])
    tail = math.prod(dshape[q:])
    ds = contiguous_strides(dshape)
    elem = data.type.elem
    key = ("scatternd", dshape, idx.type.shape, red, elem, idx.type.elem)

    def build(fn: ir.Function, b: ir.IRBuilder) -> None:
        po, pi, pu = fn.args
        sty = storage_type(elem)
        # Updates in order, so a later update of the same slot wins (or combines after).
        with loop(b, 0, m, 1, "i") as i:
            dst = c64(0)
            for t in range(q):
                k = _index(b, pi, b.add(b.mul(i, c64(q)), c64(t)), idx.type.elem, dshape[t])
                dst = b.add(dst, b.mul(k, c64(ds[t])))
            src = b.mul(i, c64(tail))
            with loop(b, 0, tail, 1, "e") as e:
                _update(
                    b, gep(b, po, b.add(dst, e), sty), gep(b, pu, b.add(src, e), sty), elem, red
                )

    calls = [_copy_all(ctx, out, data), _call(ctx, key, [out, idx, upd], build, "scatternd")]
    return Emitted([c for c in calls if c is not None], "copy+loop")


@register("scatterelements")
def emit_scatter_elements(ctx: EmitContext, ins: Any) -> Emitted:
    out, (data, idx, upd) = _ops(ins)
    if out.type.numel == 0:
        return Emitted([], "empty")
    red = ins.attrs["reduction"]
    ax = ins.attrs["axis"] % data.type.rank
    ds = contiguous_strides(data.type.shape)
    shape = idx.type.shape
    elem = data.type.elem
    n = data.type.shape[ax]
    key = ("scatterel", data.type.shape, shape, ax, red, elem, idx.type.elem)

    def build(fn: ir.Function, b: ir.IRBuilder) -> None:
        po, pi, pu = fn.args
        sty = storage_type(elem)
        os_ = contiguous_strides(shape)
        rest = [0 if d == ax else s for d, s in enumerate(ds)]

        def body(ivs):
            off = linear(b, ivs, os_)
            k = _index(b, pi, off, idx.type.elem, n)
            p = gep(b, po, b.add(linear(b, ivs, rest), b.mul(k, c64(ds[ax]))), sty)
            _update(b, p, gep(b, pu, off, sty), elem, red)

        loop_nest(b, list(shape), body)

    calls = [_copy_all(ctx, out, data), _call(ctx, key, [out, idx, upd], build, "scatterel")]
    return Emitted([c for c in calls if c is not None], "copy+loop")


def _axis_split(shape: Sequence[int], axis: int) -> tuple[int, int, int]:
    return math.prod(shape[:axis]), shape[axis], math.prod(shape[axis + 1 :])


@register("cumsum", "cumprod", elems=frozenset(NUMERIC_KINDS))
def emit_cumsum(ctx: EmitContext, ins: Any) -> Emitted:
    out, (x,) = _ops(ins)
    if out.type.numel == 0:
        return Emitted([], "empty")
    ax = ins.attrs["axis"] % x.type.rank
    outer, n, inner = _axis_split(x.type.shape, ax)
    excl, rev = ins.attrs["exclusive"], ins.attrs["reverse"]
    elem = x.type.elem
    op, identity = ("add", 0) if ins.kind == "cumsum" else ("mul", 1)
    key = (ins.kind, outer, n, inner, excl, rev, elem)

    def build(fn: ir.Function, b: ir.IRBuilder) -> None:
        po, px = fn.args
        sty, cty = storage_type(elem), compute_type(elem)
        combine = SCALAR[op]
        with loop(b, 0, outer, 1, "o") as o, loop(b, 0, inner, 1, "i") as i:
            base = b.add(b.mul(o, c64(n * inner)), i)
            acc = entry_alloca(b, cty)
            b.store(const(cty, identity), acc)
            with loop(b, 0, n, 1, "j") as j:
                jj = b.sub(c64(n - 1), j) if rev else j
                off = b.add(base, b.mul(jj, c64(inner)))
                cur = b.load(acc, typ=cty)
                nxt = combine(
                    b, [cur, load_elem(b, gep(b, px, off, sty), elem)], [elem] * 2, elem, {}
                )
                b.store(nxt, acc)
                store_elem(b, cur if excl else nxt, gep(b, po, off, sty), elem)

    return Emitted([_call(ctx, key, [out, x], build, "cumsum")], "scan")


@register("argtopk", elems=frozenset(NUMERIC_KINDS))
def emit_arg_top_k(ctx: EmitContext, ins: Any) -> Emitted:
    out, (x,) = _ops(ins)
    k = ins.attrs["k"]
    if out.type.numel == 0:
        return Emitted([], "empty")
    ax = ins.attrs["axis"] % x.type.rank
    outer, n, inner = _axis_split(x.type.shape, ax)
    largest = bool(ins.attrs["largest"])
    elem = x.type.elem
    key = ("argtopk", outer, n, inner, k, largest, elem)

    def better(b: ir.IRBuilder, v: ir.Value, w: ir.Value) -> ir.Value:
        """v comes strictly before w: larger (smaller); NaN after every number."""
        if elem.is_float:
            strict = b.fcmp_ordered(">" if largest else "<", v, w)
            return b.or_(strict, b.and_(is_nan(b, w), b.not_(is_nan(b, v))))
        op = ">" if largest else "<"
        return b.icmp_unsigned(op, v, w) if elem.is_unsigned else b.icmp_signed(op, v, w)

    def build(fn: ir.Function, b: ir.IRBuilder) -> None:
        po, px = fn.args
        sty, cty = storage_type(elem), compute_type(elem)
        with b.goto_entry_block():
            vals = b.alloca(cty, size=c64(max(k, 1)))
            idxs = b.alloca(I64, size=c64(max(k, 1)))
        count = entry_alloca(b, I64)

        def slot(arr, ety, i):
            return gep(b, arr, i, ety)

        with loop(b, 0, outer, 1, "o") as o, loop(b, 0, inner, 1, "i") as i:
            base = b.add(b.mul(o, c64(n * inner)), i)
            b.store(c64(0), count)
            with loop(b, 0, n, 1, "j") as j:
                v = load_elem(b, gep(b, px, b.add(base, b.mul(j, c64(inner))), sty), elem)
                filled = b.load(count, typ=I64)
                # Position: the entries (best first) that v does not beat stay before it.
                pos_slot = entry_alloca(b, I64)
                b.store(c64(0), pos_slot)
                with loop(b, 0, filled, 1, "p") as p:
                    w = b.load(slot(vals, cty, p), typ=cty)
                    stays = b.not_(better(b, v, w))
                    cur = b.load(pos_slot, typ=I64)
                    b.store(b.select(stays, b.add(cur, c64(1)), cur), pos_slot)
                pos = b.load(pos_slot, typ=I64)
                with b.if_then(b.icmp_signed("<", pos, c64(k))):
                    # Shift [pos, last) one place down; the last entry drops out when full.
                    last = b.select(b.icmp_signed("<", filled, c64(k)), filled, c64(k - 1))
                    with loop(b, 0, b.sub(last, pos), 1, "s") as s:
                        t = b.sub(last, s)
                        src = b.sub(t, c64(1))
                        b.store(b.load(slot(vals, cty, src), typ=cty), slot(vals, cty, t))
                        b.store(b.load(slot(idxs, I64, src), typ=I64), slot(idxs, I64, t))
                    b.store(v, slot(vals, cty, pos))
                    b.store(j, slot(idxs, I64, pos))
                    more = b.icmp_signed("<", filled, c64(k))
                    b.store(b.select(more, b.add(filled, c64(1)), filled), count)
            obase = b.add(b.mul(o, c64(k * inner)), i)
            with loop(b, 0, k, 1, "r") as r:
                b.store(
                    b.load(slot(idxs, I64, r), typ=I64),
                    gep(b, po, b.add(obase, b.mul(r, c64(inner))), I64),
                )

    return Emitted([_call(ctx, key, [out, x], build, "argtopk")], "insertion")


@register("maxpoolargmax", elems=frozenset(NUMERIC_KINDS))
def emit_max_pool_argmax(ctx: EmitContext, ins: Any) -> Emitted:
    out, (x,) = _ops(ins)
    if out.type.numel == 0:
        return Emitted([], "empty")
    at = ins.attrs
    n, c, h, w = x.type.shape
    _, _, oh, ow = out.type.shape
    kh, kw = at["kernel"]
    sh, sw = at["strides"]
    pt, pl = at["pads"][0], at["pads"][1]
    dh, dw = at["dilations"]
    col_major = bool(at["storage_order"])
    elem = x.type.elem
    geometry = ((kh, kw), (sh, sw), (pt, pl), (dh, dw))
    key = ("mpargmax", x.type.shape, out.type.shape, geometry, col_major, elem)

    def build(fn: ir.Function, b: ir.IRBuilder) -> None:
        po, px = fn.args
        sty, cty = storage_type(elem), compute_type(elem)
        best = entry_alloca(b, cty)
        where = entry_alloca(b, I64)
        with loop(b, 0, n * c, 1, "nc") as nc, loop(b, 0, oh, 1, "oh") as y:
            with loop(b, 0, ow, 1, "ow") as xx:
                first = entry_alloca(b, ir.IntType(1))
                b.store(ir.Constant(ir.IntType(1), 1), first)
                b.store(c64(0), where)
                for r in range(kh):
                    ih = b.add(b.sub(b.mul(y, c64(sh)), c64(pt)), c64(r * dh))
                    for s_ in range(kw):
                        iw = b.add(b.sub(b.mul(xx, c64(sw)), c64(pl)), c64(s_ * dw))
                        inside = b.and_(
                            b.and_(b.icmp_signed(">=", ih, c64(0)), b.icmp_signed("<", ih, c64(h))),
                            b.and_(b.icmp_signed(">=", iw, c64(0)), b.icmp_signed("<", iw, c64(w))),
                        )
                        with b.if_then(inside):
                            off = b.add(b.mul(nc, c64(h * w)), b.add(b.mul(ih, c64(w)), iw))
                            v = load_elem(b, gep(b, px, off, sty), elem)
                            cur = b.load(best, typ=cty)
                            if elem.is_float:
                                gt = b.fcmp_ordered(">", v, cur)
                            elif elem.is_unsigned:
                                gt = b.icmp_unsigned(">", v, cur)
                            else:
                                gt = b.icmp_signed(">", v, cur)
                            take = b.or_(b.load(first, typ=ir.IntType(1)), gt)
                            with b.if_then(take):
                                b.store(v, best)
                                b.store(ir.Constant(ir.IntType(1), 0), first)
                                inner = (
                                    b.add(b.mul(iw, c64(h)), ih)
                                    if col_major
                                    else b.add(b.mul(ih, c64(w)), iw)
                                )
                                b.store(b.add(b.mul(nc, c64(h * w)), inner), where)
                dst = b.add(b.mul(nc, c64(oh * ow)), b.add(b.mul(y, c64(ow)), xx))
                b.store(b.load(where, typ=I64), gep(b, po, dst, I64))

    return Emitted([_call(ctx, key, [out, x], build, "mpargmax")], "window")


_LOOP_MATMUL = frozenset(NUMERIC_KINDS) - {ElemKind.F32, ElemKind.F16}


@register("matmul", elems=_LOOP_MATMUL)
def emit_matmul_loop(ctx: EmitContext, ins: Any) -> Emitted:
    """float64 and integer matmul: a plain triple loop accumulating in the element's own type
    (float32 and float16 go to the GEMM kernels, float16 through the contract's float32)."""
    c, (a, bm) = _ops(ins)
    if c.type.numel == 0:
        return Emitted([], "empty")
    M, K = a.type.shape[-2:]
    N = bm.type.shape[-1]
    out_batch = tuple(c.type.shape[:-2])
    sa = [s * M * K for s in broadcast_strides(a.type.shape[:-2], out_batch)]
    sb = [s * K * N for s in broadcast_strides(bm.type.shape[:-2], out_batch)]
    sc = [s * M * N for s in contiguous_strides(out_batch)]
    elem = c.type.elem
    key = ("mmloop", out_batch, M, N, K, tuple(sa), tuple(sb), elem)

    def build(fn: ir.Function, b: ir.IRBuilder) -> None:
        pc, pa, pb = fn.args
        sty, cty = storage_type(elem), compute_type(elem)
        isf = elem.is_float

        def body(ivs):
            ab, bb, cb = linear(b, ivs, sa), linear(b, ivs, sb), linear(b, ivs, sc)
            with loop(b, 0, M, 1, "m") as m, loop(b, 0, N, 1, "n") as nn:
                acc = entry_alloca(b, cty)
                b.store(const(cty, 0), acc)
                with loop(b, 0, K, 1, "k") as kk:
                    x = load_elem(b, gep(b, pa, b.add(ab, b.add(b.mul(m, c64(K)), kk)), sty), elem)
                    y = load_elem(b, gep(b, pb, b.add(bb, b.add(b.mul(kk, c64(N)), nn)), sty), elem)
                    cur = b.load(acc, typ=cty)
                    b.store(b.fadd(cur, b.fmul(x, y)) if isf else b.add(cur, b.mul(x, y)), acc)
                dst = gep(b, pc, b.add(cb, b.add(b.mul(m, c64(N)), nn)), sty)
                store_elem(b, b.load(acc, typ=cty), dst, elem)

        loop_nest(b, list(out_batch), body, "bt")

    return Emitted([_call(ctx, key, [c, a, bm], build, "mmloop")], "loop")
