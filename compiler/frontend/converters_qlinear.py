"""ONNX quantization ops -> the graph IR's quantized nodes (pipeline stage 1): QuantizeLinear /
DequantizeLinear of int8 / uint8 with constant per-tensor parameters (the QDQ format that
`onnxruntime.quantization` writes; converters_quant.py dispatches here and imports every other
form as integer arithmetic), QLinearConv, QLinearMatMul, ConvInteger.

Quantized tensors are int8 with a scale and offset in their type. A uint8 tensor with zero point
z is the same numbers as int8 with zero point z - 128 (q_i8 = q_u8 - 128, so every rounding and
saturation agrees), which is how uint8 data is imported. QuantizeLinear becomes Quantize;
DequantizeLinear of a quantized value becomes Dequantize; of a weight initializer, a typed int8
constant under a Dequantize, or (per-axis scales, int32 biases) a DequantizeAxis, both kept as
nodes at import so the `fold-qdq` pass (compiler/quantization/qdq.py) can fold the float op
between the pairs into a quantized op; what it does not fold, constant folding turns into float
weights. Scales and zero points must be constants here (dynamic quantization is arithmetic).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx

from compiler.frontend.converters_nn import CONV_ATTRS, _ints, _window_pads
from compiler.frontend.onnx_importer import NodeContext
from compiler.frontend.registry import converter
from compiler.graph.ir import Constant, Value
from compiler.graph.ops_quant import is_quantized
from compiler.graph.types import ElemKind, TensorType
from compiler.kernels.reference_quant import quantize

_ELEM_OF_ONNX = {onnx.TensorProto.INT8: ElemKind.I8, onnx.TensorProto.UINT8: ElemKind.U8}


def _scalar_params(
    ctx: NodeContext, i_scale: int, i_zp: int, what: str, default_u8: bool = True
) -> tuple[float, int, bool]:
    """(scale as float32, zero point as the int8 offset, given as uint8?) of a per-tensor pair."""
    s = np.asarray(ctx.require_const(i_scale, f"{what}_scale"), np.float32)
    if s.size != 1:
        raise ctx.unsupported(f"{what}_scale must be a scalar here (per-tensor), got {s.shape}")
    unsigned = default_u8
    z = 0
    if ctx.has_input(i_zp):
        zd = ctx.require_const(i_zp, f"{what}_zero_point")
        if zd.size != 1:
            raise ctx.unsupported(f"{what}_zero_point must be a scalar, got {zd.shape}")
        if zd.dtype not in (np.int8, np.uint8):
            raise ctx.unsupported(f"{what}_zero_point of type {zd.dtype} (int8 and uint8 only)")
        unsigned = zd.dtype == np.uint8
        z = int(zd.reshape(()))
    scale = float(s.reshape(()))
    if not scale > 0:
        raise ctx.unsupported(f"{what}_scale {scale} is not positive")
    return scale, z - 128 if unsigned else z, unsigned


def _as_int8(data: np.ndarray) -> np.ndarray:
    """uint8 data as the int8 numbers it stands for (q - 128); int8 as it is."""
    if data.dtype == np.uint8:
        return (data.astype(np.int16) - 128).astype(np.int8)
    return np.asarray(data, np.int8)


def _typed_constant(
    ctx: NodeContext, data: np.ndarray, scale: float, offset: int, tag: str
) -> Constant:
    t = TensorType(ElemKind.I8, data.shape, scale, offset)
    return ctx.imp.detached_constant(f"{ctx.name}.{tag}", _as_int8(data), t)


def _check_quantized(ctx: NodeContext, v: Value, scale: float, offset: int, what: str) -> Value:
    """A quantized operand with (scale, offset): a value the graph quantized, or plain int8 /
    uint8 integers (a graph input, a constant) given those parameters."""
    if v.type.elem in (ElemKind.I8, ElemKind.U8) and v.type.scale is None:
        if isinstance(v, Constant) and v.data is not None:
            return _typed_constant(ctx, v.data, scale, offset, what)
        attrs = {"scale": scale, "offset": offset}
        return ctx.create("ImportQuantized", [v], attrs, suffix=f"{what}_q")
    if not is_quantized(v.type):
        raise ctx.unsupported(f"{what} must be int8 or uint8, got {v.type}")
    if (v.type.scale, v.type.offset) != (scale, offset):
        raise ctx.unsupported(
            f"{what} has scale/zero point ({scale}, {offset}) but its producer quantized it "
            f"with ({v.type.scale}, {v.type.offset})"
        )
    return v


def _const_of(ctx: NodeContext, i: int) -> np.ndarray | None:
    """Input i's constant value (None when absent or computed at run time)."""
    return ctx.const(i) if ctx.has_input(i) else None


