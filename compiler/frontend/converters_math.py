"""ONNX element-wise math, comparisons, logic and reductions -> graph IR.

Variadic ops (Sum, Max, Min, Mean) become chains of binary nodes; Clip on integers becomes
Max/Min; reductions take their axes from the attribute (old opsets) or the input (new).
"""

from __future__ import annotations

import math

import numpy as np

from compiler.errors import UnsupportedTypeError
from compiler.frontend.onnx_importer import ONNX_TO_ELEM, NodeContext, dtype_name
from compiler.frontend.registry import converter
from compiler.graph.ir import Value
from compiler.graph.ops_extra import BITWISE, TRIG
from compiler.graph.types import ALL_KINDS, FLOAT_KINDS, INT_KINDS, NUMERIC_KINDS, ElemKind

FLOAT_ONLY = FLOAT_KINDS
INT_ONLY = INT_KINDS
NUMERIC = NUMERIC_KINDS
ANY = ALL_KINDS


def check_elem(
    ctx: NodeContext, v: Value, allowed: tuple[ElemKind, ...], what: str = "input"
) -> None:
    if v.type.elem not in allowed:
        raise ctx.unsupported(
            f"{what} element type {v.type.elem.value} "
            f"(supported: {', '.join(k.value for k in allowed)})",
            UnsupportedTypeError,
        )


def same_elem(ctx: NodeContext, a: Value, b: Value) -> None:
    if a.type.elem != b.type.elem:
        raise ctx.unsupported(f"operands have different element types {a.type} and {b.type}")


def same_kind_operands(
    ctx: NodeContext, allowed: tuple[ElemKind, ...] = NUMERIC
) -> tuple[Value, Value]:
    """The node's two inputs, of one element kind, one of `allowed`."""
    a, b = ctx.inp(0), ctx.inp(1)
    check_elem(ctx, a, allowed)
    same_elem(ctx, a, b)
    return a, b


# -- unary --------------------------------------------------------------------------------------

_UNARY = {
    # onnx op: (graph op, element kinds handled)
    "Relu": ("Relu", NUMERIC),
    "Sigmoid": ("Sigmoid", FLOAT_ONLY),
    "Tanh": ("Tanh", FLOAT_ONLY),
    "Exp": ("Exp", FLOAT_ONLY),
    "Log": ("Log", FLOAT_ONLY),
    "Sqrt": ("Sqrt", FLOAT_ONLY),
    "Abs": ("Abs", NUMERIC),
    "Neg": ("Neg", NUMERIC),
    "Reciprocal": ("Reciprocal", FLOAT_ONLY),
    "Erf": ("Erf", FLOAT_ONLY),
    "Floor": ("Floor", FLOAT_ONLY),
    "Ceil": ("Ceil", FLOAT_ONLY),
    "Not": ("Not", (ElemKind.BOOL,)),
    "Softplus": ("Softplus", FLOAT_ONLY),
    "HardSwish": ("HardSwish", FLOAT_ONLY),
    "Sign": ("Sign", NUMERIC),
    "Round": ("Round", FLOAT_ONLY),
    **{name: (name, FLOAT_ONLY) for name, _ in TRIG},
    "BitwiseNot": ("BitwiseNot", INT_ONLY),
}


@converter(*_UNARY)
def convert_unary(ctx: NodeContext) -> list[Value | None]:
    op, kinds = _UNARY[ctx.op_type]
    ctx.check_attrs({})
    x = ctx.inp(0)
    check_elem(ctx, x, kinds)
    return [ctx.create(op, [x])]


def _float_attr(ctx: NodeContext, key: str, default: float) -> float:
    return float(ctx.attr(key, default))


