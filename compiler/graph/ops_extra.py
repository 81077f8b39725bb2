"""More rows of the graph op table, for the ops real exports added: integer and rounding math
(Mod, Round), indexing (GatherElements, GatherND, ScatterND, ScatterElements, ArgTopK,
MaxPoolArgmax), scans and masks (CumSum, CumProd, Trilu), Einsum, and normalisations (GroupNorm,
RMSNorm). The `compiler.graph` package imports this module, so the rows register before any
use of the table.

Declared like every other op: operands, attributes, type inference, traits, category, doc.
"""

from __future__ import annotations

from typing import Any

from compiler.errors import ShapeError
from compiler.graph.ops import (
    _ELEM,
    WIDE_ACCUMULATOR,
    Attr,
    OpDef,
    _axis,
    _broadcast,
    _pool,
    _same,
    register,
)
from compiler.graph.types import ElemKind, TensorType

#: Unary float math added with the node suite's coverage: (name, doc).
TRIG = (
    ("Sin", "sin(x)"),
    ("Cos", "cos(x)"),
    ("Tan", "tan(x)"),
    ("Asin", "arcsin(x)"),
    ("Acos", "arccos(x)"),
    ("Atan", "arctan(x)"),
    ("Sinh", "sinh(x)"),
    ("Cosh", "cosh(x)"),
    ("Asinh", "arsinh(x)"),
    ("Acosh", "arcosh(x)"),
    ("Atanh", "artanh(x)"),
)
#: Element-wise integer bit operations: (name, doc).
BITWISE = (
    ("BitwiseAnd", "a & b"),
    ("BitwiseOr", "a | b"),
    ("BitwiseXor", "a ^ b"),
)

_INDEX_KINDS = (ElemKind.I64, ElemKind.I32)
#: Scatter reductions: how an update combines with what is already there.
SCATTER_REDUCTIONS = ("none", "add", "mul", "max", "min")


def _indices(t: TensorType, what: str = "indices") -> None:
    if t.elem not in _INDEX_KINDS:
        raise ShapeError(f"{what} must be i64 or i32, got {t}")


def _trilu(types: list[TensorType], attrs: dict[str, Any]) -> list[TensorType]:
    (x,) = types
    if x.rank < 2:
        raise ShapeError(f"expects rank >= 2, got {x}")
    return [x]


def _cumsum(types: list[TensorType], attrs: dict[str, Any]) -> list[TensorType]:
    (x,) = types
    _axis(attrs["axis"], x.rank)
    return [x]


def _gather_elements(types: list[TensorType], attrs: dict[str, Any]) -> list[TensorType]:
    data, idx = types
    _indices(idx)
    if idx.rank != data.rank:
        raise ShapeError(f"indices {idx} and data {data} differ in rank")
    ax = _axis(attrs["axis"], data.rank)
    for i, (a, b) in enumerate(zip(idx.shape, data.shape)):
        if i != ax and a > b:
            raise ShapeError(f"indices {idx} exceed data {data} on dim {i}")
    return [data.with_shape(idx.shape)]


def gather_nd_shape(data: TensorType, idx: TensorType, batch_dims: int) -> tuple[int, ...]:
    """Result shape of GatherND: the batch dims, the index dims, then the rest of data."""
    if idx.rank < 1 or data.rank < 1:
        raise ShapeError("data and indices must have rank >= 1")
    q = idx.shape[-1]
    if not 0 <= batch_dims < min(data.rank, idx.rank):
        raise ShapeError(f"batch_dims {batch_dims} out of range")
    if data.shape[:batch_dims] != idx.shape[:batch_dims]:
        raise ShapeError(f"batch dims of {data} and {idx} differ")
    if q < 1 or batch_dims + q > data.rank:
        raise ShapeError(f"index depth {q} does not fit data {data}")
    return idx.shape[:-1] + data.shape[batch_dims + q :]


def _gather_nd(types: list[TensorType], attrs: dict[str, Any]) -> list[TensorType]:
    data, idx = types
    _indices(idx)
    return [data.with_shape(gather_nd_shape(data, idx, attrs["batch_dims"]))]


