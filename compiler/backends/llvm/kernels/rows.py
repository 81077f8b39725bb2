"""Vector loops over contiguous rows for the reduction-shaped kernels (Softmax, LayerNorm, the
reductions): full vectors, then one masked tail vector, with accumulators carried in registers.

A serial scalar reduction (``acc = acc + x[i]`` through memory, in order) is what the loop
vectoriser may not widen without reassociation, so these kernels carry ``vw`` partial results
(one per lane) and combine them at the end in a fixed order: the result does not depend on
the run, only on the shape.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from llvmlite import ir

from compiler.backends.llvm.kernels.common import (
    F32,
    I32,
    i64,
    loop_blocks,
    masked_load_call,
    masked_store_call,
)

F64 = ir.DoubleType()

Combine = Callable[[ir.IRBuilder, ir.Value, ir.Value], ir.Value]


def vty(n: int, elem: ir.Type = F32) -> ir.VectorType:
    return ir.VectorType(elem, n)


def vsplat(v: float, n: int, elem: ir.Type = F32) -> ir.Constant:
    return ir.Constant(vty(n, elem), [float(v)] * n)


def vbroadcast(b: ir.IRBuilder, x: ir.Value, n: int) -> ir.Value:
    """A scalar value in every lane."""
    t = vty(n, x.type)
    v = b.insert_element(ir.Constant(t, ir.Undefined), x, ir.Constant(I32, 0))
    return b.shuffle_vector(v, ir.Constant(t, ir.Undefined), ir.Constant(vty(n, I32), [0] * n))


def masked_load(b: ir.IRBuilder, ptr: ir.Value, n: int, valid: int, fill: float = 0.0) -> ir.Value:
    """``n`` floats at ``ptr``; lanes from ``valid`` on are ``fill`` and never read."""
    if valid >= n:
        return b.load(ptr, typ=vty(n), align=4)
    return masked_load_call(b, ptr, vty(n), valid, vsplat(fill, n), 4)


def masked_store(b: ir.IRBuilder, v: ir.Value, ptr: ir.Value, n: int, valid: int) -> None:
    if valid >= n:
        b.store(v, ptr, align=4)
        return
    masked_store_call(b, v, ptr, valid, 4)


def vector_loop(
    b: ir.IRBuilder,
    count: int,
    n: int,
    init: Sequence[ir.Value],
    body: Callable[[ir.Value, int, list[ir.Value]], list[ir.Value]],
    name: str = "v",
) -> list[ir.Value]:
    """``for (j = 0; j < count; j += n)`` with loop-carried values (phis): ``body(j, valid,
    carried) -> new carried`` sees every full vector with ``valid == n``, then the tail (if
    ``count % n``) once with its lane count. Returns the final carried values."""
    full = count - count % n
    carried = list(init)
    if full:
        pre, hdr, bod, end = loop_blocks(b, name)
        j = b.phi(i64(0).type, f"{name}.j")
        j.add_incoming(i64(0), pre)
        phis = []
        for c in carried:
            p = b.phi(c.type)
            p.add_incoming(c, pre)
            phis.append(p)
        b.cbranch(b.icmp_signed("<", j, i64(full)), bod, end)
        b.position_at_end(bod)
        new = body(j, n, list(phis))
        for p, v in zip(phis, new):
            p.add_incoming(v, b.block)
        j.add_incoming(b.add(j, i64(n), flags=("nsw",)), b.block)
        b.branch(hdr)
        b.position_at_end(end)
        carried = list(phis)
    if count % n:
        carried = body(i64(full), count % n, carried)
    return carried


def hreduce(b: ir.IRBuilder, v: ir.Value, combine: Combine) -> ir.Value:
    """The lanes of ``v`` combined pairwise (halves, then quarters, ...): a fixed order."""
    n = v.type.count
    while n > 1:
        h = n // 2
        undef = ir.Constant(v.type, ir.Undefined)
        lo = b.shuffle_vector(v, undef, ir.Constant(vty(h, I32), list(range(h))))
        hi = b.shuffle_vector(v, undef, ir.Constant(vty(h, I32), list(range(h, n))))
        v = combine(b, lo, hi)
        n = h
    return b.extract_element(v, ir.Constant(I32, 0))


def fmax_nan(b: ir.IRBuilder, x: ir.Value, y: ir.Value) -> ir.Value:
    """numpy's maximum (a NaN on either side wins), on scalars or vectors."""
    return b.select(b.fcmp_unordered("uno", x, x), x, b.select(b.fcmp_ordered(">", x, y), x, y))


def fmin_nan(b: ir.IRBuilder, x: ir.Value, y: ir.Value) -> ir.Value:
    return b.select(b.fcmp_unordered("uno", x, x), x, b.select(b.fcmp_ordered("<", x, y), x, y))


def fadd(b: ir.IRBuilder, x: ir.Value, y: ir.Value) -> ir.Value:
    return b.fadd(x, y)


def widen(b: ir.IRBuilder, v: ir.Value) -> ir.Value:
    """float lanes -> double lanes."""
    return b.fpext(v, vty(v.type.count, F64))


__all__ = [
    "F64",
    "fadd",
    "fmax_nan",
    "fmin_nan",
    "hreduce",
    "masked_load",
    "masked_store",
    "vbroadcast",
    "vector_loop",
    "vsplat",
    "vty",
    "widen",
]
