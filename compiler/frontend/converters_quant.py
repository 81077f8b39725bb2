"""ONNX quantization ops -> graph IR primitives (the integer element types make them plain
arithmetic): DequantizeLinear is (x - zero_point) * scale computed in float32; QuantizeLinear is
round-half-to-even(x / scale) + zero_point, saturated to the output type's range;
DynamicQuantizeLinear computes uint8 scale and zero point from the tensor's range first.

Scales and zero points are per tensor, per axis (1-D along `axis`) or blocked (`block_size`
along `axis`, each value repeated over its block).

int8 / uint8 with constant per-tensor (per-axis for dequantization) parameters, the QDQ form
`onnxruntime.quantization` writes, becomes the quantized nodes of converters_qlinear.py instead
(Quantize, Dequantize, DequantizeAxis), which the quantization passes fold into int8 kernels; the
numbers are the same (x / scale in float32, rounded half to even, saturated).
"""

from __future__ import annotations

import math

import numpy as np

from compiler.frontend.converters_math import FLOAT_ONLY, INT_ONLY, check_elem
from compiler.frontend.converters_qlinear import (
    dequantize_linear,
    quantize_linear,
    takes_dequantize_linear,
    takes_quantize_linear,
)
from compiler.frontend.converters_tensor import cast, norm_axis, reshape
from compiler.frontend.onnx_importer import ONNX_TO_ELEM, NodeContext, dtype_name
from compiler.frontend.registry import converter
from compiler.graph.ir import Value
from compiler.graph.ops_quant import is_quantized
from compiler.graph.types import FLOAT8_KINDS, NARROW_KINDS, ElemKind


def _cast(ctx: NodeContext, v: Value, elem: ElemKind, tag: str) -> Value:
    if v.type.elem == elem:
        return v
    return ctx.create("Cast", [v], {"to": elem.value}, suffix=tag)


def _along(
    ctx: NodeContext, v: Value, shape: tuple[int, ...], axis: int, block: int, tag: str
) -> Value:
    """A scale / zero point shaped to broadcast against `shape` (per tensor, axis or block)."""
    rank = len(shape)
    if v.type.numel == 1:
        return reshape(ctx, v, (), f"{tag}_scalar")
    axis = norm_axis(ctx, axis, rank)  # only a per-axis or blocked value needs a valid axis
    if not block:
        if v.type.rank != 1 or v.type.shape[0] != shape[axis]:
            raise ctx.unsupported(f"{tag} {v.type} does not match dim {axis} of {list(shape)}")
        dims = [1] * rank
        dims[axis] = shape[axis]
        return reshape(ctx, v, tuple(dims), f"{tag}_axis")
    n = v.type.shape[axis] if v.type.rank == rank else -1
    if n != math.ceil(shape[axis] / block) or any(
        d != s for i, (d, s) in enumerate(zip(v.type.shape, shape)) if i != axis
    ):
        raise ctx.unsupported(f"{tag} {v.type} does not block dim {axis} of {list(shape)}")
    split = v.type.shape[: axis + 1] + (1,) + v.type.shape[axis + 1 :]
    spread = split[: axis + 1] + (block,) + split[axis + 2 :]
    rep = ctx.create(
        "Broadcast",
        [reshape(ctx, v, split, f"{tag}_blocks")],
        {"shape": spread},
        suffix=f"{tag}_rep",
    )
    flat = list(shape)
    flat[axis] = n * block
    full = reshape(ctx, rep, tuple(flat), f"{tag}_flat")
    if n * block == shape[axis]:
        return full
    ends = list(shape)
    return ctx.create(
        "Slice", [full], {"starts": [0] * rank, "ends": ends, "steps": [1] * rank}, suffix=tag
    )


def _layout(ctx: NodeContext, x: Value) -> tuple[int, int]:
    return int(ctx.attr("axis", 1)), int(ctx.attr("block_size", 0))