def _scatter_nd(types: list[TensorType], attrs: dict[str, Any]) -> list[TensorType]:
    data, idx, upd = types
    _indices(idx)
    if upd.elem != data.elem:
        raise ShapeError(f"updates {upd} and data {data} differ in element kind")
    if attrs["reduction"] not in SCATTER_REDUCTIONS:
        raise ShapeError(f"unknown reduction '{attrs['reduction']}'")
    q = idx.shape[-1] if idx.rank else 0
    if idx.rank < 1 or q > data.rank:
        raise ShapeError(f"indices {idx} do not index data {data}")
    want = idx.shape[:-1] + data.shape[q:]
    if upd.shape != want:
        raise ShapeError(f"updates {upd} should have shape {list(want)}")
    return [data]


def _scatter_elements(types: list[TensorType], attrs: dict[str, Any]) -> list[TensorType]:
    data, idx, upd = types
    _indices(idx)
    if upd.elem != data.elem or upd.shape != idx.shape or idx.rank != data.rank:
        raise ShapeError(f"updates {upd} must match indices {idx} and data {data}")
    if attrs["reduction"] not in SCATTER_REDUCTIONS:
        raise ShapeError(f"unknown reduction '{attrs['reduction']}'")
    _axis(attrs["axis"], data.rank)
    return [data]


def _arg_top_k(types: list[TensorType], attrs: dict[str, Any]) -> list[TensorType]:
    (x,) = types
    ax = _axis(attrs["axis"], x.rank)
    k = attrs["k"]
    if not 0 <= k <= x.shape[ax]:
        raise ShapeError(f"k = {k} is not in [0, {x.shape[ax]}]")
    shape = list(x.shape)
    shape[ax] = k
    return [TensorType(ElemKind.I64, tuple(shape))]


def parse_einsum(equation: str, ranks: list[int]) -> tuple[list[str], str]:
    """Operand subscripts and output subscripts of an Einsum equation, with '...' expanded to
    capital letters (never used by ONNX subscripts, which are lower case) and the implicit
    output (sorted letters used once, after the ellipsis) made explicit."""
    eq = equation.replace(" ", "")
    lhs, arrow, out = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(ranks):
        raise ShapeError(f"equation '{equation}' names {len(terms)} operands, got {len(ranks)}")
    ell = 0
    for t, r in zip(terms, ranks):
        if "..." in t:
            ell = max(ell, r - (len(t) - 3))
    ell_letters = "".join(chr(ord("A") + i) for i in range(ell))
    subs = []
    for t, r in zip(terms, ranks):
        if "..." in t:
            n = r - (len(t) - 3)
            if n < 0:
                raise ShapeError(f"subscripts '{t}' have more letters than rank {r}")
            t = t.replace("...", ell_letters[ell - n :])
        if len(t) != r or not all(c.isalpha() for c in t):
            raise ShapeError(f"subscripts '{t}' do not match an operand of rank {r}")
        subs.append(t)
    if arrow:
        out = out.replace("...", ell_letters)
    else:
        counts: dict[str, int] = {}
        for t in subs:
            for c in t:
                counts[c] = counts.get(c, 0) + 1
        out = ell_letters + "".join(sorted(c for c, n in counts.items() if n == 1 and c.islower()))
    if len(set(out)) != len(out) or any(c not in "".join(subs) for c in out):
        raise ShapeError(f"output subscripts '{out}' of '{equation}' are invalid")
    return subs, out


def _einsum(types: list[TensorType], attrs: dict[str, Any]) -> list[TensorType]:
    subs, out = parse_einsum(attrs["equation"], [t.rank for t in types])
    if len({t.elem for t in types}) != 1:
        raise ShapeError("operand element kinds differ")
    sizes: dict[str, int] = {}
    for t, s in zip(types, subs):
        for c, d in zip(s, t.shape):
            if sizes.get(c, d) != d and 1 not in (sizes.get(c), d):
                raise ShapeError(f"subscript '{c}' has sizes {sizes[c]} and {d}")
            sizes[c] = max(sizes.get(c, d), d)
    return [TensorType(types[0].elem, tuple(sizes[c] for c in out))]


