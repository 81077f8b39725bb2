"""Integer Div never traps (issue 11 item 4): both executors, one call and stepping.

A zero divisor is an ExecutionError, as ONNX Runtime reports it ("Integer division by zero");
a constant zero divisor is refused when the model is imported; INT_MIN / -1 wraps to INT_MIN,
numpy's answer (ONNX Runtime itself dies of SIGFPE there, so numpy is the reference).
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from compiler.backends.llvm.executor import LLVMExecutor, _lir_and_plan
from compiler.errors import ExecutionError, InvalidModelError
from compiler.executors import make_executor
from compiler.pipeline import compile_model

EXECUTORS = ("interpreter", "llvm")
DTYPES = {np.int32: TensorProto.INT32, np.int64: TensorProto.INT64}


@pytest.fixture(autouse=True)
def _cache(monkeypatch, tmp_path_factory):
    monkeypatch.setenv("GLOWVIZ_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "llvm-cache"))


def _div_model(dt: type, n: int, divisor: np.ndarray | None = None) -> onnx.ModelProto:
    """y = a / b; b is an initializer when `divisor` is given, else a graph input."""
    et = DTYPES[dt]
    ins = [helper.make_tensor_value_info("a", et, [n])]
    inits = []
    if divisor is None:
        ins.append(helper.make_tensor_value_info("b", et, [n]))
    else:
        inits.append(numpy_helper.from_array(divisor.astype(dt), "b"))
    g = helper.make_graph(
        [helper.make_node("Div", ["a", "b"], ["y"], name="div")],
        "g",
        ins,
        [helper.make_tensor_value_info("y", et, [n])],
        inits,
    )
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def _truncating_div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """C's (and ONNX's) integer division, wrapping at INT_MIN / -1."""
    with np.errstate(over="ignore"):
        q = np.floor_divide(a, b)
    return np.where((a % b != 0) & ((a < 0) != (b < 0)), q + 1, q).astype(a.dtype)


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("dt", list(DTYPES))
def test_int_min_by_minus_one_wraps_and_signs_truncate(executor: str, dt: type) -> None:
    lo = np.iinfo(dt).min
    a = np.array([lo, lo, 7, -7, 7, -7, lo + 1, 0, 5], dt)
    b = np.array([-1, 1, 2, 2, -2, -2, -1, -3, 7], dt)
    ex = make_executor(compile_model(_div_model(dt, len(a))), executor)
    got = ex.run({"a": a, "b": b})["y"]
    np.testing.assert_array_equal(got, _truncating_div(a, b))
    assert got[0] == lo


@pytest.mark.parametrize("executor", EXECUTORS)
def test_runtime_zero_divisor_is_an_error_then_the_executor_runs_again(executor: str) -> None:
    a = np.array([5, 6, 7, 8], np.int64)
    ex = make_executor(compile_model(_div_model(np.int64, 4)), executor)
    with pytest.raises(ExecutionError, match="integer division by zero"):
        ex.run({"a": a, "b": np.array([1, 0, 2, 3], np.int64)})
    # The report is cleared: the next run with a good divisor succeeds.
    got = ex.run({"a": a, "b": np.array([1, 2, 2, 3], np.int64)})["y"]
    np.testing.assert_array_equal(got, [5, 3, 3, 2])


def test_stepping_names_the_dividing_instruction() -> None:
    ex = LLVMExecutor(*_lir_and_plan(compile_model(_div_model(np.int32, 3))))
    ex.reset({"a": np.ones(3, np.int32), "b": np.array([1, 0, 1], np.int32)})
    with pytest.raises(ExecutionError, match=r"integer division by zero in %\S+ \(div\)"):
        while not ex.done:
            ex.step()


@pytest.mark.parametrize("divisor", [np.array(0), np.array([3, 0, 1])])
def test_constant_zero_divisor_is_refused_at_compile_time(divisor: np.ndarray) -> None:
    with pytest.raises(InvalidModelError, match="node 'div'.*integer division by zero.*'b' is 0"):
        compile_model(_div_model(np.int32, 3, divisor))


def test_constant_float_zero_divisor_is_not_refused() -> None:
    g = helper.make_graph(
        [helper.make_node("Div", ["a", "b"], ["y"])],
        "g",
        [helper.make_tensor_value_info("a", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])],
        [numpy_helper.from_array(np.zeros(2, np.float32), "b")],
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    out = make_executor(compile_model(m), "llvm").run({"a": np.array([1, -1], np.float32)})
    np.testing.assert_array_equal(out["y"], [np.inf, -np.inf])
