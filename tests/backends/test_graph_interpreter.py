"""The graph interpreter: results, input validation, freeing after last use, error wrapping."""

from __future__ import annotations

import numpy as np
import pytest

from compiler.backends.interpreter.graph_interpreter import GraphInterpreter, run_graph
from compiler.errors import CompilerError, ExecutionError, InputError
from compiler.executors import EXECUTORS, make_executor
from compiler.graph import Module, TensorType, parse_module, print_module


def small_module() -> Module:
    """y = relu(x @ w + b) * 2 ; z = reshape(x) saved as a second output."""
    m = Module("small")
    x = m.add_placeholder("x", TensorType.parse("f32<2x3>"))
    w = m.add_constant("w", np.arange(12, dtype=np.float32).reshape(3, 4) - 5)
    b = m.add_constant("b", np.ones(4, np.float32))
    two = m.add_constant("two", np.array(2.0, np.float32))
    y = m.add_placeholder("y", TensorType.parse("f32<2x4>"), is_output=True)
    z = m.add_placeholder("z", TensorType.parse("f32<6>"), is_output=True)
    fn = m.create_function()
    mm = fn.create("MatMul", [x, w])
    add = fn.create("Add", [mm.result, b])
    relu = fn.create("Relu", [add.result])
    mul = fn.create("Mul", [relu.result, two])
    fn.create("Save", [mul.result, y])
    rs = fn.create("Reshape", [x], {"shape": (6,)})
    fn.create("Save", [rs.result, z])
    return m


def expected(x: np.ndarray) -> dict[str, np.ndarray]:
    w = np.arange(12, dtype=np.float32).reshape(3, 4) - 5
    return {"y": np.maximum(x @ w + 1, 0) * 2, "z": x.reshape(6)}


X = np.array([[1, -2, 3], [0.5, 0.25, -1]], np.float32)


def test_run_graph_results_in_output_order():
    out = run_graph(small_module(), {"x": X})
    assert list(out) == ["y", "z"]
    for k, v in expected(X).items():
        np.testing.assert_allclose(out[k], v, rtol=1e-6)
        assert out[k].dtype == np.float32


def test_inputs_as_list():
    out = run_graph(small_module(), [X])
    np.testing.assert_allclose(out["y"], expected(X)["y"], rtol=1e-6)


def test_outputs_do_not_alias_inputs():
    x = X.copy()
    out = run_graph(small_module(), {"x": x})
    out["z"][0] = 99.0
    assert x[0, 0] == 1.0


def test_parsed_module_runs():
    m = small_module()
    text = print_module(m, with_data=True)
    out = run_graph(parse_module(text), {"x": X})
    np.testing.assert_allclose(out["y"], expected(X)["y"], rtol=1e-6)


@pytest.mark.parametrize(
    "inputs,match",
    [
        ({}, r"missing input 'x'"),
        ({"x": X, "q": X}, r"unknown input 'q'.*inputs are: x"),
        (
            {"x": X.astype(np.float64)},
            r"input 'x': expected element type f32 \(float32\), got float64",
        ),
        ({"x": X.T.copy()}, r"input 'x': expected shape \[2, 3\] \(f32<2x3>\), got \[3, 2\]"),
        ([X, X], r"expected 1 input \(x\), got 2"),
    ],
)
def test_input_validation(inputs, match):
    with pytest.raises(InputError, match=match):
        run_graph(small_module(), inputs)


def test_input_error_is_a_compiler_error():
    assert issubclass(InputError, CompilerError)


def test_values_freed_after_last_use():
    m = Module("chain")
    x = m.add_placeholder("x", TensorType.parse("f32<4>"))
    out = m.add_placeholder("out", TensorType.parse("f32<4>"), is_output=True)
    fn = m.create_function()
    v = x
    for _ in range(10):
        v = fn.create("Neg", [v]).result
    fn.create("Save", [v, out])

    seen: list[str] = []

    class Spy(GraphInterpreter):
        def run_node(self, node, args):
            seen.append(node.op)
            return super().run_node(node, args)

    interp = Spy(m)
    res = interp.run({"x": np.arange(4, dtype=np.float32)})
    np.testing.assert_array_equal(res["out"], np.arange(4, dtype=np.float32))
    # a chain holds at most one intermediate value at a time
    assert max(interp.live_counts) <= 1
    assert interp.live_counts[-1] == 0
    assert seen == ["Neg"] * 10  # Save is handled by the driver, not a kernel


def test_unused_results_are_not_kept():
    m = Module("dead")
    x = m.add_placeholder("x", TensorType.parse("f32<4>"))
    out = m.add_placeholder("out", TensorType.parse("f32<4>"), is_output=True)
    fn = m.create_function()
    fn.create("Exp", [x])  # result unused
    fn.create("Save", [fn.create("Relu", [x]).result, out])
    interp = GraphInterpreter(m)
    interp.run([np.ones(4, np.float32)])
    assert interp.live_counts == [0, 1, 0]  # Exp's result is never stored


def test_kernel_failure_names_the_node():
    m = Module("bad")
    d = m.add_placeholder("data", TensorType.parse("f32<3>"))
    i = m.add_placeholder("idx", TensorType.parse("i64<2>"))
    out = m.add_placeholder("out", TensorType.parse("f32<2>"), is_output=True)
    fn = m.create_function()
    g = fn.create("Gather", [d, i], name="my_gather")
    fn.create("Save", [g.result, out])
    with pytest.raises(ExecutionError, match="my_gather"):
        run_graph(m, {"data": np.ones(3, np.float32), "idx": np.array([0, 7])})


def test_unexpected_kernel_exception_is_wrapped():
    class Broken(GraphInterpreter):
        def run_node(self, node, args):
            raise RuntimeError("boom")

    with pytest.raises(ExecutionError, match=r"node 'matmul' \(MatMul\): RuntimeError: boom"):
        Broken(small_module()).run({"x": X})


def test_executor_table_and_protocol():
    ex = make_executor(small_module(), "graph")
    assert ex.input_names == ["x"] and ex.output_names == ["y", "z"]
    assert str(ex.input_types["x"]) == "f32<2x3>"
    np.testing.assert_allclose(ex.run({"x": X})["y"], expected(X)["y"], rtol=1e-6)
    assert {"interpreter", "graph"} <= set(EXECUTORS)
    with pytest.raises(CompilerError, match="unknown executor 'tpu'; known executors: .*graph"):
        make_executor(small_module(), "tpu")
