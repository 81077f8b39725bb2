"""The quantized rows of the graph op table (compiler/graph/ops.py registers them by importing
this): Quantize, Dequantize, RescaleQuantized and the int8 compute ops the quantizer and the
QDQ importer rewrite float nodes into.

A quantized value is an `i8` tensor whose type carries its scale and offset (`i8<1x64:0.02,-3>`,
real = scale * (q - offset)); the type is the one place those live. An op that *defines* a
quantization takes it as attributes (`scale`, `offset`), and type inference builds the result
type from them, so attributes and type cannot disagree. Inputs' parameters are read from their
types. Per-channel weight scales are a float32 operand (one per output channel); such weights
are plain `i8` (offset 0) and biases plain `i32` in units of input scale x weight scale.

`qmin` / `qmax` clamp the integer result: a Relu or Clip folded into the op is that range
(docs/QUANTIZATION.md gives the exact arithmetic every kernel follows).
"""

from __future__ import annotations

from typing import Any

from compiler.errors import ShapeError
from compiler.graph.ops import (
    ACCUMULATE,
    INT_KERNEL,
    REQUANTIZES,
    WIDE_ACCUMULATOR,
    Attr,
    OpDef,
    _conv,
    _matmul,
    _pool,
    all_ops,
    register,
)
from compiler.graph.types import ElemKind, TensorType, broadcast_shapes

#: The integer range of the quantized element kind.
QMIN, QMAX = -128, 127

#: What an op that defines a quantization takes.
_QPARAMS = {
    "scale": Attr("float", doc="real value of one integer step"),
    "offset": Attr("int", doc="the integer that stands for real 0"),
    "qmin": Attr("int", QMIN, "lower clamp of the integer result (a folded Relu/Clip)"),
    "qmax": Attr("int", QMAX, "upper clamp of the integer result"),
}


def is_quantized(t: TensorType) -> bool:
    """An int8 tensor with a scale: the only quantized kind the kernels compute on."""
    return t.elem == ElemKind.I8 and t.scale is not None


def qtype(shape: tuple[int, ...], attrs: dict[str, Any]) -> TensorType:
    """The quantized result type an op's `scale` / `offset` attributes define."""
    scale, offset = float(attrs["scale"]), int(attrs["offset"])
    if not scale > 0:
        raise ShapeError(f"scale {scale} must be positive")
    if not QMIN <= offset <= QMAX:
        raise ShapeError(f"offset {offset} is outside [{QMIN}, {QMAX}]")
    if not QMIN <= attrs.get("qmin", QMIN) <= attrs.get("qmax", QMAX) <= QMAX:
        raise ShapeError(f"clamp [{attrs['qmin']}, {attrs['qmax']}] is not inside the i8 range")
    return TensorType(ElemKind.I8, shape, scale, offset)


def _need_q(t: TensorType, what: str) -> None:
    if not is_quantized(t):
        raise ShapeError(f"{what} must be a quantized i8 tensor, got {t}")


def _need(t: TensorType, elem: ElemKind, what: str, shape: tuple[int, ...] | None = None) -> None:
    if t.elem != elem or t.scale is not None:
        raise ShapeError(f"{what} must be plain {elem.value}, got {t}")
    if shape is not None and t.shape != shape:
        raise ShapeError(f"{what} {t} must have shape {list(shape)}")


def _quantize(types: list[TensorType], attrs: dict[str, Any]) -> list[TensorType]:
    (x,) = types
    if x.elem != ElemKind.F32:
        raise ShapeError(f"quantizes f32, got {x}")
    return [qtype(x.shape, attrs)]


def _dequantize(types: list[TensorType], attrs: dict[str, Any]) -> list[TensorType]:
    (x,) = types
    _need_q(x, "input")
    return [TensorType(ElemKind.F32, x.shape)]


