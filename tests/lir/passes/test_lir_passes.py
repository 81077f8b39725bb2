"""IR-text tests of the low-level passes: LIR in -> pass -> CHECK lines, plus must-not-fire cases."""

from __future__ import annotations

import pytest

from compiler.lir.parser import parse_lir
from compiler.lir.pipeline import DEFAULT_LIR_PASSES
from compiler.lir.printer import print_lir
from compiler.lir.verifier import verify_lir
from compiler.passes.registry import get_pass, registered_passes
from tests.filecheck import check

HEAD = """function @main
declare {
  %x = weight mutable input : f32<2x8>
  %y = weight mutable output : f32<2x8>
}
code {
"""


def run_pass(name: str, code: str, *, changed: bool | None = None) -> str:
    lir = parse_lir(HEAD + code + "}\n")
    verify_lir(lir)
    did = get_pass(name)().run(lir)
    verify_lir(lir)
    if changed is not None:
        assert did is changed, f"{name} changed={did}\n{print_lir(lir)}"
    return print_lir(lir)


def test_registry_has_default_passes() -> None:
    names = registered_passes("lir")
    for n in DEFAULT_LIR_PASSES:
        assert n in names
        assert n == n.lower() and " " not in n


# -- peephole -----------------------------------------------------------------------------------


def test_peephole_self_copy_and_view_folding() -> None:
    out = run_pass(
        "peephole",
        """
  %a = allocactivation : f32<2x8>
  %r = relu @out %a, @in %x
  %self = copy @out %a, @in %a
  %v1 = tensorview @in %a {offsets = [1, 0]} : f32<8>
  %v2 = tensorview @in %v1 {offsets = [4]} : f32<2x2>
  %same = tensorview @in %a {offsets = [0, 0]} : f32<2x8>
  %s = sigmoid @out %y, @in %same
  %n = neg @out %v2, @in %v2
  %a.d = deallocactivation @out %a
""",
        changed=True,
    )
    check(
        out,
        """
CHECK: relu @out %a, @in %x
CHECK-NOT: copy
CHECK: %v2 = tensorview @in %a {offsets = [1, 4]} : f32<2x2>
CHECK-NOT: %same =
CHECK: sigmoid @out %y, @in %a
""",
    )


def test_peephole_keeps_copies_between_different_buffers() -> None:
    out = run_pass(
        "peephole",
        """
  %a = allocactivation : f32<2x8>
  %r = relu @out %a, @in %x
  %c = copy @out %y, @in %a
  %a.d = deallocactivation @out %a
""",
        changed=False,
    )
    check(out, "CHECK: copy @out %y, @in %a")


# -- dead-store-elimination -----------------------------------------------------------------------


def test_dse_removes_unread_and_overwritten_stores() -> None:
    out = run_pass(
        "dead-store-elimination",
        """
  %a = allocactivation : f32<2x8>
  %dead = relu @out %a, @in %x
  %b = allocactivation : f32<2x8>
  %unread = sigmoid @out %b, @in %x
  %live = tanh @out %a, @in %x
  %c = copy @out %y, @in %a
  %a.d = deallocactivation @out %a
  %b.d = deallocactivation @out %b
""",
        changed=True,
    )
    check(
        out,
        """
CHECK-NOT: %dead =
CHECK-NOT: %unread =
CHECK: %live = tanh @out %a
CHECK: copy @out %y, @in %a
""",
    )


def test_dse_keeps_output_writes_and_partial_writes() -> None:
    out = run_pass(
        "dead-store-elimination",
        """
  %a = allocactivation : f32<2x8>
  %full = relu @out %a, @in %x
  %v = tensorview @in %a {offsets = [0, 0]} : f32<8>
  %part = neg @out %v, @in %v
  %c = copy @out %y, @in %a
  %w = sigmoid @out %y, @in %y
  %a.d = deallocactivation @out %a
""",
        changed=False,
    )
    check(out, "CHECK: %full = relu\nCHECK: %part = neg\nCHECK: %w = sigmoid @out %y")


# -- copy-elimination -----------------------------------------------------------------------------


def test_copy_elimination_writes_output_directly() -> None:
    out = run_pass(
        "copy-elimination",
        """
  %a = allocactivation : f32<2x8>
  %r = relu @out %a, @in %x
  %s = sigmoid @out %a, @in %a
  %c = copy @out %y, @in %a
  %a.d = deallocactivation @out %a
""",
        changed=True,
    )
    check(
        out,
        """
CHECK-NOT: allocactivation
CHECK: %r = relu @out %y, @in %x
CHECK: %s = sigmoid @out %y, @in %y
CHECK-NOT: copy
CHECK-NOT: deallocactivation
""",
    )


def test_copy_elimination_not_when_source_read_after_copy() -> None:
    out = run_pass(
        "copy-elimination",
        """
  %a = allocactivation : f32<2x8>
  %r = relu @out %a, @in %x
  %c = copy @out %y, @in %a
  %b = allocactivation : f32<2x8>
  %t = tanh @out %b, @in %a
  %a.d = deallocactivation @out %a
  %b.d = deallocactivation @out %b
""",
        changed=False,
    )
    check(out, "CHECK: copy @out %y, @in %a")


def test_copy_elimination_not_when_output_touched_during_source_life() -> None:
    out = run_pass(
        "copy-elimination",
        """
  %a = allocactivation : f32<2x8>
  %r = relu @out %a, @in %x
  %early = neg @out %y, @in %x
  %c = copy @out %y, @in %a
  %a.d = deallocactivation @out %a
""",
        changed=False,
    )
    check(out, "CHECK: copy @out %y, @in %a")


