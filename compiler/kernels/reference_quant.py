"""Reference kernels of the quantized ops, and the exact integer arithmetic they define.

Part of `compiler.kernels.reference` (which registers `QUANT_KERNELS`). Both executors follow
this arithmetic bit for bit; the LLVM emitters (compiler/backends/llvm/emitters/quant.py) use
the same compile-time constants (`multipliers`, `clamp_bounds`). The definitions:

- quantize:   q = clamp_f(x / s) rounded half to even, + z, where clamp_f bounds x / s to
  [qmin - z, qmax - z] in float32 (a NaN becomes qmin - z); `/` is the float32 division.
- dequantize: x = float32(q - z) * s.
- requantize (every op with an int32 accumulator `acc` and a float32 multiplier `m`):
  q = clamp_f(float32(acc) * m) rounded half to even, + z, clamped as above. `float32(acc)` is
  the round-to-nearest-even conversion, `*` one float32 multiply (never fused with anything).
- multipliers are float32: m = (s_in * s_w) / s_out evaluated in float32 (onnxruntime's order).
- accumulators are int32 sums of (q - z) products; biases are int32 added to them.
- the sum post-op (a QConv accumulating into the int8 value r of a residual add, its
  destination `@inout`): q = clamp_f(float32(acc) * m + float32(r - z_r) * m_r) rounded half to
  even, + z, with m_r = s_r / s_out in float32: two float32 multiplies and one add, in that
  order (one rounding to int8 where the unfused QConv -> QAdd rounds twice).

This is onnxruntime's requantization (MLAS: float multiply, round to nearest even), so models
quantized by onnxruntime run to the same integers where the two compute the same sums.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from compiler.graph.ops_quant import QMAX, QMIN, SOFTMAX_BITS
from compiler.graph.types import TensorType
from compiler.kernels.reference_nn import (
    _pad_nchw,
    _pool_geometry,
    _windows,
    avg_pool_counts,
)
from compiler.kernels.reference_nn import conv as _float_conv

Arrays = list[np.ndarray]
Attrs = dict[str, Any]
Types = Sequence[TensorType]
#: A typed kernel: (inputs, attrs, operand types, result types) -> results.
TypedKernel = Callable[[Arrays, Attrs, Types, Types], Arrays]
QUANT_KERNELS: dict[str, TypedKernel] = {}

F32 = np.float32


def _k(name: str) -> Callable[[TypedKernel], TypedKernel]:
    def deco(fn: TypedKernel) -> TypedKernel:
        QUANT_KERNELS[name] = fn
        return fn

    return deco


# -- the arithmetic ---------------------------------------------------------------------------


def clamp_bounds(offset: int, qmin: int = QMIN, qmax: int = QMAX) -> tuple[np.float32, np.float32]:
    """The float32 interval a scaled value is clamped to before rounding: [qmin - z, qmax - z]."""
    return F32(qmin - offset), F32(qmax - offset)


def _round_to_q(y: np.ndarray, offset: int, qmin: int, qmax: int) -> np.ndarray:
    lo, hi = clamp_bounds(offset, qmin, qmax)
    y = np.where(y > lo, y, lo)  # NaN > lo is false: NaN becomes the lower bound
    y = np.where(y < hi, y, hi)
    return (np.rint(y).astype(np.int32) + np.int32(offset)).astype(np.int8)


def quantize(
    x: npt.ArrayLike, scale: float, offset: int, qmin: int = QMIN, qmax: int = QMAX
) -> np.ndarray:
    """float32 -> int8 (see the module docstring)."""
    with np.errstate(all="ignore"):
        return _round_to_q(np.asarray(x, dtype=F32) / F32(scale), offset, qmin, qmax)


def dequantize(q: np.ndarray, scale: float, offset: int) -> np.ndarray:
    return (q.astype(np.int32) - np.int32(offset)).astype(F32) * F32(scale)


def requantize(
    acc: np.ndarray, mult: np.ndarray | np.float32, offset: int, qmin: int, qmax: int
) -> np.ndarray:
    """int32 accumulators -> int8 (`mult` broadcasts against `acc`, per channel or scalar)."""
    with np.errstate(all="ignore"):
        y = acc.astype(np.int32).astype(F32) * np.asarray(mult, dtype=F32)
    return _round_to_q(y, offset, qmin, qmax)


def multipliers(in_scale: float, w_scales: np.ndarray | float, out_scale: float) -> np.ndarray:
    """float32 (s_in * s_w) / s_out, per weight scale (the requantization of conv / matmul)."""
    with np.errstate(all="ignore"):
        return (F32(in_scale) * np.asarray(w_scales, dtype=F32)) / F32(out_scale)


def multiplier(in_scale: float, w_scale: float, out_scale: float) -> np.float32:
    """float32 (s_a * s_b) / s_out for one pair of scalar scales (QMatMul, QMul)."""
    with np.errstate(all="ignore"):
        return (F32(in_scale) * F32(w_scale)) / F32(out_scale)


def ratio(a: float, b: float) -> np.float32:
    """float32 a / b: the multiplier of a rescale, an add's operands or a pool."""
    return F32(a) / F32(b)


