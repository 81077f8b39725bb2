"""Element-wise scalar builders of the ops in compiler/graph/ops_extra.py (Mod, Round, the
trigonometric functions, IsNaN, IsInf, bitwise ops and shifts): they join the element-wise
table (`SCALAR`), so they run in the stacked element-wise loops like any other.
"""

from __future__ import annotations

from llvmlite import ir

from compiler.backends.llvm.emitters.common import (
    F16,
    I8,
    STATUS_MOD_BY_ZERO,
    call_intr,
    compute_type,
    const,
    divisor_or_one,
    float_libm,
    is_nan,
    storage_type,
)
from compiler.backends.llvm.emitters.elementwise import SCALAR, Scalar, _NoScalar, scalar
from compiler.graph.ops_extra import BITWISE, TRIG
from compiler.graph.types import ElemKind


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
        # A zero divisor is an error, as in ONNX Runtime ("Integer modulo by zero").
        return b.urem(a, divisor_or_one(b, d, STATUS_MOD_BY_ZERO))
    else:
        # x % -1 is 0, which srem would trap on for INT_MIN: take -1 out of the division.
        safe = divisor_or_one(b, d, STATUS_MOD_BY_ZERO)
        minus_one = b.icmp_signed("==", safe, const(d.type, -1))
        r = b.srem(a, b.select(minus_one, const(d.type, 1), safe))
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


def _libm(name: str):
    def fn(b, xs, es, eo, at):
        if not es[0].is_float:
            raise _NoScalar("float inputs only")
        return float_libm(b, name, xs[0])

    return fn


for _op, _ in TRIG:
    SCALAR[_op.lower()] = _libm(_op.lower())


@scalar("bitcast")
def _bit_cast(b, xs, es, eo, at):
    """Same-size reinterpretation; float16 computes in float32, so it goes back to half
    (exactly) before and comes out of half after."""
    x = xs[0]
    if es[0] == ElemKind.F16:
        x = b.fptrunc(x, F16)
    out = b.bitcast(x, storage_type(eo)) if x.type != storage_type(eo) else x
    return b.fpext(out, compute_type(eo)) if eo == ElemKind.F16 else out


@scalar("isnan")
def _isnan(b, xs, es, eo, at):
    return b.zext(is_nan(b, xs[0]), I8)


@scalar("isinf")
def _isinf(b, xs, es, eo, at):
    x = xs[0]
    inf = const(x.type, float("inf"))
    pos = b.fcmp_ordered("==", x, inf) if at["detect_positive"] else ir.Constant(ir.IntType(1), 0)
    neg = (
        b.fcmp_ordered("==", x, b.fneg(inf))
        if at["detect_negative"]
        else ir.Constant(ir.IntType(1), 0)
    )
    return b.zext(b.or_(pos, neg), I8)


def _bitwise(method: str) -> Scalar:
    return lambda b, xs, es, eo, at: getattr(b, method)(xs[0], xs[1])


for _op, _method in zip((n for n, _ in BITWISE), ("and_", "or_", "xor")):
    SCALAR[_op.lower()] = _bitwise(_method)


@scalar("bitwisenot")
def _bitwise_not(b, xs, es, eo, at):
    return b.not_(xs[0])


@scalar("bitshift")
def _bit_shift(b, xs, es, eo, at):
    a, n = xs
    signed = not es[0].is_unsigned
    width = const(n.type, a.type.width)
    past = b.icmp_unsigned(">=", n, width)  # negative amounts are huge unsigned: past too
    safe = b.select(past, const(n.type, 0), n)
    if at["direction"] == "LEFT":
        return b.select(past, const(a.type, 0), b.shl(a, safe))
    if signed:
        fill = b.ashr(a, const(a.type, a.type.width - 1))  # -1 for negative a, else 0
        return b.select(past, fill, b.ashr(a, safe))
    return b.select(past, const(a.type, 0), b.lshr(a, safe))
