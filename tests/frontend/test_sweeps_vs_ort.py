"""Attribute sweeps of the window ops against onnxruntime: every combination matches, except the
combinations listed in `expected_refusal`, which must be refused with an UnsupportedError naming
the node, the op and the reason. An unlisted refusal fails, and so does a listed case that stops
being refused (then the list is stale: remove the rule)."""

from __future__ import annotations

import itertools

import pytest
from frontend_helpers import check_vs_ort, make_model, rand
from onnx import TensorProto, helper

from compiler.errors import UnsupportedError

POOLS = [
    (op, nsp, k, s, p, d, ceil, cip)
    for op, nsp, k, s, p, d, ceil, cip in itertools.product(
        ["AveragePool", "MaxPool"], [1, 2, 3], [2, 3], [1, 2], [0, 1], [1, 2], [0, 1], [0, 1]
    )
    if not (op == "MaxPool" and cip) and (nsp != 3 or k == 2)
]

CONV_T = list(
    itertools.product(
        [1, 2],
        [1, 3],
        [1, 2],
        [1, 2],
        [1, 2],
        ["pads", "same_upper", "same_lower", "outpad", "outshape"],
    )
)
# output_padding is only valid with stride > 1: leave those combinations out.
CONV_T = [c for c in CONV_T if not (c[5] == "outpad" and c[2] == 1)]


def expected_refusal(op: str, case: tuple) -> str | None:
    """The reason the compiler refuses this sweep case (a message fragment), or None when it must
    match onnxruntime. Each rule is a deliberate refusal: ambiguous or unsupported semantics."""
    if op == "ConvTranspose":
        _nsp, k, s, _d, _g, mode = case
        if mode == "outshape" and s == 1:
            return "needs an odd total padding"  # output_shape asks for an asymmetric split
        if mode in ("same_upper", "same_lower") and k == 1 and s == 2:
            return "needs negative padding"
        return None
    mode, ctm, nm, sc, sizes = case
    if ctm == "tf_half_pixel_for_nn":
        return "coordinate_transformation_mode='tf_half_pixel_for_nn' is not supported"
    # Scales whose output size is not a whole number leave align_corners' ratio undefined.
    fractional = not sizes and any(n * f != int(n * f) for n, f in zip((4, 6), sc))
    if ctm == "align_corners" and fractional:
        return "that are not exactly out/in (ambiguous)"
    if (
        mode == "nearest"
        and ctm in ("half_pixel", "pytorch_half_pixel")
        and nm in ("round_prefer_ceil", "floor")
        and sc == (0.6, 1.7)
        and not sizes
    ):
        return "source pixels sit on rounding boundaries"
    return None


def _check(model, feeds, op: str, refusal: str | None) -> None:
    if refusal is None:
        check_vs_ort(model, feeds, rtol=1e-4, atol=1e-4)
        return
    with pytest.raises(UnsupportedError) as info:
        check_vs_ort(model, feeds, rtol=1e-4, atol=1e-4)
    message = str(info.value)
    assert refusal in message, message
    assert message.startswith(f"unsupported: node '{op}_0', op {op} (opset 19): "), message


@pytest.mark.parametrize("op, nsp, k, s, p, d, ceil, cip", POOLS)
def test_pool_sweep(op, nsp, k, s, p, d, ceil, cip) -> None:
    kw = dict(
        kernel_shape=[k] * nsp,
        strides=[s] * nsp,
        pads=[p] * (2 * nsp),
        dilations=[d] * nsp,
        ceil_mode=ceil,
    )
    if op == "AveragePool":
        kw["count_include_pad"] = cip
    x = rand(1, 2, *(7, 6, 5)[:nsp])
    model = make_model(
        [helper.make_node(op, ["x"], ["y"], **kw)], {"x": x}, {"y": TensorProto.FLOAT}, 19
    )
    _check(model, {"x": x}, op, None)  # every pooling combination is supported


@pytest.mark.parametrize("nsp, k, s, d, g, mode", CONV_T)
def test_conv_transpose_sweep(nsp, k, s, d, g, mode) -> None:
    shape = (1, 4, *(5, 4)[:nsp])
    kw = dict(kernel_shape=[k] * nsp, strides=[s] * nsp, dilations=[d] * nsp, group=g)
    if mode == "pads":
        kw["pads"] = [1 if k > 1 else 0] * (2 * nsp)
    elif mode == "outpad":
        kw["output_padding"] = [1] * nsp
    elif mode == "outshape":
        kw["output_shape"] = [n * s - 1 for n in shape[2:]]
    else:
        kw["auto_pad"] = mode.upper()
    x = rand(*shape)
    model = make_model(
        [helper.make_node("ConvTranspose", ["x", "w", "b"], ["y"], **kw)],
        {"x": x},
        {"y": TensorProto.FLOAT},
        19,
        {"w": rand(4, 6 // g, *[k] * nsp, seed=1), "b": rand(6, seed=2)},
    )
    refusal = expected_refusal("ConvTranspose", (nsp, k, s, d, g, mode))
    _check(model, {"x": x}, "ConvTranspose", refusal)


RESIZE = [
    (mode, ctm, nm, sc, sizes)
    for mode, ctm, nm, sc, sizes in itertools.product(
        ["nearest", "linear", "cubic"],
        [
            "half_pixel",
            "half_pixel_symmetric",
            "pytorch_half_pixel",
            "align_corners",
            "asymmetric",
            "tf_half_pixel_for_nn",
        ],
        ["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"],
        [(2, 1.5), (0.5, 0.75), (0.6, 1.7), (3, 1)],
        [False, True],
    )
    if mode == "nearest" or nm == "round_prefer_floor"
]


@pytest.mark.parametrize("mode, ctm, nm, sc, sizes", RESIZE)
def test_resize_sweep(mode, ctm, nm, sc, sizes) -> None:
    import numpy as np

    x = rand(1, 2, 4, 6)
    kw = dict(mode=mode, coordinate_transformation_mode=ctm, nearest_mode=nm)
    if sizes:
        node = helper.make_node("Resize", ["x", "", "", "sz"], ["y"], **kw)
        inits = {"sz": np.array([1, 2, int(4 * sc[0]), int(6 * sc[1])], np.int64)}
    else:
        node = helper.make_node("Resize", ["x", "", "sc"], ["y"], **kw)
        inits = {"sc": np.array([1, 1, *sc], np.float32)}
    model = make_model([node], {"x": x}, {"y": TensorProto.FLOAT}, 19, inits)
    _check(model, {"x": x}, "Resize", expected_refusal("Resize", (mode, ctm, nm, sc, sizes)))