def _params(t: TensorType) -> tuple[float, int]:
    assert t.scale is not None and t.offset is not None, t
    return t.scale, t.offset


def _centered(q: np.ndarray, offset: int) -> np.ndarray:
    """q - z as float64: products and sums of these stay exact integers (|sum| < 2**53)."""
    return q.astype(np.float64) - float(offset)


def _exact_int32(acc: np.ndarray) -> np.ndarray:
    """Exact integer float64 sums -> int32 (wrapping like the machine's int32 adds)."""
    return np.rint(acc).astype(np.int64).astype(np.int32)


# -- kernels ----------------------------------------------------------------------------------


@_k("Quantize")
def _quantize(ins: Arrays, attrs: Attrs, in_types: Types, out_types: Types) -> Arrays:
    return [quantize(ins[0], attrs["scale"], attrs["offset"])]


@_k("Dequantize")
def _dequantize(ins: Arrays, attrs: Attrs, in_types: Types, out_types: Types) -> Arrays:
    return [dequantize(ins[0], *_params(in_types[0]))]


def _dequantize_axis(ins: list[np.ndarray], attrs: dict[str, Any]) -> list[np.ndarray]:
    x, scales, offsets = ins
    shape = [1] * x.ndim
    shape[attrs["axis"] % x.ndim] = -1
    z = offsets.astype(np.int64).reshape(shape)
    return [(x.astype(np.int64) - z).astype(F32) * scales.astype(F32).reshape(shape)]


def _export_quantized(ins: list[np.ndarray], attrs: dict[str, Any]) -> list[np.ndarray]:
    (q,) = ins
    if attrs["to"] == "u8":
        return [(q.astype(np.int16) + 128).astype(np.uint8)]
    return [q.astype(np.int8)]


#: Quantization ops whose kernels need no operand types (registered like any other kernel).
PLAIN_KERNELS = {"DequantizeAxis": _dequantize_axis, "ExportQuantized": _export_quantized}


@_k("ImportQuantized")
def _import_quantized(ins: Arrays, attrs: Attrs, in_types: Types, out_types: Types) -> Arrays:
    (x,) = ins
    if x.dtype == np.uint8:
        return [(x.astype(np.int16) - 128).astype(np.int8)]
    return [x.astype(np.int8)]


@_k("IntMatMul")
def _int_matmul(ins: Arrays, attrs: Attrs, in_types: Types, out_types: Types) -> Arrays:
    (_, za), (_, zb) = _params(in_types[0]), _params(in_types[1])
    return [_exact_int32(np.matmul(_centered(ins[0], za), _centered(ins[1], zb)))]


@_k("IntConv")
def _int_conv(ins: Arrays, attrs: Attrs, in_types: Types, out_types: Types) -> Arrays:
    x, w = ins
    (_, zx), (_, zw) = _params(in_types[0]), _params(in_types[1])
    w0 = (w.astype(np.int32) - zw).astype(np.int64)
    return [conv_accumulate(x, zx, w0, attrs)]


@_k("QLookup")
def _qlookup(ins: Arrays, attrs: Attrs, in_types: Types, out_types: Types) -> Arrays:
    x, table = ins
    return [table[x.astype(np.int32) - np.int32(QMIN)]]


