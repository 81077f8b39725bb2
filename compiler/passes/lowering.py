"""Node lowering: high-level nodes become the small set of nodes a backend implements, as Glow's
`lower` does; the optimisations run again afterwards (see `pipelines.py`).

What is kept is not listed here: a `LoweringPolicy` asks its backend's contract
(compiler/backends/contract.py, Glow's `shouldLower`), and a node is lowered only when the
backend has no kernel for it and `LOWERINGS` has a lowering. Fused activations the backend's
Conv/FullyConnected kernels do not run are split back into their own node; the backend's set is
recorded in `module.meta["fused_activations"]` so activation-fusion after lowering respects it.

Policies:
- "cpu" (default): the LLVM backend keeps every op it has an emitter for. Of the ops below it
  keeps FullyConnected (one GEMM with bias and relu/clip in its epilogue), BatchNorm, LayerNorm
  (one pass, no full-size temporaries), Clip, Tile, HardSigmoid, HardSwish, LeakyRelu, PRelu,
  Softmax, LogSoftmax and grouped Conv; it lowers Gelu, Elu, Selu, Softplus (the lowered chains
  are stacked into one loop with the fast exp/erf, 4-20x faster than the libm calls a dedicated
  kernel made) and the global pools (ReduceMean/ReduceMax are as fast). Fused: relu, clip.
- "lower-all": Glow-like full lowering: every node with a lowering is lowered, and grouped Conv
  that is not depthwise is split into Split + per-group Conv + Concat (fused: as "cpu").
- "interpreter": the reference kernels run everything, so nothing is lowered.

The lowerings: FullyConnected -> MatMul + Add (+ the activation as a node); BatchNorm -> Mul +
Add with constants s = gamma/sqrt(var+eps), beta - mean*s folded at compile time (Sub/Add/Sqrt/
Div when the parameters are not constant); Clip -> Max/Min with scalar constants; LayerNorm ->
ReduceMean, Sub, Mul, ReduceMean, Add eps, Sqrt, Div, Mul scale, Add bias; Gelu -> Mul/Erf/Add
(or the tanh form); Softmax/LogSoftmax -> ReduceMax, Sub, Exp, ReduceSum, Div/Log; Tile ->
Concat per repeated axis; GlobalAvgPool/GlobalMaxPool -> ReduceMean/ReduceMax over the spatial
axes; HardSigmoid, HardSwish, Selu, Elu, Softplus, LeakyRelu, PRelu -> primitive arithmetic
(Where/Less/Greater for the piecewise ones); Trilu -> Where of a constant mask; GroupNorm ->
Reshape + LayerNorm + Reshape + scale/shift; RMSNorm -> Mul, ReduceMean, Add eps, Sqrt, Div,
Mul; Einsum -> Slice (diagonals), ReduceSum, Transpose, Reshape, MatMul (passes/einsum.py).
A node whose float16/float64 kind the backend has no kernel for, but whose float32 form it
runs, is computed in float32 between Casts (`widen`) when its reference kernel accumulates in
float32 or no lowering exists (docs/ARCHITECTURE.md, "Element types"). Every node created
records the lowered node as its origin.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from compiler.backends.contract import INTERPRETER, LLVM, Backend
from compiler.errors import CompilerError
from compiler.graph.activations import NONE, get_activation
from compiler.graph.ir import Function, Node, Value
from compiler.graph.ops import WIDE_ACCUMULATOR, all_ops, get_op
from compiler.graph.types import ElemKind
from compiler.lir.instructions import NOT_COMPUTE
from compiler.passes.manager import GraphPass
from compiler.passes.rewriter import Rewriter, apply_patterns, const_data


@dataclass(frozen=True)
class LoweringPolicy:
    """What `lower` keeps. `keep(node)` False means: lower it if a lowering exists.

    `backend` decides (its contract) unless `lower_all`, which lowers every node that has a
    lowering; `split_grouped_conv` splits grouped Conv that is not depthwise.
    """

    name: str
    backend: Backend
    lower_all: bool = False
    split_grouped_conv: bool = False

    @property
    def fused_activations(self) -> frozenset[str]:
        """Values of `activation` the backend's Conv/FullyConnected kernels run."""
        return frozenset({NONE}) | self.backend.fused_activations

    def keep(self, node: Node) -> bool:
        if node.op == "Conv":
            return not (self.split_grouped_conv and _is_general_grouped(node))
        if self.lower_all:
            return node.op not in LOWERINGS
        return self.backend.keeps(node)