def takes_quantize_linear(ctx: NodeContext) -> bool:
    """QuantizeLinear to int8 / uint8 of float32 with a constant positive scalar float32 scale
    and a constant scalar zero point: a Quantize node (anything else is arithmetic)."""
    out_dtype = int(ctx.attr("output_dtype", 0) or 0)
    s, z = _const_of(ctx, 1), _const_of(ctx, 2)
    return (
        ctx.inp(0).type.elem == ElemKind.F32
        and int(ctx.attr("block_size", 0) or 0) == 0
        and not ctx.attr("precision")
        and out_dtype in (0, *_ELEM_OF_ONNX)
        and s is not None
        and s.dtype == np.float32
        and s.size == 1
        and float(s.reshape(())) > 0
        and (
            (z is None and not ctx.has_input(2))
            or (z is not None and z.size == 1 and z.dtype in (np.int8, np.uint8))
        )
    )


def quantize_linear(ctx: NodeContext) -> Value:
    """QuantizeLinear as a Quantize node (`takes_quantize_linear` holds)."""
    x = ctx.inp(0)
    out_dtype = int(ctx.attr("output_dtype", 0) or 0)
    scale, offset, _ = _scalar_params(ctx, 1, 2, "y", default_u8=out_dtype != onnx.TensorProto.INT8)
    if isinstance(x, Constant) and x.data is not None:
        t = TensorType(ElemKind.I8, x.type.shape, scale, offset)
        q = quantize(x.data, scale, offset)
        return ctx.imp.detached_constant(f"{ctx.name}.q", q, t)
    return ctx.create("Quantize", [x], {"scale": scale, "offset": offset})


def takes_dequantize_linear(ctx: NodeContext) -> bool:
    """DequantizeLinear of int8 / uint8 / int32 (or of a quantized value) to float32 with
    constant float32 scales (per tensor or per axis) and constant zero points: Dequantize /
    DequantizeAxis nodes (anything else is arithmetic)."""
    x = ctx.inp(0)
    s = _const_of(ctx, 1)
    out = int(ctx.attr("output_dtype", 0) or 0)
    return (
        (x.type.elem in (ElemKind.I8, ElemKind.U8, ElemKind.I32) or is_quantized(x.type))
        and int(ctx.attr("block_size", 0) or 0) == 0
        and out in (0, onnx.TensorProto.FLOAT)
        and s is not None
        and s.dtype == np.float32
        and (not ctx.has_input(2) or _const_of(ctx, 2) is not None)
    )


def dequantize_linear(ctx: NodeContext) -> Value:
    """DequantizeLinear as quantized nodes (`takes_dequantize_linear` holds)."""
    x = ctx.inp(0)
    scales = np.asarray(ctx.require_const(1, "x_scale"), np.float32)
    if isinstance(x, Constant) and x.data is not None:
        data = x.data
        if data.dtype not in (np.int8, np.uint8, np.int32):
            raise ctx.unsupported(f"dequantizes int8, uint8 and int32, got {data.dtype}")
        zps = ctx.require_const(2, "x_zero_point") if ctx.has_input(2) else None
        zps = np.zeros(scales.shape, data.dtype) if zps is None else np.asarray(zps)
        if scales.size == 1 and data.dtype != np.int32:
            offset = int(zps.reshape(-1)[0]) - (128 if data.dtype == np.uint8 else 0)
            c = _typed_constant(ctx, data, float(scales.reshape(-1)[0]), offset, "q")
            return ctx.create("Dequantize", [c], fold=False)
        axis = int(ctx.attr("axis", 1)) % max(1, data.ndim)
        if scales.size not in (1, data.shape[axis]) or zps.size != scales.size:
            raise ctx.unsupported(f"scales {scales.shape} do not match axis {axis} of {data.shape}")
        offsets = zps.reshape(-1).astype(np.int32) - (128 if data.dtype == np.uint8 else 0)
        plain = data if data.dtype == np.int32 else _as_int8(data)
        operands = [
            ctx.imp.detached_constant(f"{ctx.name}.q", np.ascontiguousarray(plain)),
            ctx.constant(scales.reshape(-1), suffix="scales"),
            ctx.constant(offsets, suffix="offsets"),
        ]
        return ctx.create("DequantizeAxis", operands, {"axis": axis}, fold=False)
    if not is_quantized(x.type):
        return _dequantize_plain(ctx, x, scales)
    if scales.size != 1:
        raise ctx.unsupported("per-axis dequantization of a quantized run-time tensor")
    scale, offset, _ = _scalar_params(ctx, 1, 2, "x")
    return ctx.create("Dequantize", [_check_quantized(ctx, x, scale, offset, "x")])