def lookup_table(
    fn: Callable[[np.ndarray], np.ndarray], x: TensorType, y: TensorType
) -> np.ndarray:
    """QLookup's table of a float function: every int8 input dequantized (x's parameters),
    `fn` applied in float32, the result quantized (y's): table[q + 128] = Q_y(fn(D_x(q)))."""
    qs = np.arange(QMIN, QMAX + 1, dtype=np.int32).astype(np.int8)
    sx, zx = _params(x)
    sy, zy = _params(y)
    with np.errstate(all="ignore"):
        ys = np.asarray(fn(dequantize(qs, sx, zx)), dtype=F32)
    return quantize(ys, sy, zy)


@_k("QSoftmax")
def _qsoftmax(ins: Arrays, attrs: Attrs, in_types: Types, out_types: Types) -> Arrays:
    x, table = ins[0].astype(np.int32), ins[1]
    ax = attrs["axis"]
    e = table[np.max(x, axis=ax, keepdims=True) - x]
    s = np.sum(e, axis=ax, keepdims=True, dtype=np.int32)  # exact: the op type checks its size
    with np.errstate(all="ignore"):
        p = e.astype(F32) / s.astype(F32)
    return [quantize(p, attrs["scale"], attrs["offset"], attrs["qmin"], attrs["qmax"])]


def softmax_table(x: TensorType) -> np.ndarray:
    """QSoftmax's table for input parameters x: round(exp(-d * s) * 2**SOFTMAX_BITS)."""
    d = np.arange(QMAX - QMIN + 1, dtype=np.float64)
    s, _ = _params(x)
    return np.rint(np.exp(-d * float(np.float32(s))) * (1 << SOFTMAX_BITS)).astype(np.int32)


@_k("RescaleQuantized")
def _rescale(ins: Arrays, attrs: Attrs, in_types: Types, out_types: Types) -> Arrays:
    s_in, z_in = _params(in_types[0])
    acc = ins[0].astype(np.int32) - np.int32(z_in)
    m = ratio(s_in, attrs["scale"])
    return [requantize(acc, m, attrs["offset"], attrs["qmin"], attrs["qmax"])]


def conv_accumulate(x: np.ndarray, z_in: int, w: np.ndarray, attrs: dict[str, Any]) -> np.ndarray:
    """int32 sums of (x - z_in) * w over each window (padding contributes 0)."""
    k = w.shape[0]
    conv_attrs = {key: attrs[key] for key in ("strides", "pads", "dilations", "group")}
    (acc,) = _float_conv(
        [_centered(x, z_in), w.astype(np.float64), np.zeros(k, np.float64)], conv_attrs
    )
    return _exact_int32(acc)


@_k("QConv")
def _qconv(ins: Arrays, attrs: Attrs, in_types: Types, out_types: Types) -> Arrays:
    x, w, bias, w_scales = ins
    s_in, z_in = _params(in_types[0])
    acc = conv_accumulate(x, z_in, w, attrs) + bias.reshape(1, -1, 1, 1)
    m = multipliers(s_in, w_scales, attrs["scale"]).reshape(1, -1, 1, 1)
    return [requantize(acc, m, attrs["offset"], attrs["qmin"], attrs["qmax"])]


def qconv_accumulating(ins: Arrays, attrs: Attrs, in_types: Types, r: np.ndarray) -> np.ndarray:
    """QConv with the sum post-op: its result added to the int8 value `r` (parameters
    `sum_scale`, `sum_offset`) before the one rounding (module docstring)."""
    x, w, bias, w_scales = ins
    s_in, z_in = _params(in_types[0])
    acc = conv_accumulate(x, z_in, w, attrs) + bias.reshape(1, -1, 1, 1)
    m = multipliers(s_in, w_scales, attrs["scale"]).reshape(1, -1, 1, 1)
    m_r = ratio(attrs["sum_scale"], attrs["scale"])
    with np.errstate(all="ignore"):
        y = acc.astype(np.int32).astype(F32) * m
        y = y + (r.astype(np.int32) - np.int32(attrs["sum_offset"])).astype(F32) * m_r
    return _round_to_q(y, attrs["offset"], attrs["qmin"], attrs["qmax"])


#: Quantized ops with the sum post-op, by op: (inputs, attrs, operand types, the int8 value
#: accumulated into) -> the result (the arena interpreter runs `@inout` destinations with it).
ACCUMULATING_KERNELS = {"QConv": qconv_accumulating}


