"""Guards sample_models/generate.py: the committed models are valid, small, reproduce their
recorded onnxruntime outputs, and the generator is deterministic."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import onnxruntime
import pytest

from sample_models.generate import MODELS as BUILDERS

SAMPLES = Path(__file__).resolve().parents[1] / "sample_models"
#: What the generator writes: the committed models must be exactly these.
MODELS = list(BUILDERS)
MAX_BYTES = int(2.5 * 1024 * 1024)


def test_every_model_is_listed() -> None:
    on_disk = sorted(p.stem for p in SAMPLES.glob("*.onnx"))
    assert on_disk == sorted(MODELS)


@pytest.mark.parametrize("name", MODELS)
def test_model_is_valid_and_small(name: str) -> None:
    path = SAMPLES / f"{name}.onnx"
    assert path.stat().st_size <= MAX_BYTES
    model = onnx.load(path)
    onnx.checker.check_model(model, full_check=True)
    assert [i.name for i in model.graph.input] == ["input"]
    assert [o.name for o in model.graph.output] == ["output"]


@pytest.mark.parametrize("name", MODELS)
def test_onnxruntime_reproduces_recorded_output(name: str) -> None:
    opts = onnxruntime.SessionOptions()
    opts.intra_op_num_threads = 1
    opts.inter_op_num_threads = 1
    sess = onnxruntime.InferenceSession(
        str(SAMPLES / f"{name}.onnx"), opts, providers=["CPUExecutionProvider"]
    )
    with np.load(SAMPLES / f"{name}.input.npz") as f:
        feeds = {k: f[k] for k in f.files}
    with np.load(SAMPLES / f"{name}.expected.npz") as f:
        expected = {k: f[k] for k in f.files}
    assert list(feeds) == ["input"] and list(expected) == ["output"]
    (got,) = sess.run(["output"], feeds)
    np.testing.assert_allclose(got, expected["output"], rtol=1e-5, atol=1e-6)


def test_opset9_mlp_matches_opset17_mlp() -> None:
    old = onnx.load(SAMPLES / "mlp_opset9.onnx")
    assert [o.version for o in old.opset_import if o.domain in ("", "ai.onnx")] == [9]
    for suffix in ("input", "expected"):
        with (
            np.load(SAMPLES / f"mlp.{suffix}.npz") as a,
            np.load(SAMPLES / f"mlp_opset9.{suffix}.npz") as b,
        ):
            assert a.files == b.files
            for key in a.files:
                np.testing.assert_array_equal(a[key], b[key])


def test_generator_is_deterministic(tmp_path: Path) -> None:
    subprocess.run(
        [sys.executable, str(SAMPLES / "generate.py"), "--quiet", "--out", str(tmp_path)],
        check=True,
    )
    for name in MODELS:
        fresh = (tmp_path / f"{name}.onnx").read_bytes()
        assert fresh == (SAMPLES / f"{name}.onnx").read_bytes(), f"{name}.onnx differs"
        assert (tmp_path / f"{name}.input.npz").read_bytes() == (
            SAMPLES / f"{name}.input.npz"
        ).read_bytes(), f"{name}.input.npz differs"
