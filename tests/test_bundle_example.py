"""Issue 17's acceptance: `glowviz bundle` on the LeNet-, MLP-, MobileNet- and ResNet-shaped
sample models (and int8 bundles of them with `--quantize`), examples/bundle compiled with the system C compiler against each, run, and the
outputs compared with onnxruntime (fp32); every file byte-identical when a second process
(another hash seed) bundles the same model; the portable x86-64-v2 and the aarch64 bundles run
too (aarch64 under qemu-user on an x86-64 host). The C tools come from `bash dev.sh setup`; a
missing one fails these tests (tests/bundle_tools.py).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from glowviz.cli import main
from tests.bundle_tools import (
    ROOT,
    SAMPLES,
    aarch64_toolchain,
    build_example,
    onnxruntime_outputs,
    run_example,
    sample_inputs,
    save_inputs,
)

pytestmark = pytest.mark.slow

MODELS = ["lenet", "mlp", "mobilenet_small", "resnet_small"]


def _check_against_onnxruntime(name: str, outputs: dict[str, np.ndarray]) -> None:
    expected = onnxruntime_outputs(SAMPLES / f"{name}.onnx", sample_inputs(name))
    assert list(outputs) == list(expected)
    for key, want in expected.items():
        assert outputs[key].shape == want.shape and outputs[key].dtype == want.dtype
        np.testing.assert_allclose(outputs[key], want, rtol=1e-4, atol=1e-5, err_msg=key)


@pytest.mark.parametrize("name", MODELS)
def test_example_matches_onnxruntime_and_bundles_are_reproducible(
    name: str, tmp_path: Path
) -> None:
    model = SAMPLES / f"{name}.onnx"
    first = tmp_path / "first"
    assert main(["bundle", str(model), "-o", str(first), "--embed-weights"]) == 0
    inputs = save_inputs(tmp_path, sample_inputs(name))

    program = build_example(first, name)
    outputs, _ = run_example(program, inputs, weights=first / f"{name}.weights.bin")
    _check_against_onnxruntime(name, outputs)
    embedded, _ = run_example(build_example(first, name, embedded=True), inputs)
    assert embedded.keys() == outputs.keys()
    for key, value in embedded.items():
        np.testing.assert_array_equal(value, outputs[key])

    second = tmp_path / "second"
    cmd = [sys.executable, "-m", "glowviz", "bundle", str(model), "-o", str(second)]
    env = dict(os.environ, PYTHONHASHSEED="12345")
    subprocess.run([*cmd, "--embed-weights"], env=env, cwd=ROOT, check=True, capture_output=True)
    bundle_files = sorted(p.name for p in first.iterdir() if p.name.startswith(f"{name}."))
    assert bundle_files == sorted(p.name for p in second.iterdir())
    for file in bundle_files:
        assert (first / file).read_bytes() == (second / file).read_bytes(), file


@pytest.mark.parametrize("name", ["lenet", "mobilenet_small"])
def test_aarch64_bundle_runs(name: str, tmp_path: Path) -> None:
    cc, prefix = aarch64_toolchain()
    model = SAMPLES / f"{name}.onnx"
    assert main(["bundle", str(model), "-o", str(tmp_path), "--target", "aarch64-linux-gnu"]) == 0
    program = build_example(tmp_path, name, cc=cc, static=bool(prefix))
    inputs = save_inputs(tmp_path, sample_inputs(name))
    outputs, _ = run_example(
        program, inputs, weights=tmp_path / f"{name}.weights.bin", prefix=prefix
    )
    _check_against_onnxruntime(name, outputs)


def test_portable_x86_64_bundle_runs(tmp_path: Path) -> None:
    if os.uname().machine != "x86_64":
        pytest.fail("this test builds an x86-64 bundle and runs it natively: x86-64 hosts only")
    args = ["bundle", str(SAMPLES / "lenet.onnx"), "-o", str(tmp_path)]
    assert main([*args, "--target", "x86_64-unknown-linux-gnu", "--cpu", "x86-64-v2"]) == 0
    program = build_example(tmp_path, "lenet")
    inputs = save_inputs(tmp_path, sample_inputs("lenet"))
    outputs, _ = run_example(program, inputs, weights=tmp_path / "lenet.weights.bin")
    _check_against_onnxruntime("lenet", outputs)


def _profile(name: str, directory: Path) -> Path:
    """A quantization profile of a sample model from a few random inputs."""
    from compiler.quantize import model_input_types, profile_model, random_samples

    model = str(SAMPLES / f"{name}.onnx")
    samples = random_samples(model_input_types(model), 4, seed=2)
    path = directory / f"{name}.profile.json"
    profile_model(model, samples, executor="graph").save(path)
    return path


@pytest.mark.parametrize(
    ("name", "target"),
    [
        ("lenet", None),
        ("mlp", None),  # its output is a QSoftmax
        ("mobilenet_small", None),
        ("resnet_small", None),  # its residual adds are int8 sum post-ops
        ("mobilenet_small", "aarch64-linux-gnu"),
    ],
)
def test_quantized_bundle_runs_bit_for_bit_as_the_executors(
    name: str, target: str | None, tmp_path: Path
) -> None:
    """`glowviz bundle --quantize`: the int8 kernels (conv, depthwise, fully connected, the
    sum post-op) in a bundle compute the arena interpreter's integers exactly: the host's flavour natively, the
    plain-IR one for aarch64 under qemu."""
    from compiler.executors import make_executor
    from compiler.pipeline import CompileOptions, compile_model
    from compiler.quantization import QuantizeOptions

    profile = _profile(name, tmp_path)
    model = SAMPLES / f"{name}.onnx"
    args = ["bundle", str(model), "-o", str(tmp_path), "--quantize", str(profile)]
    cc, prefix = aarch64_toolchain() if target else (None, [])
    assert main(args + (["--target", target] if target else [])) == 0
    program = build_example(tmp_path, name, cc=cc, static=bool(prefix))
    sample = sample_inputs(name)
    outputs, _ = run_example(
        program,
        save_inputs(tmp_path, sample),
        weights=tmp_path / f"{name}.weights.bin",
        prefix=prefix,
    )
    result = compile_model(str(model), CompileOptions(quantize=QuantizeOptions(profile)))
    reference = make_executor(result, "interpreter").run(sample)
    assert list(outputs) == list(reference)
    for key, want in reference.items():
        np.testing.assert_array_equal(outputs[key], want, err_msg=key)
    if target is None:
        jit = make_executor(result, "llvm").run(sample)
        for key, want in jit.items():
            np.testing.assert_array_equal(outputs[key], want, err_msg=key)
