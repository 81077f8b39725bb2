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


def test_each_command_parses_with_its_own_parser_as_with_all(capsys):
    """A run builds only its command's parser (glowviz.cli.build_parser(command)): the names
    it dispatches on are the whole parser's commands, and each command's own parser is the
    one the whole parser holds (the same help)."""
    from glowviz.cli import COMMAND_NAMES, build_parser

    whole = build_parser()
    choices = whole._subparsers._group_actions[0].choices  # type: ignore[union-attr]
    assert sorted(choices) == sorted(COMMAND_NAMES)
    for name in COMMAND_NAMES:
        alone = build_parser(name)
        own = alone._subparsers._group_actions[0].choices  # type: ignore[union-attr]
        assert list(own) == [name]
        assert own[name].format_help() == choices[name].format_help(), name


def test_a_compile_leaves_llvm_unloaded():
    """`glowviz mem`, `export` and `compile` compile without generating code: the lowering
    contract reads the LLVM emitter table, which needs neither the JIT nor LLVM's library
    (llvmlite.binding, ~20 ms of every such run's start; compiler/backends/llvm/target.py)."""
    import subprocess
    import sys

    probe = (
        "import sys; from compiler.pipeline import compile_model; "
        f"r = compile_model({str(SAMPLES / 'mlp.onnx')!r}); assert r.plan is not None; "
        "print(sorted(m for m in sys.modules if m.startswith('llvmlite.binding') "
        "or m in ('compiler.backends.llvm.jit', 'compiler.backends.llvm.cache')))"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=120
    ).stdout
    assert out.strip() == "[]", out


def test_compile_stop_after_and_hide_unchanged(capsys):
    assert cli("compile", LENET, "--stop-after", "lower", "--hide-unchanged") == 0
    captured = capsys.readouterr()
    assert "stopped after lower" in captured.err
    assert "irgen" not in captured.out and "constant-folding" not in captured.out
    assert cli("compile", LENET, "--stop-after", "no-such-pass") == 2
    assert "unknown pass or stage 'no-such-pass' (--stop-after)" in capsys.readouterr().err


def _unary_model(path: Path, op: str, shape: list, opset: int = 17) -> Path:
    """A one-node float model `y = op(x)` of the given shape (dims may be names), saved at path."""
    graph = helper.make_graph(
        [helper.make_node(op, ["x"], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)],
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)]), path)
    return path


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
    symbolic = _unary_model(tmp / "symbolic.onnx", "Relu", ["N", 4])
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


def _one_error_line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    return err[0]


@pytest.mark.parametrize(
    ("flag", "what"),
    [
        ("--print-after", "unknown pass or stage 'nope' (--print-after)"),
        ("--stop-after", "unknown pass or stage 'nope' (--stop-after)"),
        ("--disable-pass", "unknown pass 'nope' (--disable-pass)"),
    ],
)
def test_unknown_pass_names_are_refused_alike(flag, what, capsys):
    """A misspelt pass name is refused by every option that takes one, before compiling."""
    assert cli("compile", LENET, flag, "nope") == 2
    line = _one_error_line(capsys)
    assert what in line and "known: " in line and "buffer-sharing" in line
    assert cli("mem", LENET, "--disable-pass", "nope") == 2
    assert "unknown pass 'nope' to disable" in _one_error_line(capsys)


def test_bad_inputs_files_are_one_line(tmp_path, capsys):
    empty = tmp_path / "empty.npz"
    empty.write_bytes(b"")
    good = tmp_path / "good.npz"
    np.savez(good, input=np.zeros((1, 1, 28, 28), np.float32))
    truncated = tmp_path / "truncated.npz"
    truncated.write_bytes(good.read_bytes()[:-60])
    pickled = tmp_path / "objects.npy"
    np.save(pickled, np.array([{"a": 1}], dtype=object), allow_pickle=True)
    for bad in (empty, truncated, pickled):
        assert cli("run", LENET, "--inputs", bad) == 2, bad
        assert f"cannot read inputs file '{bad}'" in _one_error_line(capsys)
    f64 = tmp_path / "f64.npz"
    np.savez(f64, input=np.zeros((1, 1, 28, 28)))
    for executor in ("interpreter", "llvm"):  # float64 is refused alike, never cast silently
        assert cli("run", LENET, "--inputs", f64, "--executor", executor) == 2
        assert "expected element type f32 (float32), got float64" in _one_error_line(capsys)


