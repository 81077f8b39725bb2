"""Element-wise instructions (unary, binary, comparisons, where, cast) as specialised loops with
constant trip counts and broadcasting strides; the O3 loop vectoriser widens them. Chains of
element-wise instructions are stacked into one loop (`emit_chain`).

Fused activations (compiler/graph/activations.py) have no IR of their own: an activation is its
op's scalar builder here (`fused_activation`), and the GEMM/convolution kernels run the ones in
`EPILOGUE_ACTIVATIONS` in their epilogue (`kernel_activation`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from llvmlite import ir

from compiler.backends.llvm.emitters.common import (
    EXP_LO,
    F16,
    F32,
    F64,
    I8,
    STATUS_DIV_BY_ZERO,
    Arg,
    Call,
    EmitContext,
    Emitted,
    broadcast_strides,
    c64,
    call_intr,
    call_libm,
    collapse,
    compute_type,
    const,
    contiguous_strides,
    divisor_or_one,
    exp_in_range,
    fast_erf,
    fast_exp,
    fast_log,
    fast_tanh,
    float_elem,
    float_libm,
    gep,
    is_nan,
    like,
    linear,
    load_elem,
    loop,
    loop_nest,
    round_to_odd_f32,
    storage_type,
    store_elem,
    unsupported,
)
from compiler.backends.llvm.emitters.narrow import decode as decode_narrow
from compiler.backends.llvm.emitters.narrow import encode as encode_narrow
from compiler.backends.llvm.kernels.common import Activation, LaneEpilogue, apply_activation, smin
from compiler.backends.llvm.kernels.parallel import ELEMENT_WORK, parallel_loop, work_chunks
from compiler.backends.llvm.kernels.rows import fmax_nan, fmin_nan
from compiler.graph.activations import NONE, get_activation
from compiler.graph.types import ElemKind

Scalar = Callable[
    [ir.IRBuilder, list[ir.Value], list[ElemKind], ElemKind, dict[str, Any]], ir.Value
]
SCALAR: dict[str, Scalar] = {}


class _NoScalar(Exception):
    pass


def scalar(*kinds: str):
    def deco(fn: Scalar) -> Scalar:
        for k in kinds:
            SCALAR[k] = fn
        return fn

    return deco


def _isf(e: ElemKind) -> bool:
    return e.is_float


def _unsigned(e: ElemKind) -> bool:
    return e.is_unsigned


def fexp(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """exp in the value's float type: the vectorisable polynomial on float, libm on double."""
    return fast_exp(b, x) if float_elem(x.type) == F32 else float_libm(b, "exp", x)


def _z(v: ir.Value) -> ir.Value:
    return const(v.type, 0)


def imax(b, x, y, unsigned=False):
    c = b.icmp_unsigned(">", x, y) if unsigned else b.icmp_signed(">", x, y)
    return b.select(c, x, y)


def imin(b, x, y, unsigned=False):
    c = b.icmp_unsigned("<", x, y) if unsigned else b.icmp_signed("<", x, y)
    return b.select(c, x, y)


def _need_float(es: list[ElemKind]) -> None:
    if not all(_isf(e) for e in es):
        raise _NoScalar("float inputs only")


@scalar("relu")
def _relu(b, xs, es, eo, at):
    x = xs[0]
    if _isf(es[0]):
        if x.type != F32:  # the kernels' epilogue form is float32; same IR in double
            return b.select(b.fcmp_ordered("<", x, _z(x)), _z(x), x)
        return apply_activation(b, x, "relu")
    if _unsigned(es[0]):
        return x
    return imax(b, x, _z(x))


#: float32 sigmoid as 1 / (1 + exp(-x)) (no sign select, no NaN select), else the two-branch
#: form below.
SIGMOID_RECIPROCAL = True
#: The sigmoid's clamp of -x from above: rounds to n = 128 in exp_in_range, whose 2^n is then
#: the bit pattern of +inf, so exp is +inf and 1 / (1 + exp) exactly 0.
SIGMOID_EXP_INF = 89.0


