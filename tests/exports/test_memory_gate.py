"""A memory gate CI can trust: every memory JSON the CLI writes follows the documented
`glowviz.memory/1` JSON Schema, unknown pass names are refused wherever a pass is named, the
arena top's instruction is right under every allocator, and the exit codes are the documented
table (0 ok, 1 regression, 2 bad input, 3 output failed)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import jsonschema
import pytest
from export_helpers import MODELS, ROOT, session_for

from glowviz.cli import main as cli_main
from glowviz.cli.common import EXIT_BAD_INPUT, EXIT_IO, EXIT_OK, EXIT_REGRESSION

SCHEMA = json.loads((ROOT / "docs/schemas/glowviz.memory-1.schema.json").read_text())
MODEL = str(MODELS / "lenet.onnx")
TRANSFORMER = str(MODELS / "transformer_block.onnx")  # buffer-sharing off: +30% peak


def cli(*argv: str) -> int:
    return cli_main(list(argv))


def validate(data: dict) -> None:
    jsonschema.Draft202012Validator.check_schema(SCHEMA)
    jsonschema.validate(data, SCHEMA, cls=jsonschema.Draft202012Validator)


# ---------------------------------------------------------------------------------------------
# One schema for every memory JSON
# ---------------------------------------------------------------------------------------------


def test_every_memory_json_follows_the_schema(tmp_path, capsys):
    mem, per_pass, export = tmp_path / "mem.json", tmp_path / "pp.json", tmp_path / "ex.json"
    assert cli("mem", MODEL, "--json", str(mem)) == EXIT_OK
    assert cli("mem", MODEL, "--per-pass", "--json", str(per_pass)) == EXIT_OK
    assert cli("export", MODEL, "--view", "memory", "--format", "json", "-o", str(export)) == 0
    capsys.readouterr()
    docs = {p.name: json.loads(p.read_text()) for p in (mem, per_pass, export)}
    for data in docs.values():
        validate(data)
    assert docs["pp.json"]["per_pass"] and docs["pp.json"]["per_pass_schedulers"]
    # mem --json and the export are the same report (the export adds its stage fields only).
    common = set(docs["mem.json"]) & set(docs["ex.json"])
    assert {k for k in common if docs["mem.json"][k] != docs["ex.json"][k]} <= {"config"}
    # and mem-diff reads the export's JSON like its own.
    assert cli("mem-diff", str(mem), str(export)) == EXIT_OK


def test_the_schema_rejects_a_broken_report():
    data = session_for("lenet.onnx").memory_report().to_json()
    validate(data)
    for broken in (
        {k: v for k, v in data.items() if k != "peak_bytes"},
        {**data, "peak_bytes": "12 KiB"},
        {**data, "schema": "glowviz.memory/2"},
    ):
        with pytest.raises(jsonschema.ValidationError):
            validate(broken)


# ---------------------------------------------------------------------------------------------
# Unknown pass names: an error wherever a pass is named
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "argv",
    [
        ("compile", MODEL, "--disable-pass", "bufer-sharing"),
        ("mem", MODEL, "--disable-pass", "bufer-sharing"),
        ("mem", MODEL, "--per-pass", "--disable-pass", "bufer-sharing"),
        ("export", MODEL, "--view", "memory", "-o", "OUT.json", "--disable-pass", "bufer-sharing"),
        ("export", MODEL, "--view", "lir", "-o", "OUT.dot", "--pass", "bufer-sharing"),
        ("mem-diff", MODEL, MODEL + ":disable=bufer-sharing"),
        ("compile", MODEL, "--stop-after", "bufer-sharing"),
        ("compile", MODEL, "--print-after", "bufer-sharing"),
    ],
    ids=lambda a: " ".join(a[:1] + a[2:]),
)
def test_unknown_pass_names_exit_2(argv, tmp_path, capsys):
    argv = tuple(a.replace("OUT", str(tmp_path / "out")) for a in argv)
    assert cli(*argv) == EXIT_BAD_INPUT
    err = capsys.readouterr().err
    assert "bufer-sharing" in err
    assert "did you mean buffer-sharing?" in err
    assert not list(tmp_path.iterdir())  # refused before anything is written


# ---------------------------------------------------------------------------------------------
# The arena top under every allocator
# ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def inception_64(tmp_path_factory):
    """An Inception-shaped model at 64x64: under first-fit its arena top (instruction 43) is
    not where the most bytes are live (instruction 14) -- the case the report used to get
    wrong."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from models import write_model

    return str(write_model("inception", tmp_path_factory.mktemp("inc"), image=64, classes=10))