@_k("QFullyConnected")
def _qfc(ins: Arrays, attrs: Attrs, in_types: Types, out_types: Types) -> Arrays:
    x, w, bias, w_scales = ins
    s_in, z_in = _params(in_types[0])
    acc = _exact_int32(_centered(x, z_in) @ w.astype(np.float64)) + bias
    m = multipliers(s_in, w_scales, attrs["scale"])
    return [requantize(acc, m, attrs["offset"], attrs["qmin"], attrs["qmax"])]


@_k("QMatMul")
def _qmatmul(ins: Arrays, attrs: Attrs, in_types: Types, out_types: Types) -> Arrays:
    (sa, za), (sb, zb) = _params(in_types[0]), _params(in_types[1])
    acc = _exact_int32(np.matmul(_centered(ins[0], za), _centered(ins[1], zb)))
    m = multiplier(sa, sb, attrs["scale"])
    return [requantize(acc, m, attrs["offset"], attrs["qmin"], attrs["qmax"])]


@_k("QAdd")
def _qadd(ins: Arrays, attrs: Attrs, in_types: Types, out_types: Types) -> Arrays:
    (sa, za), (sb, zb) = _params(in_types[0]), _params(in_types[1])
    ma, mb = ratio(sa, attrs["scale"]), ratio(sb, attrs["scale"])
    a = (ins[0].astype(np.int32) - np.int32(za)).astype(F32) * ma
    b = (ins[1].astype(np.int32) - np.int32(zb)).astype(F32) * mb
    return [_round_to_q(a + b, attrs["offset"], attrs["qmin"], attrs["qmax"])]


@_k("QMul")
def _qmul(ins: Arrays, attrs: Attrs, in_types: Types, out_types: Types) -> Arrays:
    (sa, za), (sb, zb) = _params(in_types[0]), _params(in_types[1])
    acc = (ins[0].astype(np.int32) - np.int32(za)) * (ins[1].astype(np.int32) - np.int32(zb))
    m = multiplier(sa, sb, attrs["scale"])
    return [requantize(acc, m, attrs["offset"], attrs["qmin"], attrs["qmax"])]


def _pool_result(
    sums: np.ndarray, counts: np.ndarray | float, m: np.float32, attrs: Attrs
) -> np.ndarray:
    """(float32(sum) * m) / float32(count), then rounded as every requantization is."""
    with np.errstate(all="ignore"):
        y = (sums.astype(np.int32).astype(F32) * m) / np.asarray(counts, dtype=F32)
    return _round_to_q(y, attrs["offset"], attrs["qmin"], attrs["qmax"])


@_k("QAvgPool")
def _qavgpool(ins: Arrays, attrs: Attrs, in_types: Types, out_types: Types) -> Arrays:
    (x,) = ins
    s_in, z_in = _params(in_types[0])
    oh, ow, extra = _pool_geometry(x, attrs, (1, 1))
    kh, kw = attrs["kernel"]
    sh, sw = attrs["strides"]
    xp = _pad_nchw(x.astype(np.int32) - np.int32(z_in), attrs["pads"], 0, extra)
    sums = _windows(xp, kh, kw, sh, sw, 1, 1, oh, ow).sum(axis=(4, 5), dtype=np.int64)
    counts = avg_pool_counts(x.shape, attrs, np.float32)
    return [_pool_result(sums, counts, ratio(s_in, attrs["scale"]), attrs)]


@_k("QGlobalAvgPool")
def _qglobal_avgpool(ins: Arrays, attrs: Attrs, in_types: Types, out_types: Types) -> Arrays:
    (x,) = ins
    s_in, z_in = _params(in_types[0])
    axes = tuple(range(2, x.ndim))
    sums = (x.astype(np.int64) - z_in).sum(axis=axes, keepdims=True)
    count = int(np.prod(x.shape[2:]))
    return [_pool_result(sums, count, ratio(s_in, attrs["scale"]), attrs)]


__all__ = [
    "ACCUMULATING_KERNELS",
    "PLAIN_KERNELS",
    "QUANT_KERNELS",
    "clamp_bounds",
    "conv_accumulate",
    "dequantize",
    "lookup_table",
    "multiplier",
    "multipliers",
    "qconv_accumulating",
    "quantize",
    "ratio",
    "requantize",
    "softmax_table",
]