def _dequantize_axis(types: list[TensorType], attrs: dict[str, Any]) -> list[TensorType]:
    x, scales, offsets = types
    if x.elem not in (ElemKind.I8, ElemKind.U8, ElemKind.I32) or x.scale is not None:
        raise ShapeError(f"input must be plain i8, u8 or i32, got {x}")
    if x.rank == 0:
        raise ShapeError("input must have an axis")
    ax = attrs["axis"] % x.rank
    n = x.shape[ax]
    if scales.elem != ElemKind.F32 or scales.shape not in ((n,), (1,)):
        raise ShapeError(f"scales must be f32<{n}> or f32<1>, got {scales}")
    if offsets.elem != ElemKind.I32 or offsets.shape != scales.shape:
        raise ShapeError(f"offsets must be i32 like the scales, got {offsets}")
    return [TensorType(ElemKind.F32, x.shape)]


def _export(types: list[TensorType], attrs: dict[str, Any]) -> list[TensorType]:
    (x,) = types
    _need_q(x, "input")
    if attrs["to"] not in ("i8", "u8"):
        raise ShapeError(f"to must be i8 or u8, not {attrs['to']!r}")
    return [TensorType(ElemKind.parse(attrs["to"]), x.shape)]


def _import(types: list[TensorType], attrs: dict[str, Any]) -> list[TensorType]:
    (x,) = types
    if x.elem not in (ElemKind.I8, ElemKind.U8) or x.scale is not None:
        raise ShapeError(f"input must be plain i8 or u8, got {x}")
    return [qtype(x.shape, attrs)]


def _int_matmul(types: list[TensorType], attrs: dict[str, Any]) -> list[TensorType]:
    a, b = types
    _need_q(a, "lhs")
    _need_q(b, "rhs")
    (t,) = _matmul([a.with_elem(ElemKind.F32), b.with_elem(ElemKind.F32)], attrs)
    return [t.with_elem(ElemKind.I32)]


def _int_conv(types: list[TensorType], attrs: dict[str, Any]) -> list[TensorType]:
    x, w = types
    _need_q(x, "input")
    _need_q(w, "filter")
    k = w.shape[0] if w.rank == 4 else 0
    bias = TensorType(ElemKind.F32, (k,))
    (t,) = _conv([x.with_elem(ElemKind.F32), w.with_elem(ElemKind.F32), bias], attrs)
    return [t.with_elem(ElemKind.I32)]


def _rescale(types: list[TensorType], attrs: dict[str, Any]) -> list[TensorType]:
    (x,) = types
    _need_q(x, "input")
    return [qtype(x.shape, attrs)]


def _channel_scales(s: TensorType, n: int, what: str) -> None:
    if s.elem != ElemKind.F32 or s.shape != (n,):
        raise ShapeError(f"{what} must be f32<{n}>, got {s}")


def _qconv(types: list[TensorType], attrs: dict[str, Any]) -> list[TensorType]:
    x, w, b, ws = types
    _need_q(x, "input")
    _need(w, ElemKind.I8, "filter")
    k = w.shape[0] if w.rank == 4 else 0
    _need(b, ElemKind.I32, "bias", (k,))
    _channel_scales(ws, k, "filter_scales")
    (t,) = _conv([x.with_elem(ElemKind.F32), w.with_elem(ElemKind.F32), b], attrs)
    return [qtype(t.shape, attrs)]


def _qfc(types: list[TensorType], attrs: dict[str, Any]) -> list[TensorType]:
    x, w, b, ws = types
    _need_q(x, "input")
    _need(w, ElemKind.I8, "weights")
    if x.rank != 2 or w.rank != 2 or x.shape[1] != w.shape[0]:
        raise ShapeError(f"expects x[M,K] w[K,N], got {x} and {w}")
    n = w.shape[1]
    _need(b, ElemKind.I32, "bias", (n,))
    _channel_scales(ws, n, "weight_scales")
    return [qtype((x.shape[0], n), attrs)]


def _qmatmul(types: list[TensorType], attrs: dict[str, Any]) -> list[TensorType]:
    a, b = types
    _need_q(a, "lhs")
    _need_q(b, "rhs")
    (t,) = _matmul([a.with_elem(ElemKind.F32), b.with_elem(ElemKind.F32)], attrs)
    return [qtype(t.shape, attrs)]


def _qbinary(types: list[TensorType], attrs: dict[str, Any]) -> list[TensorType]:
    a, b = types
    _need_q(a, "lhs")
    _need_q(b, "rhs")
    return [qtype(broadcast_shapes(a.shape, b.shape), attrs)]


