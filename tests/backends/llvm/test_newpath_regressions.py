"""Regressions found by the differential fuzzing of session 9's LLVM paths
(`tests/fuzz/newpaths.py`): each case failed before its fix."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper, numpy_helper
from test_emitters import F, _infer, check



def _graph(nodes, inputs, out, consts=()):
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info(n, F, list(s)) for n, s in inputs],
        [helper.make_tensor_value_info(out, F, None)],
        [numpy_helper.from_array(a, n) for n, a in consts],
    )
    return _infer(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]))


def test_sigmoid_is_zero_far_below_and_swish_of_minus_inf_is_nan() -> None:
    """sigmoid(x) is exactly 0 from x ~ -89 down to -inf (the reference's float64 sigmoid
    rounds there to 0), so x * sigmoid(x) is NaN at -inf and -0 at -3e38. The reciprocal form
    once clamped -x to exp's range and gave ~1.2e-38 there: -inf and -3.6."""
    x = np.array(
        [-np.inf, -3e38, -1e30, -1000.0, -104.0, -89.5, -89.0, np.inf, np.nan, -0.0, 0.0, 1.0]
        + [-2.0] * 4,
        np.float32,
    )
    model = _graph(
        [helper.make_node("Sigmoid", ["x"], ["s"]), helper.make_node("Mul", ["x", "s"], ["y"])],
        [("x", x.shape)],
        "y",
    )
    ex = check(model, {"x": x}, rtol=2e-6, atol=1e-6)
    y = ex.outputs()["y"]
    assert np.isnan(y[0]) and np.isnan(y[8]), y
    assert np.all(y[1:7] == 0) and np.all(np.signbit(y[1:7])), y
    sig = _graph([helper.make_node("Sigmoid", ["x"], ["y"])], [("x", x.shape)], "y")
    s = check(sig, {"x": x}, rtol=2e-6, atol=1e-6).outputs()["y"]
    np.testing.assert_array_equal(s[:7], np.zeros(7, np.float32))
    assert s[7] == 1 and np.isnan(s[8])


@pytest.mark.parametrize("act", [None, "Relu", "Sigmoid"])
@pytest.mark.parametrize("n", [5, 129])
def test_gemv_with_bias_and_residual_steps_to_the_same_bits(act, n) -> None:
    """A MatMul of one row and small constant weights with a row bias and a residual Add: the
    fused GEMM (bias and addend in its epilogue) gives the bits of the MatMul, the Add and the
    Add stepped apart. With the addend the fused GEMM once left the GEMV body for the blocked
    one, which sums K in four partial sums, while the MatMul's own entry ran the GEMV."""
    rng = np.random.default_rng(3)
    k = 8
    w = (rng.standard_normal((k, n)) / np.sqrt(k)).astype(np.float32)
    bias = rng.standard_normal(n).astype(np.float32)
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["m"]),
        helper.make_node("Add", ["m", "bias"], ["mb"]),
        helper.make_node("Add", ["r", "mb"], ["y" if act is None else "z"]),
    ]
    if act is not None:
        nodes.append(helper.make_node(act, ["z"], ["y"]))
    model = _graph(nodes, [("x", (1, k)), ("r", (1, n))], "y", [("w", w), ("bias", bias)])
    data = {
        "x": rng.standard_normal((1, k)).astype(np.float32),
        "r": rng.standard_normal((1, n)).astype(np.float32),
    }
    ex = check(model, data, rtol=1e-5, atol=1e-6, kinds=["matmul"])
    assert sum(i.kind == "matmul" for i in ex.lir.code) == 1