CPU_POLICY = LoweringPolicy("cpu", LLVM)
LOWER_ALL_POLICY = LoweringPolicy("lower-all", LLVM, lower_all=True, split_grouped_conv=True)
INTERPRETER_POLICY = LoweringPolicy("interpreter", INTERPRETER)
POLICIES = {p.name: p for p in (CPU_POLICY, LOWER_ALL_POLICY, INTERPRETER_POLICY)}


def get_policy(name: str | LoweringPolicy) -> LoweringPolicy:
    if isinstance(name, LoweringPolicy):
        return name
    try:
        return POLICIES[name]
    except KeyError:
        raise CompilerError(
            f"unknown lowering policy '{name}' (known: {', '.join(POLICIES)})"
        ) from None


def _is_general_grouped(node: Node) -> bool:
    g = node.attrs["group"]
    channels = node.operands[0].type.shape[1]
    return g > 1 and not (g == channels and node.operands[1].type.shape[1] == 1)


class _Builder:
    """Creates the nodes of one lowering, all with the lowered node as origin."""

    def __init__(self, node: Node, rw: Rewriter) -> None:
        self.node, self.rw = node, rw
        self.dtype = node.results[0].type.np_dtype if node.results else np.float32

    def op(
        self, op: str, operands: list[Value], attrs: dict[str, Any] | None = None, suffix: str = ""
    ) -> Value:
        name = f"{self.node.name}_{suffix or op.lower()}"
        return self.rw.create(op, operands, attrs, name=name, origin=[self.node]).results[0]

    def const(self, value: Any, suffix: str, shape: tuple[int, ...] | None = None) -> Value:
        """A constant of the node's element type; scalars have shape [1] (lowering skips
        rank-0 nodes, so [1] always broadcasts without changing a type)."""
        data = np.asarray(value, dtype=self.dtype)
        data = data.reshape(shape if shape is not None else (1,) if data.ndim == 0 else data.shape)
        return self.rw.constant(f"{self.node.name}_{suffix}", data)

    def done(self, value: Value) -> bool:
        self.rw.replace_node(self.node, value)
        return True


def _activation(b: _Builder, x: Value, act: str, args: tuple[float, ...]) -> Value:
    """The node a fused activation stands for (compiler/graph/activations.py), applied to x."""
    if act == NONE:
        return x
    spec = get_activation(act)
    return b.op(spec.op, [x], spec.attrs_of(args))


# -- lowerings: (node, builder) -> bool ------------------------------------------------------


def lower_fully_connected(node: Node, b: _Builder) -> bool:
    x, w, bias = node.operands
    y = b.op("MatMul", [x, w])
    bdata = const_data(bias)
    if bdata is None or np.any(bdata != 0):
        y = b.op("Add", [y, bias], suffix="bias")
    return b.done(_activation(b, y, node.attrs["activation"], node.attrs["act_args"]))


