"""A random valid-graph generator: seeded DAGs of 5-40 ONNX ops with valid static shapes.

Each value in the pool knows its shape, element type, a rough bound on its magnitude and whether
it is "exact" (computed without rounding from the inputs: Relu, Neg, data movement...). Ops are
chosen among those that apply to a value, so every graph passes `onnx.checker` with full shape
inference and runs on onnxruntime. The graphs stay numerically well-conditioned so that a
disagreement between executors at rtol 1e-4 is a bug, not float noise: discontinuous ops
(Floor, Sign, comparisons, ArgMax, casts to int) only see exact values, Exp only small ones,
Log/Sqrt/Reciprocal only values kept away from zero, and the magnitude stays below ~1e4.

`random_graph(seed)` -> (ModelProto, feeds, description).
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from .oracle import onnx_slice_bounds

F, I64, BOOL = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL
MAX_NUMEL = 4096  # keep every tensor small: the campaign runs thousands of graphs
MAX_BOUND = 1e4


@dataclass
class V:
    name: str
    shape: tuple[int, ...]
    dtype: int = F
    exact: bool = True
    bound: float = 4.0  # inputs are N(0, 1): |x| < 4 in practice

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def numel(self) -> int:
        return math.prod(self.shape)


@dataclass
class Builder:
    rng: random.Random
    opset: int
    nodes: list[onnx.NodeProto] = field(default_factory=list)
    inits: list[onnx.TensorProto] = field(default_factory=list)
    inputs: list[onnx.ValueInfoProto] = field(default_factory=list)
    pool: list[V] = field(default_factory=list)
    used: set[str] = field(default_factory=set)
    ops: list[str] = field(default_factory=list)
    _n: int = 0

    def name(self, base: str) -> str:
        self._n += 1
        return f"{base}{self._n}"

    def const(self, a: np.ndarray, base: str = "c") -> str:
        n = self.name(base)
        if self.rng.random() < 0.15 and a.dtype != np.int64:
            # now and then a Constant node instead of an initializer
            self.nodes.append(
                helper.make_node("Constant", [], [n], value=numpy_helper.from_array(a, n))
            )
        else:
            self.inits.append(numpy_helper.from_array(a, n))
        return n

    def weights(self, shape: tuple[int, ...], scale: float = 1.0) -> np.ndarray:
        g = np.random.default_rng(self.rng.randrange(1 << 30))
        return (g.standard_normal(shape) * scale).astype(np.float32)

    def node(self, op: str, ins: list[str], outs: list[V], **attrs: object) -> list[V]:
        for o in outs:
            o.name = self.name(op.lower() + "_")
        self.nodes.append(
            helper.make_node(op, ins, [o.name for o in outs], name=self.name("n"), **attrs)
        )
        self.used.update(i for i in ins if i)
        self.pool.extend(outs)
        self.ops.append(op)
        return outs

    def one(self, op: str, ins: list[str], out: V, **attrs: object) -> V:
        return self.node(op, ins, [out], **attrs)[0]

    def floats(self) -> list[V]:
        return [v for v in self.pool if v.dtype == F and v.numel > 0]


def _derive(v: V, shape: tuple[int, ...] | None = None, **kw: object) -> V:
    out = V("", v.shape if shape is None else tuple(shape), v.dtype, v.exact, v.bound)
    for k, x in kw.items():
        setattr(out, k, x)
    return out


OpFn = Callable[[Builder, V], V | None]
OPS: dict[str, tuple[float, OpFn]] = {}


def op(weight: float = 1.0) -> Callable[[OpFn], OpFn]:
    def deco(fn: OpFn) -> OpFn:
        OPS[fn.__name__.removeprefix("g_")] = (weight, fn)
        return fn

    return deco


# -- element-wise ---------------------------------------------------------------------------------

_SMOOTH = {
    # op: (bound function, attrs factory)
    "Relu": (lambda b: b, None),
    "Sigmoid": (lambda b: 1.0, None),
    "Tanh": (lambda b: 1.0, None),
    "Softsign": (lambda b: 1.0, None),
    "Erf": (lambda b: 1.0, None),
    "HardSigmoid": (lambda b: 1.0, lambda r: {"alpha": r.choice([0.2, 0.5]), "beta": 0.5}),
    "HardSwish": (lambda b: b, None),
    "Softplus": (lambda b: b + 1, None),
    "Mish": (lambda b: b, None),
    "Elu": (lambda b: b, lambda r: {"alpha": r.choice([1.0, 0.5])}),
    "Celu": (lambda b: b, lambda r: {"alpha": r.choice([1.0, 2.0])}),
    "Selu": (lambda b: 1.8 * b, None),
    "LeakyRelu": (lambda b: b, lambda r: {"alpha": r.choice([0.01, 0.2])}),
    "ThresholdedRelu": (lambda b: b, lambda r: {"alpha": r.choice([0.5, 1.0])}),
    "Abs": (lambda b: b, None),
    "Neg": (lambda b: b, None),
    "Identity": (lambda b: b, None),
}
_MIN_OPSET = {"HardSwish": 14, "Mish": 18}
_EXACT_KEEPING = {"Relu", "Abs", "Neg", "Identity"}
_DISCONTINUOUS = {"ThresholdedRelu"}  # a step at alpha: only on exact values


@op(4.0)
def g_unary(b: Builder, v: V) -> V | None:
    name = b.rng.choice(sorted(_SMOOTH))
    if b.opset < _MIN_OPSET.get(name, 0):
        name = "Relu"
    if name in _DISCONTINUOUS and not v.exact:
        name = "Relu"
    bound_fn, attrs_fn = _SMOOTH[name]
    attrs = attrs_fn(b.rng) if attrs_fn else {}
    return b.one(
        name,
        [v.name],
        _derive(v, exact=v.exact and name in _EXACT_KEEPING, bound=bound_fn(v.bound)),
        **attrs,
    )


@op(0.5)
def g_gelu(b: Builder, v: V) -> V | None:
    if b.opset < 20:
        return None
    approx = b.rng.choice(["none", "tanh"])
    return b.one("Gelu", [v.name], _derive(v, exact=False), approximate=approx)


@op(0.7)
def g_exp(b: Builder, v: V) -> V | None:
    if v.bound > 6:
        return None
    return b.one("Exp", [v.name], _derive(v, exact=False, bound=math.exp(v.bound)))


@op(1.0)
def g_positive(b: Builder, v: V) -> V | None:
    """Sqrt/Log/Reciprocal of |x| + 1: defined and well-conditioned everywhere."""
    a = b.one("Abs", [v.name], _derive(v))
    one = b.const(np.array(1.0, np.float32))
    p = b.one("Add", [a.name, one], _derive(v, exact=False, bound=v.bound + 1))
    fn = b.rng.choice(["Sqrt", "Log", "Reciprocal"])
    return b.one(fn, [p.name], _derive(p, exact=False, bound=max(1.0, math.sqrt(p.bound))))


@op(0.6)
def g_step(b: Builder, v: V) -> V | None:
    if not v.exact:
        return None
    fn = b.rng.choice(["Floor", "Ceil", "Sign"])
    return b.one(fn, [v.name], _derive(v, bound=v.bound + 1))


@op(1.0)
def g_clip(b: Builder, v: V) -> V | None:
    lo = b.rng.choice([None, -1.0, 0.0, -0.5])
    hi = b.rng.choice([None, 1.0, 6.0, 0.5])
    ins = [v.name, b.const(np.array(lo, np.float32)) if lo is not None else ""]
    if hi is not None:
        ins.append(b.const(np.array(hi, np.float32)))
    while ins and ins[-1] == "":
        ins.pop()
    return b.one("Clip", ins, _derive(v))


def _broadcast_shape(b: Builder, v: V) -> tuple[int, ...]:
    """A shape that broadcasts against v's (to v's shape)."""
    r = b.rng.random()
    if r < 0.25:
        return ()
    if r < 0.5:
        return v.shape
    if r < 0.75 and v.rank >= 1:
        return (v.shape[-1],)
    if v.rank >= 3:
        return (v.shape[1],) + (1,) * (v.rank - 2)
    return tuple(d if b.rng.random() < 0.5 else 1 for d in v.shape)


def _partner(b: Builder, v: V) -> V | None:
    """Another float value of v's shape (or one broadcasting to it), from the pool."""
    same = [
        w
        for w in b.floats()
        if w.name != v.name
        and len(w.shape) <= v.rank
        and all(a == c or a == 1 for a, c in zip(w.shape[::-1], v.shape[::-1]))
    ]
    return b.rng.choice(same) if same else None


