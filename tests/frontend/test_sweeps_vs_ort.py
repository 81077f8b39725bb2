"""Attribute sweeps of the window ops against onnxruntime: every combination either matches or
is refused with UnsupportedError (never a wrong answer). Cases onnxruntime rejects are skipped."""

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


def _check(model, feeds) -> None:
    import onnxruntime

    try:
        check_vs_ort(model, feeds, rtol=1e-4, atol=1e-4)
    except UnsupportedError:
        pass  # a refusal is acceptable
    except onnxruntime.capi.onnxruntime_pybind11_state.Fail as e:  # pragma: no cover
        pytest.skip(f"onnxruntime rejects the model: {e}")
    except (
        onnxruntime.capi.onnxruntime_pybind11_state.InvalidArgument,
        onnxruntime.capi.onnxruntime_pybind11_state.RuntimeException,
    ) as e:
        pytest.skip(f"onnxruntime rejects the model: {str(e)[:80]}")


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
    _check(model, {"x": x})


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
    _check(model, {"x": x})


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
    _check(model, {"x": x})
