"""PyTorch exports, end to end: every model in tests/torch_models/ (exported by hand with
tests/torch_models/export_models.py; this test does NOT need torch) compiles through the whole
pipeline with the verifier on after every pass, leaves no shape arithmetic in the final graph,
and matches the outputs PyTorch recorded on every executor."""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np
import onnx
import onnxruntime
import pytest

from compiler.errors import ShapeError
from compiler.executors import EXECUTORS, make_executor
from compiler.pipeline import CompileOptions, CompileResult, compile_model

HERE = Path(__file__).resolve().parent / "torch_models"
MAX_BYTES = 300 * 1024
RTOL, ATOL = 1e-4, 1e-5

#: name -> input_shapes for the exports with a symbolic batch axis (None: static shapes).
MODELS: dict[str, dict[str, tuple[int, ...]] | None] = {
    "cnn_view_flatten": None,
    "cnn_view_flatten_unfolded": None,
    "cnn_view_flatten_dynamic_batch": {"input": (1, 1, 16, 16)},
    "resnet_block": None,
    "mobilenetv2_block": None,
    "attention_block": None,
    "attention_sdpa_dynamic_batch": {"input": (1, 8, 16)},
    "attention_block_opset13_unfolded": None,
    "unet_decoder": None,
    "unet_decoder_dynamic_batch_unfolded": {"input": (1, 3, 16, 16)},
    "mlp_flatten_dropout": None,
    "lstm_classifier": None,
    "gru_sequence": None,
    "bilstm_tagger": None,
    "transformer_ops_block": None,
    "lstm_classifier_dynamo": None,
    "gru_sequence_dynamo": None,
    "bilstm_tagger_dynamo": None,
    "transformer_ops_block_dynamo": None,
}
DYNAMIC = [name for name, shapes in MODELS.items() if shapes]
#: Ops that must not survive the pipeline: shape arithmetic folds away with static shapes.
SHAPE_OPS = {"Shape", "Gather", "ConstantOfShape", "Size", "Range"}
#: name -> reason, for exports the compiler gets wrong today (xfail(strict=True)).
KNOWN_FAILURES: dict[str, str] = {}
KINDS = sorted(EXECUTORS)


def _load(name: str, suffix: str) -> dict[str, np.ndarray]:
    with np.load(HERE / f"{name}.{suffix}.npz") as f:
        return {k: f[k] for k in f.files}


@functools.cache
def _compile(name: str, batch: int = 1) -> CompileResult:
    shapes = MODELS[name]
    if shapes and batch != 1:
        shapes = {k: (batch, *v[1:]) for k, v in shapes.items()}
    return compile_model(
        HERE / f"{name}.onnx", CompileOptions(input_shapes=shapes or {}, verify=True)
    )


def _marks(name: str) -> list[pytest.MarkDecorator]:
    if name in KNOWN_FAILURES:
        return [pytest.mark.xfail(strict=True, reason=KNOWN_FAILURES[name])]
    return []


def _cases(names: list[str]) -> list:
    return [pytest.param(n, k, id=f"{n}-{k}", marks=_marks(n)) for n in names for k in KINDS]


def test_every_model_is_listed() -> None:
    assert sorted(p.stem for p in HERE.glob("*.onnx")) == sorted(MODELS)
    for name in MODELS:
        for suffix in ("input", "expected"):
            assert (HERE / f"{name}.{suffix}.npz").is_file()


@pytest.mark.parametrize("name", MODELS)
def test_files_are_valid_and_small(name: str) -> None:
    for path in HERE.glob(f"{name}.*"):
        assert path.stat().st_size < MAX_BYTES, path
    model = onnx.load(HERE / f"{name}.onnx")
    onnx.checker.check_model(model, full_check=True)
    assert model.producer_name == "pytorch"
    assert [i.name for i in model.graph.input] == ["input"]
    assert [o.name for o in model.graph.output] == ["output"]
    dims = model.graph.input[0].type.tensor_type.shape.dim
    assert (name in DYNAMIC) == any(d.HasField("dim_param") for d in dims)


@pytest.mark.parametrize("name", MODELS)
def test_onnxruntime_reproduces_recorded_output(name: str) -> None:
    opts = onnxruntime.SessionOptions()
    opts.intra_op_num_threads = opts.inter_op_num_threads = 1
    sess = onnxruntime.InferenceSession(
        str(HERE / f"{name}.onnx"), opts, providers=["CPUExecutionProvider"]
    )
    (got,) = sess.run(["output"], _load(name, "input"))
    np.testing.assert_allclose(got, _load(name, "expected")["output"], rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("name", DYNAMIC)
def test_dynamic_batch_needs_input_shapes(name: str) -> None:
    with pytest.raises(ShapeError, match=r"input 'input' has symbolic dims.*input_shapes"):
        compile_model(HERE / f"{name}.onnx", CompileOptions(verify=True))


@pytest.mark.parametrize("name", [pytest.param(n, marks=_marks(n)) for n in MODELS])
def test_pipeline_folds_shape_arithmetic(name: str) -> None:
    result = _compile(name)
    assert result.stopped_after is None
    assert result.lir is not None and result.plan is not None
    # A Gather of real data (an embedding lookup, `y[:, -1]`) is not shape arithmetic; one of
    # a 1-D integer vector (a shape) is.
    ops = {
        node.op
        for fn in result.module.functions
        for node in fn.nodes
        if node.op != "Gather"
        or (node.operands[0].type.rank == 1 and not node.operands[0].type.elem.is_float)
    }
    assert not ops & SHAPE_OPS, f"shape ops survived: {sorted(ops & SHAPE_OPS)}"


@pytest.mark.parametrize(("name", "kind"), _cases(list(MODELS)))
def test_matches_pytorch(name: str, kind: str) -> None:
    out = make_executor(_compile(name), kind).run(_load(name, "input"))
    expected = _load(name, "expected")
    assert list(out) == list(expected) == ["output"]
    assert out["output"].shape == expected["output"].shape
    assert out["output"].dtype == np.float32
    np.testing.assert_allclose(out["output"], expected["output"], rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize(("name", "kind"), _cases(DYNAMIC))
def test_dynamic_batch_at_batch_3(name: str, kind: str) -> None:
    """The symbolic batch axis really is free: compiled for batch 3, every sample of a batch
    of three copies of the recorded input gives the recorded output (eval mode, so samples are
    independent)."""
    x = _load(name, "input")["input"]
    expected = _load(name, "expected")["output"]
    result = _compile(name, 3)
    out = make_executor(result, kind).run({"input": np.concatenate([x, x, x])})
    np.testing.assert_allclose(out["output"], np.concatenate([expected] * 3), rtol=RTOL, atol=ATOL)
