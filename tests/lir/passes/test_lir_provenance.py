"""Provenance of the low-level passes comes from the rewriter and the IR, not from the passes:
a pass that never mentions provenance still leaves a complete journal."""

from __future__ import annotations

from compiler.lir.ir import Instruction, LIRFunction
from compiler.lir.passes.base import LIRPass
from compiler.lir.printer import print_lir
from compiler.passes.manager import PipelineContext, run_passes
from compiler.passes.registry import get_pass
from compiler.passes.rewriter import Rewriter, apply_patterns, lir_patterns
from tests.filecheck import check
from tests.lir.passes.lir_cases import case, lir_function


def lir(code: str) -> LIRFunction:
    f = lir_function(code)
    assert not f.journal  # parsing is not a pass's change
    return f


def records(f: LIRFunction) -> list[tuple[str, str, str, tuple[str, ...]]]:
    return [(r.kind, r.node, r.op, r.sources) for r in f.journal]


def test_a_pass_that_never_records_still_leaves_its_rewrites_in_the_journal() -> None:
    """An ad-hoc pass written only against the rewriter: every create/replace/erase is in the
    journal, grouped into one rewrite named after its rule, and what it creates comes from the
    matched instruction without the pass saying so."""

    def relu_to_two_copies(ins: Instruction, rw: Rewriter) -> bool:
        dst, src = ins.operand(0), ins.operand(1)
        rw.create("copy", [(dst, "out"), (src, "in")], at=ins.index)
        rw.erase(ins)
        return True

    class SplitRelu(LIRPass):
        name = "split-relu"

        def run(self, f: LIRFunction) -> bool:
            return apply_patterns(f, lir_patterns({"relu": [relu_to_two_copies]}))

    f = lir("""
  %r = relu @out %y, @in %x
""")
    ctx = PipelineContext(keep_events=True, verify=True)
    assert run_passes(f, [SplitRelu()], "lir-opt", ctx)
    check(print_lir(f), "CHECK: copy @out %y, @in %x\nCHECK-NOT: relu")
    (ev,) = ctx.events
    assert [(r.kind, r.node, r.op, r.sources) for r in ev.provenance] == [
        ("create", "copy", "copy", ("r",)),
        ("erase", "r", "relu", ()),
    ]
    assert {(r.rule, r.rewrite) for r in ev.provenance} == {("relu_to_two_copies", 1)}
    assert f.find("copy") is not None and f.find("copy").meta["origin"] == ("r",)


def test_buffer_sharing_is_journaled_by_the_rewriter() -> None:
    f = lir(case("buffer-sharing-reuses-dying-input").code)
    assert get_pass("buffer-sharing")().apply(f)
    assert records(f) == [
        ("erase", "a.d", "deallocactivation", ()),
        ("replace", "b", "allocactivation", ("a",)),
        ("erase", "b", "allocactivation", ()),
    ]
    assert {r.rewrite for r in f.journal} == {1} and {r.rule for r in f.journal} == {
        "buffer-sharing"
    }


def test_moves_and_in_place_changes_are_journaled() -> None:
    f = lir("""
  %a = allocactivation : f32<2x8>
  %r = relu @out %a, @in %x
  %s = sigmoid @out %y, @in %a
  %t = tanh @out %y, @in %y
  %a.d = deallocactivation @out %a
""")
    assert get_pass("hoist-dealloc")().apply(f)
    assert records(f) == [("move", "a.d", "deallocactivation", ())]

    f = lir("""
  %a = allocactivation : f32<2x8>
  %v1 = tensorview @in %a {offsets = [1, 0]} : f32<8>
  %v2 = tensorview @in %v1 {offsets = [4]} : f32<2x2>
  %n = neg @out %v2, @in %v2
  %r = relu @out %a, @in %x
  %c = copy @out %y, @in %a
  %a.d = deallocactivation @out %a
""")
    assert get_pass("peephole")().apply(f)
    assert records(f) == [("replace", "v2", "tensorview", ("a",))]
    assert f.journal[0].rule == "fold_view"


def test_each_rewrite_of_a_pass_gets_its_own_index() -> None:
    f = lir(case("dse-removes-unread-and-overwritten-stores").code)
    assert get_pass("dead-store-elimination")().apply(f)
    assert [(r.node, r.rewrite) for r in f.journal] == [("unread", 1), ("dead", 2)]
