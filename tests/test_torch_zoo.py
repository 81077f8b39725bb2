"""The model zoo, end to end: one model of each family users bring (torchvision's and
transformers' own constructors at small sizes, random weights; tests/torch_models/zoo/, made by
tests/torch_models/export_zoo.py, which this test does not need), exported by both PyTorch
exporters, compiles through the whole pipeline and matches onnxruntime on the interpreter and
the LLVM executor. Stripped models are refilled (tests/torch_models/zoo.py) before anything
else sees them; onnxruntime on the refilled model is their reference."""

from __future__ import annotations

import functools
import json
from pathlib import Path

import numpy as np
import onnx
import onnxruntime
import pytest

from compiler.executors import LOW_LEVEL_EXECUTORS, make_executor
from compiler.pipeline import CompileOptions, CompileResult, compile_model
from tests.torch_models.zoo import META_KEY, ZOO_DIR, is_stripped, load, refill

EXPORTERS = ("torchscript", "dynamo")
#: family -> slow (compiles or runs for longer than a few seconds on a loaded 2-core machine)
FAMILIES: dict[str, bool] = {
    "resnet18": False,
    "mobilenet_v2": False,
    "mobilenet_v3_small": False,
    "efficientnet_b0": False,
    "densenet": False,
    "vgg": False,
    "googlenet": False,
    "inception_v3": True,
    "regnet_y_400mf": False,
    "convnext": False,
    "deeplabv3_mobilenet_v3": True,
    "fcn_resnet50": True,
    "lraspp_mobilenet_v3": False,
    "fpn_resnet18": True,
    "vit": False,
    "swin": False,
    "bert": False,
    "distilbert": False,
    "gpt2": False,
    "t5": False,
    "whisper_encoder": False,
    "wav2vec2": False,
}
MODELS = [f"{family}-{exporter}" for family in FAMILIES for exporter in EXPORTERS]
KINDS = sorted(LOW_LEVEL_EXECUTORS)
#: committed bytes of the whole zoo (the issue's budget: small files, no weights of big nets)
MAX_ZOO_BYTES = 15 * 1024 * 1024
#: rtol, and atol relative to the output's largest magnitude: a deep net's float32 sums (FPN's
#: 2304-term convolutions on outputs up to 13) differ by a few ulps of the largest value
#: between any two summation orders, on any element, small ones included. Where onnxruntime
#: disagrees with itself by more (its optimized graph vs the unoptimized one: up to 7e-5 of the
#: largest output on the segmentation heads' upsampled logits), atol is twice that spread.
RTOL, ATOL = 1e-4, 1e-5


def _npz(name: str, suffix: str) -> dict[str, np.ndarray]:
    with np.load(ZOO_DIR / f"{name}.{suffix}.npz") as f:
        return {k: f[k] for k in f.files}


@functools.lru_cache(maxsize=1)
def _model(name: str) -> onnx.ModelProto:
    return load(ZOO_DIR / f"{name}.onnx")


def _ort(
    model: onnx.ModelProto, data: bytes, feeds: dict[str, np.ndarray], optimize: bool = True
) -> dict[str, np.ndarray]:
    """onnxruntime's outputs of `model`, given serialized as `data` (the refilled zoo is
    ~840 MB of weights: both sessions read one serialization)."""
    opts = onnxruntime.SessionOptions()
    opts.intra_op_num_threads = opts.inter_op_num_threads = 1
    if not optimize:
        opts.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = onnxruntime.InferenceSession(data, opts, providers=["CPUExecutionProvider"])
    names = [o.name for o in model.graph.output]
    return dict(zip(names, sess.run(names, feeds), strict=True))


@functools.lru_cache(maxsize=1)
def _reference(name: str) -> dict[str, tuple[np.ndarray, float]]:
    """onnxruntime's outputs (for a model committed whole, also the recorded ones), each with
    the atol it is compared at (see RTOL, ATOL)."""
    feeds = _npz(name, "input")
    model = _model(name)
    data = model.SerializeToString()
    got = _ort(model, data, feeds)
    unoptimized = _ort(model, data, feeds, optimize=False)
    del data
    if (ZOO_DIR / f"{name}.expected.npz").is_file():
        recorded = _npz(name, "expected")
        assert list(recorded) == list(got)
        for key, value in recorded.items():
            np.testing.assert_allclose(got[key], value, rtol=RTOL, atol=ATOL, err_msg=key)
    out = {}
    for key, value in got.items():
        spread = float(np.abs(value.astype(np.float64) - unoptimized[key]).max())
        out[key] = (value, max(ATOL * max(1.0, float(np.abs(value).max())), 2 * spread))
    return out


@functools.lru_cache(maxsize=1)
def _compile(name: str) -> CompileResult:
    return compile_model(_model(name), CompileOptions(verify=True))


def _cases() -> list:
    return [
        pytest.param(
            name,
            kind,
            id=f"{name}-{kind}",
            marks=[pytest.mark.slow] if FAMILIES[name.rsplit("-", 1)[0]] else [],
        )
        for name in MODELS
        for kind in KINDS
    ]


def test_zoo_is_complete_and_small() -> None:
    assert sorted(p.stem for p in ZOO_DIR.glob("*.onnx")) == sorted(MODELS)
    total = 0
    for path in ZOO_DIR.iterdir():
        total += path.stat().st_size
    assert total <= MAX_ZOO_BYTES, f"the zoo takes {total} bytes"
    for name in MODELS:
        assert (ZOO_DIR / f"{name}.input.npz").is_file()
        model = onnx.load(str(ZOO_DIR / f"{name}.onnx"))
        assert model.producer_name == "pytorch"
        # A model is committed either whole with its recorded outputs, or stripped.
        assert is_stripped(model) != (ZOO_DIR / f"{name}.expected.npz").is_file(), name


def test_refill_is_deterministic_and_complete() -> None:
    name = "resnet18-torchscript"
    stored = onnx.load(str(ZOO_DIR / f"{name}.onnx"))
    assert is_stripped(stored)
    empty = [i.name for i in stored.graph.initializer if not i.raw_data and not i.float_data]
    assert empty, "a stripped model keeps no data for its large initializers"
    first, second = refill(stored), refill(stored)
    assert first.SerializeToString() == second.SerializeToString()
    assert all(p.key != META_KEY for p in first.metadata_props)
    onnx.checker.check_model(first, full_check=True)
    stats = json.loads(next(p.value for p in stored.metadata_props if p.key == META_KEY))
    assert sorted(stats["tensors"]) == sorted(empty)
    by_name = {i.name: onnx.numpy_helper.to_array(i) for i in first.graph.initializer}
    for init, (_, _, lo, hi) in stats["tensors"].items():
        # Refilling keeps the recorded range (positive tensors stay positive).
        values = by_name[init]
        assert values.size and lo <= values.min() and values.max() <= hi, init


@pytest.mark.parametrize(("name", "kind"), _cases())
def test_matches_onnxruntime(name: str, kind: str) -> None:
    expected = _reference(name)
    result = _compile(name)
    assert result.stopped_after is None
    out = make_executor(result, kind).run(_npz(name, "input"))
    assert list(out) == list(expected)
    for key, (want, atol) in expected.items():
        got = out[key]
        assert got.shape == want.shape and got.dtype == want.dtype, key
        np.testing.assert_allclose(got, want, rtol=RTOL, atol=atol, err_msg=key)


def test_zoo_dir_is_the_exports_default() -> None:
    source = (Path(__file__).parent / "torch_models" / "export_zoo.py").read_text()
    for family in FAMILIES:
        assert f'"{family}"' in source, family
