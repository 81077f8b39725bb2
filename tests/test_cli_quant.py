"""The quantization commands: `glowviz profile`, `glowviz quant-report`, and `--quantize` on the
model commands; user errors are one line and exit 2."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from glowviz.cli import main

SAMPLES = Path(__file__).resolve().parents[1] / "sample_models"
LENET = SAMPLES / "lenet.onnx"
MLP = SAMPLES / "mlp.onnx"


def cli(*argv) -> int:
    return main([str(a) for a in argv])


def _profile(tmp: Path, model: Path = LENET) -> Path:
    out = tmp / "p.json"
    cal = tmp / "cal.npz"
    x = np.random.default_rng(0).standard_normal((5, 1, 1, 28, 28)).astype(np.float32)
    np.savez(cal, input=x)  # five samples along a new first axis
    assert cli("profile", model, "--inputs", cal, "--random", 2, "-o", out) == 0
    return out


def test_profile_writes_a_hashed_profile(tmp_path, capsys):
    path = _profile(tmp_path)
    data = json.loads(path.read_text())
    assert data["format"] == "glowviz.profile/1" and data["inputs"] == 7
    assert data["graph_hash"].startswith("sha256:") and "input" in data["tensors"]
    assert "profiled" in capsys.readouterr().out


def test_quantize_on_the_model_commands(tmp_path, capsys):
    prof = _profile(tmp_path)
    capsys.readouterr()
    assert cli("compile", LENET, "--quantize", prof, "--print-after", "quantize-graph") == 0
    out = capsys.readouterr().out
    assert "QConv(" in out and "quantize-graph" in out
    assert cli("mem", LENET, "--quantize", prof, "--json", tmp_path / "m.json") == 0
    q = json.loads((tmp_path / "m.json").read_text())
    assert cli("mem", LENET, "--json", tmp_path / "f.json") == 0
    f = json.loads((tmp_path / "f.json").read_text())
    assert q["regions"]["activations"] * 3 < f["regions"]["activations"]
    assert (
        cli("run", LENET, "--quantize", prof, "--executor", "llvm", "-o", tmp_path / "o.npz") == 0
    )
    assert (
        cli("bench", LENET, "--quantize", prof, "--vs", "none", "--reps", 2, "--no-compile-times")
        == 0
    )
    assert cli("compile", LENET, "--quantize", prof, "--keep-float", "conv_0_relu") == 0


def test_quant_report_json_figure_and_fallback(tmp_path, capsys):
    prof = _profile(tmp_path)
    capsys.readouterr()
    rep, fig = tmp_path / "r.json", tmp_path / "q.svg"
    argv = ["quant-report", LENET, "--profile", prof, "--random", 2, "--json", rep]
    assert cli(*argv, "--figure", fig, "--target-sqnr", 60) == 0
    out = capsys.readouterr().out
    assert "local" in out and "first node below" in out and "fallback to 60 dB" in out
    data = json.loads(rep.read_text())
    assert data["format"] == "glowviz.quant-report/1"
    assert {"local_sqnr_db", "propagated_sqnr_db", "scale", "offset"} <= set(data["nodes"][0])
    assert data["fallback"]["target_sqnr_db"] == 60
    assert fig.read_text().startswith("<?xml")


def test_quantization_user_errors_are_one_line(tmp_path, capsys):
    prof = _profile(tmp_path)
    capsys.readouterr()
    assert cli("compile", MLP, "--quantize", prof) == 2  # the profile of another model
    err = capsys.readouterr().err
    assert "another graph" in err and "Traceback" not in err
    assert cli("compile", LENET, "--quantize", tmp_path / "missing.json") == 2
    assert "cannot read profile" in capsys.readouterr().err
    assert cli("profile", LENET, "-o", tmp_path / "x.json") == 2
    assert "no calibration inputs" in capsys.readouterr().err
    bad = tmp_path / "bad.npz"
    np.savez(bad, other=np.zeros(3, np.float32))
    assert cli("profile", LENET, "--inputs", bad, "-o", tmp_path / "x.json") == 2
    assert "has no array for input" in capsys.readouterr().err


def test_gptq_weight_rounding_from_a_profile_with_hessians(tmp_path, capsys):
    """`profile --hessians` writes the layers' Hessians beside the profile; `--weight-rounding
    gptq` uses them (the same int8 grid, other int8 values) and both executors agree; a
    profile without them is one line and exit 2."""
    out = tmp_path / "h.json"
    assert cli("profile", LENET, "--random", 6, "--hessians", "-o", out) == 0
    assert "Hessians of" in capsys.readouterr().out
    assert (tmp_path / "h.hessians.npz").exists()
    assert json.loads(out.read_text())["hessians"]["file"] == "h.hessians.npz"
    x = np.random.default_rng(3).standard_normal((1, 1, 28, 28)).astype(np.float32)
    np.savez(tmp_path / "x.npz", input=x)
    results = {}
    for ex in ("llvm", "interpreter"):
        o = tmp_path / f"{ex}.npz"
        argv = ["run", LENET, "--quantize", out, "--weight-rounding", "gptq", "--executor", ex]
        assert cli(*argv, "--inputs", tmp_path / "x.npz", "-o", o) == 0
        with np.load(o) as z:
            results[ex] = {k: z[k] for k in z.files}
    assert results["llvm"].keys() == results["interpreter"].keys()
    for k in results["llvm"]:
        assert np.array_equal(results["llvm"][k], results["interpreter"][k]), k
    plain = _profile(tmp_path)
    capsys.readouterr()
    assert cli("compile", LENET, "--quantize", plain, "--weight-rounding", "gptq") == 2
    err = capsys.readouterr().err
    assert "Hessians" in err and "--hessians" in err and "Traceback" not in err


def test_quant_report_names_a_concat_of_mixed_ranges_kept_float(tmp_path, capsys):
    """A ViT's class-token Concat stays float by default, and quant-report says why;
    `--min-slice-steps 0` forces it to int8; a negative count is a usage error."""
    import onnx

    from benchmarks.models_transformer import build_vit_tiny

    vit = tmp_path / "vit.onnx"
    onnx.save(build_vit_tiny(image=32, patch=8, d=32, heads=2, layers=1, classes=10), vit)
    prof = tmp_path / "p.json"
    assert cli("profile", vit, "--random", 4, "-o", prof) == 0
    capsys.readouterr()
    assert cli("quant-report", vit, "--profile", prof, "--random", 1) == 0
    out = capsys.readouterr().out
    assert "float tokens_0: slice 0:1 of axis 1 spans" in out, out
    assert "float pos_1: slice 0:1 of axis 1 spans" in out
    argv = ["quant-report", vit, "--profile", prof, "--random", 1, "--min-slice-steps", 0]
    assert cli(*argv) == 0
    out = capsys.readouterr().out
    assert "float tokens_0" not in out and "tokens_0" in out  # quantized: in the node table
    with pytest.raises(SystemExit) as e:  # argparse's usage error
        cli(*argv[:-1], -1)
    assert e.value.code == 2 and "non-negative" in capsys.readouterr().err
