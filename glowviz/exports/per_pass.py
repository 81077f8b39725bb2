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

from compiler.passes.manager import PassEvent


def _affects_memory(ev: PassEvent) -> bool:
    from compiler.passes.registry import registered_passes

    cls = registered_passes(ev.ir_kind).get(ev.pass_name)
    return True if cls is None else cls.affects_memory


def per_pass_memory(model: Any, options: Any = None) -> list[dict[str, Any]]:
    """One row per memory-relevant pass: {index, stage, pass, ir_kind, changed, nodes,
    instructions, peak_bytes, lower_bound_bytes, delta_bytes (vs the previous row of the same
    method), method}."""
    from compiler.lir.pipeline import run_low_level
    from compiler.memory.plan import plan_memory
    from compiler.passes.manager import PipelineContext
    from compiler.pipeline import CompileOptions, compile_model

    options = options or CompileOptions()
    result = compile_model(model, options, keep_events=True)
    rows: list[dict[str, Any]] = []
    prev: dict[str, Any] | None = None
    for ev in result.events:
        if ev.stage == "schedule":
            continue
        if ev.ir_kind == "graph":
            if ev.stage == "import" or not _affects_memory(ev):
                if ev.stage != "import":
                    continue
            if prev is not None and not ev.changed and prev["ir_kind"] == "graph":
                peak, lb, n_instr = (
                    prev["peak_bytes"],
                    prev["lower_bound_bytes"],
                    prev["instructions"],
                )
            else:
                ctx = PipelineContext(disabled=options.disabled_passes)
                low = run_low_level(ev.ir.clone(), options, ctx)
                peak, lb = low.plan.peak_bytes, low.plan.lower_bound_bytes
                n_instr = len(low.lir.code)
            method = "graph + full low-level pipeline"
            nodes = ev.count_after
        else:
            if ev.stage != "memory" and not _affects_memory(ev):
                continue
            plan = plan_memory(ev.ir.clone(), options.allocator)
            peak, lb, n_instr = plan.peak_bytes, plan.lower_bound_bytes, len(ev.ir.code)
            method = "LIR snapshot planned as-is"
            nodes = None
        # Deltas compare rows of the same method only: the first LIR row (irgen, before any
        # LIR optimisation) starts a new series rather than "regressing" from the graph rows.
        same = prev is not None and prev["method"] == method
        row = {
            "index": ev.index,
            "stage": ev.stage,
            "pass": ev.pass_name,
            "ir_kind": ev.ir_kind,
            "changed": bool(ev.changed),
            "nodes": nodes,
            "instructions": n_instr,
            "peak_bytes": int(peak),
            "lower_bound_bytes": int(lb),
            "delta_bytes": int(peak - prev["peak_bytes"]) if same else 0,
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