@converter("DequantizeLinear")
def convert_dequantize(ctx: NodeContext) -> list[Value | None]:
    ctx.check_attrs({"axis": None, "block_size": None, "output_dtype": None})
    if takes_dequantize_linear(ctx):
        return [dequantize_linear(ctx)]
    x, scale = ctx.inp(0), ctx.inp(1)
    if is_quantized(x.type):  # its integers are not the ONNX ones (uint8 is int8 + 128)
        raise ctx.unsupported(f"this dequantization of a quantized value ({x.type})")
    check_elem(ctx, x, INT_ONLY + NARROW_KINDS)
    check_elem(ctx, scale, FLOAT_ONLY, "scale")
    axis, block = _layout(ctx, x)
    shape = x.type.shape
    dx = _cast(ctx, x, ElemKind.F32, "x_f32")
    if ctx.has_input(2):
        zp = ctx.inp(2)
        if zp.type.elem != x.type.elem:
            raise ctx.unsupported(f"zero point {zp.type} and input {x.type} differ in type")
        zp = _along(ctx, _cast(ctx, zp, ElemKind.F32, "zp_f32"), shape, axis, block, "zero_point")
        dx = ctx.create("Sub", [dx, zp], suffix="centered")
    s = _along(ctx, _cast(ctx, scale, ElemKind.F32, "scale_f32"), shape, axis, block, "scale")
    y = ctx.create("Mul", [dx, s], suffix="scaled")
    out = scale.type.elem
    if ctx.attr("output_dtype"):
        out = ONNX_TO_ELEM.get(int(ctx.attr("output_dtype")), out)
    return [_cast(ctx, y, out, "y")]


_RANGE = {
    ElemKind.U8: (0, 255),
    ElemKind.I8: (-128, 127),
    ElemKind.U16: (0, 65535),
    ElemKind.I16: (-32768, 32767),
    ElemKind.U4: (0, 15),
    ElemKind.I4: (-8, 7),
    ElemKind.U2: (0, 3),
    ElemKind.I2: (-2, 1),
}
#: Float quantized types: x / scale rounded to nearest even into the type (float8 saturating
#: unless told otherwise, its zero point taken as 0 as ONNX requires; float4 always saturates).
_FLOAT_OUT = (*FLOAT8_KINDS, ElemKind.F4E2M1)


def _quantize(
    ctx: NodeContext, x: Value, scale: Value, zp: Value | None, out: ElemKind, axis: int, block: int
) -> Value:
    """saturate(rint(x / scale) + zp), the division in the wider of x's and scale's types."""
    wide = ElemKind.F64 if ElemKind.F64 in (x.type.elem, scale.type.elem) else ElemKind.F32
    if x.type.elem == scale.type.elem:
        wide = x.type.elem
    xs = _cast(ctx, x, wide, "x_wide")
    s = _along(ctx, _cast(ctx, scale, wide, "scale_wide"), x.type.shape, axis, block, "scale")
    q = ctx.create("Round", [ctx.create("Div", [xs, s], suffix="ratio")], suffix="rounded")
    qi = _cast(ctx, q, ElemKind.I32, "rounded_i32")
    if zp is not None:
        zpi = _along(ctx, _cast(ctx, zp, ElemKind.I32, "zp_i32"), x.type.shape, axis, block, "zp")
        qi = ctx.create("Add", [qi, zpi], suffix="shifted")
    lo, hi = _RANGE[out]
    qi = ctx.create("Max", [qi, ctx.constant(np.array(lo, np.int32), suffix="qmin")], suffix="lo")
    qi = ctx.create("Min", [qi, ctx.constant(np.array(hi, np.int32), suffix="qmax")], suffix="hi")
    return _cast(ctx, qi, out, "y")


