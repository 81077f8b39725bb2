"""An empty batch (an input dim of 0; legal in ONNX, issue 11): instructions whose every output
is empty have nothing to do, so the LLVM executor emits no code for them (its GEMM refused the
0-row shape of a FullyConnected: mutant 330 of seed 11, mobilenet_small with batch 0)."""

from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper, numpy_helper

from compiler.executors import make_executor
from compiler.pipeline import compile_model

F = TensorProto.FLOAT


def _conv_fc_model() -> bytes:
    rng = np.random.default_rng(0)
    inits = [
        numpy_helper.from_array(rng.standard_normal((4, 3, 3, 3)).astype(np.float32), "cw"),
        numpy_helper.from_array(rng.standard_normal(4).astype(np.float32), "cb"),
        numpy_helper.from_array(rng.standard_normal((64, 10)).astype(np.float32), "fw"),
        numpy_helper.from_array(rng.standard_normal(10).astype(np.float32), "fb"),
        numpy_helper.from_array(np.array([0, 64], np.int64), "flat"),
    ]
    nodes = [
        helper.make_node("Conv", ["x", "cw", "cb"], ["c"], kernel_shape=[3, 3], pads=[1] * 4),
        helper.make_node("Relu", ["c"], ["r"]),
        helper.make_node("Reshape", ["r", "flat"], ["f"]),
        helper.make_node("Gemm", ["f", "fw", "fb"], ["g"]),
        helper.make_node("Relu", ["g"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "empty",
        [helper.make_tensor_value_info("x", F, [0, 3, 4, 4])],
        [helper.make_tensor_value_info("y", F, [0, 10])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    return model.SerializeToString()


def test_an_empty_batch_runs_on_both_executors() -> None:
    result = compile_model(_conv_fc_model())
    x = np.zeros((0, 3, 4, 4), np.float32)
    for kind in ("llvm", "interpreter"):
        ex = make_executor(result, kind)
        (y,) = ex.run({"x": x}).values()
        assert y.shape == (0, 10) and y.dtype == np.float32, kind
    llvm = make_executor(result, "llvm")
    ex = llvm.executor  # type: ignore[attr-defined]
    ex.reset(llvm._inputs({"x": x}))  # type: ignore[attr-defined]
    while not ex.done:  # the debugger's path: every instruction, the empty ones included
        ex.step()
    assert [v.shape for v in ex.outputs().values()] == [(0, 10)]
