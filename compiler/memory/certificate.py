"""The certificate of a memory plan (pipeline step 10): how far the plan is from the best any
allocator and any schedule could do, and why.

Three bounds, each a fact about the plan rather than a promise:

- `planned_bytes`: the activations region the allocator built;
- `schedule_lower_bound_bytes`: the most bytes live at one instruction of this schedule's
  low-level IR, which every allocator needs (the gap above it is the allocator's);
- `all_schedules_lower_bound_bytes`: what every order of the graph needs: the exact search's
  minimum when it finished (it is a lower bound even when the order it found does not reach
  it), and never less than the largest single operator's live operands and results.

`schedule_proven_optimal` holds when the schedule's low-level peak reaches the all-schedules
bound. A gap names the buffers responsible: above the schedule's bound, the buffers placed
above it; between the bounds, the buffers live across the peak instruction without being used
there (another order might not keep them).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from compiler.lir.ir import LIRFunction, view_root
from compiler.scheduling import Schedule

if TYPE_CHECKING:  # the plan module builds certificates: no import cycle at run time
    from compiler.memory.plan import MemoryPlan


@dataclass(frozen=True)
class Certificate:
    planned_bytes: int
    schedule_lower_bound_bytes: int
    all_schedules_lower_bound_bytes: int | None  # None: no schedule known (e.g. parsed LIR)
    all_schedules_bound_from: str  # how that bound was obtained
    schedule_proven_optimal: bool
    no_reuse_bytes: int
    scheduler: str = ""  # the scheduler asked for
    scheduler_used: str = ""  # whose order it is (optimal falls back to child-mem-size)
    search: dict[str, Any] = field(default_factory=dict)
    allocation_gap_bytes: int = 0
    schedule_gap_bytes: int = 0
    gap_buffers: tuple[str, ...] = ()
    aliases: dict[str, int] = field(default_factory=dict)  # alias kind -> count

    @property
    def optimal(self) -> bool:
        """No allocator and no schedule can do better than this plan."""
        return self.schedule_proven_optimal and self.allocation_gap_bytes == 0

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Certificate:
        """A certificate read back from a report (unknown keys ignored)."""
        known = cls.__dataclass_fields__
        fields = {k: v for k, v in data.items() if k in known}
        fields["gap_buffers"] = tuple(fields.get("gap_buffers") or ())
        return cls(**fields)

    def to_json(self) -> dict[str, Any]:
        return {
            "planned_bytes": self.planned_bytes,
            "schedule_lower_bound_bytes": self.schedule_lower_bound_bytes,
            "all_schedules_lower_bound_bytes": self.all_schedules_lower_bound_bytes,
            "all_schedules_bound_from": self.all_schedules_bound_from,
            "schedule_proven_optimal": self.schedule_proven_optimal,
            "no_reuse_bytes": self.no_reuse_bytes,
            "scheduler": self.scheduler,
            "scheduler_used": self.scheduler_used,
            "search": dict(self.search),
            "allocation_gap_bytes": self.allocation_gap_bytes,
            "schedule_gap_bytes": self.schedule_gap_bytes,
            "gap_buffers": list(self.gap_buffers),
            "aliases": dict(self.aliases),
        }


def certify(
    plan: MemoryPlan, lir: LIRFunction | None = None, schedule: Schedule | None = None
) -> Certificate:
    """The certificate of `plan` (for `lir`, scheduled by `schedule` when known)."""
    planned, lb = int(plan.peak_bytes), int(plan.lower_bound_bytes)
    gap_buffers: list[str] = []
    if planned > lb:
        above = [b for b in plan.buffers if b.offset + b.size > lb]
        gap_buffers += [b.name for b in sorted(above, key=lambda b: (-(b.offset + b.size), b.name))]
    kinds: dict[str, int] = {}
    for a in plan.aliases:
        kinds[a.alias_kind] = kinds.get(a.alias_kind, 0) + 1
    if schedule is None:
        return Certificate(
            planned, lb, None, "", False, int(plan.no_reuse_bytes),
            allocation_gap_bytes=planned - lb, gap_buffers=tuple(gap_buffers), aliases=kinds,
        )  # fmt: skip
    bound, source = schedule.lower_bound_bytes, f"largest operator: {schedule.lower_bound_node}"
    searched = schedule.stats.get("optimal_bytes")
    if searched is not None and searched >= bound:
        bound, source = searched, "exact search over every order"
    # Both bounds come from the scheduler's memory model, which never exceeds the low-level
    # peak of an order: the schedule is optimal exactly when its low-level bound reaches them.
    proven = lb == bound
    schedule_gap = max(0, lb - bound)
    if schedule_gap and lir is not None:
        gap_buffers += _held_across_peak(plan, lir)
    return Certificate(
        planned,
        lb,
        int(bound),
        source,
        proven,
        int(plan.no_reuse_bytes),
        schedule.kind,
        schedule.used,
        # Deterministic facts only: a plan's report must not change between identical compiles.
        {k: v for k, v in schedule.stats.items() if not k.endswith("_ms")},
        planned - lb,
        schedule_gap,
        tuple(dict.fromkeys(gap_buffers)),
        kinds,
    )


def _held_across_peak(plan: MemoryPlan, lir: LIRFunction) -> list[str]:
    """Buffers live at the peak instruction that the instruction itself does not touch,
    largest first."""
    at = plan.peak_instruction
    if not 0 <= at < len(lir.code):
        return []
    touched = {view_root(v)[0].name for v, _ in lir.code[at].operands}
    held = [b for b in plan.live_at(at) if b.name not in touched]
    return [b.name for b in sorted(held, key=lambda b: (-b.size, b.name))]


def format_certificate(c: Certificate, human: Any) -> list[str]:
    """Text lines of a certificate (`human`: the byte formatter of the report)."""
    lines = [
        "certificate:",
        f"  planned peak                 {human(c.planned_bytes):>12}",
        f"  lower bound, this schedule   {human(c.schedule_lower_bound_bytes):>12}"
        + (f"   allocation gap {human(c.allocation_gap_bytes)}" if c.allocation_gap_bytes else ""),
    ]
    if c.all_schedules_lower_bound_bytes is not None:
        lines.append(
            f"  lower bound, all schedules   {human(c.all_schedules_lower_bound_bytes):>12}"
            f"   ({c.all_schedules_bound_from})"
        )
    used = c.scheduler_used or c.scheduler
    fallback = c.search.get("fallback")
    how = f"scheduler {used}" + (f", {fallback}" if fallback else "")
    verdict = "yes" if c.schedule_proven_optimal else "no"
    lines.append(f"  schedule proven optimal      {verdict:>12}   ({how})")
    lines.append(f"  no reuse (sum of buffers)    {human(c.no_reuse_bytes):>12}")
    if c.gap_buffers:
        shown = ", ".join(f"%{n}" for n in c.gap_buffers[:6])
        more = f" and {len(c.gap_buffers) - 6} more" if len(c.gap_buffers) > 6 else ""
        lines.append(f"  the gap is held by           {shown}{more}")
    if c.aliases:
        parts = ", ".join(
            f"{n} {'accumulation targets (sum post-op)' if k == 'sum' else 'concat slices'}"
            for k, n in sorted(c.aliases.items())
        )
        lines.append(f"  aliases (bytes shared by design): {parts}")
    return lines


__all__ = ["Certificate", "certify", "format_certificate"]
