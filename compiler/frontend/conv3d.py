"""3-D Conv and ConvTranspose as sums of 2-D ones (the graph's convolutions are 2-D NCHW; the
converters in converters_nn.py call these for 5-D inputs).

Conv: the depth taps are summed. With x padded in depth and moved to [N, D, C, H, W], tap kd
reads the depth slices kd*dd, kd*dd + sd, ... (one strided Slice), folded into the batch
([N*OD, C, H, W]); a 2-D Conv with the filter's depth slice kd gives its contribution, and the
KD contributions are added. KD 2-D convolutions, each over the whole output.

ConvTranspose: every input depth slice, for tap kd, lands on output depth id*sd + kd*dd: the
2-D transposed convolution of [N*D, C, H, W] with the filter's slice kd is spread sd apart
(Pad after each slice, Reshape, Slice) and shifted by kd*dd (Pad), the KD results are added,
then the depth pads are cropped and the bias added.
"""

from __future__ import annotations

import numpy as np

from compiler.frontend.converters_tensor import reshape
from compiler.frontend.onnx_importer import NodeContext
from compiler.graph.ir import Value


def _filter_tap(ctx: NodeContext, w: Value, kd: int, tag: str) -> Value:
    """w[:, :, kd] as a 4-D filter."""
    a, b_, kdim, kh, kw = w.type.shape
    if kdim == 1:
        return reshape(ctx, w, (a, b_, kh, kw), f"{tag}_2d")
    s = ctx.create(
        "Slice",
        [w],
        {"starts": [0, 0, kd, 0, 0], "ends": [a, b_, kd + 1, kh, kw], "steps": [1] * 5},
        suffix=tag,
    )
    return reshape(ctx, s, (a, b_, kh, kw), f"{tag}_2d")


def _depth_pad(ctx: NodeContext, v: Value, axis: int, before: int, after: int, tag: str) -> Value:
    if not before and not after:
        return v
    pads = [0] * (2 * v.type.rank)
    pads[axis], pads[axis + v.type.rank] = before, after
    return ctx.create("Pad", [v], {"pads": pads, "mode": "constant", "value": 0.0}, suffix=tag)


def conv3d(
    ctx: NodeContext,
    x: Value,
    w: Value,
    bias: Value,
    strides: list[int],
    pads: list[int],
    dilations: list[int],
    group: int,
) -> Value:
    """ONNX Conv over N x C x D x H x W; pads are ONNX-ordered [begins..., ends...]."""
    n, c, _, h, wd = x.type.shape
    k, _, kdn, _, _ = w.type.shape
    sd, dd = strides[0], dilations[0]
    xp = _depth_pad(ctx, x, 2, pads[0], pads[3], "depth_pad")
    dp = xp.type.shape[2]
    od = (dp - dd * (kdn - 1) - 1) // sd + 1
    if od <= 0:
        raise ctx.unsupported(f"output depth {od} is not positive")
    xt = ctx.create("Transpose", [xp], {"perm": [0, 2, 1, 3, 4]}, suffix="depth_major")
    attrs = {
        "strides": strides[1:],
        "pads": [pads[1], pads[2], pads[4], pads[5]],
        "dilations": dilations[1:],
        "group": group,
    }
    zero = ctx.constant(np.zeros((k,), x.type.np_dtype), suffix="no_bias")
    total: Value | None = None
    for kd in range(kdn):
        lo = kd * dd
        taps = ctx.create(
            "Slice",
            [xt],
            {
                "starts": [0, lo, 0, 0, 0],
                "ends": [n, lo + (od - 1) * sd + 1, c, h, wd],
                "steps": [1, sd, 1, 1, 1],
            },
            suffix=f"tap{kd}",
        )
        x2 = reshape(ctx, taps, (n * od, c, h, wd), f"tap{kd}_2d")
        y = ctx.create(
            "Conv",
            [x2, _filter_tap(ctx, w, kd, f"w_tap{kd}"), bias if kd == 0 else zero],
            attrs,
            suffix=f"conv_tap{kd}",
        )
        total = y if total is None else ctx.create("Add", [total, y], suffix=f"sum_tap{kd}")
    assert total is not None
    _, _, oh, ow = total.type.shape
    y5 = reshape(ctx, total, (n, od, k, oh, ow), "depth_major_out")
    return ctx.create("Transpose", [y5], {"perm": [0, 2, 1, 3, 4]})


def conv_transpose3d(
    ctx: NodeContext,
    x: Value,
    w: Value,
    bias: Value,
    strides: list[int],
    begins: list[int],
    ends: list[int],
    dilations: list[int],
    out_pad: list[int],
    group: int,
) -> Value:
    """ONNX ConvTranspose over N x C x D x H x W."""
    n, c, d, h, wd = x.type.shape
    _, kg, kdn, _, _ = w.type.shape
    k = kg * group
    sd, dd = strides[0], dilations[0]
    full = sd * (d - 1) + dd * (kdn - 1) + 1 + out_pad[0]
    xt = ctx.create("Transpose", [x], {"perm": [0, 2, 1, 3, 4]}, suffix="depth_major")
    x2 = reshape(ctx, xt, (n * d, c, h, wd), "slices_2d")
    attrs = {
        "strides": strides[1:],
        "pads": [begins[1], begins[2], ends[1], ends[2]],
        "dilations": dilations[1:],
        "group": group,
        "output_padding": out_pad[1:],
    }
    zero = ctx.constant(np.zeros((k,), x.type.np_dtype), suffix="no_bias")
    total: Value | None = None
    for kd in range(kdn):
        y = ctx.create(
            "ConvTranspose",
            [x2, _filter_tap(ctx, w, kd, f"w_tap{kd}"), zero],
            attrs,
            suffix=f"convt_tap{kd}",
        )
        _, _, oh, ow = y.type.shape
        plane = k * oh * ow
        y = reshape(ctx, y, (n, d, 1, plane), f"tap{kd}_planes")
        if sd > 1:  # spread the d slices sd apart: zeros after each, then drop the last gap
            y = _depth_pad(ctx, y, 2, 0, sd - 1, f"tap{kd}_spread")
            y = reshape(ctx, y, (n, d * sd, plane), f"tap{kd}_strided")
            y = ctx.create(
                "Slice",
                [y],
                {"starts": [0, 0, 0], "ends": [n, (d - 1) * sd + 1, plane], "steps": [1, 1, 1]},
                suffix=f"tap{kd}_trim",
            )
        else:
            y = reshape(ctx, y, (n, d, plane), f"tap{kd}_strided")
        lo = kd * dd
        y = _depth_pad(ctx, y, 1, lo, full - lo - y.type.shape[1], f"tap{kd}_placed")
        total = y if total is None else ctx.create("Add", [total, y], suffix=f"sum_tap{kd}")
    assert total is not None
    od = full - begins[0] - ends[0]
    if od <= 0:
        raise ctx.unsupported(f"output depth {od} is not positive")
    if begins[0] or ends[0]:
        total = ctx.create(
            "Slice",
            [total],
            {"starts": [0, begins[0], 0], "ends": [n, begins[0] + od, plane], "steps": [1, 1, 1]},
            suffix="depth_crop",
        )
    y5 = reshape(ctx, total, (n, od, k, oh, ow), "depth_major_out")
    y = ctx.create("Transpose", [y5], {"perm": [0, 2, 1, 3, 4]}, suffix="nc_dhw")
    return ctx.create("Add", [y, reshape(ctx, bias, (1, k, 1, 1, 1), "bias_5d")])
