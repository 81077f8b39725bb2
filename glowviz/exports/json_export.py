"""The data behind every export view, as plain JSON-ready dicts (`--format json`).

Each figure is drawn from exactly these dicts, so the JSON is what the figure shows:

- `glowviz.export.graph/1` (view `graph`, see `dot_graph.graph_data`): `module`, `stage`,
  `placeholders` [{name, type, role}], `constants` [{name, type, bytes, users, digest, value?}],
  `functions` [{name, nodes: [{name, op, category, operands: [{operand, type, kind, node, port,
  value}], results: [{name, type, bytes}], attrs, default_attrs, origin}]}],
  `edges` [{from, from_port, to, to_port, kind, shape, type}].
- `glowviz.export.lir/1` (view `lir`, see `dot_lir.lir_data`): `function`, `stage`, `weights`
  [{name, type, mutability, role}], `instructions` [{index, name, kind, category, operands:
  [{value, mode}], attrs, type, node, text}].
- `glowviz.export.schedule/1` (view `schedule`): `model`, `stage`, `scheduler` (the one used),
  `series` [{scheduler, order (node names), live_bytes (after each step), peak_bytes,
  peak_step, instruction_live_bytes (at every instruction of that scheduler's low-level
  program), arena_bytes, lower_bound_bytes}], `planned_peak_bytes`, `lower_bound_bytes`,
  `peak_instruction`, `n_instructions` (of the memory plan; null if none).
- `glowviz.memory/1` (views `lifetimes` and `memory`): the memory report, exactly as
  `glowviz mem --json` writes it (documented in docs/memory-report.md, JSON Schema in
  docs/schemas/glowviz.memory-1.schema.json), plus `stage` and `n_instructions`.

Every list is in a deterministic order; sizes are bytes; indices are 0-based instruction
indices (schedule: node steps).
"""

from __future__ import annotations

import json
from typing import Any

from compiler.memory.report import MemoryReport
from compiler.scheduling import Schedule

SCHEDULE_SCHEMA = "glowviz.export.schedule/1"
MEMORY_SCHEMA = "glowviz.memory/1"  # the memory report's (compiler.memory.report.SCHEMA)


def dumps(data: Any) -> str:
    """Stable JSON text: sorted keys are not used (the order above is the documented one)."""
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


def memory_data(report: MemoryReport, *, stage: str | None = None) -> dict[str, Any]:
    """The views `lifetimes` and `memory` as data: the memory report itself (`glowviz.memory/1`,
    exactly what `glowviz mem --json` writes, so mem-diff reads it), plus the stage it shows and
    the program length the figures' instruction axis spans."""
    return {**report.to_json(), "stage": stage, "n_instructions": report.n_instructions}


def schedule_series(sched: Schedule) -> dict[str, Any]:
    return {
        "scheduler": sched.kind,
        "order": sched.names,
        "live_bytes": list(sched.live_bytes),
        "peak_bytes": sched.peak_bytes,
        "peak_step": sched.peak_step,
        "used": sched.used or sched.kind,
        "proven_optimal": sched.proven_optimal,
    }


def schedule_data(
    schedules: list[Schedule],
    report: MemoryReport | None,
    *,
    stage: str | None = None,
    reports: list[MemoryReport] | None = None,
) -> dict[str, Any]:
    """`glowviz.export.schedule/1`: the session's schedules of a stage (the one used first,
    then every other scheduler on the same graph) and the plan's bounds. `reports` (the same
    order: `CompileSession.scheduler_reports`) put every scheduler on the instruction axis the
    lifetimes and memory figures share: each series gets `instruction_live_bytes` (live bytes
    at every instruction of that scheduler's low-level program), `arena_bytes` and
    `lower_bound_bytes` of its plan."""
    by_kind = {r.scheduler: r for r in reports or []}
    series = []
    for s in schedules:
        entry = schedule_series(s)
        r = by_kind.get(s.kind) if s is not schedules[0] else (report or by_kind.get(s.kind))
        if r is not None:
            entry["instruction_live_bytes"] = r.live_bytes
            entry["arena_bytes"] = r.peak_bytes
            entry["lower_bound_bytes"] = r.lower_bound_bytes
        series.append(entry)
    return {
        "schema": SCHEDULE_SCHEMA,
        "model": report.model if report is not None else "",
        "stage": stage,
        "scheduler": schedules[0].kind if schedules else None,
        "series": series,
        "planned_peak_bytes": report.peak_bytes if report is not None else None,
        "lower_bound_bytes": report.lower_bound_bytes if report is not None else None,
        "peak_instruction": report.peak_instruction if report is not None else None,
        "n_instructions": report.n_instructions if report is not None else None,
    }


__all__ = [
    "MEMORY_SCHEMA",
    "SCHEDULE_SCHEMA",
    "dumps",
    "memory_data",
    "schedule_data",
    "schedule_series",
]
