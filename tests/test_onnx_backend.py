"""compiler.onnx_backend: the onnx.backend.base contract, and the `glowviz run` command."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import compiler.onnx_backend as backend
from compiler.errors import CompilerError, InputError

SAMPLES = Path(__file__).resolve().parents[1] / "sample_models"


def tiny_model() -> onnx.ModelProto:
    """y = relu(x @ W + b); z = x * 2 — two inputs-free outputs, names ONNX likes (with ':')."""
    w = numpy_helper.from_array(np.arange(12, dtype=np.float32).reshape(3, 4) / 10 - 0.5, "W")
    b = numpy_helper.from_array(np.ones(4, np.float32) * 0.1, "b")
    two = numpy_helper.from_array(np.array(2.0, np.float32), "two")
    nodes = [
        helper.make_node("MatMul", ["x:0", "W"], ["mm"]),
        helper.make_node("Add", ["mm", "b"], ["pre"]),
        helper.make_node("Relu", ["pre"], ["y"]),
        helper.make_node("Mul", ["x:0", "two"], ["z"]),
        helper.make_node("Add", ["z", "bias_in"], ["z2"]),
    ]
    g = helper.make_graph(
        nodes,
        "tiny",
        [
            helper.make_tensor_value_info("x:0", TensorProto.FLOAT, [2, 3]),
            helper.make_tensor_value_info("bias_in", TensorProto.FLOAT, [3]),
        ],
        [
            helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4]),
            helper.make_tensor_value_info("z2", TensorProto.FLOAT, [2, 3]),
        ],
        [w, b, two],
    )
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


X = np.array([[1, -2, 3], [0.5, 0.25, -1]], np.float32)
B = np.array([0.5, -1, 2], np.float32)


def expected():
    w = np.arange(12, dtype=np.float32).reshape(3, 4) / 10 - 0.5
    return np.maximum(X @ w + 0.1, 0), X * 2 + B


def check(outs):
    y, z = expected()
    assert len(outs) == 2
    np.testing.assert_allclose(outs[0], y, rtol=1e-6)
    np.testing.assert_allclose(outs[1], z, rtol=1e-6)
    np.testing.assert_allclose(outs["y"], y, rtol=1e-6)  # namedtupledict: by name too


@pytest.mark.parametrize("form", ["proto", "path", "str", "bytes"])
def test_prepare_model_forms(form, tmp_path):
    m = tiny_model()
    path = tmp_path / "tiny.onnx"
    onnx.save(m, path)
    src = {"proto": m, "path": path, "str": str(path), "bytes": m.SerializeToString()}[form]
    rep = backend.prepare(src)
    assert isinstance(rep, onnx.backend.base.BackendRep)
    check(rep.run([X, B]))


def test_dict_inputs_by_onnx_name():
    rep = backend.prepare(tiny_model(), device="CPU", executor="interpreter")
    check(rep.run({"x:0": X, "bias_in": B}))
    assert rep.input_names == ["x:0", "bias_in"] and rep.output_names == ["y", "z2"]


def test_run_model_and_backend_class():
    check(backend.run_model(tiny_model(), [X, B]))
    check(backend.Backend.run_model(tiny_model(), [X, B], executor="graph"))
    assert issubclass(backend.Backend, onnx.backend.base.Backend)


def test_supports_device():
    assert backend.supports_device("CPU") and backend.supports_device("cpu")
    assert not backend.supports_device("CUDA")
    with pytest.raises(CompilerError, match="device 'CUDA' is not supported"):
        backend.prepare(tiny_model(), device="CUDA")


def test_run_node():
    node = helper.make_node("Relu", ["a"], ["r"])
    (r,) = backend.run_node(node, [np.array([-1.0, 2.0], np.float32)])
    np.testing.assert_array_equal(r, [0.0, 2.0])
    node = helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1])
    x, w = np.ones((1, 1, 3, 3), np.float32), np.ones((2, 1, 3, 3), np.float32)
    (y,) = backend.run_node(node, [x, w])
    assert y.shape == (1, 2, 3, 3) and y[0, 0, 1, 1] == 9 and y[0, 1, 0, 0] == 4
    node = helper.make_node("Softmax", ["x"], ["y"], axis=0)
    (y,) = backend.run_node(node, {"x": np.zeros((2, 2), np.float32)}, opset_version=13)
    np.testing.assert_allclose(y, 0.5)


def test_unsupported_raises_compiler_error():
    node = helper.make_node("NonMaxSuppression", ["b", "s"], ["i"])
    with pytest.raises(CompilerError):
        backend.run_node(node, [np.zeros((1, 1, 4), np.float32), np.zeros((1, 1, 1), np.float32)])
    with pytest.raises(CompilerError):
        backend.prepare(b"not an onnx model")
    with pytest.raises(CompilerError, match="unknown executor 'tpu'"):
        backend.prepare(tiny_model(), executor="tpu")
    with pytest.raises(CompilerError, match="unknown backend option frobnicate"):
        backend.prepare(tiny_model(), frobnicate=1)


def test_bad_inputs_raise_input_error():
    rep = backend.prepare(tiny_model())
    with pytest.raises(InputError, match="expected 2 inputs"):
        rep.run([X])
    with pytest.raises(InputError, match="expected element type f32"):
        rep.run([X.astype(np.float64), B])


def test_sample_model_matches_recorded_output():
    path = SAMPLES / "lenet.onnx"
    if not path.exists():
        pytest.fail("sample models not generated")
    inputs = dict(np.load(SAMPLES / "lenet.input.npz"))
    exp = list(dict(np.load(SAMPLES / "lenet.expected.npz")).values())
    outs = backend.prepare(str(path)).run(inputs)
    for o, e in zip(outs, exp):
        np.testing.assert_allclose(o, e, rtol=1e-4, atol=1e-5)


# -- glowviz run --------------------------------------------------------------------------------


def cli(*argv):
    from glowviz.cli import main

    return main([str(a) for a in argv])


def test_cli_run_check_and_output(tmp_path, capsys):
    model = tmp_path / "tiny.onnx"
    onnx.save(tiny_model(), model)
    out = tmp_path / "out.npz"
    assert cli("run", model, "--seed", 3, "-o", out, "--check") == 0
    text = capsys.readouterr().out
    assert "y: shape=[2, 4] dtype=float32" in text and "check: passed" in text
    with np.load(out) as data:
        assert sorted(data.files) == ["y", "z2"]
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_cli_run_with_inputs(tmp_path, capsys):
    model = tmp_path / "tiny.onnx"
    onnx.save(tiny_model(), model)
    ins = tmp_path / "in.npz"
    np.savez(ins, **{"x:0": X, "bias_in": B})
    out = tmp_path / "out.npz"
    assert cli("run", model, "--inputs", ins, "-o", out) == 0
    with np.load(out) as data:
        np.testing.assert_allclose(data["z2"], expected()[1])


def test_cli_run_user_errors_exit_2(tmp_path, capsys):
    model = tmp_path / "tiny.onnx"
    onnx.save(tiny_model(), model)
    ins = tmp_path / "in.npz"
    np.savez(ins, **{"x:0": X})
    assert cli("run", model, "--inputs", ins) == 2
    err = capsys.readouterr().err
    assert "no array for input 'bias_in'" in err and "Traceback" not in err
    assert cli("run", tmp_path / "missing.onnx") == 2
    assert cli("run", model, "--executor", "tpu") == 2
    assert "unknown executor" in capsys.readouterr().err


def test_cli_check_mismatch_exits_1(tmp_path, capsys, monkeypatch):
    model = tmp_path / "tiny.onnx"
    onnx.save(tiny_model(), model)
    import glowviz.cli.run_cmd as run_cmd

    real = run_cmd.run_onnxruntime
    monkeypatch.setattr(
        run_cmd, "run_onnxruntime", lambda m, feeds: {k: v + 1 for k, v in real(m, feeds).items()}
    )
    assert cli("run", model, "--check") == 1
    assert "MISMATCH" in capsys.readouterr().out
