"""The oracle's float32-range class (docs/fuzzing.md): where the float64 reference holds a
tensor beyond FLT_MAX, ours must equal the reference rounded to float32 after every op; any
other disagreement is still a wrong answer.

Mutant 852 of seed 11 is lenet with fc.bias_0 = 1e38: the exact fc_1 (and relu_3) exceed
FLT_MAX, so every float32 evaluation has +inf in relu_3 and the last Gemm spreads it. Ours give
the rounded reference's +-inf; onnxruntime, whose fc_1 sums overflow in three places, NaN; the
float64 reference finite values no float32 tensor can carry."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from .oracle import float32_range_exceeded, run_reference32, run_reference64
from .runner import SAMPLES, Case, mutant_cases
from .worker import task_check


@pytest.fixture(scope="module")
def mutant_852() -> Any:
    case = next(mutant_cases(11, 1, start=852))
    assert case.desc == "lenet: init_values: initializer fc.bias_0: huge values"
    return case


def _check(case: Any, tmp: Path) -> dict[str, Any]:
    return task_check({"model": case.model, "feeds": case.feeds, "seed": case.seed}, tmp)


def test_overflowing_lenet_is_float32_range(mutant_852: Any, tmp_path: Path) -> None:
    reply = _check(mutant_852, tmp_path)
    assert reply["cls"] == "float32-range", reply
    assert "fc_1, relu_3" in reply["detail"]


def _perturbed(monkeypatch: pytest.MonkeyPatch, change: Any) -> None:
    """Every executor `task_check` makes returns `change(output)` from `run`."""
    import compiler.executors as executors

    real = executors.make_executor

    class Wrong:
        def __init__(self, inner: Any) -> None:
            self.inner = inner

        def __getattr__(self, name: str) -> Any:
            return getattr(self.inner, name)

        def run(self, feeds: Any) -> dict[str, np.ndarray]:
            return {k: change(v) for k, v in self.inner.run(feeds).items()}

    monkeypatch.setattr(executors, "make_executor", lambda *a, **k: Wrong(real(*a, **k)))


def test_a_wrong_sign_past_the_range_is_still_wrong(
    mutant_852: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _perturbed(monkeypatch, lambda v: -v)
    reply = _check(mutant_852, tmp_path)
    assert reply["cls"] == "wrong", reply
    assert "vs-ort interpreter" in reply["cause"] and "vs-ort llvm" in reply["cause"]


def test_a_wrong_answer_in_range_is_still_wrong(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _perturbed(monkeypatch, lambda v: v * np.float32(1.01))
    case = Case("mlp", "sample", "sample", "mlp", (SAMPLES / "mlp.onnx").read_bytes())
    reply = _check(case, tmp_path)
    assert reply["cls"] == "wrong", reply


def _scale_chain() -> onnx.ModelProto:
    """y = (x * 4) * 0.25: exact in float64, +inf in float32 where 4x passes FLT_MAX."""
    four = helper.make_tensor("four", TensorProto.FLOAT, [], [4.0])
    quarter = helper.make_tensor("quarter", TensorProto.FLOAT, [], [0.25])
    g = helper.make_graph(
        [
            helper.make_node("Mul", ["x", "four"], ["t"]),
            helper.make_node("Mul", ["t", "quarter"], ["y"]),
        ],
        "scale",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])],
        [four, quarter],
    )
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def test_the_rounded_reference_overflows_where_float32_must() -> None:
    m = _scale_chain()
    big = {"x": np.array([1e38, -1e38, 1.0], np.float32)}
    assert float32_range_exceeded(m, big) == ["t"]
    np.testing.assert_array_equal(run_reference32(m, big)["y"], [np.inf, -np.inf, 1.0])
    np.testing.assert_allclose(run_reference64(m, big)["y"], big["x"], rtol=1e-7)
    small = {"x": np.array([1e37, -1.0, 1.0], np.float32)}
    assert float32_range_exceeded(m, small) == []
    np.testing.assert_array_equal(run_reference32(m, small)["y"], small["x"])
