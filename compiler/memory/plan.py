"""The memory plan: where every weight and activation lives, and why (pipeline step 10).

Three regions, each starting at 0 and 64-byte aligned: `constant` (constant weights, in
declaration order), `mutable` (inputs and outputs, in declaration order) and `activations`
(placed by an allocator from the buffers' liveness). Aliases (tensorviews written through: concat
slices, accumulation targets) get no offset of their own: theirs is their root buffer's plus
their byte offset into it, and they name the value they alias (`alias_of`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from compiler.errors import CompilerError
from compiler.lir.ir import LIRFunction
from compiler.memory.allocators import allocate, check_allocation
from compiler.memory.certificate import Certificate, certify
from compiler.memory.liveness import (
    AliasLiveness,
    BufferLiveness,
    compute_aliases,
    compute_liveness,
)
from compiler.memory.regions import (
    ACTIVATION_REGION,
    ALIGNMENT,
    CONSTANT_REGION,
    MUTABLE_REGION,
    WEIGHT_REGIONS,
    align,
)
from compiler.scheduling import Schedule


@dataclass
class BufferPlacement:
    name: str
    size: int  # aligned bytes
    offset: int
    region: str
    first: int
    last: int
    producer: str = ""
    users: list[str] = field(default_factory=list)
    reason: str = ""
    producer_node: str = ""
    raw_size: int = 0
    alias_of: str = ""  # an alias: the value whose bytes it shares by design ("": a buffer)
    alias_kind: str = ""  # "sum" (an accumulation target) or "slice" (of a concat)


@dataclass
class MemoryPlan:
    """Offsets of every weight and activation buffer in their regions, plus the bounds."""

    alignment: int = ALIGNMENT
    allocator: str = ""
    region_sizes: dict[str, int] = field(default_factory=dict)
    buffers: list[BufferPlacement] = field(default_factory=list)  # activations, by first use
    weights: list[BufferPlacement] = field(default_factory=list)  # constant + mutable weights
    peak_bytes: int = 0
    lower_bound_bytes: int = 0
    no_reuse_bytes: int = 0
    peak_instruction: int = -1
    strategy: str = ""
    #: Aliases nested in the buffers (no bytes of their own), by first use.
    aliases: list[BufferPlacement] = field(default_factory=list)
    #: How far from the best any allocator and schedule could do (compiler.memory.certificate).
    certificate: Certificate | None = None
    _index: dict[str, BufferPlacement] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        self.reindex()

    def reindex(self) -> None:
        self._index = {b.name: b for b in (*self.weights, *self.buffers, *self.aliases)}

    def offset_of(self, name: str) -> tuple[str, int]:
        """(region, byte offset) of a weight, activation buffer or alias (other views: see
        `view_root`)."""
        try:
            b = self._index[name]
        except KeyError:
            raise CompilerError(f"memory plan has no buffer or weight named '%{name}'") from None
        return b.region, b.offset

    def placement(self, name: str) -> BufferPlacement:
        return self._index[name]

    @property
    def ratio(self) -> float:
        """Planned activation size over the lower bound (1.0 = optimal for this schedule)."""
        return self.peak_bytes / self.lower_bound_bytes if self.lower_bound_bytes else 1.0

    def live_at(self, index: int) -> list[BufferPlacement]:
        return [b for b in self.buffers if b.first <= index <= b.last]


def _place_weights(
    lir: LIRFunction, alignment: int
) -> tuple[list[BufferPlacement], dict[str, int]]:
    sizes = dict.fromkeys(WEIGHT_REGIONS, 0)
    out = []
    for w in lir.weights.values():
        region = CONSTANT_REGION if w.is_constant else MUTABLE_REGION
        raw = w.type_.size_bytes
        size = align(raw, alignment)
        role = f" ({w.role})" if w.role else ""
        out.append(
            BufferPlacement(
                w.name,
                size,
                sizes[region],
                region,
                0,
                len(lir.code) - 1 if lir.code else 0,
                "",
                [],
                f"{region} weight{role}, declaration order",
                raw_size=raw,
            )
        )
        sizes[region] += size
    return out, sizes


def plan_memory(
    lir: LIRFunction,
    allocator: str = "lower-bound",
    alignment: int = ALIGNMENT,
    *,
    schedule: Schedule | None = None,
) -> MemoryPlan:
    """Liveness, then the named allocator for activations; weights in declaration order;
    aliases placed inside their root buffers; the plan's certificate (complete with the
    all-schedules bound when the `schedule` the LIR was generated in is given)."""
    live = compute_liveness(lir, alignment)
    intervals = [b.interval() for b in live.values()]
    alloc = allocate(intervals, allocator)
    weights, sizes = _place_weights(lir, alignment)
    buffers = [_placement(b, alloc.offsets[b.name], alloc.reasons[b.name]) for b in live.values()]
    buffers.sort(key=lambda b: (b.first, b.name))
    sizes[ACTIVATION_REGION] = alloc.size
    aliases = [
        _alias_placement(a, alloc.offsets[a.root])
        for a in compute_aliases(lir).values()
        if a.root in alloc.offsets
    ]
    aliases.sort(key=lambda b: (b.first, b.name))
    plan = MemoryPlan(
        alignment,
        allocator,
        sizes,
        buffers,
        weights,
        alloc.size,
        alloc.lower_bound,
        sum(b.size for b in live.values()),
        alloc.peak_instruction,
        alloc.strategy,
        aliases,
    )
    plan.certificate = certify(plan, lir, schedule)
    return plan


def _placement(b: BufferLiveness, offset: int, reason: str) -> BufferPlacement:
    return BufferPlacement(
        b.name,
        b.size,
        offset,
        ACTIVATION_REGION,
        b.first,
        b.last,
        b.producer,
        list(b.users),
        reason,
        b.producer_node,
        b.raw_size,
    )


def _alias_placement(a: AliasLiveness, root_offset: int) -> BufferPlacement:
    return BufferPlacement(
        a.name,
        a.size,
        root_offset + a.offset,
        ACTIVATION_REGION,
        a.first,
        a.last,
        a.producer,
        list(a.users),
        a.reason,
        a.producer_node,
        a.size,
        alias_of=a.partner,
        alias_kind=a.kind,
    )


def check_plan(plan: MemoryPlan) -> list[str]:
    """Problems with a plan (empty when valid): misaligned offsets, overlapping live buffers,
    buffers outside their region."""
    from compiler.memory.allocators import Interval

    problems = check_allocation(
        [Interval(b.name, b.size, b.first, b.last) for b in plan.buffers],
        {b.name: b.offset for b in plan.buffers},
        plan.alignment,
    )
    for b in (*plan.buffers, *plan.weights):
        if b.offset % plan.alignment:
            problems.append(f"%{b.name} offset {b.offset} is not {plan.alignment}-aligned")
        if b.offset + b.size > plan.region_sizes.get(b.region, 0) and b.size:
            problems.append(
                f"%{b.name} ends at {b.offset + b.size}, past its {b.region} region "
                f"({plan.region_sizes.get(b.region, 0)} B)"
            )
    problems += _check_aliases(plan)
    for region in WEIGHT_REGIONS:
        ws = sorted((w for w in plan.weights if w.region == region), key=lambda w: w.offset)
        for a, b in zip(ws, ws[1:]):
            if a.offset + a.size > b.offset:
                problems.append(f"weights %{a.name} and %{b.name} overlap in the {region} region")
    return problems


def _check_aliases(plan: MemoryPlan) -> list[str]:
    """Every alias lies inside the value it aliases, in bytes and in time (nested intervals),
    so buffers that do not overlap cannot overlap through their aliases either."""
    out = []
    for a in plan.aliases:
        p = plan._index.get(a.alias_of)
        if p is None:
            out.append(f"alias %{a.name} names %{a.alias_of}, which the plan does not have")
            continue
        if not (p.offset <= a.offset and a.offset + a.raw_size <= p.offset + max(p.raw_size, 0)):
            out.append(
                f"alias %{a.name} at {a.offset}..{a.offset + a.raw_size} lies outside "
                f"%{p.name} at {p.offset}..{p.offset + p.raw_size}"
            )
        if not (p.first <= a.first and a.last <= p.last):
            out.append(
                f"alias %{a.name} [{a.first}, {a.last}] outlives %{p.name} [{p.first}, {p.last}]"
            )
        if a.offset % plan.alignment:
            out.append(f"alias %{a.name} offset {a.offset} is not {plan.alignment}-aligned")
    return out


def alias_roots(plan: MemoryPlan) -> dict[str, str]:
    """Every buffer and alias name -> the buffer it belongs to (through `alias_of` chains)."""
    out = {b.name: b.name for b in plan.buffers}
    by_name = {a.name: a for a in plan.aliases}
    for a in plan.aliases:
        cur = a
        while cur.alias_of in by_name:
            cur = by_name[cur.alias_of]
        out[a.name] = cur.alias_of
    return out


def assert_plan(plan: MemoryPlan) -> None:
    """Raise CompilerError if `check_plan` finds a problem."""
    problems = check_plan(plan)
    if problems:
        raise CompilerError("invalid memory plan: " + "; ".join(problems[:5]))