@op(4.0)
def g_binary(b: Builder, v: V) -> V | None:
    fn = b.rng.choice(["Add", "Sub", "Mul", "Max", "Min", "Div", "Pow", "PRelu"])
    w = _partner(b, v) if fn not in ("Div", "Pow", "PRelu") and b.rng.random() < 0.6 else None
    if fn == "Div":
        shape = _broadcast_shape(b, v)
        d = b.weights(shape)
        d = (np.sign(d) + (d == 0)) * (0.5 + np.abs(d) % 1.5)
        other = b.const(d.astype(np.float32))
        return b.one("Div", [v.name, other], _derive(v, exact=False, bound=2 * v.bound))
    if fn == "Pow":
        e = b.rng.choice([2.0, 3.0, 0.5])
        base = v
        if e == 0.5:
            base = b.one("Abs", [v.name], _derive(v))
        if v.bound**e > MAX_BOUND:
            return None
        return b.one(
            "Pow",
            [base.name, b.const(np.array(e, np.float32))],
            _derive(v, exact=False, bound=v.bound**e),
        )
    if fn == "PRelu":
        shape = (v.shape[1],) + (1,) * (v.rank - 2) if v.rank >= 3 else _broadcast_shape(b, v)
        slope = b.const((b.weights(shape) * 0.3).astype(np.float32))
        return b.one("PRelu", [v.name, slope], _derive(v, exact=False))
    if w is not None:
        other, wb, wexact = w.name, w.bound, w.exact
    else:
        arr = b.weights(_broadcast_shape(b, v))
        other, wb, wexact = b.const(arr), float(np.abs(arr).max(initial=0)), True
    if b.rng.random() < 0.5:
        a_, c_ = v.name, other
    else:
        a_, c_ = other, v.name
    if fn == "Mul":
        bound = v.bound * wb
        if bound > MAX_BOUND:
            return None
    else:
        bound = v.bound + wb
    exact = v.exact and wexact and fn in ("Max", "Min")
    return b.one(fn, [a_, c_], _derive(v, exact=exact, bound=bound))


