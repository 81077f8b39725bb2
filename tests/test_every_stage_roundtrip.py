"""For every sample model and every stage of the pipeline: the verifier passes and the IR's
text form round-trips (print -> parse -> print is identical), for the graph IR and the LIR."""

from __future__ import annotations

from pathlib import Path

import pytest

from compiler.graph.ir import Module
from compiler.pipeline import CompileOptions, compile_model
from tests.roundtrip import assert_round_trips

SAMPLES = sorted((Path(__file__).resolve().parents[1] / "sample_models").glob("*.onnx"))


@pytest.mark.parametrize("path", SAMPLES, ids=[p.stem for p in SAMPLES])
def test_every_stage_verifies_and_round_trips(path: Path) -> None:
    result = compile_model(path, CompileOptions(verify=True), keep_events=True)
    assert result.plan is not None, "the pipeline must reach memory planning"
    kinds = set()
    for ev in result.events:
        where = f"{path.name} after {ev.stage}/{ev.pass_name}"
        assert_round_trips(ev.ir, where=where)
        kinds.add("graph" if isinstance(ev.ir, Module) else "lir")
    assert kinds == {"graph", "lir"}
    assert len(result.events) >= 30
