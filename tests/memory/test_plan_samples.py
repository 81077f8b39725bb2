"""Memory plans of every sample model: valid for both allocators, optimal for lower-bound, and
proved right by the arena interpreter (poisoned) against the recorded outputs."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from compiler.lir.pipeline import DEFAULT_LIR_PASSES
from compiler.memory.plan import check_plan, plan_memory
from compiler.memory.report import SCHEMA, MemoryReport, format_report
from compiler.passes.manager import PassEvent
from compiler.pipeline import CompileOptions, compile_model
from glowviz.exports.render import ExportError

SAMPLES = sorted((Path(__file__).resolve().parents[2] / "sample_models").glob("*.onnx"))
IDS = [p.stem for p in SAMPLES]

_CACHE: dict[tuple[str, str], object] = {}


def _compile(path: Path, scheduler: str = "child-mem-size"):
    key = (str(path), scheduler)
    if key not in _CACHE:
        _CACHE[key] = compile_model(str(path), CompileOptions(scheduler=scheduler, verify=True))
    return _CACHE[key]


@pytest.mark.parametrize("path", SAMPLES, ids=IDS)
@pytest.mark.parametrize("allocator", ["first-fit", "lower-bound"])
def test_plans_are_valid(path: Path, allocator: str) -> None:
    res = _compile(path)
    plan = plan_memory(res.lir, allocator)
    assert check_plan(plan) == []
    assert plan.peak_bytes >= plan.lower_bound_bytes
    assert plan.no_reuse_bytes >= plan.peak_bytes
    for w in res.lir.weights:
        region, off = plan.offset_of(w)
        assert region in ("constant", "mutable") and off % 64 == 0
    for b in plan.buffers:
        assert plan.offset_of(b.name) == ("activations", b.offset)
        assert b.reason


@pytest.mark.parametrize("path", SAMPLES, ids=IDS)
@pytest.mark.parametrize("scheduler", ["child-mem-size", "topological"])
def test_lower_bound_planner_is_optimal(path: Path, scheduler: str) -> None:
    plan = _compile(path, scheduler).plan
    assert plan.peak_bytes == plan.lower_bound_bytes, f"ratio {plan.ratio:.3f}"


@pytest.mark.parametrize("path", SAMPLES, ids=IDS)
@pytest.mark.parametrize("poison", [False, True])
def test_arena_interpreter_matches_expected(path: Path, poison: bool) -> None:
    from compiler.backends.interpreter.arena import run_lir

    res = _compile(path)
    inputs = dict(np.load(path.with_suffix(".input.npz")))
    expected = dict(np.load(path.with_suffix(".expected.npz")))
    outs = run_lir(res.lir, inputs, res.plan, poison=poison)
    for name, want in expected.items():
        np.testing.assert_allclose(outs[name], want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("path", SAMPLES, ids=IDS)
def test_arena_matches_graph_interpreter(path: Path) -> None:
    from compiler.backends.interpreter.arena import run_lir
    from compiler.backends.interpreter.graph_interpreter import run_graph

    res = _compile(path)
    inputs = dict(np.load(path.with_suffix(".input.npz")))
    ref = run_graph(res.module, inputs)
    outs = run_lir(res.lir, inputs, res.plan, poison=True)
    for name, want in ref.items():
        np.testing.assert_allclose(outs[name], want, rtol=1e-5, atol=1e-6)


def test_report_schema() -> None:
    res = _compile(SAMPLES[0])
    rep = MemoryReport.from_plan(
        res.plan, res.lir, str(SAMPLES[0]), "child-mem-size", "lower-bound"
    ).to_json()
    rep = json.loads(json.dumps(rep))
    assert rep["schema"] == SCHEMA == "glowviz.memory/1"
    for key, typ in [
        ("model", str),
        ("scheduler", str),
        ("allocator", str),
        ("alignment", int),
        ("regions", dict),
        ("peak_bytes", int),
        ("lower_bound_bytes", int),
        ("no_reuse_bytes", int),
        ("buffers", list),
    ]:
        assert isinstance(rep[key], typ), key
    assert rep["model"] == SAMPLES[0].name and rep["alignment"] == 64
    assert set(rep["regions"]) == {"constant", "mutable", "activations"}
    assert rep["peak_bytes"] == rep["regions"]["activations"]
    for b in rep["buffers"]:
        for key, typ in [
            ("name", str),
            ("size", int),
            ("offset", int),
            ("first", int),
            ("last", int),
            ("producer", str),
            ("reason", str),
        ]:
            assert isinstance(b[key], typ), key
    text = format_report(MemoryReport.from_json(rep))
    assert "lower bound" in text and "ratio 1.000" in text


def test_pipeline_events() -> None:
    events: list[PassEvent] = []
    compile_model(str(SAMPLES[0]), CompileOptions(verify=True), observer=events.append)
    low = [e for e in events if e.stage in ("schedule", "irgen", "lir-opt", "memory")]
    assert [e.stage for e in low[:2]] == ["schedule", "irgen"]
    assert low[0].ir_kind == "graph" and "order" in low[0].stats and "peak_bytes" in low[0].stats
    assert [e.pass_name for e in low if e.stage == "lir-opt"] == list(DEFAULT_LIR_PASSES)
    mem = low[-1]
    assert mem.stage == "memory" and mem.pass_name == "lower-bound"
    assert {"peak_bytes", "lower_bound_bytes", "no_reuse_bytes"} <= set(mem.stats)
    idx = [e.index for e in events]
    assert idx == list(range(len(events)))


def test_disabled_and_stop_after() -> None:
    events: list[PassEvent] = []
    res = compile_model(
        str(SAMPLES[0]),
        CompileOptions(
            disabled_passes=frozenset({"buffer-sharing"}), stop_after="copy-elimination"
        ),
        observer=events.append,
    )
    names = [e.pass_name for e in events if e.stage == "lir-opt"]
    assert "buffer-sharing" not in names and names[-1] == "copy-elimination"
    assert res.stopped_after == "copy-elimination"


def test_mem_command_writes_json(tmp_path: Path, capsys) -> None:
    import argparse

    from glowviz.cli import mem_cmd

    parser = argparse.ArgumentParser()
    mem_cmd.add_parser(parser.add_subparsers())
    # Like `glowviz export`, the directory must exist: a typo in CI fails, no stray directory.
    missing = parser.parse_args(["mem", str(SAMPLES[0]), "--json", str(tmp_path / "sub" / "m")])
    with pytest.raises(ExportError, match="output directory does not exist"):
        missing.func(missing)
    assert not (tmp_path / "sub").exists()
    out = tmp_path / "mem.json"
    args = parser.parse_args(["mem", str(SAMPLES[0]), "--json", str(out)])
    assert args.func(args) == 0
    data = json.loads(out.read_text())
    assert data["schema"] == "glowviz.memory/1"
    assert "lower bound" in capsys.readouterr().out