@op(0.8)
def g_variadic(b: Builder, v: V) -> V | None:
    same = [w for w in b.floats() if w.shape == v.shape and w.name != v.name]
    if not same:
        return None
    ws = [v] + b.rng.sample(same, min(len(same), b.rng.choice([1, 2])))
    fn = b.rng.choice(["Sum", "Mean", "Max", "Min"])
    exact = fn in ("Max", "Min") and all(w.exact for w in ws)
    bound = sum(w.bound for w in ws) if fn == "Sum" else max(w.bound for w in ws)
    return b.one(fn, [w.name for w in ws], _derive(v, exact=exact, bound=bound))


@op(0.8)
def g_where(b: Builder, v: V) -> V | None:
    if not v.exact:
        return None
    cmp = b.rng.choice(["Greater", "Less", "GreaterOrEqual", "LessOrEqual", "Equal"])
    thr = b.const(np.array(b.rng.choice([0.0, 0.5, -0.25]), np.float32))
    c = b.one(cmp, [v.name, thr], _derive(v, dtype=BOOL))
    if b.rng.random() < 0.3:
        c2 = b.one("Less", [v.name, b.const(np.array(1.0, np.float32))], _derive(v, dtype=BOOL))
        logic = b.rng.choice(["And", "Or", "Xor"])
        c = b.one(logic, [c.name, c2.name], _derive(c))
        if b.rng.random() < 0.5:
            c = b.one("Not", [c.name], _derive(c))
    w = _partner(b, v)
    other = w.name if w is not None else b.const(b.weights(_broadcast_shape(b, v)))
    ob = w.bound if w is not None else 4.0
    if b.rng.random() < 0.3:
        # a bool output now and then, through Cast to float
        return b.one("Cast", [c.name], _derive(v, dtype=F, bound=1.0), to=F)
    return b.one("Where", [c.name, v.name, other], _derive(v, exact=False, bound=max(v.bound, ob)))