def _dequantize_plain(ctx: NodeContext, x: Value, scales: np.ndarray) -> Value:
    """DequantizeLinear of plain integers computed at run time (a graph input, a Cast)."""
    if x.type.elem not in (ElemKind.I8, ElemKind.U8, ElemKind.I32):
        raise ctx.unsupported(f"dequantizes int8, uint8 and int32, got {x.type}")
    zps = ctx.require_const(2, "x_zero_point") if ctx.has_input(2) else None
    zps = np.zeros(scales.shape, np.int32) if zps is None else np.asarray(zps)
    axis = int(ctx.attr("axis", 1)) % max(1, x.type.rank)
    if x.type.rank == 0 or scales.size not in (1, x.type.shape[axis]) or zps.size != scales.size:
        if x.type.rank == 0 and scales.size == 1:
            x = ctx.create("Reshape", [x], {"shape": (1,)}, suffix="as1d")
            axis = 0
            out = ctx.create(
                "DequantizeAxis",
                [
                    x,
                    ctx.constant(scales.reshape(-1), suffix="scales"),
                    ctx.constant(zps.reshape(-1).astype(np.int32), suffix="offsets"),
                ],
                {"axis": 0},
            )
            return ctx.create("Reshape", [out], {"shape": ()})
        raise ctx.unsupported(f"scales {scales.shape} do not match axis {axis} of {x.type}")
    operands = [
        x,
        ctx.constant(scales.reshape(-1), suffix="scales"),
        ctx.constant(zps.reshape(-1).astype(np.int32), suffix="offsets"),
    ]
    return ctx.create("DequantizeAxis", operands, {"axis": axis})


def _weights(
    ctx: NodeContext, i: int, i_scale: int, i_zp: int, n: int
) -> tuple[np.ndarray, np.ndarray]:
    """A constant int8/uint8 weight with per-tensor or per-output-channel scales: (int8 data
    with offset 0, float32 scales [n])."""
    w = ctx.require_const(i, "w")
    s = np.asarray(ctx.require_const(i_scale, "w_scale"), np.float32).reshape(-1)
    z = ctx.const(i_zp)
    z = np.zeros(s.shape, w.dtype) if z is None else np.asarray(z).reshape(-1)
    if w.dtype not in (np.int8, np.uint8):
        raise ctx.unsupported(f"weights of type {w.dtype} (int8 and uint8 only)")
    offsets = z.astype(np.int32) - (128 if w.dtype == np.uint8 else 0)
    if np.any(offsets != 0):
        raise ctx.unsupported("weights with a zero point other than 0 (int8) or 128 (uint8)")
    if s.size not in (1, n):
        raise ctx.unsupported(f"w_scale has {s.size} values for {n} output channels")
    return _as_int8(w), np.broadcast_to(s, (n,)).astype(np.float32)


def _conv2d_attrs(ctx: NodeContext, x: Value, kernel: list[int]) -> dict[str, Any]:
    """The graph Conv attributes (strides, dilations, explicit pads, group) of a 2-D conv node."""
    strides, dilations = _ints(ctx, "strides", 2, 1), _ints(ctx, "dilations", 2, 1)
    return {
        "strides": strides,
        "dilations": dilations,
        "pads": _window_pads(ctx, list(x.type.shape[2:]), kernel, strides, dilations),
        "group": int(ctx.attr("group", 1)),
    }