@converter("LeakyRelu", "Elu", "Selu", "HardSigmoid", "Gelu", "ThresholdedRelu", "Celu")
def convert_param_activation(ctx: NodeContext) -> list[Value | None]:
    x = ctx.inp(0)
    check_elem(ctx, x, FLOAT_ONLY)
    op = ctx.op_type
    if op == "LeakyRelu":
        ctx.check_attrs({"alpha": None})
        return [ctx.create("LeakyRelu", [x], {"alpha": _float_attr(ctx, "alpha", 0.01)})]
    if op == "Elu":
        ctx.check_attrs({"alpha": None})
        return [ctx.create("Elu", [x], {"alpha": _float_attr(ctx, "alpha", 1.0)})]
    if op == "Celu":
        # celu(x) = max(0, x) + min(0, alpha * (exp(x / alpha) - 1)) = alpha * elu(x / alpha)
        ctx.check_attrs({"alpha": None})
        a = ctx.scalar_like(x, float(np.float32(_float_attr(ctx, "alpha", 1.0))), "alpha")
        e = ctx.create(
            "Elu", [ctx.create("Div", [x, a], suffix="scaled")], {"alpha": 1.0}, suffix="elu"
        )
        return [ctx.create("Mul", [e, a])]
    if op == "Selu":
        ctx.check_attrs({"alpha": None, "gamma": None})
        return [
            ctx.create(
                "Selu",
                [x],
                {
                    "alpha": _float_attr(ctx, "alpha", 1.67326319217681884765625),
                    "gamma": _float_attr(ctx, "gamma", 1.05070102214813232421875),
                },
            )
        ]
    if op == "HardSigmoid":
        ctx.check_attrs({"alpha": None, "beta": None})
        return [
            ctx.create(
                "HardSigmoid",
                [x],
                {"alpha": _float_attr(ctx, "alpha", 0.2), "beta": _float_attr(ctx, "beta", 0.5)},
            )
        ]
    if op == "ThresholdedRelu":
        ctx.check_attrs({"alpha": None})
        alpha = ctx.scalar_like(x, _float_attr(ctx, "alpha", 1.0), "alpha")
        cond = ctx.create("Greater", [x, alpha], suffix="mask")
        return [ctx.create("Where", [cond, x, ctx.scalar_like(x, 0, "zero")])]
    ctx.check_attrs({"approximate": ("none", "tanh")})
    return [ctx.create("Gelu", [x], {"approximate": ctx.attr("approximate", "none")})]


@converter("Softsign")
def convert_softsign(ctx: NodeContext) -> list[Value | None]:
    ctx.check_attrs({})
    x = ctx.inp(0)
    check_elem(ctx, x, FLOAT_ONLY)
    den = ctx.create(
        "Add", [ctx.create("Abs", [x], suffix="abs"), ctx.scalar_like(x, 1, "one")], suffix="den"
    )
    return [ctx.create("Div", [x, den])]


@converter("Mish")
def convert_mish(ctx: NodeContext) -> list[Value | None]:
    ctx.check_attrs({})
    x = ctx.inp(0)
    check_elem(ctx, x, FLOAT_ONLY)
    t = ctx.create("Tanh", [ctx.create("Softplus", [x], suffix="softplus")], suffix="tanh")
    return [ctx.create("Mul", [x, t])]


@converter("PRelu")
def convert_prelu(ctx: NodeContext) -> list[Value | None]:
    ctx.check_attrs({})
    x, slope = same_kind_operands(ctx)
    out = ctx.create("PRelu", [x, slope])
    if out.type.shape != x.type.shape:
        raise ctx.unsupported(f"slope {slope.type} does not broadcast to the input {x.type}")
    return [out]


@converter("Clip")
def convert_clip(ctx: NodeContext) -> list[Value | None]:
    x = ctx.inp(0)
    check_elem(ctx, x, NUMERIC)
    if ctx.opset < 11:
        ctx.check_attrs({"min": None, "max": None})
        lo = ctx.attr("min")
        hi = ctx.attr("max")
    else:
        ctx.check_attrs({})
        lo_a = ctx.require_const(1, "min") if ctx.has_input(1) else None
        hi_a = ctx.require_const(2, "max") if ctx.has_input(2) else None
        for arr, what in ((lo_a, "min"), (hi_a, "max")):
            if arr is not None and arr.size != 1:
                raise ctx.unsupported(f"'{what}' must be a scalar, got shape {list(arr.shape)}")
        lo = None if lo_a is None else lo_a.reshape(()).item()
        hi = None if hi_a is None else hi_a.reshape(()).item()
    if x.type.elem.is_float:
        t = x.type.np_dtype.type  # the bound as the tensor's type holds it
        attrs = {
            "min": -math.inf if lo is None else float(t(lo)),
            "max": math.inf if hi is None else float(t(hi)),
        }
        return [ctx.create("Clip", [x], attrs)]
    out = x
    if lo is not None:
        out = ctx.create(
            "Max", [out, ctx.scalar_like(x, lo, "min")], suffix="min" if hi is not None else None
        )
    if hi is not None:
        out = ctx.create("Min", [out, ctx.scalar_like(x, hi, "max")])
    return [out]


# -- binary -------------------------------------------------------------------------------------