def test_copy_elimination_merges_activations() -> None:
    out = run_pass(
        "copy-elimination",
        """
  %a = allocactivation : f32<2x8>
  %r = relu @out %a, @in %x
  %b = allocactivation : f32<2x8>
  %c = copy @out %b, @in %a
  %a.d = deallocactivation @out %a
  %s = sigmoid @out %y, @in %b
  %b.d = deallocactivation @out %b
""",
        changed=True,
    )
    check(
        out,
        """
CHECK: %r = relu @out %a, @in %x
CHECK-NOT: copy
CHECK: %s = sigmoid @out %y, @in %a
CHECK-COUNT-1: deallocactivation
""",
    )


# -- buffer-sharing -------------------------------------------------------------------------------


def test_buffer_sharing_reuses_dying_input() -> None:
    out = run_pass(
        "buffer-sharing",
        """
  %a = allocactivation : f32<2x8>
  %r = relu @out %a, @in %x
  %b = allocactivation : f32<2x8>
  %s = sigmoid @out %b, @in %a
  %a.d = deallocactivation @out %a
  %c = copy @out %y, @in %b
  %b.d = deallocactivation @out %b
""",
        changed=True,
    )
    check(
        out,
        """
CHECK: %s = sigmoid @out %a, @in %a
CHECK: copy @out %y, @in %a
CHECK-COUNT-1: = allocactivation
CHECK-COUNT-1: deallocactivation
""",
    )


def test_buffer_sharing_not_when_input_used_later() -> None:
    out = run_pass(
        "buffer-sharing",
        """
  %a = allocactivation : f32<2x8>
  %r = relu @out %a, @in %x
  %b = allocactivation : f32<2x8>
  %s = sigmoid @out %b, @in %a
  %add = add @out %y, @in %a, @in %b
  %a.d = deallocactivation @out %a
  %b.d = deallocactivation @out %b
""",
        changed=False,
    )
    check(out, "CHECK: %s = sigmoid @out %b, @in %a")


def test_buffer_sharing_not_for_non_elementwise_or_other_types() -> None:
    out = run_pass(
        "buffer-sharing",
        """
  %a = allocactivation : f32<2x8>
  %r = relu @out %a, @in %x
  %b = allocactivation : f32<2x8>
  %s = softmax @out %b, @in %a {axis = 1}
  %a.d = deallocactivation @out %a
  %c = copy @out %y, @in %b
  %b.d = deallocactivation @out %b
""",
        changed=False,
    )
    check(out, "CHECK: softmax @out %b, @in %a")


# -- lifetimes ------------------------------------------------------------------------------------

LOOSE = """
  %a = allocactivation : f32<2x8>
  %b = allocactivation : f32<2x8>
  %r = relu @out %a, @in %x
  %s = sigmoid @out %b, @in %a
  %t = tanh @out %y, @in %b
  %a.d = deallocactivation @out %a
  %b.d = deallocactivation @out %b
"""


def test_hoist_dealloc() -> None:
    out = run_pass("hoist-dealloc", LOOSE, changed=True)
    check(
        out,
        """
CHECK: %s = sigmoid
CHECK-NEXT: %a.d = deallocactivation
CHECK-NEXT: %t = tanh
CHECK-NEXT: %b.d = deallocactivation
""",
    )
    assert not get_pass("hoist-dealloc")().run(parse_lir(out))


def test_sink_alloc() -> None:
    out = run_pass("sink-alloc", LOOSE, changed=True)
    check(
        out,
        """
CHECK: %a = allocactivation
CHECK-NEXT: %r = relu
CHECK-NEXT: %b = allocactivation
CHECK-NEXT: %s = sigmoid
""",
    )
    assert not get_pass("sink-alloc")().run(parse_lir(out))


def test_dead_alloc_elimination() -> None:
    out = run_pass(
        "dead-alloc-elimination",
        """
  %dead = allocactivation : f32<2x8>
  %v = tensorview @in %dead {offsets = [0, 0]} : f32<16>
  %a = allocactivation : f32<2x8>
  %r = relu @out %a, @in %x
  %c = copy @out %y, @in %a
  %dead.d = deallocactivation @out %dead
  %a.d = deallocactivation @out %a
""",
        changed=True,
    )
    check(out, "CHECK-NOT: %dead\nCHECK-NOT: %v =\nCHECK: %a = allocactivation")


# -- make-weights-const ---------------------------------------------------------------------------


def test_make_weights_const() -> None:
    lir = parse_lir("""function @main
declare {
  %x = weight mutable input : f32<2x8>
  %y = weight mutable output : f32<2x8>
  %scratch = weight mutable : f32<2x8>
  %written = weight mutable : f32<2x8>
}
code {
  %w = relu @out %written, @in %x
  %a = add @out %y, @in %scratch, @in %written
}
""")
    assert get_pass("make-weights-const")().run(lir)
    verify_lir(lir)
    text = print_lir(lir)
    check(
        text,
        """
CHECK: %x = weight mutable input
CHECK: %y = weight mutable output
CHECK: %scratch = weight const : f32<2x8>
CHECK: %written = weight mutable : f32<2x8>
""",
    )


@pytest.mark.parametrize("name", DEFAULT_LIR_PASSES)
def test_passes_are_idempotent_on_their_output(name: str) -> None:
    out = run_pass(name, LOOSE)
    lir = parse_lir(out)
    get_pass(name)().run(lir)
    assert print_lir(lir) == out or name in ("copy-elimination",)