def _group_norm(types: list[TensorType], attrs: dict[str, Any]) -> list[TensorType]:
    x, scale, bias = types
    g = attrs["num_groups"]
    if x.rank < 2 or g <= 0 or x.shape[1] % g:
        raise ShapeError(f"{g} groups do not divide the channels of {x}")
    for t in (scale, bias):
        if t.shape != (x.shape[1],):
            raise ShapeError(f"parameter {t} does not match {x.shape[1]} channels")
    return [x]


def _max_pool_argmax(types: list[TensorType], attrs: dict[str, Any]) -> list[TensorType]:
    (t,) = _pool(types, attrs)
    return [t.with_elem(ElemKind.I64)]


def _to_bool(types: list[TensorType], attrs: dict[str, Any]) -> list[TensorType]:
    return [types[0].with_elem(ElemKind.BOOL)]


def _rms_norm(types: list[TensorType], attrs: dict[str, Any]) -> list[TensorType]:
    x, scale = types
    ax = _axis(attrs["axis"], x.rank)
    norm = x.shape[ax:]
    if len(scale.shape) > len(norm):
        raise ShapeError(f"scale {scale} has more dims than the normalised shape {norm}")
    return [x]


register(
    OpDef(
        "Mod",
        ("lhs", "rhs"),
        _broadcast,
        {"fmod": Attr("int", 0, "1: C fmod (sign of a); 0: sign of b (integers only)")},
        _ELEM | {"binary"},
        "elementwise",
        "remainder of a / b, broadcasting",
    )
)
register(
    OpDef(
        "Round",
        ("input",),
        _same,
        traits=_ELEM | {"unary"},
        category="elementwise",
        doc="round to nearest, ties to even",
    )
)
for _name, _doc in TRIG:
    register(
        OpDef(
            _name,
            ("input",),
            _same,
            traits=_ELEM | {"unary"},
            category="elementwise",
            doc=_doc,
        )
    )


def _bit_cast(types: list[TensorType], attrs: dict[str, Any]) -> list[TensorType]:
    to = ElemKind.parse(attrs["to"])
    if to.itemsize != types[0].elem.itemsize:
        raise ShapeError(f"bit cast of {types[0].elem.value} to {to.value} changes the size")
    return [types[0].with_elem(to)]


register(
    OpDef(
        "BitCast",
        ("input",),
        _bit_cast,
        {"to": Attr("str")},
        frozenset({"elementwise", "pure"}),
        "elementwise",
        "reinterpret each element's bits as another kind of the same size",
    )
)
register(
    OpDef(
        "IsNaN",
        ("input",),
        _to_bool,
        traits=frozenset({"elementwise", "pure"}),
        category="elementwise",
        doc="x is NaN -> bool",
    )
)
register(
    OpDef(
        "IsInf",
        ("input",),
        _to_bool,
        {"detect_negative": Attr("int", 1), "detect_positive": Attr("int", 1)},
        frozenset({"elementwise", "pure"}),
        "elementwise",
        "x is an infinity of a detected sign -> bool",
    )
)
for _name, _doc in BITWISE:
    register(
        OpDef(
            _name,
            ("lhs", "rhs"),
            _broadcast,
            traits=_ELEM | {"binary", "commutative"},
            category="elementwise",
            doc=_doc + ", broadcasting",
        )
    )