# -- convolution and pooling -----------------------------------------------------------------------


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def _out_dim(i: int, k: int, s: int, d: int, p0: int, p1: int, ceil: bool = False) -> int:
    eff = d * (k - 1) + 1
    num = i + p0 + p1 - eff
    if num < 0:
        return 0
    return (-(-num // s) if ceil else num // s) + 1


@op(3.0)
def g_conv(b: Builder, v: V) -> V | None:
    if v.rank not in (3, 4):
        return None
    rng = b.rng
    c = v.shape[1]
    spatial = v.shape[2:]
    g = rng.choice(_divisors(c)) if rng.random() < 0.4 else 1
    if rng.random() < 0.2:
        g = c  # depthwise
    m = g * rng.choice([1, 1, 2, 3]) if g > 1 else rng.choice([1, 2, 4, 8, 16])
    ks, ss, ds, pb, pe = [], [], [], [], []
    for _ in spatial:
        k = rng.choice([1, 1, 2, 3, 3, 3, 5])
        s = rng.choice([1, 1, 2, 2, 3])
        d = rng.choice([1, 1, 1, 2, 3])
        p0 = rng.choice([0, 0, 1, 1, 2])
        p1 = p0 if rng.random() < 0.7 else rng.choice([0, 1, 2])
        ks.append(k)
        ss.append(s)
        ds.append(d)
        pb.append(p0)
        pe.append(p1)
    auto = rng.choice([None] * 6 + ["SAME_UPPER", "SAME_LOWER", "VALID"])
    if auto in ("SAME_UPPER", "SAME_LOWER"):
        ds = [1] * len(ds)  # onnxruntime refuses dilated SAME padding
        out = [-(-i // s) for i, s in zip(spatial, ss)]
    elif auto == "VALID":
        out = [_out_dim(i, k, s, d, 0, 0) for i, k, s, d in zip(spatial, ks, ss, ds)]
    else:
        out = [_out_dim(*t) for t in zip(spatial, ks, ss, ds, pb, pe)]
    if min(out) < 1 or v.shape[0] * m * math.prod(out) > MAX_NUMEL:
        return None
    fan_in = (c // g) * math.prod(ks)
    w = b.const(b.weights((m, c // g, *ks), 1.0 / math.sqrt(fan_in)))
    ins = [v.name, w]
    if rng.random() < 0.6:
        ins.append(b.const(b.weights((m,), 0.1)))
    attrs: dict[str, object] = {"kernel_shape": ks}
    if any(s != 1 for s in ss) or rng.random() < 0.3:
        attrs["strides"] = ss
    if any(d != 1 for d in ds) or rng.random() < 0.3:
        attrs["dilations"] = ds
    if g != 1 or rng.random() < 0.2:
        attrs["group"] = g
    if auto:
        attrs["auto_pad"] = auto
    elif any(pb) or any(pe) or rng.random() < 0.3:
        attrs["pads"] = pb + pe
    bound = v.bound * math.sqrt(fan_in) * 3 + 0.3
    if bound > MAX_BOUND:
        return None
    return b.one("Conv", ins, V("", (v.shape[0], m, *out), F, False, bound), **attrs)


@op(1.0)
def g_conv_transpose(b: Builder, v: V) -> V | None:
    if v.rank != 4:
        return None
    rng = b.rng
    c = v.shape[1]
    g = rng.choice(_divisors(c)) if rng.random() < 0.3 else 1
    m = g * rng.choice([1, 2])
    ks, ss, pads, ops_ = [], [], [], []
    out = []
    for i in v.shape[2:]:
        k = rng.choice([1, 2, 3, 4])
        s = rng.choice([1, 2, 2, 3])
        p = rng.choice([0, 0, 1]) if k > 1 else 0
        op_ = rng.choice([0, 0, 1]) if s > 1 else 0
        o = s * (i - 1) + op_ + k - 2 * p
        ks.append(k)
        ss.append(s)
        pads.append(p)
        ops_.append(op_)
        out.append(o)
    if min(out) < 1 or v.shape[0] * m * math.prod(out) > MAX_NUMEL:
        return None
    fan = (c // g) * math.prod(ks)
    w = b.const(b.weights((c, m // g, *ks), 1.0 / math.sqrt(fan)))
    attrs: dict[str, object] = {"kernel_shape": ks, "strides": ss, "pads": pads + pads}
    if any(ops_):
        attrs["output_padding"] = ops_
    if g > 1:
        attrs["group"] = g
    ins = [v.name, w] + ([b.const(b.weights((m,), 0.1))] if rng.random() < 0.5 else [])
    return b.one(
        "ConvTranspose",
        ins,
        V("", (v.shape[0], m, *out), F, False, v.bound * math.sqrt(fan) * 3),
        **attrs,
    )


@op(1.5)
def g_pool(b: Builder, v: V) -> V | None:
    if v.rank not in (3, 4):
        return None
    rng = b.rng
    fn = rng.choice(["MaxPool", "AveragePool"])
    ceil = rng.random() < 0.25
    ks, ss, pb, pe, out = [], [], [], [], []
    for i in v.shape[2:]:
        k = rng.choice([1, 2, 2, 3, 3])
        s = rng.choice([1, 2, 2, 3])
        p0 = rng.choice([0, 0, 1]) if k > 1 else 0
        p1 = p0 if rng.random() < 0.8 else (rng.choice([0, 1]) if k > 1 else 0)
        o = _out_dim(i, k, s, 1, p0, p1, ceil)
        if ceil and o > 1 and (o - 1) * s >= i + p0:
            return None  # ONNX and PyTorch disagree on a last window starting in the padding
        ks.append(k)
        ss.append(s)
        pb.append(p0)
        pe.append(p1)
        out.append(o)
    if min(out) < 1:
        return None
    attrs: dict[str, object] = {"kernel_shape": ks, "strides": ss, "pads": pb + pe}
    if ceil:
        attrs["ceil_mode"] = 1
    if fn == "AveragePool" and rng.random() < 0.5:
        attrs["count_include_pad"] = 1
    exact = v.exact and fn == "MaxPool"
    return b.one(fn, [v.name], V("", v.shape[:2] + tuple(out), F, exact, v.bound), **attrs)


@op(0.7)
def g_global_pool(b: Builder, v: V) -> V | None:
    if v.rank not in (3, 4):
        return None
    fn = b.rng.choice(["GlobalAveragePool", "GlobalMaxPool"])
    return b.one(
        fn,
        [v.name],
        V("", v.shape[:2] + (1,) * (v.rank - 2), F, v.exact and fn == "GlobalMaxPool", v.bound),
    )


# -- normalization ---------------------------------------------------------------------------------


@op(1.2)
def g_batchnorm(b: Builder, v: V) -> V | None:
    if v.rank < 2:
        return None
    c = v.shape[1]
    scale = b.const(b.weights((c,), 0.5) + 1.0)
    bias = b.const(b.weights((c,), 0.1))
    mean = b.const(b.weights((c,), 0.1))
    var = b.const(np.abs(b.weights((c,), 0.5)) + 0.5)
    return b.one(
        "BatchNormalization",
        [v.name, scale, bias, mean, var],
        _derive(v, exact=False, bound=v.bound * 4 + 1),
        epsilon=1e-5,
    )


@op(1.0)
def g_layernorm(b: Builder, v: V) -> V | None:
    if b.opset < 17 or v.rank < 1:
        return None
    axis = b.rng.randrange(-v.rank, 0) if v.rank > 1 else -1
    ns = v.shape[axis:]
    if math.prod(ns) < 2:
        return None
    ins = [v.name, b.const(b.weights(ns, 0.3) + 1.0)]
    if b.rng.random() < 0.6:
        ins.append(b.const(b.weights(ns, 0.1)))
    return b.one(
        "LayerNormalization", ins, _derive(v, exact=False, bound=10.0), axis=axis, epsilon=1e-5
    )


@op(0.6)
def g_instancenorm(b: Builder, v: V) -> V | None:
    if v.rank not in (3, 4) or math.prod(v.shape[2:]) < 2:
        return None
    c = v.shape[1]
    ins = [v.name, b.const(b.weights((c,), 0.3) + 1.0), b.const(b.weights((c,), 0.1))]
    return b.one("InstanceNormalization", ins, _derive(v, exact=False, bound=10.0), epsilon=1e-5)


@op(0.4)
def g_lrn(b: Builder, v: V) -> V | None:
    if v.rank != 4:
        return None
    size = b.rng.choice([1, 3, 5])
    return b.one(
        "LRN", [v.name], _derive(v, exact=False), size=size, alpha=1e-4, beta=0.75, bias=1.0
    )


@op(1.0)
def g_softmax(b: Builder, v: V) -> V | None:
    fn = b.rng.choice(["Softmax", "LogSoftmax"])
    axis = b.rng.randrange(-v.rank, v.rank) if v.rank else 0
    if v.rank == 0:
        return None
    bound = 1.0 if fn == "Softmax" else 2 * v.bound + math.log(max(v.numel, 1)) + 1
    return b.one(fn, [v.name], _derive(v, exact=False, bound=bound), axis=axis)


# -- linear algebra --------------------------------------------------------------------------------


@op(2.0)
def g_matmul(b: Builder, v: V) -> V | None:
    if v.rank < 1:
        return None
    k = v.shape[-1]
    n = b.rng.choice([1, 3, 4, 8, 16])
    out = v.shape[:-1] + (n,) if v.rank >= 2 else (n,)
    if math.prod(out) > MAX_NUMEL:
        return None
    w = b.const(b.weights((k, n), 1.0 / math.sqrt(k)))
    bound = v.bound * math.sqrt(k) * 3
    if bound > MAX_BOUND:
        return None
    return b.one("MatMul", [v.name, w], V("", out, F, False, bound))


@op(1.0)
def g_gemm(b: Builder, v: V) -> V | None:
    if v.rank != 2:
        return None
    m, k = v.shape
    rng = b.rng
    n = rng.choice([1, 2, 5, 8, 16])
    trans_a = rng.random() < 0.2
    if trans_a:
        m, k = k, m
    trans_b = rng.random() < 0.5
    w = b.const(b.weights((n, k) if trans_b else (k, n), 1.0 / math.sqrt(k)))
    ins = [v.name, w]
    if rng.random() < 0.7:
        ins.append(b.const(b.weights(rng.choice([(n,), (1, n), (m, n), ()]), 0.1)))
    attrs: dict[str, object] = {}
    if trans_a:
        attrs["transA"] = 1
    if trans_b:
        attrs["transB"] = 1
    if rng.random() < 0.3:
        attrs["alpha"] = rng.choice([0.5, 2.0])
        attrs["beta"] = rng.choice([0.5, 1.0, 0.0])
    return b.one("Gemm", ins, V("", (m, n), F, False, v.bound * math.sqrt(k) * 6 + 1), **attrs)


# -- data movement ---------------------------------------------------------------------------------


@op(1.5)
def g_transpose(b: Builder, v: V) -> V | None:
    if v.rank < 2:
        return None
    perm = list(range(v.rank))
    b.rng.shuffle(perm)
    return b.one("Transpose", [v.name], _derive(v, tuple(v.shape[p] for p in perm)), perm=perm)


def _factor(n: int, parts: int, rng: random.Random) -> list[int]:
    dims = []
    for _ in range(parts - 1):
        ds = _divisors(n)
        d = rng.choice(ds)
        dims.append(d)
        n //= d
    dims.append(n)
    rng.shuffle(dims)
    return dims


@op(1.5)
def g_reshape(b: Builder, v: V) -> V | None:
    rng = b.rng
    dims = _factor(v.numel, rng.choice([1, 2, 3, 4]), rng)
    spec = list(dims)
    if rng.random() < 0.3:
        spec[rng.randrange(len(spec))] = -1
    elif rng.random() < 0.2 and len(spec) <= v.rank and spec[0] == v.shape[0]:
        spec[0] = 0
    if rng.random() < 0.2 and v.rank >= 1:
        axis = rng.randrange(v.rank + 1)
        shape = (math.prod(v.shape[:axis]), math.prod(v.shape[axis:]))
        return b.one("Flatten", [v.name], _derive(v, shape), axis=axis)
    return b.one("Reshape", [v.name, b.const(np.array(spec, np.int64))], _derive(v, tuple(dims)))


@op(0.8)
def g_squeeze_unsqueeze(b: Builder, v: V) -> V | None:
    ones = [i for i, d in enumerate(v.shape) if d == 1]
    if ones and b.rng.random() < 0.5:
        axes = b.rng.sample(ones, b.rng.randint(1, len(ones)))
        shape = tuple(d for i, d in enumerate(v.shape) if i not in axes)
        axes_ = [a - v.rank if b.rng.random() < 0.3 else a for a in axes]
        return b.one("Squeeze", [v.name, b.const(np.array(axes_, np.int64))], _derive(v, shape))
    if v.rank >= 5:
        return None
    ax = b.rng.randrange(v.rank + 1)
    shape = v.shape[:ax] + (1,) + v.shape[ax:]
    return b.one("Unsqueeze", [v.name, b.const(np.array([ax], np.int64))], _derive(v, shape))


@op(1.2)
def g_concat(b: Builder, v: V) -> V | None:
    if v.rank == 0:
        return None
    axis = b.rng.randrange(v.rank)
    others = [
        w
        for w in b.floats()
        if w.rank == v.rank
        and all(a == c for i, (a, c) in enumerate(zip(w.shape, v.shape)) if i != axis)
    ]
    ws = [v] + b.rng.sample(others, min(len(others), b.rng.choice([1, 2])))
    shape = list(v.shape)
    shape[axis] = sum(w.shape[axis] for w in ws)
    if math.prod(shape) > MAX_NUMEL:
        return None
    ax = axis - v.rank if b.rng.random() < 0.3 else axis
    return b.one(
        "Concat",
        [w.name for w in ws],
        V("", tuple(shape), F, all(w.exact for w in ws), max(w.bound for w in ws)),
        axis=ax,
    )


@op(0.8)
def g_split(b: Builder, v: V) -> V | None:
    axes = [i for i, d in enumerate(v.shape) if d >= 2]
    if not axes:
        return None
    axis = b.rng.choice(axes)
    n = v.shape[axis]
    k = b.rng.randint(2, min(n, 3))
    cuts = sorted(b.rng.sample(range(1, n), k - 1))
    sizes = [e - s for s, e in zip([0] + cuts, cuts + [n])]
    outs = [_derive(v, v.shape[:axis] + (s,) + v.shape[axis + 1 :]) for s in sizes]
    res = b.node("Split", [v.name, b.const(np.array(sizes, np.int64))], outs, axis=axis)
    return b.rng.choice(res)


def onnx_slice_len(d: int, start: int, end: int, step: int) -> int:
    """Elements ONNX Slice keeps along one axis."""
    start, end = onnx_slice_bounds(d, start, end, step)
    return max(0, -(-(end - start) // step))


@op(1.2)
def g_slice(b: Builder, v: V) -> V | None:
    if v.rank == 0:
        return None
    rng = b.rng
    axes = rng.sample(range(v.rank), rng.randint(1, v.rank))
    starts, ends, steps, shape = [], [], [], list(v.shape)
    for a in axes:
        d = v.shape[a]
        step = rng.choice([1, 1, 1, 2, -1, -2, 3])
        s = rng.randint(-d - 2, d + 1)
        # "to the end" as INT64_MAX/MIN only in the step's direction (onnxruntime reads
        # INT64_MAX with a negative step as "to the start")
        e = rng.choice([rng.randint(-d - 2, d + 2), (1 << 63) - 1 if step > 0 else -(1 << 63)])
        n = onnx_slice_len(d, s, e, step)
        if n == 0 and rng.random() > 0.05:
            return None
        starts.append(s)
        ends.append(e)
        steps.append(step)
        shape[a] = n
    ins = [v.name, b.const(np.array(starts, np.int64)), b.const(np.array(ends, np.int64))]
    ins.append(b.const(np.array([x - v.rank if rng.random() < 0.3 else x for x in axes], np.int64)))
    ins.append(b.const(np.array(steps, np.int64)))
    return b.one("Slice", ins, _derive(v, tuple(shape)))


@op(0.8)
def g_pad(b: Builder, v: V) -> V | None:
    if v.rank == 0:
        return None
    rng = b.rng
    mode = rng.choice(["constant", "constant", "reflect", "edge"])
    pads = []
    for _ in range(2):
        for d in v.shape:
            lim = d - 1 if mode == "reflect" else 2
            pads.append(rng.randint(0, max(0, min(2, lim))))
    shape = tuple(d + pads[i] + pads[i + v.rank] for i, d in enumerate(v.shape))
    if math.prod(shape) > MAX_NUMEL:
        return None
    ins = [v.name, b.const(np.array(pads, np.int64))]
    if mode == "constant" and rng.random() < 0.5:
        ins.append(b.const(np.array(rng.choice([0.5, -1.0]), np.float32)))
    return b.one("Pad", ins, _derive(v, shape), mode=mode)


@op(0.8)
def g_gather(b: Builder, v: V) -> V | None:
    if v.rank == 0:
        return None
    rng = b.rng
    axis = rng.randrange(v.rank)
    d = v.shape[axis]
    ishape = rng.choice([(), (1,), (3,), (2, 2)])
    idx = np.array([rng.randrange(-d, d) for _ in range(math.prod(ishape))], np.int64).reshape(
        ishape
    )
    shape = v.shape[:axis] + ishape + v.shape[axis + 1 :]
    if math.prod(shape) > MAX_NUMEL or not shape:
        return None
    return b.one("Gather", [v.name, b.const(idx)], _derive(v, shape), axis=axis)


@op(0.6)
def g_expand_tile(b: Builder, v: V) -> V | None:
    rng = b.rng
    if rng.random() < 0.5:
        reps = [rng.choice([1, 1, 2, 3]) for _ in v.shape]
        shape = tuple(d * r for d, r in zip(v.shape, reps))
        if math.prod(shape) > MAX_NUMEL or v.rank == 0:
            return None
        return b.one("Tile", [v.name, b.const(np.array(reps, np.int64))], _derive(v, shape))
    target = [rng.choice([2, 3]) if d == 1 else d for d in v.shape]
    if rng.random() < 0.3:
        target = [rng.choice([1, 2])] + target
    if math.prod(target) > MAX_NUMEL:
        return None
    return b.one("Expand", [v.name, b.const(np.array(target, np.int64))], _derive(v, tuple(target)))


@op(0.7)
def g_resize(b: Builder, v: V) -> V | None:
    if v.rank != 4:
        return None
    rng = b.rng
    sc = [rng.choice([1.0, 2.0, 3.0, 0.5]) for _ in range(2)]
    out = [int(math.floor(d * s)) for d, s in zip(v.shape[2:], sc)]
    if min(out) < 1 or math.prod(v.shape[:2]) * math.prod(out) > MAX_NUMEL:
        return None
    mode = rng.choice(["nearest", "linear"])
    attrs: dict[str, object] = {"mode": mode}
    ctm = rng.choice(["half_pixel", "asymmetric", "align_corners", "pytorch_half_pixel"])
    attrs["coordinate_transformation_mode"] = ctm
    if mode == "nearest":
        attrs["nearest_mode"] = rng.choice(["round_prefer_floor", "floor", "ceil"])
        # nearest picks a source pixel by rounding a computed coordinate: only exactly
        # representable cases (integer scales, asymmetric) are free of float ties
        if not (ctm == "asymmetric" and all(s >= 1 for s in sc)):
            return None
    scales = b.const(np.array([1.0, 1.0] + sc, np.float32))
    return b.one(
        "Resize",
        [v.name, "", scales],
        _derive(v, v.shape[:2] + tuple(out), exact=v.exact and mode == "nearest"),
        **attrs,
    )


# -- reductions ------------------------------------------------------------------------------------

_REDUCE = [
    "ReduceMean",
    "ReduceSum",
    "ReduceMax",
    "ReduceMin",
    "ReduceL1",
    "ReduceL2",
    "ReduceSumSquare",
    "ReduceLogSumExp",
    "ReduceProd",
    "ReduceLogSum",
]


@op(1.5)
def g_reduce(b: Builder, v: V) -> V | None:
    if v.rank == 0:
        return None
    rng = b.rng
    fn = rng.choice(_REDUCE)
    axes = sorted(rng.sample(range(v.rank), rng.randint(1, v.rank)))
    keep = rng.random() < 0.6
    count = math.prod(v.shape[a] for a in axes)
    src = v
    if fn in ("ReduceProd", "ReduceSumSquare") and (v.bound > 2 or count > 8):
        return None
    if fn == "ReduceLogSum":
        # the log of a sum of |x| + 1: positive, away from zero
        a = b.one("Abs", [v.name], _derive(v))
        src = b.one(
            "Add",
            [a.name, b.const(np.array(1.0, np.float32))],
            _derive(v, exact=False, bound=v.bound + 1),
        )
    shape = tuple(1 if i in axes else d for i, d in enumerate(v.shape) if keep or i not in axes)
    if fn in ("ReduceSum", "ReduceL1"):
        bound = v.bound * count
    elif fn == "ReduceL2":
        bound = v.bound * math.sqrt(count)
    elif fn == "ReduceSumSquare":
        bound = v.bound**2 * count
    elif fn == "ReduceProd":
        bound = v.bound**count
    else:
        bound = v.bound + math.log(count + 1)
    if bound > MAX_BOUND:
        return None
    attrs: dict[str, object] = {"keepdims": int(keep)}
    ins = [src.name]
    axes_ = [a - v.rank if rng.random() < 0.3 else a for a in axes]
    if b.opset >= 18 or fn == "ReduceSum":
        ins.append(b.const(np.array(axes_, np.int64)))
    else:
        attrs["axes"] = axes_
    exact = v.exact and fn in ("ReduceMax", "ReduceMin")
    return b.one(fn, ins, V("", shape, F, exact, bound), **attrs)


@op(0.5)
def g_argmax(b: Builder, v: V) -> V | None:
    if v.rank == 0 or not v.exact:
        return None
    fn = b.rng.choice(["ArgMax", "ArgMin"])
    axis = b.rng.randrange(v.rank)
    keep = b.rng.random() < 0.5
    shape = tuple(1 if i == axis else d for i, d in enumerate(v.shape) if keep or i != axis)
    r = b.one(
        fn, [v.name], V("", shape, I64, True, float(v.shape[axis])), axis=axis, keepdims=int(keep)
    )
    return b.one("Cast", [r.name], _derive(r, dtype=F), to=F)


@op(0.3)
def g_shape_flatten(b: Builder, v: V) -> V | None:
    """PyTorch's flatten: Shape -> Gather -> Unsqueeze -> Concat -> Reshape (folds at import)."""
    if v.rank < 2:
        return None
    s = b.one("Shape", [v.name], V("", (v.rank,), I64))
    n0 = b.one("Gather", [s.name, b.const(np.array(0, np.int64))], V("", (), I64), axis=0)
    u = b.one("Unsqueeze", [n0.name, b.const(np.array([0], np.int64))], V("", (1,), I64))
    cat = b.one("Concat", [u.name, b.const(np.array([-1], np.int64))], V("", (2,), I64), axis=0)
    return b.one("Reshape", [v.name, cat.name], _derive(v, (v.shape[0], v.numel // v.shape[0])))


# -- the generator ---------------------------------------------------------------------------------

OPSETS = (13, 17, 17, 18, 20)


def _input_shape(rng: random.Random) -> tuple[int, ...]:
    kind = rng.choice(["image", "image", "image", "seq", "matrix", "conv1d"])
    if kind == "image":
        c = rng.choice([1, 2, 3, 4, 8, 16])
        h = rng.choice([1, 2, 3, 4, 5, 6, 7, 8, 12, 16])
        w = h if rng.random() < 0.6 else rng.choice([1, 2, 3, 5, 8, 11])
        while c * h * w > 1024:
            h, w = max(1, h // 2), max(1, w // 2)
        return (1, c, h, w)
    if kind == "conv1d":
        return (1, rng.choice([1, 3, 4, 8]), rng.choice([1, 3, 7, 16]))
    if kind == "seq":
        return (1, rng.choice([1, 4, 8]), rng.choice([4, 8, 16, 32]))
    return (rng.choice([1, 2, 4]), rng.choice([3, 8, 16, 64]))


def random_graph(
    seed: int, n_ops: int | None = None, *, debug_shapes: bool = False
) -> tuple[onnx.ModelProto, dict[str, np.ndarray], str]:
    """A valid random model, its seeded float32 inputs and a one-line description."""
    rng = random.Random(seed)
    opset = rng.choice(OPSETS)
    b = Builder(rng, opset)
    target = n_ops if n_ops is not None else rng.randint(5, 40)
    shape = _input_shape(rng)
    n_inputs = 1 if rng.random() < 0.7 else 2
    for i in range(n_inputs):
        s = (
            shape
            if i == 0 or rng.random() < 0.6
            else tuple(d if rng.random() < 0.7 else 1 for d in shape)
        )
        name = f"x{i}"
        b.inputs.append(helper.make_tensor_value_info(name, F, list(s)))
        b.pool.append(V(name, s))
    names = sorted(OPS)
    weights = [OPS[n][0] for n in names]
    tries = 0
    while len(b.ops) < target and tries < 20 * target:
        tries += 1
        floats = b.floats()
        recent = floats[-4:]
        v = rng.choice(recent if rng.random() < 0.7 else floats)
        kind = rng.choices(names, weights)[0]
        try:
            OPS[kind][1](b, v)
        except _Skip:
            continue
    inputs = {vi.name for vi in b.inputs}
    leaves = [v for v in b.pool if v.name not in b.used and v.name not in inputs]
    # an output per leaf (up to three), so nothing the generator made is dead code
    outs = leaves[-3:] if leaves else [b.floats()[-1]]
    outs = [v for v in outs if v.name not in inputs] or [b.pool[-1]]
    # ops that gave up half way leave unused constants behind
    needed = set(b.used) | {v.name for v in outs}
    nodes = [n for n in b.nodes if n.op_type != "Constant" or n.output[0] in needed]
    inits = [t for t in b.inits if t.name in needed]
    graph = helper.make_graph(
        nodes,
        f"fuzz_{seed}",
        b.inputs,
        [helper.make_tensor_value_info(v.name, v.dtype, list(v.shape)) for v in outs],
        inits,
    )
    if debug_shapes:
        graph.value_info.extend(
            helper.make_tensor_value_info(v.name, v.dtype, list(v.shape))
            for v in b.pool
            if v.name not in inputs and v not in outs
        )
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", opset)], producer_name="glowviz-fuzz"
    )
    model.ir_version = 9 if opset >= 20 else 8
    g = np.random.default_rng(seed)
    feeds = {
        vi.name: g.standard_normal([d.dim_value for d in vi.type.tensor_type.shape.dim]).astype(
            np.float32
        )
        for vi in b.inputs
    }
    desc = f"opset {opset}, {len(b.nodes)} nodes: " + " ".join(b.ops)
    return model, feeds, desc


class _Skip(Exception):
    pass


__all__ = ["OPS", "random_graph"]
