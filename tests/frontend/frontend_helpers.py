"""Shared helpers of the frontend tests: build one-node ONNX models and compare with onnxruntime."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from compiler.backends.interpreter.graph_interpreter import run_graph
from compiler.frontend import import_onnx
from compiler.graph import verify_module

NP_TO_ONNX = {
    np.dtype(np.float32): TensorProto.FLOAT,
    np.dtype(np.int64): TensorProto.INT64,
    np.dtype(np.int32): TensorProto.INT32,
    np.dtype(np.bool_): TensorProto.BOOL,
}
# onnxruntime reads IR versions up to its own; keep each opset at the oldest IR that allows it.
IR_FOR_OPSET = {
    7: 3,
    8: 3,
    9: 4,
    10: 5,
    11: 6,
    12: 7,
    13: 7,
    14: 7,
    15: 8,
    16: 8,
    17: 8,
    18: 8,
    19: 9,
    20: 9,
    21: 10,
}


def make_model(
    nodes: Sequence[onnx.NodeProto],
    inputs: dict[str, np.ndarray | tuple],
    outputs: dict[str, int],
    opset: int,
    initializers: dict[str, np.ndarray] | None = None,
) -> onnx.ModelProto:
    """`inputs`: name -> example array (its dtype and shape) or (onnx elem type, shape);
    `outputs`: name -> onnx elem type or (elem type, shape)."""
    ins = []
    for name, spec in inputs.items():
        if isinstance(spec, np.ndarray):
            ins.append(helper.make_tensor_value_info(name, NP_TO_ONNX[spec.dtype], spec.shape))
        else:
            ins.append(helper.make_tensor_value_info(name, spec[0], spec[1]))
    outs = [
        helper.make_tensor_value_info(n, *(t if isinstance(t, tuple) else (t, None)))
        for n, t in outputs.items()
    ]
    inits = [numpy_helper.from_array(v, k) for k, v in (initializers or {}).items()]
    if IR_FOR_OPSET.get(opset, 10) < 4:  # IR 3 lists initializers among the graph inputs
        ins += [
            helper.make_tensor_value_info(k, NP_TO_ONNX[v.dtype], v.shape)
            for k, v in (initializers or {}).items()
        ]
    graph = helper.make_graph(list(nodes), "test", ins, outs, inits)
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", opset)],
        ir_version=IR_FOR_OPSET.get(opset, 10),
    )
    # The checker wants output shapes: take them from ONNX's shape inference.
    inferred = onnx.shape_inference.infer_shapes(model)
    known = {v.name: v for v in list(inferred.graph.value_info) + list(inferred.graph.output)}
    for o in model.graph.output:
        if o.type.tensor_type.HasField("shape"):
            continue
        if o.name in known and known[o.name].type.tensor_type.HasField("shape"):
            o.type.CopyFrom(known[o.name].type)
        else:  # unknown: one symbolic dim per... anything; the importer ignores output shapes
            o.type.tensor_type.shape.dim.add().dim_param = "unknown"
    return model


def run_ort(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    opts.log_severity_level = 3
    sess = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def run_ours(model: onnx.ModelProto, feeds: dict[str, np.ndarray], **kw) -> list[np.ndarray]:
    module = import_onnx(model, **kw)
    verify_module(module)
    outs = run_graph(module, feeds)
    return [outs[p.name] for p in module.outputs()]


def check_vs_ort(
    model: onnx.ModelProto, feeds: dict[str, np.ndarray], rtol: float = 1e-5, atol: float = 1e-5
) -> None:
    want = run_ort(model, feeds)
    got = run_ours(model, feeds)
    assert len(want) == len(got)
    for w, g in zip(want, got):
        assert w.dtype == g.dtype, (w.dtype, g.dtype)
        assert w.shape == g.shape, (w.shape, g.shape)
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)


def rand(*shape: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def reshape_by_input_model(path: Path) -> Path:
    """Save at `path` a model whose Reshape takes its target shape from graph input 'shape'
    (x: f32<2x6>): it compiles only once that input's value is given (--const-input)."""
    graph = helper.make_graph(
        [
            helper.make_node("Reshape", ["x", "shape"], ["y"]),
            helper.make_node("Relu", ["y"], ["z"]),
        ],
        "g",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 6]),
            helper.make_tensor_value_info("shape", TensorProto.INT64, [2]),
        ],
        [helper.make_tensor_value_info("z", TensorProto.FLOAT, ["a", "b"])],
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path