def lower_batchnorm(node: Node, b: _Builder) -> bool:
    x, gamma, beta, mean, var = node.operands
    rank = x.type.rank
    shape = (1, x.type.shape[1]) + (1,) * (rank - 2)
    eps = node.attrs["epsilon"]
    params = [const_data(v) for v in (gamma, beta, mean, var)]
    if all(p is not None for p in params):
        g, bt, m, v = (p.astype(np.float64) for p in params)  # type: ignore[union-attr]
        s = g / np.sqrt(v + eps)
        y = b.op("Mul", [x, b.const(s, "scale", shape)])
        return b.done(b.op("Add", [y, b.const(bt - m * s, "shift", shape)]))

    def chan(v: Value, tag: str) -> Value:
        return b.op("Reshape", [v], {"shape": shape}, suffix=f"{tag}_r")

    centered = b.op("Sub", [x, chan(mean, "mean")])
    std = b.op("Sqrt", [b.op("Add", [chan(var, "var"), b.const(eps, "eps")], suffix="var_eps")])
    normed = b.op("Div", [centered, std])
    scaled = b.op("Mul", [normed, chan(gamma, "gamma")])
    return b.done(b.op("Add", [scaled, chan(beta, "beta")]))


def lower_clip(node: Node, b: _Builder) -> bool:
    y = node.operands[0]
    lo, hi = node.attrs["min"], node.attrs["max"]
    if lo != -math.inf:
        y = b.op("Max", [y, b.const(lo, "min")])
    if hi != math.inf:
        y = b.op("Min", [y, b.const(hi, "max")])
    return b.done(y)


def lower_layernorm(node: Node, b: _Builder) -> bool:
    x, scale, bias = node.operands
    axis = node.attrs["axis"] % x.type.rank
    axes = tuple(range(axis, x.type.rank))
    red = {"axes": axes, "keepdims": 1}
    mean = b.op("ReduceMean", [x], red, suffix="mean")
    d = b.op("Sub", [x, mean], suffix="centered")
    var = b.op("ReduceMean", [b.op("Mul", [d, d], suffix="sq")], red, suffix="var")
    std = b.op(
        "Sqrt", [b.op("Add", [var, b.const(node.attrs["epsilon"], "eps")], suffix="var_eps")]
    )
    y = b.op("Div", [d, std], suffix="normed")
    y = b.op("Mul", [y, scale], suffix="scaled")
    return b.done(b.op("Add", [y, bias], suffix="shifted"))


def lower_gelu(node: Node, b: _Builder) -> bool:
    x = node.operands[0]
    if node.attrs["approximate"] == "tanh":
        cube = b.op("Mul", [b.op("Mul", [x, x], suffix="sq"), x], suffix="cube")
        inner = b.op("Add", [x, b.op("Mul", [cube, b.const(0.044715, "k")], suffix="kcube")])
        t = b.op("Tanh", [b.op("Mul", [inner, b.const(math.sqrt(2 / math.pi), "s")], suffix="arg")])
    else:
        t = b.op("Erf", [b.op("Mul", [x, b.const(1 / math.sqrt(2), "s")], suffix="arg")])
    one_plus = b.op("Add", [t, b.const(1.0, "one")], suffix="1p")
    half_x = b.op("Mul", [x, b.const(0.5, "half")], suffix="halfx")
    return b.done(b.op("Mul", [half_x, one_plus], suffix="out"))


def lower_softmax(node: Node, b: _Builder) -> bool:
    x = node.operands[0]
    red = {"axes": (node.attrs["axis"] % x.type.rank,), "keepdims": 1}
    d = b.op("Sub", [x, b.op("ReduceMax", [x], red, suffix="max")], suffix="shifted")
    e = b.op("Exp", [d])
    s = b.op("ReduceSum", [e], red, suffix="sum")
    if node.op == "Softmax":
        return b.done(b.op("Div", [e, s]))
    return b.done(b.op("Sub", [d, b.op("Log", [s])], suffix="out"))


def lower_tile(node: Node, b: _Builder) -> bool:
    y = node.operands[0]
    for axis, r in enumerate(node.attrs["repeats"]):
        if r != 1:
            y = b.op("Concat", [y] * r, {"axis": axis}, suffix=f"tile{axis}")
    return b.done(y)


def lower_global_pool(node: Node, b: _Builder) -> bool:
    x = node.operands[0]
    op = "ReduceMean" if node.op == "GlobalAvgPool" else "ReduceMax"
    return b.done(b.op(op, [x], {"axes": tuple(range(2, x.type.rank)), "keepdims": 1}))


