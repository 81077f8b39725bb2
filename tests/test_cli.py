"""The `glowviz` command line: the compile stage table, and one clear line + exit 2 for every
user error on every command (never a traceback)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from glowviz.cli import main
from tests.frontend.frontend_helpers import reshape_by_input_model

SAMPLES = Path(__file__).resolve().parents[1] / "sample_models"
LENET = SAMPLES / "lenet.onnx"


def cli(*argv) -> int:
    return main([str(a) for a in argv])


def test_compile_table_print_after_and_dump_dir(tmp_path, capsys):
    dump = tmp_path / "dump"
    assert cli("compile", LENET, "--print-after", "activation-fusion", "--dump-dir", dump) == 0
    out = capsys.readouterr().out
    assert "// ----- IR after graph-opt/activation-fusion -----" in out
    assert 'activation = "relu"' in out
    for stage in ("import-onnx", "activation-fusion", "lower", "irgen", "buffer-sharing"):
        assert stage in out
    files = sorted(p.name for p in dump.iterdir())
    assert files[0] == "000-import-import-onnx.ir" and len(files) >= 30
    assert not [f for f in files if f.startswith(".") or f.endswith(".tmp")]
    assert (dump / files[0]).read_text().startswith("module @lenet {")


def test_compile_stop_after_and_hide_unchanged(capsys):
    assert cli("compile", LENET, "--stop-after", "lower", "--hide-unchanged") == 0
    captured = capsys.readouterr()
    assert "stopped after lower" in captured.err
    assert "irgen" not in captured.out and "constant-folding" not in captured.out
    assert cli("compile", LENET, "--stop-after", "no-such-pass") == 2
    assert "matched no pass or stage" in capsys.readouterr().err


def _bad_models(tmp: Path) -> dict[str, Path]:
    garbage = tmp / "garbage.onnx"
    garbage.write_bytes(b"not a model at all\n")
    truncated = tmp / "truncated.onnx"
    truncated.write_bytes(LENET.read_bytes()[:3000])
    node = helper.make_node("NonMaxSuppression", ["a", "b"], ["c"])
    graph = helper.make_graph(
        [node],
        "g",
        [
            helper.make_tensor_value_info("a", TensorProto.FLOAT, [1, 1, 4]),
            helper.make_tensor_value_info("b", TensorProto.FLOAT, [1, 1, 1]),
        ],
        [helper.make_tensor_value_info("c", TensorProto.INT64, [1, 3])],
    )
    unknown = tmp / "unknown_op.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), unknown)
    graph = helper.make_graph(
        [helper.make_node("Relu", ["a"], ["c"])],
        "g",
        [helper.make_tensor_value_info("a", TensorProto.FLOAT, ["N", 4])],
        [helper.make_tensor_value_info("c", TensorProto.FLOAT, ["N", 4])],
    )
    symbolic = tmp / "symbolic.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), symbolic)
    return {
        "missing": tmp / "missing.onnx",
        "garbage": garbage,
        "truncated": truncated,
        "unknown op": unknown,
        "symbolic dims": symbolic,
    }


COMMANDS = {
    "compile": lambda m, t: ["compile", m],
    "run": lambda m, t: ["run", m],
    "mem": lambda m, t: ["mem", m],
    "export": lambda m, t: ["export", m, "--view", "graph", "--stage", "final", "-o", t / "g.dot"],
    "mem-diff": lambda m, t: ["mem-diff", m, LENET],
    "bench": lambda m, t: ["bench", m, "--reps", "1"],
}


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_command_reports_bad_models_in_one_line(command, tmp_path, capsys):
    for kind, model in _bad_models(tmp_path).items():
        assert cli(*COMMANDS[command](model, tmp_path)) == 2, (command, kind)
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("glowviz: error: "), (command, kind, err)


def test_wrong_input_shape_is_one_line(tmp_path, capsys):
    bad = tmp_path / "in.npz"
    np.savez(bad, input=np.zeros((2, 2), np.float32))
    assert cli("run", LENET, "--inputs", bad) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        "glowviz: error: input 'input': expected shape [1, 1, 28, 28] (f32<1x1x28x28>), got [2, 2]"
    ]


def test_out_of_memory_is_one_line(monkeypatch, capsys):
    # a plan under the memory limit that the machine cannot hold: numpy's MemoryError becomes
    # one line and exit 2, like every other user-facing failure (issue 11)
    import glowviz.cli.run_cmd as run_cmd

    def no_memory(*_a, **_k):
        raise MemoryError("Unable to allocate 1.14 GiB for an array")

    monkeypatch.setattr(run_cmd, "make_executor", no_memory)
    assert cli("run", LENET) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["glowviz: error: out of memory: Unable to allocate 1.14 GiB for an array"]


def _reshape_model(tmp: Path) -> Path:
    """Reshape whose target shape is a graph input: it needs --const-input to compile."""
    return reshape_by_input_model(tmp / "reshape.onnx")


def test_const_input_specializes_the_model(tmp_path, capsys):
    model = _reshape_model(tmp_path)
    assert cli("compile", model) == 2
    err = capsys.readouterr().err
    assert "depends on graph input 'shape'" in err and "--const-input shape=..." in err
    assert cli("compile", model, "--const-input", "shape=3,4", "--print-after", "import") == 0
    out = capsys.readouterr().out
    assert "Reshape(%x) {shape = [3, 4]} : f32<3x4>" in out  # the specialized graph
    assert "note: input 'shape' specialized to [3, 4]" in out
    # run feeds onnxruntime the same value for --check; an npz gives values by input name
    consts = tmp_path / "consts.npz"
    np.savez(consts, shape=np.array([4, -1]))
    for arg in ("shape=3,-1", str(consts)):
        assert cli("run", model, "--const-input", arg, "--check") == 0
        assert "check: passed" in capsys.readouterr().out


@pytest.mark.parametrize(
    "arg, message",
    [
        ("nosuch=1", "--const-input names 'nosuch', which is not an input of the model"),
        ("shape=3.5,4", "does not fit the input's element type i64"),
        ("shape=3,x", "'x' is not a number"),
        ("shape=", "bad --const-input 'shape='"),
    ],
)
def test_bad_const_input_is_one_line(arg, message, tmp_path, capsys):
    assert cli("compile", _reshape_model(tmp_path), "--const-input", arg) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0], err


def test_opset_upgrade_note_is_printed(tmp_path, capsys):
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["z"])],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 6])],
        [helper.make_tensor_value_info("z", TensorProto.FLOAT, [2, 6])],
    )
    old = tmp_path / "old.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 6)]), old)
    assert cli("compile", old, "--stop-after", "import") == 0
    assert "note: upgraded from ONNX opset 6 to 7" in capsys.readouterr().out
