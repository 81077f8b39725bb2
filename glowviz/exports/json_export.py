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

from compiler.lir.instructions import Trait

SCHEDULE_SCHEMA = "glowviz.export.schedule/1"
MEMORY_SCHEMA = "glowviz.export.memory/1"


def dumps(data: Any) -> str:
    """Stable JSON text: sorted keys are not used (the order above is the documented one)."""
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


def _category_of_instruction(lir: Any, name: str) -> str:
    if lir is None or not name:
        return "other"
    ins = lir.find(name) if hasattr(lir, "find") else None
    if ins is None:
        return "other"
    try:
        opdef = ins.idef.opdef
    except Exception:  # noqa: BLE001 - an unknown kind is drawn as "other"
        return "other"
    if opdef is not None:
        return opdef.category
    return "tensor" if ins.has_trait(Trait.DATA_MOVEMENT) else "other"


def live_profile(buffers: list[dict[str, Any]], n: int) -> list[int]:
    diff = [0] * (n + 1)
    for b in buffers:
        lo, hi = max(0, b["first"]), min(n - 1, b["last"])
        if lo <= hi:
            diff[lo] += b["size"]
            diff[hi + 1] -= b["size"]
    out, acc = [], 0
    for i in range(n):
        acc += diff[i]
        out.append(acc)
    return out


def memory_data(
    plan: Any,
    lir: Any = None,
    *,
    model: str = "",
    stage: str | None = None,
    scheduler: str = "",
    allocator: str | None = None,
) -> dict[str, Any]:
    """`glowviz.export.memory/1` from a compiler.memory MemoryPlan (and the LIR it plans)."""
    buffers = []
    for b in plan.buffers:
        if getattr(b, "region", "activations") != "activations":
            continue
        buffers.append(
            {
                "name": b.name,
                "size": int(b.size),
                "offset": int(b.offset),
                "first": int(b.first),
                "last": int(b.last),
                "producer": b.producer,
                "node": getattr(b, "producer_node", "") or "",
                "category": _category_of_instruction(lir, b.producer),
                "users": list(b.users),
                "reason": b.reason,
            }
        )
    n = len(lir.code) if lir is not None else max((b["last"] for b in buffers), default=-1) + 1
    live = live_profile(buffers, n)
    peak_at = int(getattr(plan, "peak_instruction", -1))
    if peak_at < 0 and live:
        peak_at = live.index(max(live))
    at_peak = sorted(
        (b for b in buffers if b["first"] <= peak_at <= b["last"]),
        key=lambda b: (-b["size"], b["name"]),
    )
    return {
        "schema": MEMORY_SCHEMA,
        "model": model,
        "stage": stage,
        "scheduler": scheduler,
        "allocator": allocator or plan.allocator,
        "alignment": int(plan.alignment),
        "peak_bytes": int(plan.peak_bytes),
        "lower_bound_bytes": int(plan.lower_bound_bytes),
        "no_reuse_bytes": int(plan.no_reuse_bytes),
        "peak_instruction": peak_at,
        "n_instructions": n,
        "live_at_peak": [b["name"] for b in at_peak],
        "live_bytes": live,
        "buffers": buffers,
    }


def schedule_series(sched: Any) -> dict[str, Any]:
    live = [int(x) for x in sched.live_bytes]
    peak = max(live, default=0)
    return {
        "scheduler": sched.kind,
        "order": [n.name for n in sched.order],
        "live_bytes": live,
        "peak_bytes": peak,
        "peak_step": live.index(peak) if live else -1,
    }


def schedule_data(
    module: Any,
    used: Any,
    *,
    model: str = "",
    stage: str | None = None,
    plan: Any = None,
    schedulers: tuple[str, ...] | None = None,
) -> dict[str, Any]:
    """`glowviz.export.schedule/1`: the schedule used, plus every other scheduler on the same
    graph (recomputed with compiler.scheduling; cheap: no IRGen or planning)."""
    from compiler.scheduling import SCHEDULERS, schedule

    series = []
    if used is not None:
        series.append(schedule_series(used))
    for kind in schedulers or SCHEDULERS:
        if used is not None and kind == used.kind:
            continue
        for fn in module.functions[:1]:
            series.append(schedule_series(schedule(fn, kind)))
    return {
        "schema": SCHEDULE_SCHEMA,
        "model": model,
        "stage": stage,
        "scheduler": used.kind if used is not None else None,
        "series": series,
        "planned_peak_bytes": int(plan.peak_bytes) if plan is not None else None,
        "lower_bound_bytes": int(plan.lower_bound_bytes) if plan is not None else None,
    }


__all__ = [
    "MEMORY_SCHEMA",
    "SCHEDULE_SCHEMA",
    "dumps",
    "live_profile",
    "memory_data",
    "schedule_data",
    "schedule_series",
]
