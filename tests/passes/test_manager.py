"""The pass runner and the registry: one runner for both IRs, one list of passes by name."""

from __future__ import annotations

import dataclasses

import pytest
from pass_helpers import load, module_ir

from compiler.errors import CompilerError, PassError
from compiler.graph.ir import Module
from compiler.lir.ir import LIRFunction
from compiler.lir.parser import parse_lir
from compiler.passes.manager import (
    PassEvent,
    PipelineContext,
    StopPipeline,
    journals,
    run_passes,
)
from compiler.pipeline import ir_text
from compiler.passes.registry import PASSES, get_pass, registered_passes

GRAPH = module_ir("""
    placeholder %x : f32<4>
    placeholder %out : f32<4> output
    %a = Relu(%x) : f32<4>
    %dead = Neg(%x) : f32<4>
    %b = Neg(%a) : f32<4>
    %c = Neg(%b) : f32<4>
    Save(%c, %out)
""")

LIR = """function @main
declare {
  %x = weight mutable input : f32<2x8>
  %y = weight mutable output : f32<2x8>
}
code {
  %a = allocactivation : f32<2x8>
  %dead = relu @out %a, @in %x
  %w = tanh @out %y, @in %x
  %a.d = deallocactivation @out %a
}
"""


def graph_ir() -> Module:
    return load(GRAPH)


def lir_ir() -> LIRFunction:
    return parse_lir(LIR)


#: (IR factory, a pass that changes it, a pass that does not, sizes before -> after)
CASES = {
    "graph": (graph_ir, "dce", "cse", (5, 4)),
    "lir": (lir_ir, "dead-store-elimination", "sink-alloc", (4, 3)),
}


@pytest.mark.parametrize("kind", CASES)
def test_the_runner_emits_the_same_events_for_both_irs(kind: str) -> None:
    make, changing, idle, (before, after) = CASES[kind]
    ir = make()
    seen: list[PassEvent] = []
    ctx = PipelineContext(observer=seen.append, keep_events=True, verify=True)
    assert run_passes(ir, [get_pass(changing)(), get_pass(idle)()], "opt", ctx)
    assert ctx.events == seen and ctx.index == 2
    first, second = seen
    assert (first.index, first.stage, first.pass_name, first.ir_kind) == (0, "opt", changing, kind)
    assert (first.changed, first.count_before, first.count_after) == (True, before, after)
    assert [(r.kind, r.node) for r in first.provenance] == [("erase", "dead")]
    assert first.provenance[0].rule == changing
    assert (second.index, second.pass_name, second.changed, second.provenance) == (
        1,
        idle,
        False,
        [],
    )
    assert second.count_before == second.count_after == after
    # snapshots are clones: later changes to the IR do not reach them
    assert first.ir is not ir and isinstance(first.ir, type(ir))
    assert first.time_ms >= 0 and first.stats == {}


@pytest.mark.parametrize("kind", CASES)
def test_an_unchanged_pass_shares_the_previous_snapshot(kind: str) -> None:
    """A DenseNet-121 compile copied its 1,000-node graph after each of 42 passes, 33 of which
    changed nothing: an unchanged pass's event now carries the previous event's copy. A pass
    that changes the IR gets a copy of its own, and the shared one is never modified."""
    make, changing, idle, _ = CASES[kind]
    ir = make()
    ctx = PipelineContext(keep_events=True, verify=True)
    run_passes(ir, [get_pass(idle)(), get_pass(changing)(), get_pass(idle)()], "opt", ctx)
    first, second, third = ctx.events
    assert (first.changed, second.changed, third.changed) == (False, True, False)
    assert third.ir is second.ir  # unchanged: shared
    assert second.ir is not first.ir and first.ir is not ir  # changed: a copy of its own
    assert ir_text(first.ir) != ir_text(second.ir) == ir_text(third.ir) == ir_text(ir)


@pytest.mark.parametrize("kind", CASES)
def test_a_pass_that_changes_the_ir_but_says_it_did_not_is_caught_under_verify(
    kind: str,
) -> None:
    """A shared snapshot relies on the pass's `changed`: the verifier's run checks it (the
    snapshot would otherwise show the IR before the pass)."""
    make, changing, idle, _ = CASES[kind]
    real = get_pass(changing)

    class Liar(real):  # type: ignore[misc, valid-type]
        def apply(self, ir):  # noqa: ANN001, ANN202
            super().apply(ir)
            for journal in journals(ir):
                journal.clear()  # nothing recorded either
            return False

    ctx = PipelineContext(keep_events=True, verify=True)
    ir = make()
    run_passes(ir, [get_pass(idle)()], "opt", ctx)
    with pytest.raises(PassError, match="changed the IR but reported no change"):
        run_passes(ir, [Liar()], "opt", ctx)


@pytest.mark.parametrize("kind", CASES)
def test_disabled_and_stop_after_work_alike_for_both_irs(kind: str) -> None:
    make, changing, idle, _ = CASES[kind]
    ctx = PipelineContext(keep_events=True, disabled=frozenset({changing}))
    assert not run_passes(make(), [get_pass(changing)(), get_pass(idle)()], "opt", ctx)
    assert [e.pass_name for e in ctx.events] == [idle]
    ctx = PipelineContext(keep_events=True, stop_after=changing)
    with pytest.raises(StopPipeline):
        run_passes(make(), [get_pass(changing)(), get_pass(idle)()], "opt", ctx)
    assert [e.pass_name for e in ctx.events] == [changing]


def test_a_pass_of_the_other_ir_is_refused() -> None:
    with pytest.raises(PassError, match="lir pass cannot run on the graph IR"):
        run_passes(graph_ir(), [get_pass("peephole")()], "opt", PipelineContext())


def test_pass_events_take_keywords_only() -> None:
    fields = [f for f in dataclasses.fields(PassEvent)]
    assert all(f.kw_only for f in fields)
    with pytest.raises(TypeError):
        PassEvent(0, "s", "p", "graph", graph_ir(), True, 0.0, 0, 0)  # type: ignore[misc]


def test_registry_lists_every_pass_once_with_a_kebab_case_name() -> None:
    names = [p.name for p in PASSES]
    assert len(names) == len(set(names))
    assert set(registered_passes()) == set(names)
    assert set(registered_passes("graph")) | set(registered_passes("lir")) == set(names)
    assert not set(registered_passes("graph")) & set(registered_passes("lir"))


def test_unknown_pass_names_list_the_known_ones() -> None:
    with pytest.raises(CompilerError, match=r"unknown pass 'dce2' \(known passes: .*cse.*peephole"):
        get_pass("dce2")
    with pytest.raises(CompilerError, match=r"unknown low-level pass 'dce' \(known passes: "):
        get_pass("dce", "lir")
