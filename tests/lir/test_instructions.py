"""The instruction table: hand-written kinds are the `Kind` enum, categories are traits."""

from __future__ import annotations

from compiler.graph.types import f32
from compiler.lir.instructions import MARKER_KINDS, Kind, Trait, all_instrs, get_instr
from compiler.lir.ir import LIRFunction
from compiler.lir.printer import print_lir


def test_every_kind_is_registered_as_plain_text_with_its_traits() -> None:
    table = all_instrs()
    for kind in Kind:
        assert kind in table and type(get_instr(kind).kind) is str
    assert MARKER_KINDS == {Kind.ALLOC, Kind.DEALLOC, Kind.VIEW}
    assert {k for k, d in table.items() if Trait.DATA_MOVEMENT in d.traits} == {
        Kind.COPY,
        Kind.INSERT,
        Kind.EXTRACT,
    }
    # Every compute kind comes from the op table; none is a marker.
    assert all(d.is_compute and not d.is_marker for k, d in table.items() if k not in set(Kind))


def test_instructions_made_from_kinds_print_their_text() -> None:
    fn = LIRFunction()
    x = fn.add_weight("x", f32(2, 3), "mutable", role="input")
    out = fn.add_weight("out", f32(2, 3), "mutable", role="output")
    a = fn.create(Kind.ALLOC, (), name="a", type=f32(2, 3))
    v = fn.create(Kind.VIEW, [(a, "in")], {"offsets": (0, 0)}, name="v", type=f32(6))
    fn.create(Kind.COPY, [(a, "out"), (x, "in")], name="c")
    fn.create(Kind.COPY, [(out, "out"), (a, "in")], name="s")
    d = fn.create(Kind.DEALLOC, [(a, "out")], name="d")
    assert all(type(i.kind) is str for i in fn.code)
    assert a.is_alloc and d.is_dealloc and v.is_view and a.is_memory and v.is_memory
    assert [i.is_marker for i in fn.code] == [True, True, False, False, True]
    text = print_lir(fn)
    for word in ("allocactivation", "tensorview", "copy", "deallocactivation"):
        assert word in text
    assert "Kind." not in text
