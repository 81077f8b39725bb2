"""Hypothesis strategies for the property tests: small valid graph-IR modules built through the
compiler's own graph API (`Module`, `Function.create`), plus inputs to run them on.

`graphs(ops)` grows a random DAG from one NCHW input: each step picks an op of `ops`, an existing
value to apply it to, and attributes that make it valid; constants get seeded random data.
Op menus: `ROUND_TRIP_OPS` (every f32 op that has a builder below, for the printers and parsers),
`EXECUTABLE_OPS` (those finite and continuous on any input, for comparing pipelines) and
`NUMERIC_OPS` (its element-wise, matmul and conv ops, for comparing executors).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from hypothesis import strategies as st

from compiler.graph import Module, print_module, verify_module
from compiler.graph.ir import Function, Value
from compiler.graph.types import f32


@dataclass
class _Ctx:
    draw: Callable
    module: Module
    fn: Function
    rng: np.random.Generator
    values: list[Value]  # every value computed so far: operands for the next nodes
    op: str = ""  # the op being built

    def const(self, name: str, shape: Sequence[int], positive: bool = False) -> Value:
        data = self.rng.standard_normal(tuple(shape)).astype(np.float32)
        if positive:  # divisors, variances
            data = np.abs(data) + 0.5
        return self.module.add_constant(name, data)

    def node(self, op: str, operands: Sequence[Value], attrs: dict | None = None) -> Value:
        return self.fn.create(op, list(operands), attrs or {}).results[0]


#: Builds one node of `ctx.op` on a value, or returns None where the op does not apply to it.
Builder = Callable[[_Ctx, Value], Value | None]
_BUILDERS: dict[str, Builder] = {}


def _builder(*ops: str) -> Callable[[Builder], Builder]:
    def deco(fn: Builder) -> Builder:
        for op in ops:
            _BUILDERS[op] = fn
        return fn

    return deco


def _dim(ctx: _Ctx, lo: int = 1, hi: int = 4) -> int:
    return ctx.draw(st.integers(lo, hi))


def _float(ctx: _Ctx, lo: float, hi: float) -> float:
    # Round so attribute values are short in the printed IR; the printer is exact either way.
    return round(ctx.draw(st.floats(lo, hi, allow_nan=False, allow_infinity=False)), 3)


_UNARY = ["Relu", "Sigmoid", "Tanh", "Abs", "Neg", "Erf", "Softplus", "HardSwish", "Selu"]
# Undefined, unbounded or discontinuous somewhere: printed and parsed, not compared numerically.
_UNARY_PARTIAL = ["Exp", "Log", "Sqrt", "Reciprocal", "Floor", "Ceil", "Sign"]


@_builder(*_UNARY, *_UNARY_PARTIAL)
def _unary(ctx: _Ctx, x: Value) -> Value:
    return ctx.node(ctx.op, [x])


@_builder("LeakyRelu", "Elu")
def _alpha(ctx: _Ctx, x: Value) -> Value:
    return ctx.node(ctx.op, [x], {"alpha": _float(ctx, 0.01, 2.0)})


@_builder("HardSigmoid")
def _hard_sigmoid(ctx: _Ctx, x: Value) -> Value:
    return ctx.node("HardSigmoid", [x], {"alpha": _float(ctx, 0.1, 1.0), "beta": 0.5})


@_builder("Gelu")
def _gelu(ctx: _Ctx, x: Value) -> Value:
    return ctx.node("Gelu", [x], {"approximate": ctx.draw(st.sampled_from(["none", "tanh"]))})


@_builder("Clip")
def _clip(ctx: _Ctx, x: Value) -> Value:
    lo = _float(ctx, -3.0, 0.0)
    return ctx.node("Clip", [x], {"min": lo, "max": lo + _float(ctx, 0.5, 6.0)})


def _broadcastable(ctx: _Ctx, shape: tuple[int, ...]) -> tuple[int, ...]:
    """A shape that broadcasts into `shape`: trailing dims kept or set to 1."""
    keep = ctx.draw(st.integers(0, len(shape)))
    return tuple(d if ctx.draw(st.booleans()) else 1 for d in shape[len(shape) - keep :])


@_builder("Add", "Sub", "Mul", "Max", "Min", "Div", "PRelu")
def _binary(ctx: _Ctx, x: Value) -> Value:
    op: str = ctx.op
    # The other operand: a value of the same shape when there is one, else a broadcast constant.
    same = [v for v in ctx.values if v.type == x.type and v is not x]
    if same and op not in ("Div", "PRelu") and ctx.draw(st.booleans()):
        other = ctx.draw(st.sampled_from(same))
    else:
        other = ctx.const("k", _broadcastable(ctx, x.type.shape), positive=op == "Div")
    # x is the numerator of Div (the constant divisor is positive) and the input of PRelu.
    swap = op not in ("Div", "PRelu") and ctx.draw(st.booleans())
    return ctx.node(op, [other, x] if swap else [x, other])


@_builder("MatMul")
def _matmul(ctx: _Ctx, x: Value) -> Value | None:
    if x.type.rank < 2:
        return None
    k, n = x.type.shape[-1], _dim(ctx, 1, 5)
    w = ctx.const("w", (k, n))
    return ctx.node("MatMul", [x, w])


@_builder("FullyConnected")
def _fully_connected(ctx: _Ctx, x: Value) -> Value | None:
    if x.type.rank != 2:
        return None
    n = _dim(ctx, 1, 5)
    return ctx.node(
        "FullyConnected", [x, ctx.const("w", (x.type.shape[1], n)), ctx.const("b", (n,))]
    )


def _window(ctx: _Ctx, size: int) -> tuple[int, int, int, int, int] | None:
    """(kernel, stride, pad before, pad after, dilation) with a positive output size."""
    k, s, d = _dim(ctx, 1, 3), _dim(ctx, 1, 2), _dim(ctx, 1, 2)
    p0, p1 = ctx.draw(st.integers(0, k - 1)), ctx.draw(st.integers(0, k - 1))
    if size + p0 + p1 - d * (k - 1) - 1 < 0:
        return None
    return k, s, p0, p1, d


@_builder("Conv")
def _conv(ctx: _Ctx, x: Value) -> Value | None:
    if x.type.rank != 4:
        return None
    _n, c, h, w = x.type.shape
    wh, ww = _window(ctx, h), _window(ctx, w)
    if wh is None or ww is None:
        return None
    group = ctx.draw(st.sampled_from([g for g in (1, 2, c) if c % g == 0]))
    k = group * _dim(ctx, 1, 2)
    attrs = {
        "strides": (wh[1], ww[1]),
        "pads": (wh[2], ww[2], wh[3], ww[3]),
        "dilations": (wh[4], ww[4]),
        "group": group,
    }
    act = ctx.draw(st.sampled_from(["none", "none", "relu", "clip", "sigmoid"]))
    if act != "none":
        attrs["activation"] = act
        attrs["act_args"] = (0.0, 6.0) if act == "clip" else ()
    filt = ctx.const("filter", (k, c // group, wh[0], ww[0]))
    return ctx.node("Conv", [x, filt, ctx.const("bias", (k,))], attrs)


@_builder("MaxPool", "AvgPool")
def _pool(ctx: _Ctx, x: Value) -> Value | None:
    if x.type.rank != 4:
        return None
    wh, ww = _window(ctx, x.type.shape[2]), _window(ctx, x.type.shape[3])
    if wh is None or ww is None:
        return None
    attrs = {
        "kernel": (wh[0], ww[0]),
        "strides": (wh[1], ww[1]),
        "pads": (wh[2], ww[2], wh[3], ww[3]),
    }
    if ctx.op == "AvgPool":
        attrs["count_include_pad"] = ctx.draw(st.integers(0, 1))
    else:
        attrs["dilations"] = (wh[4], ww[4])
    return ctx.node(ctx.op, [x], attrs)


@_builder("GlobalAvgPool", "GlobalMaxPool")
def _global_pool(ctx: _Ctx, x: Value) -> Value | None:
    return ctx.node(ctx.op, [x]) if x.type.rank >= 3 else None


@_builder("BatchNorm")
def _batchnorm(ctx: _Ctx, x: Value) -> Value | None:
    if x.type.rank < 2:
        return None
    c = x.type.shape[1]
    params = [ctx.const(n, (c,), positive=n == "var") for n in ("scale", "shift", "mean", "var")]
    return ctx.node("BatchNorm", [x, *params], {"epsilon": 1e-5})


@_builder("LayerNorm")
def _layernorm(ctx: _Ctx, x: Value) -> Value:
    axis = ctx.draw(st.integers(0, x.type.rank - 1))
    norm = x.type.shape[axis:]
    return ctx.node(
        "LayerNorm", [x, ctx.const("gamma", norm), ctx.const("beta", norm)], {"axis": axis}
    )


@_builder("Softmax", "LogSoftmax")
def _softmax(ctx: _Ctx, x: Value) -> Value:
    axis = ctx.draw(st.integers(-x.type.rank, x.type.rank - 1))
    return ctx.node(ctx.op, [x], {"axis": axis})


@_builder("ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin")
def _reduce(ctx: _Ctx, x: Value) -> Value:
    axes = ctx.draw(st.lists(st.integers(0, x.type.rank - 1), min_size=1, unique=True))
    keep = ctx.draw(st.integers(0, 1)) if len(axes) < x.type.rank else 1
    return ctx.node(ctx.op, [x], {"axes": sorted(axes), "keepdims": keep})


@_builder("Transpose")
def _transpose(ctx: _Ctx, x: Value) -> Value:
    perm = ctx.draw(st.permutations(range(x.type.rank)))
    return ctx.node("Transpose", [x], {"perm": perm})


@_builder("Reshape")
def _reshape(ctx: _Ctx, x: Value) -> Value:
    shape = x.type.shape
    options = [(x.type.numel,), tuple(reversed(shape))]
    if len(shape) >= 2:
        options.append((shape[0], math.prod(shape[1:])))  # flatten
        options.append((*shape[:-1], 1, shape[-1]))
    return ctx.node("Reshape", [x], {"shape": ctx.draw(st.sampled_from(options))})


@_builder("Concat")
def _concat(ctx: _Ctx, x: Value) -> Value:
    axis = ctx.draw(st.integers(0, x.type.rank - 1))
    fits = [
        v
        for v in ctx.values
        if v.type.rank == x.type.rank
        and all(a == b for i, (a, b) in enumerate(zip(v.type.shape, x.type.shape)) if i != axis)
    ]
    others = ctx.draw(st.lists(st.sampled_from(fits), min_size=1, max_size=2))
    return ctx.node("Concat", [x, *others], {"axis": axis})


@_builder("Split")
def _split(ctx: _Ctx, x: Value) -> Value | None:
    axis = ctx.draw(st.integers(0, x.type.rank - 1))
    size = x.type.shape[axis]
    if size < 2:
        return None
    cut = ctx.draw(st.integers(1, size - 1))
    node = ctx.fn.create("Split", [x], {"axis": axis, "splits": (cut, size - cut)})
    return node.results[ctx.draw(st.integers(0, 1))]


@_builder("Slice")
def _slice(ctx: _Ctx, x: Value) -> Value:
    starts, ends, steps = [], [], []
    for d in x.type.shape:
        s = ctx.draw(st.integers(0, d - 1))
        starts.append(s)
        ends.append(ctx.draw(st.integers(s + 1, d)))
        steps.append(ctx.draw(st.integers(1, 2)))
    return ctx.node("Slice", [x], {"starts": starts, "ends": ends, "steps": steps})


@_builder("Pad")
def _pad(ctx: _Ctx, x: Value) -> Value:
    pads = ctx.draw(st.lists(st.integers(0, 2), min_size=2 * x.type.rank, max_size=2 * x.type.rank))
    return ctx.node("Pad", [x], {"pads": pads, "value": _float(ctx, -1.0, 1.0)})


@_builder("Tile")
def _tile(ctx: _Ctx, x: Value) -> Value:
    reps = ctx.draw(st.lists(st.integers(1, 2), min_size=x.type.rank, max_size=x.type.rank))
    return ctx.node("Tile", [x], {"repeats": reps})


#: The printers and parsers see every op that has a builder.
ROUND_TRIP_OPS: tuple[str, ...] = tuple(sorted(_BUILDERS))
#: Ops that are finite and continuous on any finite input, so two pipelines that compute them
#: differently agree within float tolerance (NaN or a rounding step would hide or fake a bug).
EXECUTABLE_OPS: tuple[str, ...] = tuple(op for op in ROUND_TRIP_OPS if op not in _UNARY_PARTIAL)
#: The element-wise, matmul and conv ops among them.
NUMERIC_OPS: tuple[str, ...] = (
    *("Relu", "Sigmoid", "Tanh", "Abs", "Neg", "HardSwish", "LeakyRelu", "Elu", "Gelu", "Clip"),
    *("Add", "Sub", "Mul", "Max", "Min", "Div"),
    *("MatMul", "FullyConnected", "Conv"),
)


@dataclass
class GraphCase:
    """A generated module and inputs for it; prints as IR text when hypothesis reports it."""

    module: Module
    inputs: dict[str, np.ndarray]

    def __repr__(self) -> str:
        return "GraphCase(\n" + print_module(self.module) + ")"


@st.composite
def graphs(draw: Callable, ops: Sequence[str] = ROUND_TRIP_OPS, max_nodes: int = 6) -> GraphCase:
    """A verified module: one f32 NCHW input (and sometimes a 2-D one), up to `max_nodes` nodes
    from `ops`, and the values nothing else uses saved as outputs."""
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    m = Module("gen")
    fn = m.create_function()
    shape = (1, draw(st.integers(1, 4)), draw(st.integers(1, 6)), draw(st.integers(1, 6)))
    values: list[Value] = [m.add_placeholder("x", f32(*shape))]
    if draw(st.booleans()):
        values.append(m.add_placeholder("y", f32(draw(st.integers(1, 4)), draw(st.integers(1, 6)))))
    ctx = _Ctx(draw, m, fn, rng, values)
    for _ in range(draw(st.integers(1, max_nodes))):
        ctx.op = op = draw(st.sampled_from(list(ops)))
        # Counted from the newest value, so examples (and their shrinks) grow chains.
        source = values[-1 - draw(st.integers(0, len(values) - 1))]
        made = _BUILDERS[op](ctx, source)
        if made is not None:
            values.append(made)
    computed = [v for v in values if v.name not in m.placeholders]
    if not computed:  # every drawn op was inapplicable: fall back to one element-wise node
        computed.append(fn.create("Neg", [values[0]]).result)
    # Save every value nothing uses (up to three), so every node stays live through the passes.
    sinks = [v for v in computed if not v.has_users][-3:]
    for v in sinks:
        out = m.add_placeholder("out", v.type, is_output=True)
        fn.create("Save", [v, out])
    verify_module(m)
    inputs = {p.name: rng.standard_normal(p.type.shape).astype(np.float32) for p in m.inputs()}
    return GraphCase(m, inputs)