@converter("QuantizeLinear")
def convert_quantize(ctx: NodeContext) -> list[Value | None]:
    ctx.check_attrs(
        {
            "axis": None,
            "block_size": None,
            "output_dtype": None,
            "saturate": None,
            "precision": None,
        }
    )
    if takes_quantize_linear(ctx):
        return [quantize_linear(ctx)]
    x, scale = ctx.inp(0), ctx.inp(1)
    check_elem(ctx, x, FLOAT_ONLY)
    check_elem(ctx, scale, FLOAT_ONLY, "scale")
    zp = ctx.inp(2) if ctx.has_input(2) else None
    code = ctx.attr("output_dtype")
    if zp is not None:
        out = zp.type.elem
    elif code:
        if int(code) not in ONNX_TO_ELEM:
            raise ctx.unsupported(f"output_dtype {dtype_name(int(code))}")
        out = ONNX_TO_ELEM[int(code)]
    else:
        out = ElemKind.U8
    if out not in _RANGE and out not in _FLOAT_OUT:
        supported = [k.value for k in (*_RANGE, *_FLOAT_OUT)]
        raise ctx.unsupported(f"quantized type {out.value} (supported: {', '.join(supported)})")
    if ctx.attr("precision"):
        raise ctx.unsupported("attribute 'precision'")
    axis, block = _layout(ctx, x)
    if out in _FLOAT_OUT:
        return [_quantize_float(ctx, x, scale, zp, out, axis, block)]
    return [_quantize(ctx, x, scale, zp, out, axis, block)]


def _quantize_float(
    ctx: NodeContext, x: Value, scale: Value, zp: Value | None, out: ElemKind, axis: int, block: int
) -> Value:
    if x.type.elem != scale.type.elem:
        raise ctx.unsupported(f"input {x.type} and scale {scale.type} differ in type")
    s = _along(ctx, scale, x.type.shape, axis, block, "scale")
    y = ctx.create("Div", [x, s], suffix="ratio")
    if zp is not None and out == ElemKind.F4E2M1:
        zpf = _along(ctx, _cast(ctx, zp, x.type.elem, "zp_wide"), x.type.shape, axis, block, "zp")
        y = ctx.create("Add", [y, zpf], suffix="shifted")
    return cast(ctx, y, out, bool(ctx.attr("saturate", 1)), "y_")


@converter("DynamicQuantizeLinear")
def convert_dynamic_quantize(ctx: NodeContext) -> list[Value | None]:
    ctx.check_attrs({})
    x = ctx.inp(0)
    check_elem(ctx, x, (ElemKind.F32,))
    axes = list(range(x.type.rank))
    zero = ctx.constant(np.array(0, np.float32), suffix="zero")
    lo = ctx.create(
        "Min",
        [ctx.create("ReduceMin", [x], {"axes": axes, "keepdims": 0}, suffix="min"), zero],
        suffix="lo",
    )
    hi = ctx.create(
        "Max",
        [ctx.create("ReduceMax", [x], {"axes": axes, "keepdims": 0}, suffix="max"), zero],
        suffix="hi",
    )
    span = ctx.create("Sub", [hi, lo], suffix="span")
    scale = ctx.create(
        "Div", [span, ctx.constant(np.array(255, np.float32), suffix="qrange")], suffix="scale"
    )
    neg_lo = ctx.create("Sub", [zero, lo], suffix="neg_lo")
    zpf = ctx.create(
        "Round", [ctx.create("Div", [neg_lo, scale], suffix="zp_ratio")], suffix="zp_rounded"
    )
    zp_clipped = ctx.create(
        "Min",
        [
            ctx.create("Max", [zpf, zero], suffix="zp_lo"),
            ctx.constant(np.array(255, np.float32), suffix="zp_max"),
        ],
        suffix="zp_hi",
    )
    zp = _cast(ctx, zp_clipped, ElemKind.U8, "zero_point")
    y = _quantize(ctx, x, scale, zp, ElemKind.U8, 0, 0)
    return [y, scale, zp]
