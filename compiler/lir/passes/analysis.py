"""Buffer accesses of a low-level function: the shared analysis of the memory passes.

For every activation (allocactivation) the indices at which it is read or written, directly or
through tensorviews, and its markers: `analyze` for all of them (O(instructions)), `accesses`
for one buffer from its use lists (O(its uses)).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from compiler.lir.instructions import Kind
from compiler.lir.ir import Instruction, LIRFunction, LValue, WeightVar


@dataclass
class Access:
    alloc: Instruction | None  # None for weights
    value: LValue  # the root value (alloc or weight)
    reads: list[int] = field(default_factory=list)
    writes: list[int] = field(default_factory=list)
    views: list[int] = field(default_factory=list)  # tensorview creations
    deallocs: list[Instruction] = field(default_factory=list)

    @property
    def indices(self) -> list[int]:
        return sorted({*self.reads, *self.writes, *self.views})

    @property
    def first(self) -> int:
        idx = self.indices
        return idx[0] if idx else -1

    @property
    def last(self) -> int:
        idx = self.indices
        return idx[-1] if idx else -1

    def accessed_in(self, lo: int, hi: int, *, exclude: int | None = None) -> bool:
        """Whether any read/write/view happens at an index in [lo, hi] other than `exclude`."""
        return any(lo <= i <= hi and i != exclude for i in self.indices)

    def written_in(self, lo: int, hi: int, *, exclude: int | None = None) -> bool:
        return any(lo <= i <= hi and i != exclude for i in self.writes)

    def record(self, ins: Instruction, i: int, mode: str) -> None:
        """Instruction `ins` at index `i` uses the buffer (or a view of it) as `mode`."""
        if ins.is_dealloc:
            if ins not in self.deallocs:
                self.deallocs.append(ins)
        elif ins.is_view:
            self.views.append(i)
        else:
            if mode in ("in", "inout"):
                self.reads.append(i)
            if mode in ("out", "inout"):
                self.writes.append(i)


def root_of(v: LValue) -> LValue:
    """The buffer (allocactivation or weight) under `v`, through any tensorviews."""
    while isinstance(v, Instruction) and v.is_view:
        v = v.operands[0][0]
    return v


def is_activation(v: LValue) -> bool:
    return isinstance(v, Instruction) and v.is_alloc


def analyze(lir: LIRFunction) -> dict[int, Access]:
    """Accesses keyed by id(root value): every allocactivation and every weight."""
    out: dict[int, Access] = {}
    for w in lir.weights.values():
        out[id(w)] = Access(None, w)
    for i, ins in enumerate(lir.code):
        if ins.is_alloc:
            out[id(ins)] = Access(ins, ins)
            continue
        for v, mode in ins.operands:
            root = root_of(v)
            acc = out.get(id(root))
            if acc is not None:
                acc.record(ins, i, mode)
    return out


def views_of(value: LValue) -> list[Instruction]:
    """Every tensorview of `value`, directly or through other tensorviews."""
    out, todo = [], [value]
    while todo:
        v = todo.pop()
        for user, _ in v.users:
            if user.is_view:
                out.append(user)
                todo.append(user)
    return out


def accesses(lir: LIRFunction, alloc: LValue) -> Access:
    """The accesses of one buffer (an allocactivation or a weight) found through its use lists:
    cheaper than `analyze` when a pass looks at a few buffers per rewrite."""
    acc = Access(alloc if isinstance(alloc, Instruction) else None, alloc)
    for v in (alloc, *views_of(alloc)):
        for user, idx in v.users:
            acc.record(user, lir.index_of(user), user.mode(idx))
    for lst in (acc.reads, acc.writes, acc.views):
        lst.sort()
    return acc


def is_output_weight(v: LValue) -> bool:
    return isinstance(v, WeightVar) and v.is_output


def copied_to_output(value: LValue) -> bool:
    """Whether a copy reads `value` (or a view of it) into an output weight: the value is a
    graph output too."""
    return any(
        user.kind == Kind.COPY and is_output_weight(user.operand(0))
        for v in (value, *views_of(value))
        for user, _ in v.users
    )