def _hard_sigmoid(b: _Builder, x: Value, alpha: float, beta: float) -> Value:
    y = b.op(
        "Add",
        [b.op("Mul", [x, b.const(alpha, "alpha")], suffix="ax"), b.const(beta, "beta")],
        suffix="axb",
    )
    y = b.op("Max", [y, b.const(0.0, "zero")])
    return b.op("Min", [y, b.const(1.0, "one")])


def lower_hard_sigmoid(node: Node, b: _Builder) -> bool:
    return b.done(_hard_sigmoid(b, node.operands[0], node.attrs["alpha"], node.attrs["beta"]))


def lower_hard_swish(node: Node, b: _Builder) -> bool:
    x = node.operands[0]
    return b.done(b.op("Mul", [x, _hard_sigmoid(b, x, 1 / 6, 0.5)], suffix="out"))


def _elu(b: _Builder, x: Value, alpha: float) -> Value:
    em1 = b.op("Sub", [b.op("Exp", [x]), b.const(1.0, "one")], suffix="expm1")
    neg = b.op("Mul", [em1, b.const(alpha, "alpha")], suffix="neg")
    pos = b.op("Greater", [x, b.const(0.0, "zero")])
    return b.op("Where", [pos, x, neg])


def lower_elu(node: Node, b: _Builder) -> bool:
    y = _elu(b, node.operands[0], node.attrs["alpha"])
    if node.op == "Selu":
        y = b.op("Mul", [y, b.const(node.attrs["gamma"], "gamma")], suffix="out")
    return b.done(y)


def lower_softplus(node: Node, b: _Builder) -> bool:
    # max(x, 0) + log(1 + exp(-|x|)): never overflows, unlike log(1 + exp(x)).
    x = node.operands[0]
    e = b.op("Exp", [b.op("Neg", [b.op("Abs", [x])])])
    tail = b.op("Log", [b.op("Add", [e, b.const(1.0, "one")], suffix="1p")])
    return b.done(b.op("Add", [b.op("Relu", [x]), tail], suffix="out"))


def lower_leaky(node: Node, b: _Builder) -> bool:
    x = node.operands[0]
    slope = b.const(node.attrs["alpha"], "alpha") if node.op == "LeakyRelu" else node.operands[1]
    neg = b.op("Less", [x, b.const(0.0, "zero")])
    return b.done(b.op("Where", [neg, b.op("Mul", [x, slope], suffix="scaled"), x]))


def split_activation(node: Node, b: _Builder) -> bool:
    """Conv/FC whose fused activation the backend cannot run: plain node + activation node."""
    attrs = dict(node.attrs, activation="none", act_args=())
    base = b.rw.create(node.op, node.operands, attrs, name=f"{node.name}_base", origin=[node])
    return b.done(_activation(b, base.result, node.attrs["activation"], node.attrs["act_args"]))


