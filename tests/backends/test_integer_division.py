"""Integer Div and Mod never trap (issue 11 item 4): both executors, one call and stepping.

A zero divisor is an ExecutionError, as ONNX Runtime reports it ("Integer division by zero",
"Integer modulo by zero", for Mod with fmod 0 and 1 and every integer type); a constant zero
divisor is refused when the model is imported; INT_MIN / -1 wraps to INT_MIN, numpy's answer
(ONNX Runtime itself dies of SIGFPE there, so numpy is the reference); INT_MIN % -1 is 0, as in
ONNX Runtime.
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
DTYPES = {
    np.int32: TensorProto.INT32,
    np.int64: TensorProto.INT64,
    np.uint8: TensorProto.UINT8,
    np.int8: TensorProto.INT8,
}


def _div_model(
    dt: type, n: int, divisor: np.ndarray | None = None, op: str = "Div", **attrs: int
) -> onnx.ModelProto:
    """y = a / b (or `op`); b is an initializer when `divisor` is given, else a graph input."""
    et = DTYPES[dt]
    ins = [helper.make_tensor_value_info("a", et, [n])]
    inits = []
    if divisor is None:
        ins.append(helper.make_tensor_value_info("b", et, [n]))
    else:
        inits.append(numpy_helper.from_array(divisor.astype(dt), "b"))
    g = helper.make_graph(
        [helper.make_node(op, ["a", "b"], ["y"], name=op.lower(), **attrs)],
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
@pytest.mark.parametrize("dt", [np.int32, np.int64])
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


def _ort(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> np.ndarray:
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.log_severity_level = 4  # its own report of the error is the exception we check
    sess = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)[0]


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("fmod", [0, 1])
@pytest.mark.parametrize("dt", list(DTYPES))
def test_mod_signs_and_int_min_by_minus_one_equal_onnxruntime(
    executor: str, fmod: int, dt: type
) -> None:
    info = np.iinfo(dt)
    if info.min < 0:
        a = np.array([info.min, info.min, 7, -7, 7, -7, info.max, 0, 5], dt)
        b = np.array([-1, 3, 2, 2, -2, -2, -1, -3, 7], dt)
    else:
        a = np.array([info.max, 7, 0, 5, 200], dt)
        b = np.array([1, 2, 3, 7, 9], dt)
    m = _div_model(dt, len(a), op="Mod", fmod=fmod)
    got = make_executor(compile_model(m), executor).run({"a": a, "b": b})["y"]
    np.testing.assert_array_equal(got, _ort(m, {"a": a, "b": b}))
    assert got.dtype == np.dtype(dt)


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("fmod", [0, 1])
@pytest.mark.parametrize("dt", [np.int64, np.uint8])
def test_mod_by_zero_is_an_error_as_in_onnxruntime(executor: str, fmod: int, dt: type) -> None:
    m = _div_model(dt, 3, op="Mod", fmod=fmod)
    feeds = {"a": np.array([5, 6, 7], dt), "b": np.array([2, 0, 3], dt)}
    with pytest.raises(Exception, match="modulo by zero"):
        _ort(m, feeds)
    ex = make_executor(compile_model(m), executor)
    with pytest.raises(ExecutionError, match="integer modulo by zero"):
        ex.run(feeds)
    got = ex.run({"a": feeds["a"], "b": np.array([2, 4, 3], dt)})["y"]
    np.testing.assert_array_equal(got, [1, 2, 1])


def test_stepping_names_the_mod_instruction() -> None:
    ex = LLVMExecutor(*_lir_and_plan(compile_model(_div_model(np.int32, 3, op="Mod"))))
    ex.reset({"a": np.ones(3, np.int32), "b": np.array([1, 0, 1], np.int32)})
    with pytest.raises(ExecutionError, match=r"integer modulo by zero in %\S+ \(mod\)"):
        while not ex.done:
            ex.step()


def test_constant_zero_mod_divisor_is_refused_at_compile_time() -> None:
    with pytest.raises(InvalidModelError, match="node 'mod'.*integer modulo by zero.*'b' is 0"):
        compile_model(_div_model(np.int32, 3, np.array([3, 0, 1]), op="Mod", fmod=1))


def test_float_mod_by_zero_is_nan_as_in_onnxruntime() -> None:
    m = _div_model(np.int32, 3, op="Mod", fmod=1)
    for v in (*m.graph.input, *m.graph.output):
        v.type.tensor_type.elem_type = TensorProto.FLOAT
    feeds = {"a": np.array([7, -7, 5], np.float32), "b": np.array([0, 0, 2], np.float32)}
    want = _ort(m, feeds)
    for executor in EXECUTORS:
        got = make_executor(compile_model(m), executor).run(feeds)["y"]
        np.testing.assert_array_equal(got, want)
