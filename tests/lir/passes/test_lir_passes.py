"""Low-level pass tests beyond the IR-in, CHECK-lines-out cases of test_rewrites.lir: the
registry, the lifetime passes reaching a fixed point, make-weights-const's own declarations, and
every default pass idempotent on its output."""

from __future__ import annotations

import pytest

from compiler.lir.parser import parse_lir
from compiler.lir.pipeline import DEFAULT_LIR_PASSES
from compiler.lir.printer import print_lir
from compiler.lir.verifier import verify_lir
from compiler.passes.registry import get_pass, registered_passes
from tests.filecheck import check
from tests.lir.passes.lir_cases import run_pass


def test_registry_has_default_passes() -> None:
    names = registered_passes("lir")
    for n in DEFAULT_LIR_PASSES:
        assert n in names
        assert n == n.lower() and " " not in n


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