def check_top(data: dict) -> None:
    bufs = {b["name"]: b for b in data["buffers"]}
    top = bufs[data["top_buffer"]]
    at = data["peak_instruction"]
    # The top buffer ends at the arena's top and is live at the named instruction ...
    assert top["offset"] + top["size"] == data["peak_bytes"]
    assert top["first"] <= at <= top["last"]
    # ... and the buffers listed there are exactly the ones live at it, largest first.
    live = [n for n, b in bufs.items() if b["first"] <= at <= b["last"]]
    assert set(data["live_at_peak"]) == set(live)
    sizes = [bufs[n]["size"] for n in data["live_at_peak"]]
    assert sizes == sorted(sizes, reverse=True)


@pytest.mark.parametrize("allocator", ["first-fit", "lower-bound"])
def test_peak_instruction_is_where_the_arena_top_is_reached(inception_64, allocator, capsys):
    from compiler.pipeline import CompileOptions, compile_model

    report = compile_model(inception_64, CompileOptions(allocator=allocator)).memory_report()
    assert report is not None
    data = report.to_json()
    check_top(data)
    if allocator == "first-fit":
        # Fragmentation: the top is reached later than the most bytes are live, and the
        # report names the top (the figure's peak line follows it), the other as the bound's.
        assert data["peak_bytes"] > data["lower_bound_bytes"]
        assert data["peak_instruction"] != data["lower_bound_instruction"]
        assert cli("mem", inception_64, "--allocator", allocator) == EXIT_OK
        out = capsys.readouterr().out
        assert f"arena top reached at instruction {data['peak_instruction']} " in out
        assert f"%{data['top_buffer']}" in out
    else:
        assert data["peak_bytes"] == data["lower_bound_bytes"]


# ---------------------------------------------------------------------------------------------
# The exit-code table
# ---------------------------------------------------------------------------------------------


def _glowviz(*argv: str, stdout: int | None = subprocess.PIPE) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "glowviz", *argv],
        cwd=ROOT,
        stdout=stdout,
        stderr=subprocess.PIPE,
        text=True,
        timeout=300,
    )


def test_exit_code_table(tmp_path, capsys):
    base = tmp_path / "base.json"
    assert cli("mem", TRANSFORMER, "--json", str(base)) == EXIT_OK
    # 1: a regression past the threshold (buffer sharing off); 0: the same model
    worse = TRANSFORMER + ":disable=buffer-sharing"
    assert cli("mem-diff", str(base), worse, "--fail-above", "5") == EXIT_REGRESSION
    assert cli("mem-diff", str(base), TRANSFORMER, "--fail-above", "5") == EXIT_OK
    # 2: bad input -- a missing model, a JSON into a directory that does not exist
    assert cli("mem", str(tmp_path / "missing.onnx")) == EXIT_BAD_INPUT
    assert cli("mem", MODEL, "--json", str(tmp_path / "no" / "r.json")) == EXIT_BAD_INPUT
    err = capsys.readouterr().err
    assert ".tmp" not in err  # never an internal temp file's name


def test_closed_stdout_is_an_output_failure_not_a_regression(tmp_path):
    """`glowviz mem-diff A B | true`: the reader is gone; exit 3, not 1 ("regression")."""
    base = tmp_path / "base.json"
    assert cli("mem", TRANSFORMER, "--json", str(base)) == EXIT_OK
    r, w = os.pipe()
    os.close(r)  # nobody reads: the first write fails with EPIPE
    try:
        worse = TRANSFORMER + ":disable=buffer-sharing"  # a regression: exit 1 if it could print
        proc = _glowviz("mem-diff", str(base), worse, "--fail-above", "5", stdout=w)
    finally:
        os.close(w)
    assert proc.returncode == EXIT_IO, proc.stderr
    assert "Traceback" not in proc.stderr