_BINARY = {
    "Add": ("Add", NUMERIC),
    "Sub": ("Sub", NUMERIC),
    "Mul": ("Mul", NUMERIC),
    "Div": ("Div", NUMERIC),
    "Equal": ("Equal", ANY),
    "Less": ("Less", NUMERIC),
    "Greater": ("Greater", NUMERIC),
    "And": ("And", (ElemKind.BOOL,)),
    "Or": ("Or", (ElemKind.BOOL,)),
    **{name: (name, INT_ONLY) for name, _ in BITWISE},
}


@converter(*_BINARY)
def convert_binary(ctx: NodeContext) -> list[Value | None]:
    op, kinds = _BINARY[ctx.op_type]
    ctx.check_attrs({})  # opset < 7 'broadcast'/'axis' forms are outside the supported range
    a, b = same_kind_operands(ctx, kinds)
    return [ctx.create(op, [a, b])]


@converter("BitCast")
def convert_bit_cast(ctx: NodeContext) -> list[Value | None]:
    ctx.check_attrs({"to": None})
    x = ctx.inp(0)
    check_elem(ctx, x, ANY)
    code = int(ctx.attr("to"))
    to = ONNX_TO_ELEM.get(code)
    if to is None or to.is_narrow:
        raise ctx.unsupported(f"bit cast to {dtype_name(code)}", UnsupportedTypeError)
    if to.itemsize != x.type.elem.itemsize:
        # ONNX then adds or drops a last dim of the size ratio; not needed by real models yet.
        raise ctx.unsupported(
            f"bit cast of {x.type.elem.value} to {to.value} changes the element size"
        )
    if to == x.type.elem:
        return [x]
    return [ctx.create("BitCast", [x], {"to": to.value})]


@converter("IsNaN", "IsInf")
def convert_is_special(ctx: NodeContext) -> list[Value | None]:
    x = ctx.inp(0)
    check_elem(ctx, x, FLOAT_ONLY)
    if ctx.op_type == "IsNaN":
        ctx.check_attrs({})
        return [ctx.create("IsNaN", [x])]
    ctx.check_attrs({"detect_negative": (0, 1), "detect_positive": (0, 1)})
    attrs = {k: int(ctx.attr(k, 1)) for k in ("detect_negative", "detect_positive")}
    return [ctx.create("IsInf", [x], attrs)]


@converter("BitShift")
def convert_bit_shift(ctx: NodeContext) -> list[Value | None]:
    ctx.check_attrs({"direction": ("LEFT", "RIGHT")})
    a, b = ctx.inp(0), ctx.inp(1)
    # Signed types since opset 28 (right shifts keep the sign).
    check_elem(
        ctx, a, INT_KINDS if ctx.opset >= 28 else tuple(k for k in INT_KINDS if k.is_unsigned)
    )
    same_elem(ctx, a, b)
    if not ctx.has_attr("direction"):
        raise ctx.unsupported("attribute 'direction' is required")
    return [ctx.create("BitShift", [a, b], {"direction": ctx.attr("direction")})]


@converter("Mod")
def convert_mod(ctx: NodeContext) -> list[Value | None]:
    ctx.check_attrs({"fmod": (0, 1)})
    a, b = same_kind_operands(ctx)
    fmod = int(ctx.attr("fmod", 0))
    if not fmod and a.type.elem.is_float and ctx.opset < 28:
        raise ctx.unsupported("fmod=0 on floating-point inputs before opset 28")
    return [ctx.create("Mod", [a, b], {"fmod": fmod})]


@converter("Xor")
def convert_xor(ctx: NodeContext) -> list[Value | None]:
    ctx.check_attrs({})
    a, b = same_kind_operands(ctx, (ElemKind.BOOL,))
    return [ctx.create("Not", [ctx.create("Equal", [a, b], suffix="eq")])]


@converter("LessOrEqual", "GreaterOrEqual")
def convert_compare_or_equal(ctx: NodeContext) -> list[Value | None]:
    ctx.check_attrs({})
    a, b = same_kind_operands(ctx)
    strict = "Less" if ctx.op_type == "LessOrEqual" else "Greater"
    # (a < b) or (a == b): NaN compares false either way, as ONNX requires.
    s = ctx.create(strict, [a, b], suffix=strict.lower())
    e = ctx.create("Equal", [a, b], suffix="equal")
    return [ctx.create("Or", [s, e])]