register(
    OpDef(
        "BitwiseNot",
        ("input",),
        _same,
        traits=_ELEM | {"unary"},
        category="elementwise",
        doc="~x",
    )
)
register(
    OpDef(
        "BitShift",
        ("lhs", "rhs"),
        _broadcast,
        {"direction": Attr("str", "LEFT", "LEFT or RIGHT")},
        _ELEM | {"binary"},
        "elementwise",
        "a << b or a >> b (shifts past the width or negative give 0, -1 for negative a >> b)",
    )
)
register(
    OpDef(
        "Trilu",
        ("input",),
        _trilu,
        {"k": Attr("int", 0, "diagonal offset"), "upper": Attr("int", 1)},
        frozenset({"pure"}),
        "tensor",
        "keep the upper (or lower) triangle of the last two dims, zero the rest",
    )
)
for _name, _what in (("CumSum", "sum"), ("CumProd", "product")):
    register(
        OpDef(
            _name,
            ("input",),
            _cumsum,
            {"axis": Attr("int"), "exclusive": Attr("int", 0), "reverse": Attr("int", 0)},
            frozenset({"pure", WIDE_ACCUMULATOR}),
            "reduction",
            f"running {_what} along axis (exclusive: without the element itself; reverse: "
            "from the end)",
        )
    )
register(
    OpDef(
        "GatherElements",
        ("data", "indices"),
        _gather_elements,
        {"axis": Attr("int", 0)},
        frozenset({"pure"}),
        "tensor",
        "out[i] = data[i with dim axis replaced by indices[i]]",
    )
)
register(
    OpDef(
        "GatherND",
        ("data", "indices"),
        _gather_nd,
        {"batch_dims": Attr("int", 0)},
        frozenset({"pure"}),
        "tensor",
        "slices of data at the index tuples in the last dim of indices",
    )
)
register(
    OpDef(
        "ScatterND",
        ("data", "indices", "updates"),
        _scatter_nd,
        {"reduction": Attr("str", "none", ", ".join(SCATTER_REDUCTIONS))},
        frozenset({"pure"}),
        "tensor",
        "data with the slices at the index tuples replaced by (or combined with) updates",
    )
)
register(
    OpDef(
        "ScatterElements",
        ("data", "indices", "updates"),
        _scatter_elements,
        {
            "axis": Attr("int", 0),
            "reduction": Attr("str", "none", ", ".join(SCATTER_REDUCTIONS)),
        },
        frozenset({"pure"}),
        "tensor",
        "data with data[i with dim axis = indices[i]] replaced by (or combined with) updates[i]",
    )
)
register(
    OpDef(
        "ArgTopK",
        ("input",),
        _arg_top_k,
        {
            "k": Attr("int"),
            "axis": Attr("int", -1),
            "largest": Attr("int", 1),
            "sorted": Attr("int", 1),
        },
        frozenset({"pure"}),
        "reduction",
        "indices of the k largest (smallest) along axis, best first, ties by lower index -> i64 "
        "(ONNX TopK's values are GatherElements of them)",
    )
)
register(
    OpDef(
        "MaxPoolArgmax",
        ("input",),
        _max_pool_argmax,
        {
            "kernel": Attr("ints"),
            "strides": Attr("ints", (1, 1)),
            "pads": Attr("ints", (0, 0, 0, 0)),
            "dilations": Attr("ints", (1, 1)),
            "ceil_mode": Attr("int", 0),
            "storage_order": Attr("int", 0, "0: row-major indices, 1: column-major (H fastest)"),
        },
        frozenset({"pure"}),
        "pool",
        "flat input index of each MaxPool window's maximum (first if tied) -> i64",
    )
)
register(
    OpDef(
        "Einsum",
        ("inputs",),
        _einsum,
        {"equation": Attr("str")},
        frozenset({"pure", WIDE_ACCUMULATOR}),
        "matmul",
        "Einstein summation",
        variadic=True,
    )
)
register(
    OpDef(
        "GroupNorm",
        ("input", "scale", "bias"),
        _group_norm,
        {"num_groups": Attr("int"), "epsilon": Attr("float", 1e-5)},
        frozenset({"pure", WIDE_ACCUMULATOR}),
        "norm",
        "normalise each group of channels (with the spatial dims), then per-channel scale, shift",
    )
)
register(
    OpDef(
        "RMSNorm",
        ("input", "scale"),
        _rms_norm,
        {"axis": Attr("int", -1), "epsilon": Attr("float", 1e-5)},
        frozenset({"pure", WIDE_ACCUMULATOR}),
        "norm",
        "x / sqrt(mean(x^2 over dims axis..) + epsilon) * scale",
    )
)