def sigmoid(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """1 / (1 + e) for x >= 0, e / (1 + e) below, e = exp(-|x|): one division per element.

    In float32, exp's argument is never positive: its overflow clamp and infinity branch go,
    one compare both clamps the argument from below and flushes e to 0 there, and NaN is
    handled once at the end (~20% fewer instructions; EfficientNet runs one per activation).
    """
    one = like(x, 1.0)
    if float_elem(x.type) == F32 and SIGMOID_RECIPROCAL:
        # 1 / (1 + exp(-x)) with -x clamped (ordered compares: NaN passes through the
        # clamps and the polynomial). Relative error of exp's few ulp in both tails. Above,
        # -x is clamped to SIGMOID_EXP_INF, where exp_in_range's power of two is +inf: the
        # result is exactly 0 from x ~ -88.7 down to -inf, as in the reference (clamped to
        # exp's range instead, it stayed at ~1.2e-38, so x * sigmoid(x) at x = -inf was
        # -inf instead of NaN and at -3e38 was -3.6 instead of -0).
        t = b.fneg(x)
        t = b.select(b.fcmp_ordered(">", t, like(x, SIGMOID_EXP_INF)), like(x, SIGMOID_EXP_INF), t)
        t = b.select(b.fcmp_ordered("<", t, like(x, EXP_LO)), like(x, EXP_LO), t)
        return b.fdiv(one, b.fadd(one, exp_in_range(b, t)))
    pos = b.fcmp_ordered(">=", x, like(x, 0.0))
    if float_elem(x.type) != F32:
        e = fexp(b, b.fneg(call_intr(b, "fabs", x)))
        return b.fdiv(b.select(pos, one, e), b.fadd(one, e))
    a = b.fneg(call_intr(b, "fabs", x))
    under = b.fcmp_ordered("<", a, like(x, EXP_LO))
    e = exp_in_range(b, b.select(under, like(x, EXP_LO), a))
    e = b.select(under, like(x, 0.0), e)
    s = b.fdiv(b.select(pos, one, e), b.fadd(one, e))
    return b.select(is_nan(b, x), x, s)


@scalar("sigmoid")
def _sigmoid(b, xs, es, eo, at):
    _need_float(es)
    return sigmoid(b, xs[0])


@scalar("exp")
def _exp(b, xs, es, eo, at):
    _need_float(es)
    return fexp(b, xs[0])


@scalar("sqrt")
def _sqrt(b, xs, es, eo, at):
    _need_float(es)
    return call_intr(b, "sqrt", xs[0])


@scalar("abs")
def _abs(b, xs, es, eo, at):
    x = xs[0]
    if _isf(es[0]):
        return call_intr(b, "fabs", x)
    if _unsigned(es[0]):
        return x
    return b.select(b.icmp_signed("<", x, _z(x)), b.sub(_z(x), x), x)


@scalar("neg")
def _neg(b, xs, es, eo, at):
    x = xs[0]
    return b.fneg(x) if _isf(es[0]) else b.sub(_z(x), x)


@scalar("reciprocal")
def _recip(b, xs, es, eo, at):
    _need_float(es)
    return b.fdiv(like(xs[0], 1.0), xs[0])


def _fast_or_libm(name: str, fast: Any) -> Scalar:
    """float32 lanes: our polynomial `fast`; other float kinds: libm's `name` in their own
    precision."""

    def fn(b, xs, es, eo, at):
        _need_float(es)
        x = xs[0]
        return fast(b, x) if float_elem(x.type) == F32 else float_libm(b, name, x)

    return fn


for _name, _fast in (("tanh", fast_tanh), ("log", fast_log), ("erf", fast_erf)):
    SCALAR[_name] = _fast_or_libm(_name, _fast)


def _round_fn(name: str) -> Scalar:
    def fn(b, xs, es, eo, at):
        return call_intr(b, name, xs[0]) if _isf(es[0]) else xs[0]

    return fn


SCALAR["floor"] = _round_fn("floor")
SCALAR["ceil"] = _round_fn("ceil")


@scalar("not")
def _not(b, xs, es, eo, at):
    return b.zext(b.icmp_unsigned("==", xs[0], _z(xs[0])), I8)


def _clamp01(b, v):
    v = b.select(b.fcmp_ordered("<", v, like(v, 0.0)), like(v, 0.0), v)
    return b.select(b.fcmp_ordered(">", v, like(v, 1.0)), like(v, 1.0), v)


@scalar("hardswish")
def _hardswish(b, xs, es, eo, at):
    _need_float(es)
    x = xs[0]
    return b.fmul(x, _clamp01(b, b.fadd(b.fmul(x, like(x, 1.0 / 6.0)), like(x, 0.5))))


@scalar("sign")
def _sign(b, xs, es, eo, at):
    x = xs[0]
    one, mone = const(x.type, 1), const(x.type, -1)
    if _isf(es[0]):
        return b.select(
            b.fcmp_ordered(">", x, _z(x)), one, b.select(b.fcmp_ordered("<", x, _z(x)), mone, x)
        )
    if _unsigned(es[0]):
        return b.select(b.icmp_unsigned(">", x, _z(x)), one, x)
    return b.select(
        b.icmp_signed(">", x, _z(x)), one, b.select(b.icmp_signed("<", x, _z(x)), mone, x)
    )


@scalar("leakyrelu")
def _leaky(b, xs, es, eo, at):
    _need_float(es)
    x = xs[0]
    return b.select(b.fcmp_ordered(">=", x, _z(x)), x, b.fmul(x, like(x, at["alpha"])))


@scalar("hardsigmoid")
def _hsig(b, xs, es, eo, at):
    _need_float(es)
    x = xs[0]
    v = b.fadd(b.fmul(x, like(x, at["alpha"])), like(x, at["beta"]))
    return b.select(is_nan(b, v), v, _clamp01(b, v))


@scalar("clip")
def _clip(b, xs, es, eo, at):
    x = xs[0]
    lo, hi = at["min"], at["max"]
    if _isf(es[0]):
        if x.type != F32:
            if lo != -math.inf:
                x = b.select(b.fcmp_ordered("<", x, const(x.type, lo)), const(x.type, lo), x)
            if hi != math.inf:
                x = b.select(b.fcmp_ordered(">", x, const(x.type, hi)), const(x.type, hi), x)
            return x
        return apply_activation(b, x, ("clip", lo, hi))
    info = np.iinfo(es[0].np_dtype)
    ilo = info.min if lo == -math.inf else max(int(math.ceil(lo)), info.min)
    ihi = info.max if hi == math.inf else min(int(math.floor(hi)), info.max)
    u = _unsigned(es[0])
    x = imax(b, x, const(x.type, ilo), u)
    return imin(b, x, const(x.type, ihi), u)


def _arith(fop: str, iop: str) -> Scalar:
    def fn(b, xs, es, eo, at):
        a, c = xs
        if _isf(es[0]):
            return getattr(b, fop)(a, c)
        return getattr(b, iop)(a, c)

    return fn


SCALAR["add"] = _arith("fadd", "add")
SCALAR["sub"] = _arith("fsub", "sub")
SCALAR["mul"] = _arith("fmul", "mul")


@scalar("div")
def _div(b, xs, es, eo, at):
    """Integer division never traps: a zero divisor sets the status (the executor raises, as
    ONNX Runtime does) and divides by 1; INT_MIN / -1 wraps to INT_MIN, as numpy does (ONNX
    Runtime itself dies of SIGFPE there)."""
    a, c = xs
    if _isf(es[0]):
        return b.fdiv(a, c)
    safe = divisor_or_one(b, c, STATUS_DIV_BY_ZERO)
    one = const(c.type, 1)
    if _unsigned(es[0]):
        return b.udiv(a, safe)
    minus_one = b.icmp_signed("==", safe, const(c.type, -1))
    q = b.sdiv(a, b.select(minus_one, one, safe))
    return b.select(minus_one, b.sub(_z(a), a), q)


#: Constant float exponents whose powers are a few multiplications (numpy's own fast paths
#: cover 2 and 0.5; GPT-2's tanh GELU raises to 3).
POW_BY_MULTIPLY = (1.0, 2.0, 3.0, 4.0)


@scalar("pow")
def _pow(b, xs, es, eo, at):
    a, c = xs
    if _isf(es[0]):
        k = at.get(CONST_EXPONENT)
        if k in POW_BY_MULTIPLY:
            r = a
            for _ in range(int(k) - 1):
                r = b.fmul(r, a)
            return r
        return float_libm(b, "pow", a, c)
    fa = b.uitofp(a, F64) if _unsigned(es[0]) else b.sitofp(a, F64)
    fc = b.uitofp(c, F64) if _unsigned(es[1]) else b.sitofp(c, F64)
    r = call_libm(b, "pow", fa, fc)
    return b.fptoui(r, a.type) if _unsigned(es[0]) else b.fptosi(r, a.type)


@scalar("max")
def _max(b, xs, es, eo, at):
    a, c = xs
    return fmax_nan(b, a, c) if _isf(es[0]) else imax(b, a, c, _unsigned(es[0]))


@scalar("min")
def _min(b, xs, es, eo, at):
    a, c = xs
    return fmin_nan(b, a, c) if _isf(es[0]) else imin(b, a, c, _unsigned(es[0]))


@scalar("prelu")
def _prelu(b, xs, es, eo, at):
    a, c = xs
    if _isf(es[0]):
        return b.select(b.fcmp_ordered("<", a, _z(a)), b.fmul(a, c), a)
    if _unsigned(es[0]):
        return a
    return b.select(b.icmp_signed("<", a, _z(a)), b.mul(a, c), a)


def _cmp(op: str) -> Scalar:
    def fn(b, xs, es, eo, at):
        a, c = xs
        if _isf(es[0]):
            r = b.fcmp_ordered(op, a, c)
        elif _unsigned(es[0]):
            r = b.icmp_unsigned(op, a, c)
        else:
            r = b.icmp_signed(op, a, c)
        return b.zext(r, I8)

    return fn


SCALAR["equal"] = _cmp("==")
SCALAR["less"] = _cmp("<")
SCALAR["greater"] = _cmp(">")


@scalar("and")
def _and(b, xs, es, eo, at):
    a, c = (b.icmp_unsigned("!=", x, _z(x)) for x in xs)
    return b.zext(b.and_(a, c), I8)


@scalar("or")
def _or(b, xs, es, eo, at):
    a, c = (b.icmp_unsigned("!=", x, _z(x)) for x in xs)
    return b.zext(b.or_(a, c), I8)


@scalar("where")
def _where(b, xs, es, eo, at):
    c, x, y = xs
    return b.select(b.icmp_unsigned("!=", c, _z(c)), x, y)


def convert(b: ir.IRBuilder, x: ir.Value, src: ElemKind, dst: ElemKind) -> ir.Value:
    """numpy astype semantics (float -> int truncates; -> bool is != 0). The value is rounded
    once, to the destination's storage type, then widened to its compute type (f16 -> f32)."""
    if src.is_narrow or dst.is_narrow:
        if src.is_narrow:
            x = decode_narrow(b, x, src)
            src = ElemKind.F32
        return encode_narrow(b, x, src, dst) if dst.is_narrow else convert(b, x, src, dst)
    sty, dty = compute_type(src), compute_type(dst)
    sto = storage_type(dst)
    if dst == ElemKind.BOOL:
        nz = b.fcmp_unordered("!=", x, _z(x)) if _isf(src) else b.icmp_unsigned("!=", x, _z(x))
        return b.zext(nz, I8)
    if _isf(src) and _isf(dst):
        if sto.intrinsic_name == x.type.intrinsic_name:
            return x
        if sto == F16 and x.type == F64:
            return b.fpext(b.fptrunc(round_to_odd_f32(b, x), F16), F32)
        if sto == F16 or (sto == F32 and x.type == F64):
            r = b.fptrunc(x, sto)
            return b.fpext(r, dty) if r.type != dty else r
        return b.fpext(x, dty)
    if _isf(src):
        return b.fptoui(x, dty) if _unsigned(dst) else b.fptosi(x, dty)
    if _isf(dst):
        if sto == F16:  # integer -> double is exact below 2**53, and larger ones are inf in f16
            d = b.uitofp(x, F64) if _unsigned(src) else b.sitofp(x, F64)
            return convert(b, d, ElemKind.F64, dst)
        r = b.uitofp(x, sto) if _unsigned(src) else b.sitofp(x, sto)
        return b.fpext(r, dty) if r.type != dty else r
    if sty.width == dty.width:
        return x
    if sty.width > dty.width:
        return b.trunc(x, dty)
    return b.zext(x, dty) if _unsigned(src) else b.sext(x, dty)


@scalar("cast")
def _cast(b, xs, es, eo, at):
    return convert(b, xs[0], es[0], eo)


def fused_activation(b: ir.IRBuilder, v: ir.Value, act: str, args: Sequence[float]) -> ir.Value:
    """The `activation` attribute of conv / fully-connected on a float32 scalar: the scalar
    builder of the op the activation stands for."""
    if act == NONE:
        return v
    spec = get_activation(act)
    build = SCALAR[spec.op.lower()]
    return build(b, [v], [ElemKind.F32], ElemKind.F32, spec.attrs_of(args))


#: Fused activations the GEMM and convolution kernels run in their epilogue, on vectors
#: (kernels/common.py `apply_activation`). The backend contract offers exactly these for fusion
#: into Conv / FullyConnected; lowering splits any other back into its own node.
EPILOGUE_ACTIVATIONS = frozenset({"relu", "clip"})


def kernel_activation(act: str, args: Sequence[float]) -> Activation:
    """The kernels' epilogue form of a fused activation (None for "none")."""
    if act == NONE:
        return None
    if act not in EPILOGUE_ACTIVATIONS:
        raise ValueError(
            f"fused activation '{act}' is not run by the GEMM/convolution kernels "
            f"(only {', '.join(sorted(EPILOGUE_ACTIVATIONS))}); lowering splits it off"
        )
    attrs = get_activation(act).attrs_of(args)
    return "relu" if act == "relu" else ("clip", attrs["min"], attrs["max"])


# -- the loop -----------------------------------------------------------------------------------


def _attr_key(attrs: dict[str, Any]) -> tuple:
    return tuple(sorted((k, v) for k, v in attrs.items()))


class Step:
    """One element-wise instruction inside a (possibly fused) loop.

    `sources[i]`: ("mem", arg index, strides) or ("prev", step index).
    """

    def __init__(
        self,
        kind: str,
        attrs: dict[str, Any],
        in_elems: list[ElemKind],
        out_elem: ElemKind,
        sources: list[tuple],
        store_arg: int | None,
    ) -> None:
        self.kind, self.attrs, self.in_elems, self.out_elem = kind, attrs, in_elems, out_elem
        self.sources, self.store_arg = sources, store_arg

    def key(self) -> tuple:
        return (
            self.kind,
            _attr_key(self.attrs),
            tuple(self.in_elems),
            self.out_elem,
            tuple((s[0], s[1], tuple(s[2]) if len(s) > 2 else ()) for s in self.sources),
            self.store_arg,
        )


#: A step attribute (not an op attribute): the value of a constant, uniform exponent of Pow.
CONST_EXPONENT = "__const_exponent"


def _step_attrs(ctx: EmitContext, ins: Any) -> dict[str, Any]:
    """The instruction's attributes, plus what its constant operands let the scalar builder
    specialise on."""
    if ins.kind != "pow":
        return ins.attrs
    data = ctx.constant_data(ins.operands[2][0])
    if data is None or data.size == 0 or not np.all(data == data.flat[0]):
        return ins.attrs
    return {**ins.attrs, CONST_EXPONENT: float(data.flat[0])}


def is_elementwise(ins: Any) -> bool:
    return ins.kind in SCALAR and ins.graph_op is not None


def emit_chain(
    ctx: EmitContext, chain: Sequence[Any], keep: Sequence[bool] | None = None
) -> Emitted:
    """One loop computing every instruction of `chain` (each feeds the next via `@out`).

    `keep[j]`: whether step j's result is stored (the last always is). Operands shared between
    steps are passed once; the loop runs over the last instruction's dest shape.
    """
    shape = tuple(chain[-1].operands[0][0].type.shape)
    args: list[Any] = []  # LValues, kernel parameter order
    arg_elems: list[ElemKind] = []

    def arg_index(v: Any) -> int:
        for i, a in enumerate(args):
            if a is v:
                return i
        args.append(v)
        arg_elems.append(v.type.elem)
        return len(args) - 1

    steps: list[Step] = []
    prev_dest = None
    for j, ins in enumerate(chain):
        dest = ins.operands[0][0]
        if tuple(dest.type.shape) != shape:
            raise unsupported(ins, "fused chain with differing shapes")
        sources: list[tuple] = []
        in_elems = []
        for v, _m in ins.operands[1:]:
            in_elems.append(v.type.elem)
            if prev_dest is not None and v is prev_dest:
                sources.append(("prev", j - 1))
            else:
                sources.append(("mem", arg_index(v), broadcast_strides(v.type.shape, shape)))
        last = j == len(chain) - 1
        store = arg_index(dest) if (last or (keep is not None and keep[j])) else None
        steps.append(
            Step(ins.kind, _step_attrs(ctx, ins), in_elems, dest.type.elem, sources, store)
        )
        prev_dest = dest
    for s in steps:
        if s.kind not in SCALAR:
            raise unsupported(chain[0], f"no element-wise semantics for '{s.kind}'")
    # Collapse loop dims over the union of all access patterns.
    patterns: list[list[int]] = [list(contiguous_strides(shape))]
    for s in steps:
        for src in s.sources:
            if src[0] == "mem":
                patterns.append(list(src[2]))
    cshape, cstrides = collapse(shape, patterns)
    k = 1
    for s in steps:
        new = []
        for src in s.sources:
            if src[0] == "mem":
                new.append(("mem", src[1], tuple(cstrides[k])))
                k += 1
            else:
                new.append(src)
        s.sources = new
    out_strides = tuple(cstrides[0])
    noalias = ctx.noalias_flags(args)
    key = (
        "ew",
        tuple(cshape),
        out_strides,
        tuple(s.key() for s in steps),
        tuple(arg_elems),
        noalias,
    )

    # Big loops spread their outermost dim over the thread pool.
    chunks = work_chunks(math.prod(cshape) * ELEMENT_WORK, cshape[0])
    per = -(-cshape[0] // chunks)

    def build(fn: ir.Function, b: ir.IRBuilder) -> None:
        def nest(b: ir.IRBuilder, args: list[ir.Value], ivs: list[ir.Value]) -> None:
            vals: list[ir.Value] = []
            out_off = linear(b, ivs, out_strides)
            for s in steps:
                xs = []
                for src in s.sources:
                    if src[0] == "prev":
                        xs.append(vals[src[1]])
                    else:
                        e = arg_elems[src[1]]
                        p = gep(b, args[src[1]], linear(b, ivs, src[2]), storage_type(e))
                        xs.append(load_elem(b, p, e))
                try:
                    v = SCALAR[s.kind](b, xs, s.in_elems, s.out_elem, s.attrs)
                except _NoScalar as why:
                    raise unsupported(chain[0], f"{s.kind}: {why}") from None
                if s.out_elem == ElemKind.F16 and s.store_arg is None:
                    # A float16 op rounds its result even when the next step of the chain
                    # reads it from a register (as the interpreters' per-op results do).
                    v = b.fpext(b.fptrunc(v, F16), F32)
                vals.append(v)
                if s.store_arg is not None:
                    e = arg_elems[s.store_arg]
                    store_elem(b, v, gep(b, args[s.store_arg], out_off, storage_type(e)), e)

        if chunks == 1:
            loop_nest(b, cshape, lambda ivs: nest(b, list(fn.args), ivs))
            return

        def chunk(bb: ir.IRBuilder, i: ir.Value, tid: ir.Value, args: list[ir.Value]) -> None:
            lo = bb.mul(i, c64(per))
            with loop(bb, lo, smin(bb, bb.add(lo, c64(per)), cshape[0]), 1, "d0") as i0:
                loop_nest(bb, cshape[1:] or [1], lambda ivs: nest(bb, args, [i0, *ivs]), "d")

        parallel_loop(b, chunks, list(fn.args), chunk, "ew")

    # Validate semantics before building (so unsupported cases raise cleanly).
    name = ctx.sink.kernel(key, len(args), build, "ew", noalias)
    return Emitted(
        [Call(name, [Arg(value=a) for a in args])], "fused" if len(chain) > 1 else "loop"
    )


def lane_sources(ctx: EmitContext, ins: Any, known: dict[int, tuple]) -> list[tuple] | None:
    """How a float32 element-wise step reads each operand lane-wise: ``known[id(value)]`` (the
    producer's result, an earlier step's), or ``("const", v)`` for a constant holding one value
    everywhere; None when some operand is neither (the step needs its operand's memory)."""
    if not is_elementwise(ins) or any(v.type.elem != ElemKind.F32 for v, _ in ins.operands):
        return None
    out = []
    for v, _ in ins.operands[1:]:
        if id(v) in known:
            out.append(known[id(v)])
            continue
        data = ctx.constant_data(v)
        if data is None or data.size == 0 or not np.all(data == data.flat[0]):
            return None
        out.append(("const", float(data.flat[0])))
    return out


def lane_epilogue(ctx: EmitContext, src: Any, chain: Sequence[Any]) -> LaneEpilogue:
    """The element-wise ``chain`` after the instruction that writes ``src``, as a lane-wise
    function of src's value (for that instruction's epilogue). Every step's operands must be
    ``src``, an earlier step's dest or a uniform constant (``lane_sources``)."""
    known: dict[int, tuple] = {id(src): ("acc",)}
    steps = []
    for j, ins in enumerate(chain):
        srcs = lane_sources(ctx, ins, known)
        if srcs is None:
            raise unsupported(ins, "not lane-wise: an operand is neither the chain nor a constant")
        attrs = _step_attrs(ctx, ins)
        steps.append((ins.kind, _attr_key(attrs), attrs, tuple(srcs)))
        known[id(ins.operands[0][0])] = ("step", j)

    def build(b: ir.IRBuilder, v: ir.Value) -> ir.Value:
        vals: list[ir.Value] = []
        for kind, _, attrs, srcs in steps:
            xs = [
                v if s[0] == "acc" else vals[s[1]] if s[0] == "step" else like(v, s[1])
                for s in srcs
            ]
            vals.append(SCALAR[kind](b, xs, [ElemKind.F32] * len(xs), ElemKind.F32, attrs))
        return vals[-1]

    return LaneEpilogue(("lanes", tuple((k, ak, srcs) for k, ak, _, srcs in steps)), build)


def emit_elementwise(ctx: EmitContext, ins: Any) -> Emitted:
    return emit_chain(ctx, [ins])


__all__ = [
    "EPILOGUE_ACTIVATIONS",
    "SCALAR",
    "convert",
    "emit_chain",
    "emit_elementwise",
    "fused_activation",
    "is_elementwise",
    "kernel_activation",
    "lane_epilogue",
    "lane_sources",
    "sigmoid",
]