@converter("Pow")
def convert_pow(ctx: NodeContext) -> list[Value | None]:
    ctx.check_attrs({})
    a, b = ctx.inp(0), ctx.inp(1)
    check_elem(ctx, a, NUMERIC)
    check_elem(ctx, b, NUMERIC, "exponent")
    if a.type.elem != b.type.elem:
        if a.type.elem.is_float or not b.type.elem.is_float:
            b = ctx.create("Cast", [b], {"to": a.type.elem.value}, suffix="cast")
        else:
            # Integer base, float exponent: computed in the exponent's float type, truncated
            # back (as ONNX's reference does); exact while results fit its mantissa.
            fk = b.type.elem.value
            af = ctx.create("Cast", [a], {"to": fk}, suffix=f"base_{fk}")
            p = ctx.create("Pow", [af, b], suffix=f"pow_{fk}")
            return [ctx.create("Cast", [p], {"to": a.type.elem.value})]
    return [ctx.create("Pow", [a, b])]


@converter("Sum", "Max", "Min", "Mean")
def convert_variadic(ctx: NodeContext) -> list[Value | None]:
    ctx.check_attrs({})
    xs = ctx.inputs()
    if not xs:
        raise ctx.unsupported("no inputs")
    for x in xs:
        check_elem(ctx, x, FLOAT_ONLY if ctx.op_type == "Mean" else NUMERIC)
        same_elem(ctx, xs[0], x)
    op = {"Sum": "Add", "Mean": "Add", "Max": "Max", "Min": "Min"}[ctx.op_type]
    acc = xs[0]
    final_is_chain = ctx.op_type != "Mean"
    for i, x in enumerate(xs[1:], start=1):
        last = final_is_chain and i == len(xs) - 1
        acc = ctx.create(op, [acc, x], suffix=None if last else f"{op.lower()}{i}")
    if ctx.op_type == "Mean":
        if len(xs) > 1:
            acc = ctx.create("Div", [acc, ctx.scalar_like(acc, len(xs), "count")])
    return [acc]


@converter("Where")
def convert_where(ctx: NodeContext) -> list[Value | None]:
    ctx.check_attrs({})
    c, x, y = ctx.inp(0), ctx.inp(1), ctx.inp(2)
    check_elem(ctx, c, (ElemKind.BOOL,), "condition")
    check_elem(ctx, x, ANY)
    same_elem(ctx, x, y)
    return [ctx.create("Where", [c, x, y])]


# -- reductions ---------------------------------------------------------------------------------

_REDUCE_INPUT_AXES_FROM = {"ReduceSum": 13}  # others: 18


def reduce_axes(ctx: NodeContext, rank: int) -> list[int] | None:
    """Normalised axes, or None for 'no-op' (noop_with_empty_axes with empty axes)."""
    from_input = ctx.opset >= _REDUCE_INPUT_AXES_FROM.get(ctx.op_type, 18)
    if from_input:
        ctx.check_attrs({"keepdims": (0, 1), "noop_with_empty_axes": (0, 1)})
        axes = (
            [int(a) for a in ctx.require_const(1, "axes").reshape(-1)] if ctx.has_input(1) else []
        )
    else:
        ctx.check_attrs({"keepdims": (0, 1), "axes": None})
        axes = [int(a) for a in ctx.attr("axes", [])]
    if not axes:
        if from_input and ctx.attr("noop_with_empty_axes", 0):
            return None
        return list(range(rank))
    out = []
    for a in axes:
        if not -rank <= a < max(rank, 1):
            raise ctx.unsupported(f"axis {a} is out of range for rank {rank}")
        out.append(a % max(rank, 1))
    if len(set(out)) != len(out):
        raise ctx.unsupported(f"axes {axes} repeat an axis")
    return sorted(out)


_REDUCE_KINDS = {
    "ReduceMean": FLOAT_ONLY,
    "ReduceSum": NUMERIC,
    "ReduceMax": ANY,
    "ReduceMin": ANY,
    "ReduceProd": NUMERIC,
    "ReduceSumSquare": NUMERIC,
    "ReduceL1": NUMERIC,
    "ReduceL2": FLOAT_ONLY,
    "ReduceLogSum": FLOAT_ONLY,
    "ReduceLogSumExp": FLOAT_ONLY,
}


