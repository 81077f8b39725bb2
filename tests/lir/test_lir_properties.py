"""Property test of both IRs' text forms through the whole pipeline on generated modules: the
snapshot after every pass (graph IR after the graph passes, low-level IR after IRGen and every
LIR pass) verifies, and parses back to an IR that prints identically, with and without data."""

from __future__ import annotations

from hypothesis import given, settings

from compiler.graph import parse_module, print_module, verify_module
from compiler.lir import parse_lir, print_lir, verify_lir
from compiler.pipeline import CompileOptions, compile_model
from tests.graph_strategies import GraphCase, graphs


@settings(max_examples=25)
@given(graphs())
def test_every_snapshot_round_trips(case: GraphCase) -> None:
    result = compile_model(case.module.clone(), CompileOptions(verify=True), keep_events=True)
    assert result.stopped_after is None and result.lir is not None
    kinds = set()
    for event in result.events:
        kinds.add(event.ir_kind)
        if event.ir_kind == "lir":
            parse, show, verify = parse_lir, print_lir, verify_lir
        else:
            parse, show, verify = parse_module, print_module, verify_module
        for with_data in (False, True):
            text = show(event.ir, with_data=with_data)
            back = parse(text)
            verify(back)
            assert show(back, with_data=with_data) == text, f"after {event.pass_name}"
    assert kinds == {"graph", "lir"}
