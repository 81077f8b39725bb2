"""ONNX neural-network ops (convolution, pooling, normalisation, Gemm/MatMul, softmax) -> graph IR.

Convolutions and pools are 2-D NCHW in the graph: 1-D ones get a Reshape (H = 1) around them,
3-D ones become sums of 2-D ones (conv3d.py).
auto_pad becomes explicit pads. Gemm becomes FullyConnected when the bias is a vector, with a
transposed or scaled constant B folded at import; otherwise MatMul/Mul/Add.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from compiler.frontend.conv3d import conv3d, conv_transpose3d
from compiler.frontend.converters_math import (
    FLOAT_ONLY,
    NUMERIC,
    check_elem,
    same_elem,
    same_kind_operands,
)
from compiler.frontend.converters_tensor import norm_axis, reshape
from compiler.frontend.onnx_importer import NodeContext
from compiler.frontend.registry import converter
from compiler.graph.ir import Constant, Value
from compiler.graph.types import broadcast_shapes

_AUTO_PAD = ("NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID")
#: The attributes of every sliding-window op (pools, convolutions), with the values allowed.
WINDOW_ATTRS: dict[str, Any] = {
    "auto_pad": _AUTO_PAD,
    "dilations": None,
    "kernel_shape": None,
    "pads": None,
    "strides": None,
}
#: Conv's (and QLinearConv's, ConvInteger's).
CONV_ATTRS: dict[str, Any] = {**WINDOW_ATTRS, "group": None}


def _ints(ctx: NodeContext, key: str, n: int, default: int) -> list[int]:
    v = ctx.attr(key)
    if v is None:
        return [default] * n
    v = [int(x) for x in v]
    if len(v) != n:
        raise ctx.unsupported(f"attribute {key}={v} does not have {n} values")
    return v


def _spatial_rank(ctx: NodeContext, x: Value) -> int:
    nsp = x.type.rank - 2
    if nsp not in (1, 2, 3):
        raise ctx.unsupported(f"{nsp}-D spatial input {x.type} (only 1-D, 2-D and 3-D)")
    return nsp


def _window_pads(
    ctx: NodeContext, sizes: list[int], kernel: list[int], strides: list[int], dilations: list[int]
) -> list[int]:
    """ONNX-ordered pads [begins..., ends...] from `pads` or `auto_pad`."""
    n = len(sizes)
    auto = ctx.attr("auto_pad", "NOTSET")
    if auto in ("NOTSET", ""):
        pads = _ints(ctx, "pads", 2 * n, 0)
        if any(p < 0 for p in pads):
            raise ctx.unsupported(f"negative pads {pads}")
        return pads
    if auto == "VALID":
        return [0] * (2 * n)
    begins, ends = [], []
    for size, k, s, d in zip(sizes, kernel, strides, dilations):
        out = -(-size // s)
        total = max(0, (out - 1) * s + (k - 1) * d + 1 - size)
        small = total // 2
        begins.append(small if auto == "SAME_UPPER" else total - small)
        ends.append(total - small if auto == "SAME_UPPER" else small)
    return begins + ends


def _to_2d(pads: list[int]) -> list[int]:
    """ONNX 1-D pads [b, e] -> graph [top, left, bottom, right] with H = 1."""
    return [0, pads[0], 0, pads[1]]


def _lift_1d(ctx: NodeContext, x: Value, suffix: str) -> Value:
    n, c, l = x.type.shape
    return reshape(ctx, x, (n, c, 1, l), suffix)


def _conv_operands(ctx: NodeContext) -> tuple[Value, Value, int, list[int], list[int], list[int]]:
    """Input, filter, spatial rank, kernel, strides and dilations shared by Conv and ConvTranspose."""
    x, w = same_kind_operands(ctx, FLOAT_ONLY)
    nsp = _spatial_rank(ctx, x)
    if w.type.rank != x.type.rank:
        raise ctx.unsupported(f"filter {w.type} does not match input {x.type}")
    kernel = list(w.type.shape[2:])
    if ctx.has_attr("kernel_shape") and [int(k) for k in ctx.attr("kernel_shape")] != kernel:
        raise ctx.unsupported(
            f"kernel_shape {ctx.attr('kernel_shape')} differs from the filter {w.type}"
        )
    strides = _ints(ctx, "strides", nsp, 1)
    dilations = _ints(ctx, "dilations", nsp, 1)
    return x, w, nsp, kernel, strides, dilations


def _bias(ctx: NodeContext, x: Value, k: int) -> Value:
    """Input 2, or zeros for `k` output channels when the node has no bias."""
    if ctx.has_input(2):
        return ctx.inp(2)
    return ctx.constant(np.zeros((k,), x.type.np_dtype), suffix="bias")


def _conv_1d_as_2d(
    ctx: NodeContext,
    op: str,
    x: Value,
    w: Value,
    b: Value,
    strides: list[int],
    dilations: list[int],
    attrs: dict[str, Any],
) -> Value:
    """A 1-D Conv/ConvTranspose as the 2-D op over a height-1 image (`attrs`: the 2-D pads,
    group, ...), reshaped back to NxCxL."""
    x2 = _lift_1d(ctx, x, "input2d")
    w2 = reshape(ctx, w, (*w.type.shape[:2], 1, w.type.shape[2]), "filter2d")
    attrs = {"strides": [1, strides[0]], "dilations": [1, dilations[0]], **attrs}
    y = ctx.create(op, [x2, w2, b], attrs, suffix="conv2d" if op == "Conv" else "convt2d")
    n, kk, _, l = y.type.shape
    return reshape(ctx, y, (n, kk, l))


@converter("Conv")
def convert_conv(ctx: NodeContext) -> list[Value | None]:
    ctx.check_attrs(CONV_ATTRS)
    x, w, nsp, kernel, strides, dilations = _conv_operands(ctx)
    pads = _window_pads(ctx, list(x.type.shape[2:]), kernel, strides, dilations)
    k = w.type.shape[0]
    b = _bias(ctx, x, k)
    group = int(ctx.attr("group", 1))
    if nsp == 3:
        return [conv3d(ctx, x, w, b, strides, pads, dilations, group)]
    if nsp == 2:
        return [
            ctx.create(
                "Conv",
                [x, w, b],
                {"strides": strides, "pads": pads, "dilations": dilations, "group": group},
            )
        ]
    attrs = {"pads": _to_2d(pads), "group": group}
    return [_conv_1d_as_2d(ctx, "Conv", x, w, b, strides, dilations, attrs)]


@converter("ConvTranspose")
def convert_conv_transpose(ctx: NodeContext) -> list[Value | None]:
    ctx.check_attrs({**CONV_ATTRS, "output_padding": None, "output_shape": None})
    x, w, nsp, kernel, strides, dilations = _conv_operands(ctx)
    out_pad = _ints(ctx, "output_padding", nsp, 0)
    group = int(ctx.attr("group", 1))
    sizes = list(x.type.shape[2:])
    auto = ctx.attr("auto_pad", "NOTSET")
    out_shape = ctx.attr("output_shape")
    if out_shape is not None:
        out_shape = [int(v) for v in out_shape][-nsp:]
        if len(out_shape) != nsp:
            raise ctx.unsupported(f"output_shape {out_shape} does not match {nsp} spatial dims")
    begins, ends = [0] * nsp, [0] * nsp
    if auto in ("SAME_UPPER", "SAME_LOWER") or (out_shape is not None and auto not in ("VALID",)):
        for i in range(nsp):
            natural = strides[i] * (sizes[i] - 1) + out_pad[i] + (kernel[i] - 1) * dilations[i] + 1
            want = out_shape[i] if out_shape is not None else sizes[i] * strides[i]
            total = natural - want
            if out_shape is not None and total < 0 and auto not in ("SAME_UPPER", "SAME_LOWER"):
                out_pad[i] -= total  # a larger output_shape grows the end (bias only there)
            elif total < 0:
                raise ctx.unsupported(f"output size {want} needs negative padding")
            elif out_shape is not None:
                # The spec puts an odd total's extra pad on one side, onnxruntime on the other:
                # only even totals (split evenly by both) are unambiguous.
                if total % 2:
                    raise ctx.unsupported(
                        f"output_shape {out_shape} needs an odd total padding "
                        f"{total} on spatial dim {i} (ambiguous split)"
                    )
                begins[i] = ends[i] = total // 2
            else:
                small = total // 2
                begins[i] = small if auto == "SAME_UPPER" else total - small
                ends[i] = total - small if auto == "SAME_UPPER" else small
    elif auto == "NOTSET":
        pads = _ints(ctx, "pads", 2 * nsp, 0)
        begins, ends = pads[:nsp], pads[nsp:]
    if any(p < 0 for p in begins + ends):
        raise ctx.unsupported(f"negative pads {begins + ends}")
    k = w.type.shape[1] * group
    b = _bias(ctx, x, k)
    if nsp == 3:
        return [conv_transpose3d(ctx, x, w, b, strides, begins, ends, dilations, out_pad, group)]
    if nsp == 2:
        return [
            ctx.create(
                "ConvTranspose",
                [x, w, b],
                {
                    "strides": strides,
                    "pads": begins + ends,
                    "dilations": dilations,
                    "group": group,
                    "output_padding": out_pad,
                },
            )
        ]
    attrs = {"pads": [0, begins[0], 0, ends[0]], "group": group, "output_padding": [0, out_pad[0]]}
    return [_conv_1d_as_2d(ctx, "ConvTranspose", x, w, b, strides, dilations, attrs)]


def _pool_out(size: int, k: int, s: int, p0: int, p1: int, d: int, ceil: int) -> tuple[int, int]:
    """(output size, extra end padding that makes the floor formula give it) for one dim."""
    eff = d * (k - 1) + 1
    if ceil:
        o = -(-(size + p0 + p1 - eff) // s) + 1
        if (o - 1) * s >= size + p0:  # the last window must start inside the input or left pad
            o -= 1
    else:
        o = (size + p0 + p1 - eff) // s + 1
    return o, max(0, (o - 1) * s + eff - (size + p0 + p1))


@converter("MaxPool", "AveragePool")
def convert_pool(ctx: NodeContext) -> list[Value | None]:
    is_max = ctx.op_type == "MaxPool"
    allowed = {**WINDOW_ATTRS, "ceil_mode": (0, 1)}
    if is_max:
        allowed["storage_order"] = (0, 1)
    else:
        allowed["count_include_pad"] = (0, 1)
    ctx.check_attrs(allowed)
    x = ctx.inp(0)
    check_elem(ctx, x, NUMERIC if is_max else FLOAT_ONLY)
    nsp = x.type.rank - 2
    if nsp not in (1, 2, 3):
        raise ctx.unsupported(f"{nsp}-D spatial input {x.type} (only 1-D, 2-D and 3-D)")
    if not ctx.has_attr("kernel_shape"):
        raise ctx.unsupported("attribute 'kernel_shape' is required")
    kernel = _ints(ctx, "kernel_shape", nsp, 1)
    strides = _ints(ctx, "strides", nsp, 1)
    dilations = _ints(ctx, "dilations", nsp, 1)
    ceil_mode = int(ctx.attr("ceil_mode", 0))
    if ceil_mode and ctx.attr("auto_pad", "NOTSET") not in ("NOTSET", "VALID"):
        raise ctx.unsupported("ceil_mode together with SAME auto_pad")
    if ctx.attr("auto_pad", "NOTSET") in ("SAME_UPPER", "SAME_LOWER") and any(
        d != 1 for d in dilations
    ):
        # onnxruntime pads these as if undilated, the ONNX spec with the dilated extent.
        raise ctx.unsupported(f"SAME auto_pad with dilations {dilations} (ambiguous pads)")
    pads = _window_pads(ctx, list(x.type.shape[2:]), kernel, strides, dilations)
    for i in range(nsp):
        if pads[i] >= kernel[i] * dilations[i] or pads[i + nsp] >= kernel[i] * dilations[i]:
            # ONNX requires pads smaller than the kernel; larger ones make windows of padding only.
            raise ctx.unsupported(f"pads {pads} are not smaller than the kernel {kernel}")
    cip = int(ctx.attr("count_include_pad", 0))
    if not is_max and (nsp == 3 or any(d != 1 for d in dilations)):
        return [_avg_pool_by_conv(ctx, x, kernel, strides, pads, dilations, ceil_mode, cip), None]
    if nsp == 3:
        if is_max and ctx.output_used(1):
            raise ctx.unsupported("the Indices output of a 3-D pool")
        return [_max_pool_3d(ctx, x, kernel, strides, pads, dilations, ceil_mode), None]
    attrs = {"kernel": kernel, "strides": strides, "ceil_mode": ceil_mode}
    if is_max:
        attrs["dilations"] = dilations
    else:
        attrs["count_include_pad"] = cip
    op = "MaxPool" if is_max else "AvgPool"
    indices = None
    if is_max and ctx.output_used(1):
        # The Indices output: flat positions in the input (storage_order 1: H fastest).
        order = int(ctx.attr("storage_order", 0))
        if nsp == 1 and order:
            raise ctx.unsupported("storage_order=1 indices of a 1-D pool")
        if nsp == 2:
            at2 = {**attrs, "pads": pads, "storage_order": order}
            indices = ctx.create("MaxPoolArgmax", [x], at2, suffix="indices")
    if nsp == 2:
        return [ctx.create(op, [x], {**attrs, "pads": pads}), indices]
    attrs2 = {
        "kernel": [1, kernel[0]],
        "strides": [1, strides[0]],
        "ceil_mode": ceil_mode,
        "pads": _to_2d(pads),
    }
    if is_max:
        attrs2["dilations"] = [1, dilations[0]]
    else:
        attrs2["count_include_pad"] = cip
    x2 = _lift_1d(ctx, x, "input2d")
    y = ctx.create(op, [x2], attrs2, suffix="pool2d")
    n, c, _, l = y.type.shape
    if is_max and ctx.output_used(1):  # with H = 1, row-major flat indices are the same
        i2 = ctx.create("MaxPoolArgmax", [x2], attrs2, suffix="indices2d")
        indices = reshape(ctx, i2, (n, c, l))
    return [reshape(ctx, y, (n, c, l)), indices]


def _max_pool_3d(
    ctx: NodeContext,
    x: Value,
    kernel: list[int],
    strides: list[int],
    pads: list[int],
    dilations: list[int],
    ceil_mode: int,
) -> Value:
    """3-D max pooling, separably: a 2-D pool over (H, W), then one over D (max is separable)."""
    n, c, d, h, w = x.type.shape
    hw = ctx.create(
        "MaxPool",
        [reshape(ctx, x, (n, c * d, h, w), "as_2d")],
        {
            "kernel": kernel[1:],
            "strides": strides[1:],
            "dilations": dilations[1:],
            "pads": [pads[1], pads[2], pads[4], pads[5]],
            "ceil_mode": ceil_mode,
        },
        suffix="pool_hw",
    )
    _, _, oh, ow = hw.type.shape
    dd = ctx.create(
        "MaxPool",
        [reshape(ctx, hw, (n, c, d, oh * ow), "depth_major")],
        {
            "kernel": [kernel[0], 1],
            "strides": [strides[0], 1],
            "dilations": [dilations[0], 1],
            "pads": [pads[0], 0, pads[3], 0],
            "ceil_mode": ceil_mode,
        },
        suffix="pool_d",
    )
    return reshape(ctx, dd, (n, c, dd.type.shape[2], oh, ow))


def _avg_pool_by_conv(
    ctx: NodeContext,
    x: Value,
    kernel: list[int],
    strides: list[int],
    pads: list[int],
    dilations: list[int],
    ceil_mode: int,
    cip: int,
    sums_only: bool = False,
) -> Value:
    """Average pooling the graph's AvgPool cannot express (dilated, 3-D): window sums by
    depthwise convolutions with a ones filter (separable for 3-D), divided by a constant map of
    per-window element counts (a product of per-dim counts). `sums_only`: the sums (LpPool)."""
    nsp = len(kernel)
    sizes = list(x.type.shape[2:])
    outs, extra, counts = [], [], []
    for i in range(nsp):
        o, e = _pool_out(
            sizes[i], kernel[i], strides[i], pads[i], pads[i + nsp], dilations[i], ceil_mode
        )
        if o <= 0:
            raise ctx.unsupported(f"pooling output size {o} is not positive")
        lo, hi = (-pads[i], sizes[i] + pads[i + nsp]) if cip else (0, sizes[i])
        taps = (
            np.arange(o)[:, None] * strides[i]
            - pads[i]
            + np.arange(kernel[i])[None, :] * dilations[i]
        )
        counts.append(((taps >= lo) & (taps < hi)).sum(axis=1))
        outs.append(o)
        extra.append(e)
    if not sums_only and any((cnt == 0).any() for cnt in counts):
        raise ctx.unsupported("a pooling window covers no element")
    count = counts[0].astype(np.float64)
    for cnt in counts[1:]:
        count = np.multiply.outer(count, cnt)
    n, c = x.type.shape[:2]

    def window_sum(
        v: Value, k2: list[int], s2: list[int], p4: list[int], d2: list[int], suffix: str
    ) -> Value:
        ch = v.type.shape[1]
        ones = ctx.constant(np.ones((ch, 1, *k2), x.type.np_dtype), suffix=f"{suffix}_ones")
        zero = ctx.constant(np.zeros((ch,), x.type.np_dtype), suffix=f"{suffix}_zero")
        return ctx.create(
            "Conv",
            [v, ones, zero],
            {"strides": s2, "pads": p4, "dilations": d2, "group": ch},
            suffix=suffix,
        )

    if nsp == 1:
        v = window_sum(
            _lift_1d(ctx, x, "input2d"),
            [1, kernel[0]],
            [1, strides[0]],
            [0, pads[0], 0, pads[1] + extra[0]],
            [1, dilations[0]],
            "window_sum",
        )
        total = reshape(ctx, v, (n, c, outs[0]), "window_sum_1d")
    elif nsp == 2:
        total = window_sum(
            x,
            kernel,
            strides,
            [pads[0], pads[1], pads[2] + extra[0], pads[3] + extra[1]],
            dilations,
            "window_sum",
        )
    else:
        d, h, w = sizes
        hw = window_sum(
            reshape(ctx, x, (n, c * d, h, w), "as_2d"),
            kernel[1:],
            strides[1:],
            [pads[1], pads[2], pads[4] + extra[1], pads[5] + extra[2]],
            dilations[1:],
            "sum_hw",
        )
        oh, ow = hw.type.shape[2:]
        dd = window_sum(
            reshape(ctx, hw, (n, c, d, oh * ow), "depth_major"),
            [kernel[0], 1],
            [strides[0], 1],
            [pads[0], 0, pads[3] + extra[0], 0],
            [dilations[0], 1],
            "sum_d",
        )
        total = reshape(ctx, dd, (n, c, *outs), "window_sum")
    if sums_only:
        return total
    divisor = ctx.constant(count.astype(x.type.np_dtype).reshape((1, 1, *outs)), suffix="counts")
    return ctx.create("Div", [total, divisor])


@converter("LpPool")
def convert_lp_pool(ctx: NodeContext) -> list[Value | None]:
    """(sum over each window of |x|^p)^(1/p): window sums of |x|^p by depthwise convolutions."""
    ctx.check_attrs({**WINDOW_ATTRS, "ceil_mode": (0, 1), "p": None})
    x = ctx.inp(0)
    check_elem(ctx, x, FLOAT_ONLY)
    nsp = x.type.rank - 2
    if nsp not in (1, 2, 3) or not ctx.has_attr("kernel_shape"):
        raise ctx.unsupported(f"input {x.type} (1-D to 3-D spatial, with a kernel_shape)")
    kernel = _ints(ctx, "kernel_shape", nsp, 1)
    strides = _ints(ctx, "strides", nsp, 1)
    dilations = _ints(ctx, "dilations", nsp, 1)
    pads = _window_pads(ctx, list(x.type.shape[2:]), kernel, strides, dilations)
    p = float(ctx.attr("p", 2))
    if p == 2:
        powered = ctx.create("Mul", [x, x], suffix="sq")
    else:
        ax = ctx.create("Abs", [x], suffix="abs")
        powered = ctx.create("Pow", [ax, ctx.scalar_like(x, p, "p")], suffix="pow")
    ceil = int(ctx.attr("ceil_mode", 0))
    sums = _avg_pool_by_conv(ctx, powered, kernel, strides, pads, dilations, ceil, 1, True)
    if p == 2:
        return [ctx.create("Sqrt", [sums])]
    return [ctx.create("Pow", [sums, ctx.scalar_like(x, 1.0 / p, "inv_p")])]


@converter("GlobalAveragePool", "GlobalMaxPool")
def convert_global_pool(ctx: NodeContext) -> list[Value | None]:
    ctx.check_attrs({})
    x = ctx.inp(0)
    check_elem(ctx, x, FLOAT_ONLY)
    if x.type.rank < 3:
        raise ctx.unsupported(f"input {x.type} has no spatial dims")
    op = "GlobalAvgPool" if ctx.op_type == "GlobalAveragePool" else "GlobalMaxPool"
    return [ctx.create(op, [x])]


@converter("LRN")
def convert_lrn(ctx: NodeContext) -> list[Value | None]:
    ctx.check_attrs({"size": None, "alpha": None, "beta": None, "bias": None})
    x = ctx.inp(0)
    check_elem(ctx, x, FLOAT_ONLY)
    if not ctx.has_attr("size"):
        raise ctx.unsupported("attribute 'size' is required")
    return [
        ctx.create(
            "LRN",
            [x],
            {
                "size": int(ctx.attr("size")),
                "alpha": float(ctx.attr("alpha", 1e-4)),
                "beta": float(ctx.attr("beta", 0.75)),
                "bias": float(ctx.attr("bias", 1.0)),
            },
        )
    ]


@converter("BatchNormalization")
def convert_batchnorm(ctx: NodeContext) -> list[Value | None]:
    ctx.check_attrs(
        {
            "epsilon": None,
            "momentum": None,
            "spatial": (1,),
            "training_mode": (0, 1),
            "is_test": (1,),
        }
    )
    training = int(ctx.attr("training_mode", 0))
    if not training:
        for i in range(1, ctx.num_outputs):
            if ctx.output_used(i):
                raise ctx.unsupported(f"training output {i} (running statistics) is not supported")
    x = ctx.inp(0)
    check_elem(ctx, x, FLOAT_ONLY)
    params = [ctx.inp(i) for i in range(1, 5)]
    for p in params:
        check_elem(ctx, p, FLOAT_ONLY, "parameter")
    if x.type.rank < 2:
        raise ctx.unsupported(f"input {x.type} has no channel axis")
    eps = float(ctx.attr("epsilon", 1e-5))
    if not training:
        return [ctx.create("BatchNorm", [x, *params], {"epsilon": eps})]
    # training_mode (opset >= 14): normalise with the batch statistics; the running
    # statistics outputs blend them into the given ones with `momentum`.
    c = x.type.shape[1]
    axes = [0, *range(2, x.type.rank)]
    mean_k = ctx.create("ReduceMean", [x], {"axes": axes, "keepdims": 1}, suffix="batch_mean")
    d = ctx.create("Sub", [x, mean_k], suffix="centered")
    var_k = ctx.create(
        "ReduceMean",
        [ctx.create("Mul", [d, d], suffix="sq")],
        {"axes": axes, "keepdims": 1},
        suffix="batch_var",
    )
    mean = reshape(ctx, mean_k, (c,), "batch_mean_c")
    var = reshape(ctx, var_k, (c,), "batch_var_c")
    y = ctx.create("BatchNorm", [x, params[0], params[1], mean, var], {"epsilon": eps})
    momentum = float(np.float32(ctx.attr("momentum", 0.9)))
    outs: list[Value | None] = [y]
    for i, (given, batch) in enumerate(((params[2], mean), (params[3], var)), start=1):
        if not ctx.output_used(i):
            outs.append(None)
            continue
        a = ctx.create(
            "Mul", [given, ctx.scalar_like(given, momentum, "momentum")], suffix=f"running{i}_old"
        )
        b = ctx.create(
            "Mul",
            [batch, ctx.scalar_like(batch, 1.0 - momentum, "one_minus_momentum")],
            suffix=f"running{i}_new",
        )
        outs.append(ctx.create("Add", [a, b], suffix=f"running{i}"))
    return outs


@converter("InstanceNormalization")
def convert_instance_norm(ctx: NodeContext) -> list[Value | None]:
    ctx.check_attrs({"epsilon": None})
    x, scale, bias = ctx.inp(0), ctx.inp(1), ctx.inp(2)
    check_elem(ctx, x, FLOAT_ONLY)
    if x.type.rank < 3:
        raise ctx.unsupported(f"input {x.type} has no spatial dims")
    # Normalising over the spatial dims is LayerNorm from axis 2 (its kernels accumulate the
    # statistics in double, as onnxruntime does: float32 x - mean cancels on nearly constant
    # rows); the per-channel scale and bias, which LayerNorm cannot broadcast, come after.
    eps = float(np.float32(ctx.attr("epsilon", 1e-5)))
    one = ctx.constant(np.ones(1, x.type.np_dtype), suffix="one")
    zero = ctx.constant(np.zeros(1, x.type.np_dtype), suffix="zero")
    y = ctx.create("LayerNorm", [x, one, zero], {"axis": 2, "epsilon": eps}, suffix="normalized")
    pshape = (x.type.shape[1],) + (1,) * (x.type.rank - 2)
    y = ctx.create("Mul", [y, reshape(ctx, scale, pshape, "scale_b")], suffix="scaled")
    return [ctx.create("Add", [y, reshape(ctx, bias, pshape, "bias_b")])]


@converter("Dropout")
def convert_dropout(ctx: NodeContext) -> list[Value | None]:
    if ctx.opset >= 12:
        ctx.check_attrs({"seed": None})
        if ctx.has_input(2):
            tm = ctx.require_const(2, "training_mode")
            ratio = ctx.require_const(1, "ratio") if ctx.has_input(1) else np.array(0.5)
            # Training with ratio 0 drops nothing: the identity, whatever the seed.
            if bool(tm.reshape(-1)[0]) and float(ratio.reshape(-1)[0]) != 0.0:
                raise ctx.unsupported("training_mode = true (only inference is supported)")
    else:
        ctx.check_attrs({"ratio": None, "seed": None, "is_test": None})
    x = ctx.inp(0)
    mask = None
    if ctx.output_used(1):
        if ctx.opset < 10:
            raise ctx.unsupported("the mask output before opset 10")
        mask = ctx.constant(np.ones(x.type.shape, np.bool_), suffix="mask")
    return [x, mask]


# -- dense ----------------------------------------------------------------------------------------


@converter("Gemm")
def convert_gemm(ctx: NodeContext) -> list[Value | None]:
    ctx.check_attrs({"alpha": None, "beta": None, "transA": (0, 1), "transB": (0, 1)})
    a, b = same_kind_operands(ctx, FLOAT_ONLY)
    if a.type.rank != 2 or b.type.rank != 2:
        raise ctx.unsupported(f"operands must be 2-D, got {a.type} and {b.type}")
    alpha = float(np.float32(ctx.attr("alpha", 1.0)))
    beta = float(np.float32(ctx.attr("beta", 1.0)))
    if int(ctx.attr("transA", 0)):
        a = ctx.create("Transpose", [a], {"perm": [1, 0]}, suffix="transA")
    if int(ctx.attr("transB", 0)):
        b = ctx.create("Transpose", [b], {"perm": [1, 0]}, suffix="transB")
    if a.type.shape[1] != b.type.shape[0]:
        raise ctx.unsupported(f"inner dims differ: {a.type} x {b.type}")
    m, n = a.type.shape[0], b.type.shape[1]
    if alpha != 1.0 and isinstance(b, Constant):
        b = ctx.create("Mul", [b, ctx.scalar_like(b, alpha, "alpha")], suffix="alphaB")
        alpha = 1.0
    c = ctx.inp(2) if ctx.has_input(2) and beta != 0.0 else None
    if c is not None:
        same_elem(ctx, a, c)
        if beta != 1.0:
            c = ctx.create("Mul", [c, ctx.scalar_like(c, beta, "beta")], suffix="betaC")
        c_shape = c.type.shape
        try:
            if broadcast_shapes(c_shape, (m, n)) != (m, n):
                raise ValueError
        except ValueError:
            raise ctx.unsupported(f"C {c.type} does not broadcast to [{m}, {n}]") from None
    vector_bias = (
        c is None
        or math.prod(c.type.shape[:-1]) == 1
        and (c.type.rank == 0 or c.type.shape[-1] in (1, n))
        and (c.type.rank < 2 or c.type.shape[0] == 1)
    )
    if alpha == 1.0 and vector_bias:
        bias: Value
        if c is None:
            bias = ctx.constant(np.zeros((n,), a.type.np_dtype), suffix="bias")
        elif c.type.shape == (n,):
            bias = c
        elif isinstance(c, Constant) and c.data is not None:  # the importer's always have data
            bias = ctx.constant(np.broadcast_to(c.data.reshape(-1), (n,)).copy(), suffix="bias")
        else:
            bias = ctx.create(
                "Broadcast",
                [reshape(ctx, c, (c.type.numel,), "bias_flat")],
                {"shape": (n,)},
                suffix="bias",
            )
        return [ctx.create("FullyConnected", [a, b, bias])]
    y = ctx.create("MatMul", [a, b], suffix="matmul")
    if alpha != 1.0:
        y = ctx.create(
            "Mul",
            [y, ctx.scalar_like(y, alpha, "alpha")],
            suffix="alpha" if c is not None else None,
        )
    if c is not None:
        y = ctx.create("Add", [y, c])
    return [y]


@converter("MatMul")
def convert_matmul(ctx: NodeContext) -> list[Value | None]:
    ctx.check_attrs({})
    a, b = same_kind_operands(ctx)
    if a.type.rank == 0 or b.type.rank == 0:
        raise ctx.unsupported("scalar operands")
    a2 = reshape(ctx, a, (1, a.type.shape[0]), "lhs2d") if a.type.rank == 1 else a
    b2 = reshape(ctx, b, (b.type.shape[0], 1), "rhs2d") if b.type.rank == 1 else b
    if a2.type.shape[-1] != b2.type.shape[-2]:
        raise ctx.unsupported(f"inner dims differ: {a.type} x {b.type}")
    if a.type.rank > 1 and b.type.rank > 1:
        return [ctx.create("MatMul", [a2, b2])]
    y = ctx.create("MatMul", [a2, b2], suffix="matmul")
    shape = list(y.type.shape)
    if b.type.rank == 1:
        shape.pop(-1)
    if a.type.rank == 1:
        shape.pop(-2 if b.type.rank > 1 else -1)
    return [reshape(ctx, y, shape)]


@converter("Softmax", "LogSoftmax")
def convert_softmax(ctx: NodeContext) -> list[Value | None]:
    ctx.check_attrs({"axis": None})
    x = ctx.inp(0)
    check_elem(ctx, x, FLOAT_ONLY)
    rank = x.type.rank
    if rank == 0:
        raise ctx.unsupported("scalar input")
    op = ctx.op_type
    if ctx.opset >= 13:
        axis = norm_axis(ctx, int(ctx.attr("axis", -1)), rank)
        return [ctx.create(op, [x], {"axis": axis})]
    axis = int(ctx.attr("axis", 1))
    if not -rank <= axis <= rank:
        raise ctx.unsupported(f"axis {axis} is out of range for rank {rank}")
    axis = axis + rank if axis < 0 else axis
    if axis == rank - 1:
        return [ctx.create(op, [x], {"axis": axis})]
    # Opsets < 13 coerce to 2-D: flatten at axis, normalise over the last dim, reshape back.
    flat = reshape(
        ctx, x, (math.prod(x.type.shape[:axis]), math.prod(x.type.shape[axis:])), "coerced"
    )
    y = ctx.create(op, [flat], {"axis": flat.type.rank - 1}, suffix="coerced_softmax")
    return [reshape(ctx, y, x.type.shape)]


@converter("LayerNormalization")
def convert_layernorm(ctx: NodeContext) -> list[Value | None]:
    ctx.check_attrs({"axis": None, "epsilon": None, "stash_type": (1,)})
    x, scale = same_kind_operands(ctx, FLOAT_ONLY)
    axis = norm_axis(ctx, int(ctx.attr("axis", -1)), x.type.rank)
    bias = (
        ctx.inp(2)
        if ctx.has_input(2)
        else ctx.constant(np.zeros(scale.type.shape, scale.type.np_dtype), suffix="bias")
    )
    eps = float(np.float32(ctx.attr("epsilon", 1e-5)))
    y = ctx.create("LayerNorm", [x, scale, bias], {"axis": axis, "epsilon": eps})
    mean = inv_std = None
    if ctx.output_used(1) or ctx.output_used(2):
        # The statistics outputs, computed separately: mean and 1/sqrt(var + eps).
        axes = list(range(axis, x.type.rank))
        mean = ctx.create("ReduceMean", [x], {"axes": axes, "keepdims": 1}, suffix="mean")
        d = ctx.create("Sub", [x, mean], suffix="centered")
        var = ctx.create(
            "ReduceMean",
            [ctx.create("Mul", [d, d], suffix="sq")],
            {"axes": axes, "keepdims": 1},
            suffix="var",
        )
        std = ctx.create(
            "Sqrt",
            [ctx.create("Add", [var, ctx.scalar_like(x, eps, "eps")], suffix="var_eps")],
            suffix="std",
        )
        inv_std = ctx.create("Reciprocal", [std], suffix="inv_std")
    return [y, mean, inv_std]
