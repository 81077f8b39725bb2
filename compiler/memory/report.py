"""The memory report (`glowviz mem`): the `glowviz.memory/1` JSON contract and its text form."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from compiler.memory.plan import MemoryPlan
from compiler.memory.regions import REGIONS

SCHEMA = "glowviz.memory/1"


def human_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.2f} {unit}"
        n /= 1024
    return f"{n} B"  # pragma: no cover


def memory_report(
    plan: MemoryPlan,
    lir: Any = None,
    model: str = "",
    scheduler: str = "",
    allocator: str | None = None,
) -> dict[str, Any]:
    """The report dict, exactly in the `glowviz.memory/1` schema (plus extra fields)."""
    peak_at = plan.peak_instruction
    live = sorted(plan.live_at(peak_at), key=lambda b: (-b.size, b.name)) if peak_at >= 0 else []
    return {
        "schema": SCHEMA,
        "model": Path(model).name if model else "",
        "scheduler": scheduler,
        "allocator": allocator or plan.allocator,
        "alignment": plan.alignment,
        "regions": {k: int(plan.region_sizes.get(k, 0)) for k in REGIONS},
        "peak_bytes": int(plan.peak_bytes),
        "lower_bound_bytes": int(plan.lower_bound_bytes),
        "no_reuse_bytes": int(plan.no_reuse_bytes),
        "buffers": [
            {
                "name": b.name,
                "size": int(b.size),
                "offset": int(b.offset),
                "first": int(b.first),
                "last": int(b.last),
                "producer": b.producer_node or b.producer,
                "reason": b.reason,
                "instruction": b.producer,
                "users": list(b.users),
            }
            for b in plan.buffers
        ],
        # Extra fields (allowed by the contract).
        "ratio": round(plan.ratio, 6),
        "strategy": plan.strategy,
        "instructions": len(lir.code) if lir is not None else None,
        "peak_instruction": peak_at,
        "live_at_peak": [b.name for b in live],
        "weights": [
            {"name": w.name, "region": w.region, "size": int(w.size), "offset": int(w.offset)}
            for w in plan.weights
        ],
    }


def format_report(report: dict[str, Any], top: int = 15) -> str:
    """Readable text of a report dict: regions, bounds, and the buffers live at the peak."""
    r = report
    regions = r["regions"]
    lb, peak = r["lower_bound_bytes"], r["peak_bytes"]
    ratio = peak / lb if lb else 1.0
    lines = [
        f"memory plan for {r['model'] or '<model>'}  (scheduler {r['scheduler']}, "
        f"allocator {r['allocator']}, alignment {r['alignment']} B)",
        "regions:",
        *(f"  {k:<12} {human_bytes(regions[k]):>12}  ({regions[k]} B)" for k in REGIONS),
        f"peak (activations)   {human_bytes(peak):>12}",
        f"lower bound          {human_bytes(lb):>12}   ratio {ratio:.3f}",
        f"no reuse (sum)       {human_bytes(r['no_reuse_bytes']):>12}   "
        f"saved {human_bytes(r['no_reuse_bytes'] - peak)}",
        f"buffers              {len(r['buffers']):>12}",
    ]
    by_name = {b["name"]: b for b in r["buffers"]}
    live = [by_name[n] for n in r.get("live_at_peak", []) if n in by_name]
    if live:
        at = r.get("peak_instruction", -1)
        lines.append(f"live at the peak (instruction {at}), largest first:")
        w = max(len(b["name"]) for b in live[:top])
        for b in live[:top]:
            lines.append(
                f"  %{b['name']:<{w}} {human_bytes(b['size']):>11}  @{b['offset']:<10} "
                f"[{b['first']}, {b['last']}]  from {b['producer'] or '?'}"
            )
        if len(live) > top:
            lines.append(f"  ... and {len(live) - top} more")
    return "\n".join(lines)