@converter(*_REDUCE_KINDS)
def convert_reduce(ctx: NodeContext) -> list[Value | None]:
    x = ctx.inp(0)
    check_elem(ctx, x, _REDUCE_KINDS[ctx.op_type])
    axes = reduce_axes(ctx, x.type.rank)
    keep = int(ctx.attr("keepdims", 1))
    op = ctx.op_type
    if axes is None:
        # No-op reduction: the input itself (after the per-element part of the composite ops).
        if op == "ReduceSumSquare":
            return [ctx.create("Mul", [x, x])]
        if op == "ReduceL1":
            return [ctx.create("Abs", [x])]
        if op == "ReduceL2":
            return [ctx.create("Abs", [x])]
        if op == "ReduceLogSum":
            return [ctx.create("Log", [x])]
        return [x]
    if any(x.type.shape[a] == 0 for a in axes):
        return [_empty_reduction(ctx, x, axes, keep)]
    if x.type.rank == 0:
        return [convert_reduce_scalar(ctx, x)]
    attrs = {"axes": axes, "keepdims": keep}
    if x.type.elem == ElemKind.BOOL:
        if op not in ("ReduceMax", "ReduceMin"):
            raise ctx.unsupported("bool input")
        xi = ctx.create("Cast", [x], {"to": "i32"}, suffix="as_i32")
        r = ctx.create(op, [xi], attrs, suffix="reduce_i32")
        return [ctx.create("Cast", [r], {"to": "bool"})]
    if op in ("ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd"):
        return [ctx.create(op, [x], attrs)]
    if op == "ReduceSumSquare":
        return [ctx.create("ReduceSum", [ctx.create("Mul", [x, x], suffix="square")], attrs)]
    if op == "ReduceL1":
        return [ctx.create("ReduceSum", [ctx.create("Abs", [x], suffix="abs")], attrs)]
    if op == "ReduceL2":
        s = ctx.create(
            "ReduceSum", [ctx.create("Mul", [x, x], suffix="square")], attrs, suffix="sum"
        )
        return [ctx.create("Sqrt", [s])]
    if op == "ReduceLogSum":
        return [ctx.create("Log", [ctx.create("ReduceSum", [x], attrs, suffix="sum")])]
    # ReduceLogSumExp, stabilised: m + log(sum(exp(x - m))), m = max over the axes.
    m = ctx.create("ReduceMax", [x], {"axes": axes, "keepdims": 1}, suffix="max")
    e = ctx.create("Exp", [ctx.create("Sub", [x, m], suffix="shift")], suffix="exp")
    s = ctx.create("Log", [ctx.create("ReduceSum", [e], attrs, suffix="sum")], suffix="log")
    if not keep:
        m = ctx.create("Reshape", [m], {"shape": s.type.shape}, suffix="max_squeezed")
    return [ctx.create("Add", [s, m])]


def _empty_reduction(ctx: NodeContext, x: Value, axes: list[int], keep: int) -> Value:
    """A reduction over a zero-sized dim: the identity of the reduction, as a constant."""
    shape = tuple(
        1 if i in axes else d for i, d in enumerate(x.type.shape) if keep or i not in axes
    )
    dt = x.type.np_dtype
    big = np.inf if dt.kind == "f" else (True if dt.kind == "b" else np.iinfo(dt).max)
    small = -np.inf if dt.kind == "f" else (False if dt.kind == "b" else np.iinfo(dt).min)
    value = {
        "ReduceSum": 0,
        "ReduceSumSquare": 0,
        "ReduceL1": 0,
        "ReduceL2": 0,
        "ReduceProd": 1,
        "ReduceMax": small,
        "ReduceMin": big,
        "ReduceLogSum": -np.inf,
        "ReduceLogSumExp": -np.inf,
        "ReduceMean": np.nan,
    }[ctx.op_type]
    return ctx.constant(np.full(shape, value, dtype=dt), suffix="empty")


def convert_reduce_scalar(ctx: NodeContext, x: Value) -> Value:
    op = ctx.op_type
    if op in ("ReduceSumSquare",):
        return ctx.create("Mul", [x, x])
    if op in ("ReduceL1", "ReduceL2"):
        return ctx.create("Abs", [x])
    if op == "ReduceLogSum":
        return ctx.create("Log", [x])
    return x


@converter("ArgMax", "ArgMin")
def convert_arg(ctx: NodeContext) -> list[Value | None]:
    ctx.check_attrs({"axis": None, "keepdims": (0, 1), "select_last_index": (0, 1)})
    x = ctx.inp(0)
    check_elem(ctx, x, NUMERIC)
    rank = x.type.rank
    axis = int(ctx.attr("axis", 0))
    if not -rank <= axis < max(rank, 1) or rank == 0:
        raise ctx.unsupported(f"axis {axis} is out of range for rank {rank}")
    return [
        ctx.create(
            ctx.op_type,
            [x],
            {
                "axis": axis % rank,
                "keepdims": int(ctx.attr("keepdims", 1)),
                "select_last_index": int(ctx.attr("select_last_index", 0)),
            },
        )
    ]
