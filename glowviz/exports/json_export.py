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
  peak_step}], `planned_peak_bytes`, `lower_bound_bytes` (of the memory plan; null if none).
- `glowviz.export.memory/1` (views `lifetimes` and `memory`): `model`, `stage`, `scheduler`,
  `allocator`, `alignment`, `peak_bytes`, `lower_bound_bytes`, `no_reuse_bytes`,
  `peak_instruction`, `n_instructions`, `live_at_peak` (names, largest first), `live_bytes`
  (sum of live activation bytes at every instruction), `buffers` [{name, size, offset, first,
  last, producer (instruction), node (graph node), category, users, reason}].

Every list is in a deterministic order; sizes are bytes; indices are 0-based instruction
indices (schedule: node steps).
"""

from __future__ import annotations

import json
from typing import Any

from compiler.memory.report import MemoryReport
from compiler.scheduling import Schedule

SCHEDULE_SCHEMA = "glowviz.export.schedule/1"
MEMORY_SCHEMA = "glowviz.export.memory/1"


def dumps(data: Any) -> str:
    """Stable JSON text: sorted keys are not used (the order above is the documented one)."""
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


def memory_data(report: MemoryReport, *, stage: str | None = None) -> dict[str, Any]:
    """`glowviz.export.memory/1`: a memory report (the session's) as the figures draw it."""
    return {
        "schema": MEMORY_SCHEMA,
        "model": report.model,
        "stage": stage,
        "scheduler": report.scheduler,
        "allocator": report.allocator,
        "alignment": report.alignment,
        "peak_bytes": report.peak_bytes,
        "lower_bound_bytes": report.lower_bound_bytes,
        "no_reuse_bytes": report.no_reuse_bytes,
        "peak_instruction": report.peak_instruction,
        "n_instructions": report.n_instructions,
        "live_at_peak": list(report.live_at_peak),
        "live_bytes": report.live_bytes,
        "buffers": [
            {
                **b.placement(),
                "producer": b.instruction,
                "node": b.node,
                "category": b.category,
                "users": list(b.users),
                "reason": b.reason,
                "alias_of": b.alias_of or None,
            }
            for b in report.buffers
            if b.region == "activations"
        ],
        "certificate": report.certificate.to_json() if report.certificate else None,
    }


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
    schedules: list[Schedule], report: MemoryReport | None, *, stage: str | None = None
) -> dict[str, Any]:
    """`glowviz.export.schedule/1`: the session's schedules of a stage (the one used first,
    then every other scheduler on the same graph) and the plan's bounds."""
    return {
        "schema": SCHEDULE_SCHEMA,
        "model": report.model if report is not None else "",
        "stage": stage,
        "scheduler": schedules[0].kind if schedules else None,
        "series": [schedule_series(s) for s in schedules],
        "planned_peak_bytes": report.peak_bytes if report is not None else None,
        "lower_bound_bytes": report.lower_bound_bytes if report is not None else None,
    }


__all__ = [
    "MEMORY_SCHEMA",
    "SCHEDULE_SCHEMA",
    "dumps",
    "memory_data",
    "schedule_data",
    "schedule_series",
]