@converter("QLinearConv")
def convert_qlinear_conv(ctx: NodeContext) -> list[Value | None]:
    ctx.check_attrs(CONV_ATTRS)
    x_scale, x_off, _ = _scalar_params(ctx, 1, 2, "x")
    x = _check_quantized(ctx, ctx.inp(0), x_scale, x_off, "x")
    w_arr = ctx.require_const(3, "w")
    k = w_arr.shape[0]
    w, ws = _weights(ctx, 3, 4, 5, k)
    y_scale, y_off, _ = _scalar_params(ctx, 6, 7, "y")
    bias = ctx.const(8) if ctx.has_input(8) else np.zeros(k, np.int32)
    if bias is None or bias.dtype != np.int32:
        raise ctx.unsupported("B must be a constant int32 tensor")
    if x.type.rank != 4:
        raise ctx.unsupported(f"{x.type.rank - 2}-D convolution (2-D only)")
    attrs = {
        **_conv2d_attrs(ctx, x, list(w.shape[2:])),
        "scale": y_scale,
        "offset": y_off,
    }
    operands = [
        x,
        ctx.imp.detached_constant(f"{ctx.name}.w", np.ascontiguousarray(w)),
        ctx.imp.detached_constant(f"{ctx.name}.b", np.ascontiguousarray(bias.reshape(k))),
        ctx.constant(ws, suffix="w_scales"),
    ]
    return [ctx.create("QConv", operands, attrs)]


@converter("QLinearMatMul")
def convert_qlinear_matmul(ctx: NodeContext) -> list[Value | None]:
    ctx.check_attrs({})
    a_scale, a_off, _ = _scalar_params(ctx, 1, 2, "a")
    a = _check_quantized(ctx, ctx.inp(0), a_scale, a_off, "a")
    y_scale, y_off, _ = _scalar_params(ctx, 6, 7, "y")
    b = ctx.inp(3)
    if isinstance(b, Constant) and b.data is not None and b.type.rank == 2 and _per_column(ctx):
        n = b.type.shape[1]
        w, ws = _weights(ctx, 3, 4, 5, n)
        kk = w.shape[0]
        rows = a
        if a.type.rank != 2:
            rows = ctx.create("Reshape", [a], {"shape": (a.type.numel // kk, kk)}, suffix="rows")
        operands = [
            rows,
            ctx.imp.detached_constant(f"{ctx.name}.w", np.ascontiguousarray(w)),
            ctx.constant(np.zeros(n, np.int32), suffix="bias"),
            ctx.constant(ws, suffix="w_scales"),
        ]
        y = ctx.create(
            "QFullyConnected", operands, {"scale": y_scale, "offset": y_off}, suffix="fc"
        )
        if a.type.rank != 2:
            y = ctx.create("Reshape", [y], {"shape": a.type.shape[:-1] + (n,)})
        return [y]
    b_scale, b_off, _ = _scalar_params(ctx, 4, 5, "b")
    b = _check_quantized(ctx, b, b_scale, b_off, "b")
    return [ctx.create("QMatMul", [a, b], {"scale": y_scale, "offset": y_off})]


def _per_column(ctx: NodeContext) -> bool:
    """QLinearMatMul's b zero point is 0 (int8) or 128 (uint8): a weight for QFullyConnected."""
    z = ctx.const(5)
    b = ctx.const(3)
    if z is None or b is None:
        return z is None
    return bool(np.all(z.astype(np.int32) == (128 if b.dtype == np.uint8 else 0)))


def _int_operand(ctx: NodeContext, i: int, i_zp: int, what: str) -> Value:
    """An operand of ConvInteger as a quantized value with scale 1."""
    v = ctx.inp(i)
    if v.type.elem not in (ElemKind.I8, ElemKind.U8) or v.type.scale is not None:
        raise ctx.unsupported(f"{what} must be int8 or uint8, got {v.type}")
    z = 0
    if ctx.has_input(i_zp):
        zd = ctx.require_const(i_zp, f"{what}_zero_point")
        if zd.size != 1:
            raise ctx.unsupported(f"per-channel {what}_zero_point")
        z = int(zd.reshape(-1)[0])
    offset = z - 128 if v.type.elem == ElemKind.U8 else z
    return _check_quantized(ctx, v, 1.0, offset, what)


@converter("ConvInteger")
def convert_conv_integer(ctx: NodeContext) -> list[Value | None]:
    ctx.check_attrs(CONV_ATTRS)
    x, w = _int_operand(ctx, 0, 2, "x"), _int_operand(ctx, 1, 3, "w")
    if x.type.rank != 4 or w.type.rank != 4:
        raise ctx.unsupported(f"{x.type.rank - 2}-D convolution (2-D only)")
    return [ctx.create("IntConv", [x, w], _conv2d_attrs(ctx, x, list(w.type.shape[2:])))]


__all__ = [
    "convert_conv_integer",
    "convert_qlinear_conv",
    "convert_qlinear_matmul",
    "dequantize_linear",
    "quantize_linear",
    "takes_dequantize_linear",
    "takes_quantize_linear",
]