def test_a_npy_feeds_a_model_with_one_input(tmp_path, capsys):
    x = np.random.default_rng(0).standard_normal((1, 1, 28, 28)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    np.savez(tmp_path / "x.npz", input=x)
    for src in ("x.npy", "x.npz"):
        assert cli("run", LENET, "--inputs", tmp_path / src, "-o", tmp_path / f"{src}.out.npz") == 0
    a, b = (np.load(tmp_path / f"{s}.out.npz") for s in ("x.npy", "x.npz"))
    np.testing.assert_array_equal(a["output"], b["output"])


@pytest.mark.parametrize(
    "argv",
    [
        ["run", LENET, "--seed", "-1"],
        ["mem", LENET, "--top", "-1"],
        ["bench", LENET, "--batch", "0"],
        ["bench", LENET, "--reps", "0"],
        ["run", LENET, "--rtol", "nan"],
    ],
)
def test_out_of_range_numbers_are_usage_errors(argv, capsys):
    with pytest.raises(SystemExit) as exc:
        cli(*argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert "must be a" in err[-1] and "Traceback" not in "".join(err)


def test_mem_top_0_lists_no_buffer(capsys):
    assert cli("mem", LENET, "--top", "0") == 0
    out = capsys.readouterr().out
    listed = out.split("live at the peak", 1)[1]  # the buffer list (the arena-top line names one)
    assert "... and" in listed and "%" not in listed


def test_dump_dir_on_a_file_and_devices_as_models(tmp_path, capsys):
    a_file = tmp_path / "a_file"
    a_file.write_text("keep me")
    assert cli("compile", LENET, "--dump-dir", a_file) == 2
    assert "--dump-dir" in _one_error_line(capsys) and a_file.read_text() == "keep me"
    for device in ("/dev/zero", "/dev/null"):  # /dev/zero used to be read until memory ran out
        assert cli("compile", device) == 2
        assert f"model path '{device}' is a device" in _one_error_line(capsys)


def test_check_treats_nan_positions_as_data(tmp_path, capsys, recwarn):
    """log of negatives: NaN on both sides at the same places is a match, without warnings."""
    model = _unary_model(tmp_path / "log.onnx", "Log", [2, 8])
    xs = tmp_path / "x.npz"
    np.savez(xs, x=np.array([[-1.0] * 8, [0.0, 1, 2, np.inf, -np.inf, np.nan, 3, 4]], np.float32))
    for executor in ("interpreter", "llvm"):
        assert cli("run", model, "--inputs", xs, "--check", "--executor", executor) == 0
        assert "check y: ok" in capsys.readouterr().out
    assert not [w for w in recwarn.list if issubclass(w.category, RuntimeWarning)]


def test_compare_nan_and_inf():
    from glowviz.cli.run_cmd import compare

    nan, inf = np.nan, np.inf
    ok = compare(np.array([nan, inf, -inf, 1.0]), np.array([nan, inf, -inf, 1.0]), 1e-3, 0)
    assert ok == (True, 0.0, 0.0)
    for ours, ref in (([nan], [1.0]), ([1.0], [nan]), ([inf], [1.0]), ([inf], [-inf])):
        good, abs_err, _ = compare(np.array(ours), np.array(ref), 1e-3, 1e-4)
        assert not good and abs_err == inf


def test_a_failed_write_is_one_line_and_keeps_the_old_file(tmp_path, monkeypatch, capsys):
    """A disk that fills half way: one line, exit 3 (an output failure), the previous output
    intact, no temp."""
    import errno

    out = tmp_path / "out.npz"
    assert cli("run", LENET, "-o", out) == 0
    good = out.read_bytes()

    def full(f, **_arrays):
        f.write(b"PK half a file")
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(np, "savez", full)
    assert cli("run", LENET, "-o", out) == 3
    assert (
        _one_error_line(capsys) == f"glowviz: error: cannot write '{out}': No space left on device"
    )
    assert out.read_bytes() == good
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.npz"]


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
    old = _unary_model(tmp_path / "old.onnx", "Relu", [2, 6], opset=6)
    assert cli("compile", old, "--stop-after", "import") == 0
    assert "note: upgraded from ONNX opset 6 to 7" in capsys.readouterr().out
