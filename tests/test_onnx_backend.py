"""compiler.onnx_backend: the onnx.backend.base contract, and the `glowviz run` command."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import compiler.onnx_backend as backend
from compiler.errors import (
    CompilerError,
    InputError,
    InputValueRequiredError,
    UnsupportedError,
    UnsupportedOpError,
)

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


# -- run-time specialization ----------------------------------------------------------------------


def _model(nodes, inputs, outputs, inits=(), opset=17) -> onnx.ModelProto:
    g = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs],
        [helper.make_tensor_value_info(n, t, s) for n, t, s in outputs],
        list(inits),
    )
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def reshape_pad_model() -> onnx.ModelProto:
    """y = Pad(Reshape(x, Concat([-1], tail)), pads): two inputs that shape the graph."""
    minus1 = numpy_helper.from_array(np.array([-1], np.int64), "minus1")
    nodes = [
        helper.make_node("Concat", ["minus1", "tail"], ["shape"], axis=0),
        helper.make_node("Reshape", ["x", "shape"], ["r"]),
        helper.make_node("Pad", ["r", "pads"], ["y"]),
    ]
    return _model(
        nodes,
        [
            ("x", TensorProto.FLOAT, [2, 6]),
            ("tail", TensorProto.INT64, [1]),
            ("pads", TensorProto.INT64, [4]),
        ],
        [("y", TensorProto.FLOAT, ["r", "c"])],
        [minus1],
    )


@pytest.mark.parametrize("executor", ["interpreter", "llvm"])
def test_inputs_feeding_shape_operands_are_specialized_at_run_time(executor):
    rep = backend.prepare(reshape_pad_model(), executor=executor)
    assert rep.compile_count == 0 and rep.executor is None  # nothing static to compile yet
    x = np.arange(12, dtype=np.float32).reshape(2, 6)
    runs = [
        (np.array([3], np.int64), np.array([0, 1, 0, 0], np.int64)),
        (np.array([4], np.int64), np.array([1, 0, 0, 2], np.int64)),
        (np.array([3], np.int64), np.array([0, 1, 0, 0], np.int64)),  # cached
    ]
    for tail, pads in runs:
        (y,) = rep.run([x, tail, pads])
        r = x.reshape(-1, int(tail[0]))
        np.testing.assert_array_equal(y, np.pad(r, [(pads[0], pads[2]), (pads[1], pads[3])]))
    # The importer asked for 'tail' first, then for 'pads' once Reshape was static.
    assert rep.value_inputs == {"tail", "pads"}
    assert rep.compile_count == 2  # one per value pair (the first run asked for 'pads' too)
    meta = rep.result.module.meta
    assert meta["const_inputs"] == ["pads", "tail"]
    assert "input 'tail' specialized to [3]" in meta["notes"]
    assert [p.name for p in rep.result.module.inputs()] == ["x"]


def test_with_executor_shares_the_compiles():
    rep = backend.prepare(tiny_model(), executor="interpreter")
    llvm = rep.with_executor("llvm")
    assert llvm.kind == "llvm" and llvm.executor.kind == "llvm"
    assert llvm.result is rep.result and llvm.compile_count == 0  # nothing compiled again
    check(llvm.run([X, B]))
    check(rep.run([X, B]))  # the original keeps its own executor
    assert rep.executor.kind == "interpreter"
    # Run-time specializations: those compiled so far are shared, later ones are the rep's own.
    shaped = backend.prepare(reshape_pad_model(), executor="interpreter")
    x = np.arange(12, dtype=np.float32).reshape(2, 6)
    pads = np.zeros(4, np.int64)
    shaped.run([x, np.array([3], np.int64), pads])
    other = shaped.with_executor("llvm")
    (y,) = other.run([x, np.array([3], np.int64), pads])
    np.testing.assert_array_equal(y, x.reshape(-1, 3))
    assert other.compile_count == 0 and other.executor.kind == "llvm"
    (y,) = other.run([x, np.array([4], np.int64), pads])
    np.testing.assert_array_equal(y, x.reshape(-1, 4))
    assert other.compile_count == 1 and shaped.compile_count == 1
    # An executor that needs the low-level stages, after a compile that skipped them.
    graph = backend.prepare(tiny_model(), executor="graph").with_executor("interpreter")
    check(graph.run([X, B]))
    assert graph.compile_count == 1 and graph.options.low_level
    with pytest.raises(UnsupportedError, match="unknown executor 'gpu'"):
        rep.with_executor("gpu")


def test_specializations_are_bounded_and_keyed_by_value():
    rep = backend.prepare(reshape_pad_model(), executor="interpreter", max_specializations=2)
    x = np.zeros((2, 6), np.float32)
    pads = np.zeros(4, np.int64)
    for t in (1, 2, 3, 1):  # 1 was evicted by 3: compiled again
        rep.run({"x": x, "tail": np.array([t], np.int64), "pads": pads})
    assert rep.compile_count == 4
    rep.run({"x": x, "tail": np.array([1], np.int64), "pads": pads})
    assert rep.compile_count == 4
    with pytest.raises(InputError, match="expected element type i64"):
        rep.run([x, np.array([6.0], np.float32), pads])
    with pytest.raises(InputError, match="no array for input 'pads'"):
        rep.run({"x": x, "tail": np.array([1], np.int64)})
    with pytest.raises(InputError, match="expected 3 inputs"):
        rep.run([x])


def test_const_inputs_compile_option():
    from compiler.pipeline import CompileOptions, compile_model

    opts = CompileOptions(
        const_inputs={"tail": np.array([4], np.int64), "pads": np.zeros(4, np.int64)}
    )
    result = compile_model(reshape_pad_model(), opts)
    assert result.module.outputs()[0].type.shape == (3, 4)
    with pytest.raises(InputValueRequiredError) as info:
        compile_model(
            reshape_pad_model(), CompileOptions(const_inputs={"pads": opts.const_inputs["pads"]})
        )
    assert info.value.inputs == ("tail",)
    assert "node 'Reshape_1'" in str(info.value) and "'tail'" in str(info.value)
    with pytest.raises(InputError, match="'nope', which is not an input"):
        compile_model(reshape_pad_model(), CompileOptions(const_inputs={"nope": np.zeros(1)}))


def symbolic_model() -> onnx.ModelProto:
    nodes = [
        helper.make_node("MatMul", ["ids", "W"], ["h"]),
        helper.make_node("Relu", ["h"], ["y"]),
    ]
    w = numpy_helper.from_array(np.eye(4, dtype=np.float32) - 0.5, "W")
    return _model(
        nodes,
        [("ids", TensorProto.FLOAT, ["batch", "sequence", 4])],
        [("y", TensorProto.FLOAT, ["batch", "sequence", 4])],
        [w],
    )


@pytest.mark.parametrize("executor", ["interpreter", "llvm"])
def test_symbolic_dims_respecialize_per_shape(executor):
    rep = backend.prepare(symbolic_model(), executor=executor)
    assert rep.shape_inputs == {"ids"} and rep.compile_count == 0
    w = np.eye(4, dtype=np.float32) - 0.5
    rng = np.random.default_rng(0)
    for shape in [(1, 3, 4), (5, 7, 4), (1, 3, 4)]:
        x = rng.standard_normal(shape).astype(np.float32)
        (y,) = rep.run([x])
        np.testing.assert_allclose(y, np.maximum(x @ w, 0), rtol=1e-6)
    assert rep.compile_count == 2  # cached per shape
    with pytest.raises(InputError, match=r"input 'ids' has shape \[2, 3, 5\], the model "):
        rep.run([np.zeros((2, 3, 5), np.float32)])  # the model fixes the last dim
    with pytest.raises(InputError, match="batchxsequencex4"):
        rep.run([np.zeros((2, 4), np.float32)])


def test_symbolic_dims_with_input_shapes_compile_at_prepare():
    rep = backend.prepare(symbolic_model(), executor="interpreter", input_shapes={"ids": (2, 3, 4)})
    assert rep.compile_count == 1
    rep.run([np.zeros((2, 3, 4), np.float32)])
    assert rep.compile_count == 1
    rep.run([np.zeros((3, 3, 4), np.float32)])  # a new batch: re-specialized, not refused
    assert rep.compile_count == 2


def test_prepare_refuses_unknown_ops_even_when_compiling_is_deferred():
    m = symbolic_model()
    m.graph.node[1].op_type = "Frobnicate"
    with pytest.raises(UnsupportedOpError, match="Frobnicate"):
        backend.prepare(m)


def test_symbolic_hint_names_every_input_with_sensible_examples():
    from compiler.errors import ShapeError
    from compiler.frontend import import_onnx

    nodes = [helper.make_node("Identity", ["ids"], ["a"]), helper.make_node("Relu", ["img"], ["b"])]
    m = _model(
        nodes,
        [
            ("ids", TensorProto.INT64, ["batch_size", "sequence_length"]),
            ("img", TensorProto.FLOAT, ["N", 3, "H", "W"]),
        ],
        [("a", TensorProto.INT64, ["b", "s"]), ("b", TensorProto.FLOAT, ["N", 3, "H", "W"])],
    )
    with pytest.raises(ShapeError) as info:
        import_onnx(m)
    msg = str(info.value)
    assert "input 'ids' has symbolic dims (batch_sizexsequence_length)" in msg
    assert "input 'img' has symbolic dims (Nx3xHxW)" in msg
    assert "--input-shape ids=1x128 --input-shape img=1x3x224x224" in msg
    assert "input_shapes={'ids': (1, 128), 'img': (1, 3, 224, 224)}" in msg


# -- opset upgrades -------------------------------------------------------------------------------


def opset6_model() -> onnx.ModelProto:
    """Opset 6 Add with its legacy `broadcast` attribute: needs the version converter."""
    b = numpy_helper.from_array(np.array([1.0, -2.0, 3.0], np.float32), "b")
    nodes = [helper.make_node("Add", ["x", "b"], ["y"], broadcast=1)]
    return _model(
        nodes, [("x", TensorProto.FLOAT, [2, 3])], [("y", TensorProto.FLOAT, [2, 3])], [b], 6
    )


def test_models_below_opset_7_are_upgraded_with_a_note():
    from compiler.frontend import import_onnx

    module = import_onnx(opset6_model())
    assert module.meta["model_opset"] == 6 and module.meta["opset"] == 7
    assert module.meta["notes"] == ["upgraded from ONNX opset 6 to 7 by onnx.version_converter"]
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    (y,) = backend.prepare(opset6_model(), executor="interpreter").run([x])
    np.testing.assert_array_equal(y, x + np.array([1.0, -2.0, 3.0], np.float32))


def test_failed_opset_upgrade_says_so(monkeypatch):
    from onnx import version_converter

    def fail(model, version):
        raise RuntimeError("no adapter for Frob")

    monkeypatch.setattr(version_converter, "convert_version", fail)
    with pytest.raises(
        UnsupportedError, match=r"opset 6 .*version_converter could not upgrade it: no adapter"
    ):
        backend.prepare(opset6_model())


def test_opset6_prelu_slope_stays_per_channel():
    """PRelu-6 applies a [C] slope per channel; opset 7 would broadcast it from the right."""
    from compiler.frontend import import_onnx

    slope = np.array([0.1, 0.2, 0.3], np.float32)
    nodes = [helper.make_node("PRelu", ["x", "slope"], ["y"])]
    m = _model(
        nodes,
        [("x", TensorProto.FLOAT, [2, 3, 4])],
        [("y", TensorProto.FLOAT, [2, 3, 4])],
        [numpy_helper.from_array(slope, "slope")],
        opset=6,
    )
    assert "PRelu slopes made per-channel" in import_onnx(m).meta["notes"][0]
    x = np.linspace(-1, 1, 24, dtype=np.float32).reshape(2, 3, 4)
    (y,) = backend.prepare(m, executor="interpreter").run([x])
    np.testing.assert_allclose(y, np.where(x >= 0, x, x * slope[:, None]), rtol=1e-6)


def test_const_inputs_given_to_prepare_are_not_run_inputs():
    tail = np.array([3], np.int64)
    rep = backend.prepare(reshape_pad_model(), executor="interpreter", const_inputs={"tail": tail})
    assert rep.input_names == ["x", "pads"]
    x = np.arange(12, dtype=np.float32).reshape(2, 6)
    (y,) = rep.run({"x": x, "pads": np.zeros(4, np.int64)})
    np.testing.assert_array_equal(y, x.reshape(4, 3))