def lower_grouped_conv(node: Node, b: _Builder) -> bool:
    x, w, bias = node.operands
    g = node.attrs["group"]
    c, k = x.type.shape[1], w.type.shape[0]
    xs = b.rw.create(
        "Split", [x], {"axis": 1, "splits": [c // g] * g}, name=f"{node.name}_split", origin=[node]
    ).results
    ws = b.rw.create(
        "Split", [w], {"axis": 0, "splits": [k // g] * g}, name=f"{node.name}_wsplit", origin=[node]
    ).results
    bs = b.rw.create(
        "Split",
        [bias],
        {"axis": 0, "splits": [k // g] * g},
        name=f"{node.name}_bsplit",
        origin=[node],
    ).results
    attrs = dict(node.attrs, group=1)
    outs = [b.op("Conv", [xs[i], ws[i], bs[i]], attrs, suffix=f"g{i}") for i in range(g)]
    return b.done(b.op("Concat", outs, {"axis": 1}))


def lower_trilu(node: Node, b: _Builder) -> bool:
    """Where(constant triangle mask, x, 0): the mask covers the last two dims and broadcasts."""
    x = node.operands[0]
    n, m = x.type.shape[-2:]
    fn = np.triu if node.attrs["upper"] else np.tril
    mask = fn(np.ones((n, m), dtype=bool), node.attrs["k"])
    keep = b.rw.constant(f"{node.name}_mask", mask)
    zero = b.const(0, "zero")
    return b.done(b.op("Where", [keep, x, zero], suffix="out"))


def lower_group_norm(node: Node, b: _Builder) -> bool:
    """Reshape to [N, G, rest], LayerNorm over the group (unit scale, zero shift), reshape
    back, then the per-channel scale and shift: the CPU keeps LayerNorm's one-pass kernel."""
    x, scale, bias = node.operands
    shape = x.type.shape
    n, c, g = shape[0], shape[1], node.attrs["num_groups"]
    rest = x.type.numel // (n * g)
    grouped = b.op("Reshape", [x], {"shape": (n, g, rest)}, suffix="grouped")
    ones = b.const(np.ones(rest), "ones", (rest,))
    zeros = b.const(np.zeros(rest), "zeros", (rest,))
    normed = b.op(
        "LayerNorm", [grouped, ones, zeros], {"axis": 2, "epsilon": node.attrs["epsilon"]}
    )
    y = b.op("Reshape", [normed], {"shape": shape}, suffix="ungrouped")
    pshape = (c,) + (1,) * (len(shape) - 2)
    s = b.op("Reshape", [scale], {"shape": pshape}, suffix="scale_c")
    t = b.op("Reshape", [bias], {"shape": pshape}, suffix="bias_c")
    return b.done(b.op("Add", [b.op("Mul", [y, s], suffix="scaled"), t], suffix="out"))


def lower_rms_norm(node: Node, b: _Builder) -> bool:
    x, scale = node.operands
    axes = tuple(range(node.attrs["axis"] % x.type.rank, x.type.rank))
    ms = b.op("ReduceMean", [b.op("Mul", [x, x], suffix="sq")], {"axes": axes, "keepdims": 1})
    rms = b.op("Sqrt", [b.op("Add", [ms, b.const(node.attrs["epsilon"], "eps")], suffix="ms_eps")])
    y = b.op("Div", [x, rms], suffix="normed")
    return b.done(b.op("Mul", [y, scale], suffix="out"))


def lower_einsum(node: Node, b: _Builder) -> bool:
    """Einsum as Glow would run it: operands reduced over the letters only they have, then a
    pairwise contraction at a time as Transpose + Reshape + batched MatMul (batch letters,
    free letters, contracted letters), and a final Transpose into the output's order."""
    from compiler.passes.einsum import EinsumPlanError, lower_einsum_values

    try:
        y = lower_einsum_values(b, list(node.operands), node.attrs["equation"])
    except EinsumPlanError:
        return False  # e.g. a repeated letter in one operand (a diagonal): not lowered
    return b.done(y)


def widen(node: Node, b: _Builder, wide: ElemKind) -> bool:
    """`node` computed in `wide` (float32): its float operands cast to it, its float results
    cast back (the backend contract's float fallback)."""
    narrow = node.results[0].type.elem
    ops = [
        b.op("Cast", [v], {"to": wide.value}, suffix=f"in{i}_{wide.value}")
        if v.type.elem.is_float
        else v
        for i, v in enumerate(node.operands)
    ]
    new = b.rw.create(node.op, ops, node.attrs, name=f"{node.name}_{wide.value}", origin=[node])
    outs = [
        b.op("Cast", [r], {"to": narrow.value}, suffix=f"out{i}") if r.type.elem == wide else r
        for i, r in enumerate(new.results)
    ]
    b.rw.replace_node(node, outs)
    return True


LOWERINGS: dict[str, Callable[[Node, _Builder], bool]] = {
    "FullyConnected": lower_fully_connected,
    "BatchNorm": lower_batchnorm,
    "Clip": lower_clip,
    "LayerNorm": lower_layernorm,
    "Gelu": lower_gelu,
    "Softmax": lower_softmax,
    "LogSoftmax": lower_softmax,
    "Tile": lower_tile,
    "GlobalAvgPool": lower_global_pool,
    "GlobalMaxPool": lower_global_pool,
    "HardSigmoid": lower_hard_sigmoid,
    "HardSwish": lower_hard_swish,
    "Elu": lower_elu,
    "Selu": lower_elu,
    "Softplus": lower_softplus,
    "LeakyRelu": lower_leaky,
    "PRelu": lower_leaky,
    "Trilu": lower_trilu,
    "GroupNorm": lower_group_norm,
    "RMSNorm": lower_rms_norm,
    "Einsum": lower_einsum,
}
#: Lowerings that apply to every element kind (the others only to float results).
ANY_ELEM_LOWERINGS = frozenset({"Tile", "Trilu", "Einsum"})
# A mistyped op name fails at import, not by silently never lowering.
assert set(LOWERINGS) <= set(all_ops()), sorted(set(LOWERINGS) - set(all_ops()))


def _computes_wide(node: Node) -> bool:
    """The reference kernel computes this float16 node in float32 (trait "wide-accumulator")."""
    return node.results[0].type.elem == ElemKind.F16 and WIDE_ACCUMULATOR in get_op(node.op).traits


def _float_result(node: Node) -> bool:
    return bool(node.results) and node.results[0].type.elem.is_float


class Lower(GraphPass):
    """Lower every node the policy does not keep; see the module docstring for decisions."""

    name = "lower"

    def __init__(self, policy: str | LoweringPolicy = "cpu") -> None:
        self.policy = get_policy(policy)

    def _pattern(self, node: Node, rw: Rewriter) -> bool:
        policy = self.policy
        if node.op == "Conv" or (node.op == "FullyConnected" and policy.keep(node)):
            if node.attrs["activation"] not in policy.fused_activations:
                return split_activation(node, _Builder(node, rw))
        kept = policy.keep(node)
        if kept and (policy.backend.keeps(node) or node.op in NOT_COMPUTE):
            return False
        # The backend has no kernel for the node's element kinds (or the policy lowers it).
        wide = policy.backend.float_fallback(node)
        lowering = None if kept else self._lowering(node)
        if wide is not None and (lowering is None or _computes_wide(node)):
            # The reference kernels define the precision: ops that sum many terms compute
            # float16 in float32, so the CPU does too; otherwise a lowering into primitives
            # that round like the reference is preferred (float64 computes in float64).
            return widen(node, _Builder(node, rw), wide)
        if lowering is None:
            return False
        if node.op == "Conv":
            return lower_grouped_conv(node, _Builder(node, rw))
        return lowering(node, _Builder(node, rw))

    @staticmethod
    def _lowering(node: Node) -> Callable[[Node, _Builder], bool] | None:
        if node.op == "Conv":
            return lower_grouped_conv
        lowering = LOWERINGS.get(node.op)
        if lowering is None or (node.op not in ANY_ELEM_LOWERINGS and not _float_result(node)):
            return None
        if node.results[0].type.rank == 0 and node.op != "Einsum":  # Einsum makes no constants
            return None
        return lowering

    def run(self, fn: Function) -> bool:
        # Read by activation-fusion after lowering: never re-fuse what this backend cannot run.
        fn.module.meta["fused_activations"] = frozenset(self.policy.fused_activations)
        # Read by the sum-post-op low-level pass: accumulate only where the backend's kernels can.
        fn.module.meta["accumulating_ops"] = self.policy.backend.accumulating_ops
        table = {op: [self._pattern] for op in all_ops()}
        changed = apply_patterns(fn, table)
        if changed:
            fn.module.remove_unused_constants()
        return changed
