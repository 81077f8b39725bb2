"""Per-pass memory: the activation peak and its lower bound after every graph pass that can
change memory, and after every low-level stage — so a regression's pass is found, not guessed.

How each row is computed (honest about what it measures):
- graph passes (`GraphPass.affects_memory`): a clone of the graph as it was after the pass runs
  through the *whole* low-level pipeline with the same options — schedule, IRGen, every LIR
  pass, then the allocator — i.e. the plan you would get if graph optimisation stopped there.
  A pass that changed nothing repeats the row before it (marked `changed: false`).
- low-level stages (irgen, each LIR pass, memory): that stage's LIR snapshot planned as-is with
  the allocator. Before `hoist-dealloc` / `sink-alloc` the lifetimes are the markers IRGen
  wrote, so those rows are what the plan would be without the remaining LIR passes.
"""

from __future__ import annotations

from typing import Any

from glowviz.session import CompileSession, StageRecord


def _affects_memory(rec: StageRecord) -> bool:
    from compiler.passes.registry import registered_passes

    cls = registered_passes(rec.ir_kind).get(rec.pass_name)
    return True if cls is None else cls.affects_memory


def per_pass_memory(session: CompileSession) -> list[dict[str, Any]]:
    """One row per memory-relevant pass of a compiled session: {index, stage, pass, ir_kind,
    changed, nodes, instructions, peak_bytes, lower_bound_bytes, delta_bytes (vs the previous
    row of the same method), method}. The figures are the session's memory reports of the
    stages (`CompileSession.memory_report(i)`)."""
    rows: list[dict[str, Any]] = []
    prev: dict[str, Any] | None = None
    for i, rec in enumerate(session.stages):
        if rec.stage == "schedule":
            continue
        if rec.ir_kind == "graph":
            if rec.stage != "import" and not _affects_memory(rec):
                continue
            method = "graph + full low-level pipeline"
            nodes: int | None = rec.count_after
        else:
            if rec.stage != "memory" and not _affects_memory(rec):
                continue
            method = "LIR snapshot planned as-is"
            nodes = None
        if prev is not None and not rec.changed and rec.ir_kind == prev["ir_kind"] == "graph":
            # An unchanged graph pass: the same graph, so the same plan.
            peak, lb, n_instr = prev["peak_bytes"], prev["lower_bound_bytes"], prev["instructions"]
        else:
            report = session.memory_report(i)
            assert report is not None, "every stage of a compiled session can be planned"
            peak, lb = report.peak_bytes, report.lower_bound_bytes
            n_instr = report.n_instructions
        # Deltas compare rows of the same method only: the first LIR row (irgen, before any
        # LIR optimisation) starts a new series rather than "regressing" from the graph rows.
        same = prev is not None and prev["method"] == method
        row = {
            "index": rec.index,
            "stage": rec.stage,
            "pass": rec.pass_name,
            "ir_kind": rec.ir_kind,
            "changed": rec.changed,
            "nodes": nodes,
            "instructions": n_instr,
            "peak_bytes": peak,
            "lower_bound_bytes": lb,
            "delta_bytes": peak - prev["peak_bytes"] if prev is not None and same else 0,
            "method": method,
        }
        rows.append(row)
        prev = row
    return rows


def _kib(n: int) -> str:
    return f"{n / 1024:.1f}"


def format_per_pass(rows: list[dict[str, Any]], *, only_changes: bool = False) -> str:
    """A table: # stage pass changed instrs peak KiB lower-bound KiB delta KiB."""
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
    lines.append(
        "graph rows: the graph after the pass through the full low-level pipeline; "
        "LIR rows: that snapshot planned as-is"
    )
    return "\n".join(lines)


__all__ = ["format_per_pass", "per_pass_memory"]