def _qpool(types: list[TensorType], attrs: dict[str, Any]) -> list[TensorType]:
    (x,) = types
    _need_q(x, "input")
    (t,) = _pool([x], attrs)
    return [qtype(t.shape, attrs)]


def _qglobal_pool(types: list[TensorType], attrs: dict[str, Any]) -> list[TensorType]:
    (x,) = types
    _need_q(x, "input")
    if x.rank < 3:
        raise ShapeError(f"expects N x C x spatial input, got {x}")
    return [qtype(x.shape[:2] + (1,) * (x.rank - 2), attrs)]


_PURE = frozenset({"pure"})
_INT = _PURE | {INT_KERNEL}
_REQ = _INT | {REQUANTIZES}

register(
    OpDef(
        "Quantize",
        ("input",),
        _quantize,
        {"scale": _QPARAMS["scale"], "offset": _QPARAMS["offset"]},
        _INT,
        "quantization",
        "f32 -> i8: clamp(round_half_even(x / scale) + offset)",
    )
)
register(
    OpDef(
        "Dequantize",
        ("input",),
        _dequantize,
        traits=_INT,
        category="quantization",
        doc="i8 -> f32: (q - offset) * scale, the input type's parameters",
    )
)
register(
    OpDef(
        "DequantizeAxis",
        ("input", "scales", "offsets"),
        _dequantize_axis,
        {"axis": Attr("int", 0)},
        frozenset({"pure"}),
        "quantization",
        "plain i8/u8/i32 -> f32 with a scale and offset per slice along axis (ONNX DequantizeLinear)",
    )
)
register(
    OpDef(
        "ExportQuantized",
        ("input",),
        _export,
        {"to": Attr("str", "i8", "i8 (the integers as they are) or u8 (offset by 128)")},
        frozenset({"pure"}),
        "quantization",
        "quantized i8 -> the plain integers an ONNX int8 / uint8 output holds",
    )
)
register(
    OpDef(
        "ImportQuantized",
        ("input",),
        _import,
        {"scale": _QPARAMS["scale"], "offset": _QPARAMS["offset"]},
        _INT,
        "quantization",
        "the plain integers of an ONNX int8 / uint8 tensor (uint8 less 128) -> quantized i8",
    )
)
register(
    OpDef(
        "IntMatMul",
        ("lhs", "rhs"),
        _int_matmul,
        traits=_INT | {WIDE_ACCUMULATOR},
        category="matmul",
        doc="int32 sums of (a - offset_a) (b - offset_b) products (ONNX MatMulInteger)",
    )
)
register(
    OpDef(
        "IntConv",
        ("input", "filter"),
        _int_conv,
        {
            "strides": Attr("ints", (1, 1)),
            "pads": Attr("ints", (0, 0, 0, 0), "top, left, bottom, right"),
            "dilations": Attr("ints", (1, 1)),
            "group": Attr("int", 1),
        },
        _INT | {WIDE_ACCUMULATOR},
        "conv",
        "int32 sums of (x - offset_x) (w - offset_w) over each window (ONNX ConvInteger)",
    )
)
register(
    OpDef(
        "RescaleQuantized",
        ("input",),
        _rescale,
        dict(_QPARAMS),
        _REQ,
        "quantization",
        "i8 -> i8 with another scale/offset (and clamp)",
    )
)
register(
    OpDef(
        "QConv",
        ("input", "filter", "bias", "filter_scales"),
        _qconv,
        {
            "strides": Attr("ints", (1, 1)),
            "pads": Attr("ints", (0, 0, 0, 0), "top, left, bottom, right"),
            "dilations": Attr("ints", (1, 1)),
            "group": Attr("int", 1),
            # The sum post-op (compiler/lir/passes/accumulate.py): the parameters of the int8
            # value an accumulating QConv (@inout destination) adds to its result.
            "sum_scale": Attr("float", 0.0, "scale of the value accumulated into (@inout)"),
            "sum_offset": Attr("int", 0, "offset of the value accumulated into (@inout)"),
            **_QPARAMS,
        },
        _REQ | {WIDE_ACCUMULATOR, ACCUMULATE},
        "conv",
        "int8 2-D convolution, NCHW; per-channel filter scales; int32 bias; requantized "
        "(with the accumulated value's real value added first when its destination is @inout)",
    )
)
register(
    OpDef(
        "QFullyConnected",
        ("input", "weights", "bias", "weight_scales"),
        _qfc,
        dict(_QPARAMS),
        _REQ | {WIDE_ACCUMULATOR},
        "matmul",
        "int8 x[M,K] @ w[K,N] + b[N]; per-column weight scales; requantized",
    )
)
register(
    OpDef(
        "QMatMul",
        ("lhs", "rhs"),
        _qmatmul,
        dict(_QPARAMS),
        _REQ | {WIDE_ACCUMULATOR},
        "matmul",
        "int8 matrix product of two quantized tensors (batch dims broadcast); requantized",
    )
)
for _name, _doc in (("QAdd", "a + b"), ("QMul", "a * b")):
    register(
        OpDef(
            _name,
            ("lhs", "rhs"),
            _qbinary,
            dict(_QPARAMS),
            _REQ,
            "elementwise",
            f"int8 {_doc}, broadcasting; requantized",
        )
    )
