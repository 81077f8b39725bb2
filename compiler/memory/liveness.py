"""Liveness of activation buffers in a low-level function: the input of the allocators.

A buffer is an `allocactivation`. Its interval spans its allocactivation and deallocactivation
markers and every instruction that reads or writes it, directly or through tensorviews, so
memory reuse never crosses a marker (`sink-alloc` / `hoist-dealloc` make the markers tight).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from compiler.lir.ir import Instruction, LIRFunction, LValue, view_root
from compiler.memory.allocators import Interval
from compiler.memory.regions import ALIGNMENT, align


@dataclass
class BufferLiveness:
    """One activation buffer's lifetime and who touches it."""

    name: str
    size: int  # aligned bytes
    raw_size: int
    first: int
    last: int
    alloc_index: int
    dealloc_index: int | None = None
    producer: str = ""  # first instruction writing it
    producer_node: str = ""  # that instruction's graph node (meta["node"])
    users: list[str] = field(default_factory=list)  # instructions reading it, in order
    reads: list[int] = field(default_factory=list)
    writes: list[int] = field(default_factory=list)

    def interval(self) -> Interval:
        return Interval(self.name, self.size, self.first, self.last)


def _root_alloc(v: LValue) -> Instruction | None:
    root, _ = view_root(v)
    if isinstance(root, Instruction) and root.is_alloc:
        return root
    return None


def compute_liveness(fn: LIRFunction, alignment: int = ALIGNMENT) -> dict[str, BufferLiveness]:
    """Intervals of every activation buffer, keyed by the allocactivation's name, in code order."""
    out: dict[str, BufferLiveness] = {}
    for i, ins in enumerate(fn.code):
        if ins.is_alloc:
            assert ins.type is not None
            raw = ins.type.size_bytes
            out[ins.name] = BufferLiveness(ins.name, align(raw, alignment), raw, i, i, i)
            continue
        if ins.is_dealloc:
            a = _root_alloc(ins.operand(0))
            if a is not None and a.name in out:
                b = out[a.name]
                b.dealloc_index = i
                b.last = max(b.last, i)
                b.first = min(b.first, i)
            continue
        for v, mode in ins.operands:
            a = _root_alloc(v)
            if a is None or a.name not in out:
                continue
            b = out[a.name]
            b.first, b.last = min(b.first, i), max(b.last, i)
            if ins.is_view:
                continue  # creating an alias is neither a read nor a write
            if mode in ("out", "inout"):
                if not b.writes or b.writes[-1] != i:
                    b.writes.append(i)
                if not b.producer:
                    b.producer = ins.name
                    b.producer_node = str(ins.meta.get("node", ""))
            if mode in ("in", "inout"):
                if not b.reads or b.reads[-1] != i:
                    b.reads.append(i)
                    if ins.name not in b.users:
                        b.users.append(ins.name)
    return out


def live_at(liveness: dict[str, BufferLiveness], index: int) -> list[BufferLiveness]:
    return [b for b in liveness.values() if b.first <= index <= b.last]
