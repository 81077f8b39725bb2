"""Per-pass memory: the activation peak and its lower bound after every step of the pipeline
that can change memory -- graph passes, the scheduler, IRGen and every low-level pass -- so a
regression's step is found, not guessed.

Every row is measured the same way (`CompileSession.stage_memory`), so consecutive rows differ
only by what that step did and the deltas add up from the first row to the final plan:
- a graph stage is scheduled in plain topological order, lowered by IRGen;
- the `schedule` row is the final graph in the compile's scheduler's order (its delta is what
  the scheduler gains or loses against topological order: a scheduler regression is blamed on
  it);
- a low-level stage is its own snapshot;
then each is planned with lifetimes tightened (`TIGHTENING_PASSES`, as hoist-dealloc and
sink-alloc leave them: those passes therefore show no delta of their own) by the compile's
allocator. The last row is the compile's own plan. A step that changed nothing repeats the row
before it (`changed: false`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from glowviz.session import CompileSession, StageRecord

PER_PASS_SCHEMA_KEY = "per_pass"  # the key of the rows in a glowviz.memory/1 report
METHOD = (
    "every row: graph stages in topological order (the schedule row in the compile's "
    "scheduler's), IRGen, lifetimes tightened, the compile's allocator; deltas add up"
)


def _affects_memory(rec: StageRecord) -> bool:
    from compiler.passes.registry import registered_passes

    if rec.stage in ("import", "schedule", "irgen", "memory"):
        return True
    cls = registered_passes(rec.ir_kind).get(rec.pass_name)
    return True if cls is None else cls.affects_memory


def per_pass_memory(
    session: CompileSession, between: Callable[[], None] | None = None
) -> list[dict[str, Any]]:
    """One row per memory-relevant step of a compiled session: {index, stage, pass, ir_kind,
    changed, nodes, instructions, peak_bytes, lower_bound_bytes, delta_bytes (against the row
    before; the first row's is 0), top_buffer, peak_instruction}. `between` is called before
    each stage is planned (background work waits there while a view computes what the user
    waits for; it may raise to stop)."""
    rows: list[dict[str, Any]] = []
    prev: dict[str, Any] | None = None
    for i, rec in enumerate(session.stages):
        if not _affects_memory(rec):
            continue
        # A step that changed nothing keeps the plan (the schedule stage always "changes" the
        # order; IRGen and the allocator are measured as what they are).
        same = prev is not None and not rec.changed and rec.stage not in ("schedule", "memory")
        if same:
            assert prev is not None
            peak, lb, n_instr = prev["peak_bytes"], prev["lower_bound_bytes"], prev["instructions"]
            top, at = prev["top_buffer"], prev["peak_instruction"]
        else:
            if between is not None:
                between()
            report = session.stage_memory(i)
            assert report is not None, "every stage of a compiled session can be planned"
            peak, lb, n_instr = report.peak_bytes, report.lower_bound_bytes, report.n_instructions
            top, at = report.top_buffer, report.peak_instruction
        row = {
            "index": rec.index,
            "stage": rec.stage,
            "pass": rec.pass_name,
            "ir_kind": rec.ir_kind,
            "changed": rec.changed,
            "nodes": rec.count_after if rec.ir_kind == "graph" else None,
            "instructions": n_instr,
            "peak_bytes": peak,
            "lower_bound_bytes": lb,
            "delta_bytes": peak - prev["peak_bytes"] if prev is not None else 0,
            "top_buffer": top,
            "peak_instruction": at,
        }
        rows.append(row)
        prev = row
    return rows


def scheduler_comparison(session: CompileSession) -> list[dict[str, Any]]:
    """The final graph planned with every scheduler through the whole low-level pipeline (the
    one used first): {scheduler, peak_bytes, lower_bound_bytes, delta_bytes (against the one
    used)}. A schedule's cost can show only after the low-level passes (an order that keeps
    a big result alive stops buffer sharing), which the rows, each planned before the passes
    still to come, cannot attribute; this comparison does."""
    reports = session.scheduler_reports()
    if not reports:
        return []
    used = reports[0].peak_bytes
    return [
        {
            "scheduler": r.scheduler,
            "peak_bytes": r.peak_bytes,
            "lower_bound_bytes": r.lower_bound_bytes,
            "delta_bytes": r.peak_bytes - used,
        }
        for r in reports
    ]


def _kib(n: int) -> str:
    return f"{n / 1024:.1f}"


def format_per_pass(
    rows: list[dict[str, Any]],
    *,
    only_changes: bool = False,
    schedulers: list[dict[str, Any]] | None = None,
) -> str:
    """A table: # stage pass changed instrs peak KiB bound KiB delta KiB, then the largest
    increase and decrease, the schedulers compared on the final graph (`scheduler_comparison`)
    and how the rows are measured."""
    header = ("#", "stage", "pass", "changed", "instrs", "peak KiB", "bound KiB", "delta KiB")
    body = []
    for r in rows:
        if only_changes and r["delta_bytes"] == 0:
            continue
        d = r["delta_bytes"]
        body.append(
            (
                str(r["index"]),
                r["stage"],
                r["pass"],
                "yes" if r["changed"] else "-",
                str(r["instructions"]),
                _kib(r["peak_bytes"]),
                _kib(r["lower_bound_bytes"]),
                ("+" if d > 0 else "") + _kib(d) if d else "0",
            )
        )
    widths = [
        max(len(h), *(len(b[i]) for b in body)) if body else len(h) for i, h in enumerate(header)
    ]
    right = {0, 4, 5, 6, 7}

    def fmt(cols: tuple[str, ...]) -> str:
        return "  ".join(
            c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(cols, widths))
        ).rstrip()

    lines = [fmt(header), fmt(tuple("-" * w for w in widths)), *(fmt(b) for b in body)]
    if only_changes and not body:
        lines.append("(no step changed the peak)")
    if rows:
        worst = max(rows, key=lambda r: r["delta_bytes"])
        best = min(rows, key=lambda r: r["delta_bytes"])
        if worst["delta_bytes"] > 0:
            lines.append(
                f"largest increase: {worst['stage']}/{worst['pass']} (#{worst['index']}) "
                f"+{_kib(worst['delta_bytes'])} KiB"
            )
        if best["delta_bytes"] < 0:
            lines.append(
                f"largest decrease: {best['stage']}/{best['pass']} (#{best['index']}) "
                f"{_kib(best['delta_bytes'])} KiB"
            )
        first, last = rows[0], rows[-1]
        lines.append(
            f"from {first['stage']}/{first['pass']} to the final plan: "
            f"{_kib(first['peak_bytes'])} -> {_kib(last['peak_bytes'])} KiB"
        )
    if schedulers:
        used = schedulers[0]
        bits = [f"{used['scheduler']} {_kib(used['peak_bytes'])} KiB (used)"]
        for x in schedulers[1:]:
            d = x["delta_bytes"]
            pct = 100.0 * d / used["peak_bytes"] if used["peak_bytes"] else 0.0
            bits.append(f"{x['scheduler']} {_kib(x['peak_bytes'])} KiB ({pct:+.1f}%)")
        lines.append("schedulers on the final graph (whole pipeline): " + ", ".join(bits))
        best = min(schedulers, key=lambda x: (x["peak_bytes"], x is not used))
        if best is not used and best["peak_bytes"] < used["peak_bytes"]:
            worse = 100.0 * (used["peak_bytes"] - best["peak_bytes"]) / best["peak_bytes"]
            lines.append(
                f"the scheduler: {used['scheduler']} is {worse:.1f}% worse than "
                f"{best['scheduler']} (+{_kib(used['peak_bytes'] - best['peak_bytes'])} KiB)"
            )
    lines.append(METHOD)
    return "\n".join(lines)


__all__ = ["METHOD", "format_per_pass", "per_pass_memory", "scheduler_comparison"]
