"""Element-wise scalar builders of the ops in compiler/graph/ops_extra.py (Mod, Round): they join
the element-wise table (`SCALAR`), so they run in the stacked element-wise loops like any other.
"""

from __future__ import annotations

from llvmlite import ir

from compiler.backends.llvm.emitters.common import call_intr, const
from compiler.backends.llvm.emitters.elementwise import scalar


def _is_zero(b: ir.IRBuilder, v: ir.Value, isf: bool) -> ir.Value:
    z = const(v.type, 0)
    return b.fcmp_ordered("==", v, z) if isf else b.icmp_unsigned("==", v, z)


def _negative(b: ir.IRBuilder, v: ir.Value, isf: bool) -> ir.Value:
    z = const(v.type, 0)
    return b.fcmp_ordered("<", v, z) if isf else b.icmp_signed("<", v, z)


@scalar("mod")
def _mod(b, xs, es, eo, at):
    a, d = xs
    elem = es[0]
    isf = elem.is_float
    if isf:
        r = b.frem(a, d)  # C fmod: the sign of a
    elif elem.is_unsigned:
        # x % 0 is undefined behaviour in LLVM (a trap on x86): numpy's answer is 0.
        zero = _is_zero(b, d, False)
        r = b.select(zero, const(a.type, 0), b.urem(a, b.select(zero, const(d.type, 1), d)))
        return r
    else:
        # Divisors 0 and -1 (INT_MIN % -1 traps too) both give 0.
        bad = b.or_(_is_zero(b, d, False), b.icmp_signed("==", d, const(d.type, -1)))
        r = b.select(bad, const(a.type, 0), b.srem(a, b.select(bad, const(d.type, 1), d)))
    if at["fmod"]:
        return r
    # Python / numpy mod: the sign of the divisor. A non-zero remainder of the other sign gets
    # the divisor added; for floats a zero remainder takes the divisor's sign.
    fix = b.and_(b.not_(_is_zero(b, r, isf)), b.xor(_negative(b, r, isf), _negative(b, d, isf)))
    r = b.select(fix, b.fadd(r, d) if isf else b.add(r, d), r)
    if isf:
        r = b.select(_is_zero(b, r, True), call_intr(b, "copysign", const(r.type, 0), d), r)
    return r


@scalar("round")
def _round(b, xs, es, eo, at):
    x = xs[0]
    return call_intr(b, "roundeven", x) if es[0].is_float else x
