"""The Memory view's comparison data: the session's memory plan against a second
`glowviz.memory/1` report (a JSON file, a model, a `model.onnx:key=value,...` spec, or the same
model recompiled with another allocator/scheduler), matched and diffed by mem-diff
(`glowviz.exports.memdiff`), with both allocation maps in the Memory view's map format.

Plain data, Textual-free:

    {"base": SIDE, "other": SIDE, "diff": <glowviz.memdiff/1>, "rows": [ROW]}
    SIDE = {"label", "source", "map": {buffers, n_instructions, peak_bytes, peak_instruction,
                                       lower_bound_bytes, no_reuse_bytes}}
    ROW  = {"old", "new" (names or None), "tags": [grew|shrank|appeared|vanished|longer|
            shorter|moved], "old_size", "new_size", "old_first", "old_last", "new_first",
            "new_last", "old_offset", "new_offset" (None on the missing side), "changed":
            [size|live|offset]}
"""

from __future__ import annotations

from typing import Any

from glowviz.session.util import _get

#: The order the buffer rows are listed in (the first tag of a row decides).
TAG_ORDER = ("grew", "appeared", "longer", "shrank", "vanished", "shorter", "moved")


def map_from_report(report: dict[str, Any]) -> dict[str, Any]:
    """A `glowviz.memory/1` report as the data the Memory view's map renderer draws."""
    from glowviz.exports.memdiff import _peak_info

    bufs = [
        {
            "name": b["name"],
            "size": int(b["size"]),
            "offset": int(b["offset"]),
            "first": int(b["first"]),
            "last": int(b["last"]),
            "producer": b.get("producer") or "",
        }
        for b in report["buffers"]
    ]
    n = max((b["last"] for b in bufs), default=0) + 1
    if isinstance(report.get("instructions"), int):
        n = max(n, report["instructions"])
    at, live = _peak_info(report)
    return {
        "available": True,
        "buffers": bufs,
        "n_instructions": n,
        "peak_bytes": int(report["peak_bytes"]),
        "lower_bound_bytes": int(report["lower_bound_bytes"]),
        "no_reuse_bytes": int(report["no_reuse_bytes"]),
        "peak_instruction": max(0, at),
        "live_at_peak": list(live),
        "regions": dict(report.get("regions") or {}),
    }


def report_from_map(
    data: dict[str, Any], model: str, regions: dict[str, int] | None = None
) -> dict[str, Any]:
    """A `glowviz.memory/1` report built from `CompileSession.memory_map()` (used when the plan
    is not the compiler's MemoryPlan, e.g. a test pipeline's)."""
    from pathlib import Path

    return {
        "schema": "glowviz.memory/1",
        "model": Path(model).name,
        "scheduler": str(data.get("scheduler", "")),
        "allocator": str(data.get("allocator", "")),
        "regions": dict(regions or {"activations": data["peak_bytes"]}),
        "peak_bytes": int(data["peak_bytes"]),
        "lower_bound_bytes": int(data["lower_bound_bytes"]),
        "no_reuse_bytes": int(data["no_reuse_bytes"]),
        "buffers": [
            {
                "name": b["name"],
                "size": b["size"],
                "offset": b["offset"],
                "first": b["first"],
                "last": b["last"],
                "producer": b["producer"],
            }
            for b in data["buffers"]
        ],
        "instructions": int(data["n_instructions"]),
        "peak_instruction": int(data["peak_instruction"]),
        "live_at_peak": list(data["live_at_peak"]),
    }


def session_report(session: Any) -> dict[str, Any]:
    """The `glowviz.memory/1` report of a compiled session's final memory plan."""
    from compiler.errors import CompilerError

    data = session.memory_map()
    if not data.get("available"):
        raise CompilerError(f"this compile has no memory plan: {data.get('reason')}")
    result = session.result
    plan, lir = getattr(result, "plan", None), getattr(result, "lir", None)
    try:
        from compiler.memory.plan import MemoryPlan
        from compiler.memory.report import memory_report

        if isinstance(plan, MemoryPlan):
            return memory_report(
                plan, lir, session.model_path, data["scheduler"], data["allocator"]
            )
    except ModuleNotFoundError:
        pass
    regions = _get(plan, "region_sizes", default=None)
    return report_from_map(
        data, session.model_path, {k: int(v) for k, v in regions.items()} if regions else None
    )


