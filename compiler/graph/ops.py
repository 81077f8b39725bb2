"""The op table of the graph IR: every op declared once (operands, attributes, type inference,
traits, category, one-line doc). The verifier, printer, parser, DOT export and IDE inspector are
generic over it. Adding an op: its ONNX converter, its row here, its reference kernel in
`compiler/kernels/reference.py`, and an LLVM emitter or a lowering in
`compiler/passes/lowering.py` (docs/ARCHITECTURE.md, "How to add things").

Layout: convolution and pooling ops are NCHW, as ONNX is (see docs/ARCHITECTURE.md for why).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from compiler.errors import ShapeError, VerifyError
from compiler.graph.activations import ACTIVATIONS, NONE, check_fused
from compiler.graph.types import ElemKind, TensorType, broadcast_shapes

REQUIRED: Any = object()

#: Trait of ops whose kernel can add its result to the destination instead of storing it (a
#: sum post-op: the low-level IR's `@inout` dest, see compiler/lir/passes/accumulate.py).
ACCUMULATE = "accumulate"
#: Trait of ops that sum many terms: a float16 node computes in float32 (as onnxruntime does).
WIDE_ACCUMULATOR = "wide-accumulator"
#: Trait of ops whose kernels run on quantized integers (they need their operands' types).
INT_KERNEL = "int-kernel"
#: Trait of int8 ops that requantize their result (a Rescale after them folds into their params).
REQUANTIZES = "requantizes"
#: Every trait an op may have (`register` refuses others, so a misspelt trait fails at import).
TRAITS = frozenset(
    {
        "pure",
        "elementwise",
        "unary",
        "binary",
        "commutative",
        "inplace",
        "view",
        "side_effect",
        ACCUMULATE,
        WIDE_ACCUMULATOR,
        INT_KERNEL,
        REQUANTIZES,
    }
)

#: Attribute kinds: how a value is normalised and printed.
ATTR_KINDS = ("int", "float", "str", "ints", "floats")


@dataclass(frozen=True)
class Attr:
    kind: str
    default: Any = REQUIRED
    doc: str = ""


#: Op categories (`OpDef.category`), in the order the IDE and the figures list them (legends,
#: hatch patterns); theme files colour them. Every op's category is one of these.
CATEGORIES = (
    "conv",
    "matmul",
    "activation",
    "elementwise",
    "norm",
    "pool",
    "tensor",
    "reduction",
    "quantization",
    "io",
    "other",
)

InferFn = Callable[[list[TensorType], dict[str, Any]], list[TensorType]]


@dataclass(frozen=True)
class OpDef:
    name: str
    operands: tuple[str, ...]
    infer: InferFn
    attrs: dict[str, Attr] = field(default_factory=dict)
    traits: frozenset[str] = frozenset()  # a subset of TRAITS
    category: str = "other"
    doc: str = ""
    variadic: bool = False  # the last operand may repeat (>= 1 times)

    def normalize_attrs(
        self, attrs: dict[str, Any], node_name: str | None = None
    ) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key in attrs:
            if key not in self.attrs:
                raise VerifyError(f"{self.name} {node_name or ''}: unknown attribute '{key}'")
        for key, spec in self.attrs.items():
            if key in attrs:
                out[key] = _coerce(spec.kind, attrs[key])
            elif spec.default is REQUIRED:
                raise VerifyError(f"{self.name} {node_name or ''}: missing attribute '{key}'")
            else:
                out[key] = _coerce(spec.kind, spec.default)
        return out

    def infer_types(
        self, types: list[TensorType], attrs: dict[str, Any], node_name: str = "?"
    ) -> list[TensorType]:
        """The declared `infer` rule with the operand count checked and its errors naming the
        op and the node."""
        n = len(self.operands)
        if (not self.variadic and len(types) != n) or (self.variadic and len(types) < n):
            raise VerifyError(
                f"{self.name} '{node_name}': expected {n}{'+' if self.variadic else ''}"
                f" operands, got {len(types)}"
            )
        try:
            return self.infer(types, attrs)
        except (ShapeError, VerifyError) as e:
            raise type(e)(f"{self.name} '{node_name}': {e.message}") from None
        except (ValueError, IndexError, ZeroDivisionError) as e:
            raise ShapeError(f"{self.name} '{node_name}': {e}") from None


def _coerce(kind: str, v: Any) -> Any:
    if kind == "int":
        return int(v)
    if kind == "float":
        return float(v)
    if kind == "str":
        return str(v)
    if kind == "ints":
        return tuple(int(x) for x in v)
    if kind == "floats":
        return tuple(float(x) for x in v)
    raise AssertionError(kind)


_OPS: dict[str, OpDef] = {}


def register(op: OpDef) -> OpDef:
    assert op.name not in _OPS, op.name
    assert op.category in CATEGORIES, f"{op.name}: unknown category '{op.category}'"
    assert op.traits <= TRAITS, f"{op.name}: unknown traits {sorted(op.traits - TRAITS)}"
    _OPS[op.name] = op
    return op


def get_op(name: str) -> OpDef:
    try:
        return _OPS[name]
    except KeyError:
        raise VerifyError(f"unknown graph op '{name}'") from None


def all_ops() -> dict[str, OpDef]:
    return dict(_OPS)


def has_op(name: str) -> bool:
    return name in _OPS


# ---------------------------------------------------------------------------------------------
# Type inference helpers
# ---------------------------------------------------------------------------------------------


def _same(types: list[TensorType], attrs: dict[str, Any]) -> list[TensorType]:
    return [types[0]]


def _broadcast(types: list[TensorType], attrs: dict[str, Any]) -> list[TensorType]:
    elems = {t.elem for t in types}
    if len(elems) != 1:
        raise ShapeError(f"operand element kinds differ: {', '.join(str(t) for t in types)}")
    return [TensorType(types[0].elem, broadcast_shapes(*(t.shape for t in types)))]


def _compare(types: list[TensorType], attrs: dict[str, Any]) -> list[TensorType]:
    (t,) = _broadcast(types, attrs)
    return [t.with_elem(ElemKind.BOOL)]


def _where(types: list[TensorType], attrs: dict[str, Any]) -> list[TensorType]:
    c, x, y = types
    if c.elem != ElemKind.BOOL:
        raise ShapeError("condition must be bool")
    if x.elem != y.elem:
        raise ShapeError("x and y element kinds differ")
    return [TensorType(x.elem, broadcast_shapes(c.shape, x.shape, y.shape))]


def _conv_out(size: int, k: int, s: int, p0: int, p1: int, d: int) -> int:
    out = (size + p0 + p1 - d * (k - 1) - 1) // s + 1
    if out <= 0:
        raise ShapeError(f"output size {out} is not positive")
    return out


def _conv(types: list[TensorType], attrs: dict[str, Any]) -> list[TensorType]:
    x, w, b = types
    if x.rank != 4 or w.rank != 4:
        raise ShapeError(f"expects NCHW input and KCRS filter, got {x} and {w}")
    n, c, h, wd = x.shape
    k, cg, r, s = w.shape
    g = attrs["group"]
    if c != cg * g or k % g:
        raise ShapeError(f"channels {c} do not match filter {w} with group {g}")
    if b.shape != (k,):
        raise ShapeError(f"bias {b} does not match {k} output channels")
    sh, sw = attrs["strides"]
    pt, pl, pb, pr = attrs["pads"]
    dh, dw = attrs["dilations"]
    return [
        TensorType(
            x.elem, (n, k, _conv_out(h, r, sh, pt, pb, dh), _conv_out(wd, s, sw, pl, pr, dw))
        )
    ]


def _conv_transpose(types: list[TensorType], attrs: dict[str, Any]) -> list[TensorType]:
    x, w, b = types
    if x.rank != 4 or w.rank != 4:
        raise ShapeError(f"expects NCHW input and CKRS filter, got {x} and {w}")
    n, c, h, wd = x.shape
    cw, kg, r, s = w.shape
    g = attrs["group"]
    if c != cw:
        raise ShapeError(f"input channels {c} do not match filter {w}")
    k = kg * g
    if b.shape != (k,):
        raise ShapeError(f"bias {b} does not match {k} output channels")
    sh, sw = attrs["strides"]
    pt, pl, pb, pr = attrs["pads"]
    dh, dw = attrs["dilations"]
    oph, opw = attrs["output_padding"]
    oh = sh * (h - 1) + oph + ((r - 1) * dh + 1) - pt - pb
    ow = sw * (wd - 1) + opw + ((s - 1) * dw + 1) - pl - pr
    if oh <= 0 or ow <= 0:
        raise ShapeError("output size is not positive")
    return [TensorType(x.elem, (n, k, oh, ow))]


def _pool(types: list[TensorType], attrs: dict[str, Any]) -> list[TensorType]:
    (x,) = types
    if x.rank != 4:
        raise ShapeError(f"expects NCHW input, got {x}")
    n, c, h, w = x.shape
    kh, kw = attrs["kernel"]
    sh, sw = attrs["strides"]
    pt, pl, pb, pr = attrs["pads"]
    dh, dw = attrs.get("dilations", (1, 1))
    out = []
    for size, k, s, p0, p1, d in ((h, kh, sh, pt, pb, dh), (w, kw, sw, pl, pr, dw)):
        eff = d * (k - 1) + 1
        if attrs["ceil_mode"]:
            o = -(-(size + p0 + p1 - eff) // s) + 1
            if (o - 1) * s >= size + p0:  # last window must start inside the input or left pad
                o -= 1
        else:
            o = (size + p0 + p1 - eff) // s + 1
        if o <= 0:
            raise ShapeError(f"output size {o} is not positive")
        out.append(o)
    return [x.with_shape((n, c, out[0], out[1]))]  # max pooling keeps a quantized type


def _global_pool(types: list[TensorType], attrs: dict[str, Any]) -> list[TensorType]:
    (x,) = types
    if x.rank < 3:
        raise ShapeError(f"expects N x C x spatial input, got {x}")
    return [x.with_shape(x.shape[:2] + (1,) * (x.rank - 2))]


def _pad(types: list[TensorType], attrs: dict[str, Any]) -> list[TensorType]:
    (x,) = types
    p = attrs["pads"]
    if len(p) != 2 * x.rank:
        raise ShapeError(f"pads {p} do not match rank {x.rank}")
    shape = tuple(d + p[i] + p[i + x.rank] for i, d in enumerate(x.shape))
    if any(d <= 0 for d in shape):
        raise ShapeError(f"padded shape {shape} is not positive")
    return [x.with_shape(shape)]


def _axis(axis: int, rank: int) -> int:
    if not -rank <= axis < max(rank, 1):
        raise ShapeError(f"axis {axis} out of range for rank {rank}")
    return axis % max(rank, 1)


def _concat(types: list[TensorType], attrs: dict[str, Any]) -> list[TensorType]:
    first = types[0]
    ax = _axis(attrs["axis"], first.rank)
    total = 0
    for t in types:
        if t.rank != first.rank or t.elem != first.elem or t.scale != first.scale:
            raise ShapeError(f"operands {first} and {t} cannot be concatenated")
        if t.offset != first.offset:
            raise ShapeError(f"quantized operands {first} and {t} differ in offset")
        if any(a != b for i, (a, b) in enumerate(zip(t.shape, first.shape)) if i != ax):
            raise ShapeError(f"operands {first} and {t} differ off axis {ax}")
        total += t.shape[ax]
    shape = list(first.shape)
    shape[ax] = total
    return [first.with_shape(shape)]


def _split(types: list[TensorType], attrs: dict[str, Any]) -> list[TensorType]:
    (x,) = types
    ax = _axis(attrs["axis"], x.rank)
    splits = attrs["splits"]
    if sum(splits) != x.shape[ax] or any(s < 0 for s in splits):
        raise ShapeError(f"splits {splits} do not sum to {x.shape[ax]}")
    out = []
    for s in splits:
        shape = list(x.shape)
        shape[ax] = s
        out.append(x.with_shape(shape))
    return out


def _slice(types: list[TensorType], attrs: dict[str, Any]) -> list[TensorType]:
    """starts/ends/steps are given for every dim, already clamped (Python range semantics)."""
    (x,) = types
    starts, ends, steps = attrs["starts"], attrs["ends"], attrs["steps"]
    if not (len(starts) == len(ends) == len(steps) == x.rank):
        raise ShapeError("starts/ends/steps must cover every dimension")
    shape = []
    for d, s, e, st in zip(x.shape, starts, ends, steps):
        if st == 0:
            raise ShapeError("step 0")
        shape.append(len(range(s, e, st)) if (0 <= s <= d or (st < 0 and s == d - 1)) else 0)
    return [x.with_shape(shape)]


def _reshape(types: list[TensorType], attrs: dict[str, Any]) -> list[TensorType]:
    (x,) = types
    shape = attrs["shape"]
    if math.prod(shape) != x.numel or any(d < 0 for d in shape):
        raise ShapeError(f"cannot reshape {x} to {list(shape)}")
    return [x.with_shape(shape)]


def _transpose(types: list[TensorType], attrs: dict[str, Any]) -> list[TensorType]:
    (x,) = types
    perm = attrs["perm"]
    if sorted(perm) != list(range(x.rank)):
        raise ShapeError(f"perm {perm} is not a permutation of rank {x.rank}")
    return [x.with_shape(tuple(x.shape[p] for p in perm))]


def _broadcast_to(types: list[TensorType], attrs: dict[str, Any]) -> list[TensorType]:
    (x,) = types
    return [x.with_shape(broadcast_shapes(x.shape, attrs["shape"]))]


def _tile(types: list[TensorType], attrs: dict[str, Any]) -> list[TensorType]:
    (x,) = types
    reps = attrs["repeats"]
    if len(reps) != x.rank:
        raise ShapeError(f"repeats {reps} do not match rank {x.rank}")
    return [x.with_shape(tuple(d * r for d, r in zip(x.shape, reps)))]


def _gather(types: list[TensorType], attrs: dict[str, Any]) -> list[TensorType]:
    data, idx = types
    if idx.elem not in (ElemKind.I64, ElemKind.I32):
        raise ShapeError("indices must be i64 or i32")
    ax = _axis(attrs["axis"], data.rank)
    return [data.with_shape(data.shape[:ax] + idx.shape + data.shape[ax + 1 :])]


def _matmul(types: list[TensorType], attrs: dict[str, Any]) -> list[TensorType]:
    a, b = types
    if a.rank < 2 or b.rank < 2:
        raise ShapeError(f"operands must have rank >= 2, got {a} and {b}")
    if a.shape[-1] != b.shape[-2]:
        raise ShapeError(f"inner dimensions differ: {a} @ {b}")
    if a.elem != b.elem:
        raise ShapeError("element kinds differ")
    batch = broadcast_shapes(a.shape[:-2], b.shape[:-2])
    return [TensorType(a.elem, batch + (a.shape[-2], b.shape[-1]))]


def _fully_connected(types: list[TensorType], attrs: dict[str, Any]) -> list[TensorType]:
    x, w, b = types
    if x.rank != 2 or w.rank != 2 or x.shape[1] != w.shape[0]:
        raise ShapeError(f"expects x[M,K] w[K,N], got {x} and {w}")
    if b.shape != (w.shape[1],):
        raise ShapeError(f"bias {b} does not match N={w.shape[1]}")
    return [TensorType(x.elem, (x.shape[0], w.shape[1]))]


def _batchnorm(types: list[TensorType], attrs: dict[str, Any]) -> list[TensorType]:
    x = types[0]
    if x.rank < 2:
        raise ShapeError(f"input {x} has no channel axis")
    for t in types[1:]:
        if t.shape != (x.shape[1],):
            raise ShapeError(f"parameter {t} does not match {x.shape[1]} channels")
    return [x]


def _layernorm(types: list[TensorType], attrs: dict[str, Any]) -> list[TensorType]:
    x, scale, bias = types
    ax = _axis(attrs["axis"], x.rank)
    norm = x.shape[ax:]
    for t in (scale, bias):
        broadcast_shapes(norm, t.shape)  # must broadcast into the normalised dims
        if len(t.shape) > len(norm):
            raise ShapeError(f"parameter {t} has more dims than the normalised shape {norm}")
    return [x]


def _reduce(types: list[TensorType], attrs: dict[str, Any]) -> list[TensorType]:
    (x,) = types
    axes = sorted({_axis(a, x.rank) for a in attrs["axes"]})
    if attrs["keepdims"]:
        shape = tuple(1 if i in axes else d for i, d in enumerate(x.shape))
    else:
        shape = tuple(d for i, d in enumerate(x.shape) if i not in axes)
    return [x.with_shape(shape)]


def _argmax(types: list[TensorType], attrs: dict[str, Any]) -> list[TensorType]:
    (x,) = types
    ax = _axis(attrs["axis"], x.rank)
    if attrs["keepdims"]:
        shape = tuple(1 if i == ax else d for i, d in enumerate(x.shape))
    else:
        shape = tuple(d for i, d in enumerate(x.shape) if i != ax)
    return [TensorType(ElemKind.I64, shape)]


def _softmax(types: list[TensorType], attrs: dict[str, Any]) -> list[TensorType]:
    _axis(attrs["axis"], types[0].rank)
    return [types[0]]


def _cast(types: list[TensorType], attrs: dict[str, Any]) -> list[TensorType]:
    return [types[0].with_elem(ElemKind.parse(attrs["to"]))]


def _resize(types: list[TensorType], attrs: dict[str, Any]) -> list[TensorType]:
    (x,) = types
    shape = attrs["out_shape"]
    if len(shape) != x.rank:
        raise ShapeError(f"output shape {shape} does not match rank {x.rank}")
    return [x.with_shape(shape)]


def _save(types: list[TensorType], attrs: dict[str, Any]) -> list[TensorType]:
    src, dst = types
    if src.shape != dst.shape or src.elem != dst.elem:
        raise ShapeError(f"cannot save {src} into {dst}")
    return []


# ---------------------------------------------------------------------------------------------
# The table
# ---------------------------------------------------------------------------------------------

_ACT = {
    "activation": Attr("str", NONE, f"fused activation: {', '.join((NONE, *ACTIVATIONS))}"),
    "act_args": Attr(
        "floats",
        (),
        "arguments of the fused activation: "
        + "; ".join(f"{a.name} ({', '.join(a.params)})" for a in ACTIVATIONS.values() if a.params),
    ),
}


def _fused(infer: InferFn) -> InferFn:
    """Type inference of an op with the fused-activation attributes (`_ACT`): checks them too."""

    def checked(types: list[TensorType], attrs: dict[str, Any]) -> list[TensorType]:
        check_fused(attrs["activation"], attrs["act_args"])
        return infer(types, attrs)

    return checked


_ELEM = frozenset({"elementwise", "pure", "inplace"})

#: Unary element-wise ops: (name, category, doc).
for _name, _category, _doc in [
    ("Relu", "activation", "max(x, 0)"),
    ("Sigmoid", "activation", "1 / (1 + exp(-x))"),
    ("Tanh", "activation", "tanh(x)"),
    ("Exp", "elementwise", "exp(x)"),
    ("Log", "elementwise", "natural log"),
    ("Sqrt", "elementwise", "square root"),
    ("Abs", "elementwise", "|x|"),
    ("Neg", "elementwise", "-x"),
    ("Reciprocal", "elementwise", "1 / x"),
    ("Erf", "elementwise", "error function"),
    ("Floor", "elementwise", "floor(x)"),
    ("Ceil", "elementwise", "ceil(x)"),
    ("Not", "elementwise", "logical not"),
    ("Softplus", "activation", "log(1 + exp(x))"),
    ("HardSwish", "activation", "x * max(0, min(1, x/6 + 1/2))"),
    ("Sign", "elementwise", "sign(x)"),
]:
    register(
        OpDef(
            _name,
            ("input",),
            _same,
            traits=_ELEM | {"unary"},
            category=_category,
            doc=_doc,
        )
    )

register(
    OpDef(
        "LeakyRelu",
        ("input",),
        _same,
        {"alpha": Attr("float", 0.01)},
        _ELEM | {"unary"},
        "activation",
        "x if x >= 0 else alpha * x",
    )
)
register(
    OpDef(
        "Elu",
        ("input",),
        _same,
        {"alpha": Attr("float", 1.0)},
        _ELEM | {"unary"},
        "activation",
        "x if x > 0 else alpha * (exp(x) - 1)",
    )
)
register(
    OpDef(
        "Selu",
        ("input",),
        _same,
        {"alpha": Attr("float", 1.6732632423543772), "gamma": Attr("float", 1.0507009873554805)},
        _ELEM | {"unary"},
        "activation",
        "gamma * elu(x, alpha)",
    )
)
register(
    OpDef(
        "HardSigmoid",
        ("input",),
        _same,
        {"alpha": Attr("float", 0.2), "beta": Attr("float", 0.5)},
        _ELEM | {"unary"},
        "activation",
        "max(0, min(1, alpha * x + beta))",
    )
)
register(
    OpDef(
        "Gelu",
        ("input",),
        _same,
        {"approximate": Attr("str", "none")},
        _ELEM | {"unary"},
        "activation",
        "x * Phi(x) (approximate: none or tanh)",
    )
)
register(
    OpDef(
        "Clip",
        ("input",),
        _same,
        {"min": Attr("float", -math.inf), "max": Attr("float", math.inf)},
        _ELEM | {"unary"},
        "activation",
        "min(max(x, min), max)",
    )
)

for _name, _doc, _extra in [
    ("Add", "a + b", {"commutative"}),
    ("Sub", "a - b", set()),
    ("Mul", "a * b", {"commutative"}),
    ("Div", "a / b (integer division truncates toward zero)", set()),
    ("Pow", "a ** b", set()),
    ("Max", "max(a, b)", {"commutative"}),
    ("Min", "min(a, b)", {"commutative"}),
    ("PRelu", "a if a >= 0 else b * a", set()),
]:
    register(
        OpDef(
            _name,
            ("lhs", "rhs"),
            _broadcast,
            traits=_ELEM | {"binary"} | _extra,
            category="elementwise",
            doc=_doc + ", broadcasting",
        )
    )

for _name, _doc in [
    ("Equal", "a == b"),
    ("Less", "a < b"),
    ("Greater", "a > b"),
    ("And", "a and b"),
    ("Or", "a or b"),
]:
    register(
        OpDef(
            _name,
            ("lhs", "rhs"),
            _compare,
            traits=frozenset({"elementwise", "pure", "binary"}),
            category="elementwise",
            doc=_doc + " -> bool, broadcasting",
        )
    )

register(
    OpDef(
        "Where",
        ("cond", "x", "y"),
        _where,
        traits=frozenset({"elementwise", "pure"}),
        category="elementwise",
        doc="x where cond else y, broadcasting",
    )
)
register(
    OpDef(
        "Cast",
        ("input",),
        _cast,
        {"to": Attr("str")},
        frozenset({"elementwise", "pure"}),
        "elementwise",
        "convert element kind",
    )
)

register(
    OpDef(
        "Conv",
        ("input", "filter", "bias"),
        _fused(_conv),
        {
            "strides": Attr("ints", (1, 1)),
            "pads": Attr("ints", (0, 0, 0, 0), "top, left, bottom, right"),
            "dilations": Attr("ints", (1, 1)),
            "group": Attr("int", 1),
            **_ACT,
        },
        frozenset({"pure", ACCUMULATE, WIDE_ACCUMULATOR}),
        "conv",
        "2-D convolution, NCHW input, KCRS filter",
    )
)
register(
    OpDef(
        "ConvTranspose",
        ("input", "filter", "bias"),
        _conv_transpose,
        {
            "strides": Attr("ints", (1, 1)),
            "pads": Attr("ints", (0, 0, 0, 0)),
            "dilations": Attr("ints", (1, 1)),
            "group": Attr("int", 1),
            "output_padding": Attr("ints", (0, 0)),
        },
        frozenset({"pure", WIDE_ACCUMULATOR}),
        "conv",
        "2-D transposed convolution, NCHW, filter C x K/g x R x S",
    )
)
register(
    OpDef(
        "BatchNorm",
        ("input", "scale", "bias", "mean", "var"),
        _batchnorm,
        {"epsilon": Attr("float", 1e-5)},
        frozenset({"pure", WIDE_ACCUMULATOR}),
        "norm",
        "inference batch normalisation over channel axis 1",
    )
)
register(
    OpDef(
        "LayerNorm",
        ("input", "scale", "bias"),
        _layernorm,
        {"axis": Attr("int", -1), "epsilon": Attr("float", 1e-5)},
        frozenset({"pure", WIDE_ACCUMULATOR}),
        "norm",
        "normalise over dims axis.. then scale and shift",
    )
)
register(
    OpDef(
        "LRN",
        ("input",),
        _same,
        {
            "size": Attr("int"),
            "alpha": Attr("float", 1e-4),
            "beta": Attr("float", 0.75),
            "bias": Attr("float", 1.0),
        },
        frozenset({"pure", WIDE_ACCUMULATOR}),
        "norm",
        "local response normalisation across channels",
    )
)
register(
    OpDef(
        "MaxPool",
        ("input",),
        _pool,
        {
            "kernel": Attr("ints"),
            "strides": Attr("ints", (1, 1)),
            "pads": Attr("ints", (0, 0, 0, 0)),
            "dilations": Attr("ints", (1, 1)),
            "ceil_mode": Attr("int", 0),
        },
        frozenset({"pure"}),
        "pool",
        "2-D max pooling, NCHW",
    )
)
register(
    OpDef(
        "AvgPool",
        ("input",),
        _pool,
        {
            "kernel": Attr("ints"),
            "strides": Attr("ints", (1, 1)),
            "pads": Attr("ints", (0, 0, 0, 0)),
            "ceil_mode": Attr("int", 0),
            "count_include_pad": Attr("int", 0),
        },
        frozenset({"pure", WIDE_ACCUMULATOR}),
        "pool",
        "2-D average pooling, NCHW",
    )
)
register(
    OpDef(
        "GlobalAvgPool",
        ("input",),
        _global_pool,
        traits=frozenset({"pure", WIDE_ACCUMULATOR}),
        category="pool",
        doc="mean over all spatial dims (kept as 1)",
    )
)
register(
    OpDef(
        "GlobalMaxPool",
        ("input",),
        _global_pool,
        traits=frozenset({"pure"}),
        category="pool",
        doc="max over all spatial dims (kept as 1)",
    )
)
register(
    OpDef(
        "Pad",
        ("input",),
        _pad,
        {
            "pads": Attr("ints", doc="begins for every dim, then ends"),
            "mode": Attr("str", "constant"),
            "value": Attr("float", 0.0),
        },
        frozenset({"pure"}),
        "tensor",
        "pad with a constant, edge or reflection",
    )
)
register(
    OpDef(
        "Resize",
        ("input",),
        _resize,
        {
            "out_shape": Attr("ints"),
            "mode": Attr("str", "nearest"),
            "coordinate_transformation_mode": Attr("str", "half_pixel"),
            "nearest_mode": Attr("str", "round_prefer_floor"),
            "cubic_coeff_a": Attr("float", -0.75),
            "exclude_outside": Attr("int", 0),
            "extrapolation_value": Attr("float", 0.0),
            "antialias": Attr("int", 0, "linear/cubic downsampling widens the filter by 1/scale"),
            "roi": Attr(
                "floats", (), "tf_crop_and_resize: starts then ends per dim, as input fractions"
            ),
            "scales": Attr(
                "floats",
                (),
                "per-dim scale mapping coordinates when it is not "
                "exactly out/in (ONNX scales input); empty = out/in",
            ),
        },
        frozenset({"pure"}),
        "tensor",
        "resize by nearest, linear or cubic interpolation",
    )
)
register(
    OpDef(
        "Concat",
        ("inputs",),
        _concat,
        {"axis": Attr("int")},
        frozenset({"pure"}),
        "tensor",
        "concatenate along axis",
        variadic=True,
    )
)
register(
    OpDef(
        "Split",
        ("input",),
        _split,
        {"axis": Attr("int"), "splits": Attr("ints")},
        frozenset({"pure"}),
        "tensor",
        "split along axis into pieces of the given sizes",
    )
)
register(
    OpDef(
        "Slice",
        ("input",),
        _slice,
        {"starts": Attr("ints"), "ends": Attr("ints"), "steps": Attr("ints")},
        frozenset({"pure"}),
        "tensor",
        "strided slice; starts/ends/steps given for every dim, already clamped",
    )
)
register(
    OpDef(
        "Reshape",
        ("input",),
        _reshape,
        {"shape": Attr("ints")},
        frozenset({"pure", "view"}),
        "tensor",
        "same data, new static shape",
    )
)
register(
    OpDef(
        "Transpose",
        ("input",),
        _transpose,
        {"perm": Attr("ints")},
        frozenset({"pure"}),
        "tensor",
        "permute dims",
    )
)
register(
    OpDef(
        "Broadcast",
        ("input",),
        _broadcast_to,
        {"shape": Attr("ints")},
        frozenset({"pure"}),
        "tensor",
        "broadcast to a shape (ONNX Expand)",
    )
)
register(
    OpDef(
        "Tile",
        ("input",),
        _tile,
        {"repeats": Attr("ints")},
        frozenset({"pure"}),
        "tensor",
        "repeat along every dim",
    )
)
register(
    OpDef(
        "Gather",
        ("data", "indices"),
        _gather,
        {"axis": Attr("int", 0)},
        frozenset({"pure"}),
        "tensor",
        "take slices of data along axis at indices",
    )
)
register(
    OpDef(
        "MatMul",
        ("lhs", "rhs"),
        _matmul,
        traits=frozenset({"pure", ACCUMULATE, WIDE_ACCUMULATOR}),
        category="matmul",
        doc="matrix product with broadcast batch dims (rank >= 2)",
    )
)
register(
    OpDef(
        "FullyConnected",
        ("input", "weights", "bias"),
        _fused(_fully_connected),
        dict(_ACT),
        frozenset({"pure", ACCUMULATE, WIDE_ACCUMULATOR}),
        "matmul",
        "x[M,K] @ w[K,N] + b[N]",
    )
)
register(
    OpDef(
        "Softmax",
        ("input",),
        _softmax,
        {"axis": Attr("int", -1)},
        frozenset({"pure"}),
        "activation",
        "softmax along one axis",
    )
)
register(
    OpDef(
        "LogSoftmax",
        ("input",),
        _softmax,
        {"axis": Attr("int", -1)},
        frozenset({"pure"}),
        "activation",
        "log of softmax along one axis",
    )
)
_SUMS = ("ReduceMean", "ReduceSum", "ReduceProd")
for _name in ("ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd"):
    register(
        OpDef(
            _name,
            ("input",),
            _reduce,
            {"axes": Attr("ints"), "keepdims": Attr("int", 1)},
            frozenset({"pure"} | ({WIDE_ACCUMULATOR} if _name in _SUMS else set())),
            "reduction",
            f"{_name[6:].lower()} over axes (axes non-empty)",
        )
    )
register(
    OpDef(
        "ArgMax",
        ("input",),
        _argmax,
        {"axis": Attr("int", 0), "keepdims": Attr("int", 1), "select_last_index": Attr("int", 0)},
        frozenset({"pure"}),
        "reduction",
        "index of the largest element along axis -> i64",
    )
)
register(
    OpDef(
        "ArgMin",
        ("input",),
        _argmax,
        {"axis": Attr("int", 0), "keepdims": Attr("int", 1), "select_last_index": Attr("int", 0)},
        frozenset({"pure"}),
        "reduction",
        "index of the smallest element along axis -> i64",
    )
)
register(
    OpDef(
        "Save",
        ("input", "output"),
        _save,
        traits=frozenset({"side_effect"}),
        category="io",
        doc="write a value into an output placeholder",
    )
)
