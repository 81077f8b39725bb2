"""Liveness of activation buffers in a low-level function: the input of the allocators.

A buffer is an `allocactivation`. Its interval spans its allocactivation and deallocactivation
markers and every instruction that reads or writes it, directly or through tensorviews, so
memory reuse never crosses a marker (`sink-alloc` / `hoist-dealloc` make the markers tight).

Aliases (`compute_aliases`) are the tensorviews written through: a slice of a concat destination
a producer writes (zero-copy-concat) or the target a kernel accumulates into (sum-post-op). They
are no buffers of their own (the allocator never sees them) but sub-buffers nested in one: their
bytes lie inside their root's, their interval inside its interval.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from compiler.lir.ir import Instruction, LIRFunction, LValue, view_byte_offset, view_root
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


@dataclass
class AliasLiveness:
    """A tensorview written through: its bytes are its root buffer's (`offset` into it)."""

    name: str
    partner: str  # the value it is a view of: a buffer, or a wider alias (nested concats)
    root: str  # the allocactivation underneath
    offset: int  # bytes into the root
    size: int  # bytes it covers
    first: int
    last: int
    kind: str  # "sum": an accumulation target; "slice": a concat input's slice
    producer: str = ""  # first instruction writing through it
    producer_node: str = ""
    users: list[str] = field(default_factory=list)
    reason: str = ""


def compute_aliases(fn: LIRFunction) -> dict[str, AliasLiveness]:
    """Every tensorview that an instruction writes through (directly or through a narrower
    view of it), keyed by name, in code order; Reshape-like views that are only read are not
    aliases (their bytes are simply their source's)."""
    spans: dict[int, list[int]] = {}  # id(view) -> [first, last]
    written: dict[int, Instruction] = {}  # id(view) -> first instruction writing through it
    readers: dict[int, list[str]] = {}
    views: dict[int, Instruction] = {}
    for i, ins in enumerate(fn.code):
        if ins.is_view and _root_alloc(ins) is not None:
            views[id(ins)] = ins
            spans.setdefault(id(ins), [i, i])
        if ins.is_marker:
            continue
        for v, mode in ins.operands:
            while isinstance(v, Instruction) and v.is_view:
                span = spans.setdefault(id(v), [i, i])
                span[1] = i
                if mode in ("out", "inout"):
                    written.setdefault(id(v), ins)
                if mode in ("in", "inout") and ins.name not in readers.setdefault(id(v), []):
                    readers[id(v)].append(ins.name)
                v = v.operands[0][0]
    out: dict[str, AliasLiveness] = {}
    for key, view in views.items():
        writer = written.get(key)
        if writer is None:
            continue
        src = view.operands[0][0]
        root, off = view_root(view)
        assert view.type is not None and src.type is not None
        same = view_byte_offset(view, src.type) == 0 and view.type.size_bytes == src.type.size_bytes
        kind = "sum" if same and writer.accumulates else "slice"
        first, last = spans[key]
        out[view.name] = AliasLiveness(
            view.name,
            src.name,
            root.name,
            off,
            view.type.size_bytes,
            first,
            last,
            kind,
            writer.name,
            str(writer.meta.get("node", "")),
            readers.get(key, []),
        )
    _explain(fn, out)
    return out


def _explain(fn: LIRFunction, aliases: dict[str, AliasLiveness]) -> None:
    """The `reason` of every alias: what it accumulates into, or which slice of which concat."""
    siblings: dict[str, list[AliasLiveness]] = {}
    for a in aliases.values():
        if a.kind == "slice":
            siblings.setdefault(a.partner, []).append(a)
    for group in siblings.values():
        group.sort(key=lambda a: a.offset)
    for a in aliases.values():
        if a.kind == "sum":
            a.reason = f"accumulates into %{a.partner} (sum post-op of %{a.producer})"
            continue
        partner = fn.get(a.partner)
        concat = partner.meta.get("node") if isinstance(partner, Instruction) else None
        k = siblings[a.partner].index(a)
        a.reason = (
            f"slice {k} of concat {concat or '%' + a.partner}: bytes {a.offset}..{a.offset + a.size}"
            f" of %{a.root}, written in place by %{a.producer} (zero-copy concat)"
        )


def live_at(liveness: dict[str, BufferLiveness], index: int) -> list[BufferLiveness]:
    return [b for b in liveness.values() if b.first <= index <= b.last]