def side_label(report: dict[str, Any]) -> str:
    """`name (allocator, scheduler)`: the file a report came from, else its model."""
    from pathlib import Path

    source = str(report.get("source") or "")
    name = Path(source.partition(":")[0] if ".onnx:" in source else source).name
    bits = [x for x in (report.get("allocator"), report.get("scheduler")) if x]
    if ".onnx:" in source:
        bits.append(source.rpartition(":")[2])
    return (name or str(report.get("model") or "?")) + (f" ({', '.join(bits)})" if bits else "")


def buffer_rows(diff: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per changed buffer (matched and changed, appeared, vanished)."""
    b = diff["buffers"]
    rows: dict[tuple[str | None, str | None], dict[str, Any]] = {}
    for tag in ("grew", "shrank", "longer", "shorter", "moved"):
        for c in b[tag]:
            row = rows.setdefault(
                (c["old"], c["new"]),
                {
                    "old": c["old"],
                    "new": c["new"],
                    "tags": [],
                    "changed": [],
                    "old_size": c["old_size"],
                    "new_size": c["new_size"],
                    "old_first": c["old_first"],
                    "old_last": c["old_last"],
                    "new_first": c["new_first"],
                    "new_last": c["new_last"],
                    "old_offset": c["old_offset"],
                    "new_offset": c["new_offset"],
                    "size_delta": c["size_delta"],
                    "producer": c.get("producer", ""),
                },
            )
            row["tags"].append(tag)
            field = {"grew": "size", "shrank": "size", "moved": "offset"}.get(tag, "live")
            if field not in row["changed"]:
                row["changed"].append(field)
    out = list(rows.values())
    for tag, side in (("appeared", "new"), ("vanished", "old")):
        for x in b[tag]:
            other = "old" if side == "new" else "new"
            out.append(
                {
                    side: x["name"],
                    other: None,
                    "tags": [tag],
                    "changed": ["size", "live", "offset"],
                    f"{side}_size": x["size"],
                    f"{other}_size": None,
                    f"{side}_first": x["first"],
                    f"{side}_last": x["last"],
                    f"{other}_first": None,
                    f"{other}_last": None,
                    f"{side}_offset": x.get("offset"),
                    f"{other}_offset": None,
                    "size_delta": x["size"] if side == "new" else -x["size"],
                    "producer": x.get("producer", ""),
                }
            )

    def key(r: dict[str, Any]) -> tuple[int, int, str]:
        return (
            min(TAG_ORDER.index(t) for t in r["tags"]),
            -abs(r["size_delta"] or 0),
            r["new"] or r["old"] or "",
        )

    return sorted(out, key=key)


def compare_reports(base: dict[str, Any], other: dict[str, Any]) -> dict[str, Any]:
    """Both sides (label, source, map data), mem-diff's diff and the changed-buffer rows."""
    from glowviz.exports.memdiff import diff_reports

    diff = diff_reports(base, other)
    offsets = {("old", b["name"]): b["offset"] for b in base["buffers"]}
    offsets.update({("new", b["name"]): b["offset"] for b in other["buffers"]})
    rows = buffer_rows(diff)
    for r in rows:  # mem-diff's BUF has no offset: take it from the reports
        for side in ("old", "new"):
            if r[side] is not None and r.get(f"{side}_offset") is None:
                r[f"{side}_offset"] = offsets.get((side, r[side]))
    return {
        "base": {
            "label": side_label(base),
            "source": base.get("source", ""),
            "map": map_from_report(base),
        },
        "other": {
            "label": side_label(other),
            "source": other.get("source", ""),
            "map": map_from_report(other),
        },
        "diff": diff,
        "rows": rows,
    }


__all__ = [
    "buffer_rows",
    "compare_reports",
    "map_from_report",
    "report_from_map",
    "session_report",
    "side_label",
]