register(
    OpDef(
        "QAvgPool",
        ("input",),
        _qpool,
        {
            "kernel": Attr("ints"),
            "strides": Attr("ints", (1, 1)),
            "pads": Attr("ints", (0, 0, 0, 0)),
            "ceil_mode": Attr("int", 0),
            "count_include_pad": Attr("int", 0),
            **_QPARAMS,
        },
        _REQ | {WIDE_ACCUMULATOR},
        "pool",
        "int8 2-D average pooling, NCHW; requantized",
    )
)
register(
    OpDef(
        "QGlobalAvgPool",
        ("input",),
        _qglobal_pool,
        dict(_QPARAMS),
        _REQ | {WIDE_ACCUMULATOR},
        "pool",
        "int8 mean over all spatial dims; requantized",
    )
)


def _qlookup(types: list[TensorType], attrs: dict[str, Any]) -> list[TensorType]:
    x, table = types
    _need_q(x, "input")
    _need(table, ElemKind.I8, "table", (QMAX - QMIN + 1,))
    return [qtype(x.shape, attrs)]


register(
    OpDef(
        "QLookup",
        ("input", "table"),
        _qlookup,
        dict(_QPARAMS),
        _INT,
        "activation",
        "int8 -> int8 through a 256-entry table: y = table[x + 128] (an element-wise float "
        "function of the input's real value, quantized at compile time: Tanh, Erf, Sigmoid...)",
    )
)

#: QSoftmax's table: exp(-d * s_in) in units of 2**-SOFTMAX_BITS, d = row max - q in 0..255.
SOFTMAX_BITS = 16


def _qsoftmax(types: list[TensorType], attrs: dict[str, Any]) -> list[TensorType]:
    x, table = types
    _need_q(x, "input")
    _need(table, ElemKind.I32, "table", (QMAX - QMIN + 1,))
    axis = attrs["axis"]
    if not -x.rank <= axis < x.rank:
        raise ShapeError(f"axis {axis} is out of range for {x}")
    if x.shape[axis] << SOFTMAX_BITS >= 1 << 31:
        raise ShapeError(f"softmax over {x.shape[axis]} values overflows the int32 sum")
    return [qtype(x.shape, attrs)]


register(
    OpDef(
        "QSoftmax",
        ("input", "table"),
        _qsoftmax,
        {"axis": Attr("int", -1), **_QPARAMS},
        _INT,
        "activation",
        "int8 softmax along one axis: e = table[row max - x] (int32 exp values), quantized "
        "float32(e) / float32(sum of e) (the sum exact, in any order)",
    )
)

#: The ops whose kernels run on quantized integers (and need their operands' types).
QUANTIZED_OPS = frozenset(n for n, op in all_ops().items() if INT_KERNEL in op.traits)
#: The int8 ops that requantize their result (a Rescale after them folds into their params).
REQUANTIZING = frozenset(n for n, op in all_ops().items() if REQUANTIZES in op.traits)
