"""The Memory view's comparison data: the session's memory report against a second one (a
`glowviz.memory/1` JSON file, a model, a `model.onnx:key=value,...` spec, or the same model
recompiled with another allocator/scheduler), matched and diffed by mem-diff
(`glowviz.core.memdiff`), both reports kept for the two allocation maps.

Plain data, Textual-free:

    {"base": SIDE, "other": SIDE, "diff": <glowviz.memdiff/1>, "rows": [ROW]}
    SIDE = {"label", "source", "report": MemoryReport}
    ROW  = {"old", "new" (names or None), "tags": [grew|shrank|appeared|vanished|longer|
            shorter|moved], "old_size", "new_size", "old_first", "old_last", "new_first",
            "new_last", "old_offset", "new_offset" (None on the missing side), "changed":
            [size|live|offset]}
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from compiler.memory.report import MemoryReport
from glowviz.core.memdiff import diff_reports

#: The order the buffer rows are listed in (the first tag of a row decides).
TAG_ORDER = ("grew", "appeared", "longer", "shrank", "vanished", "shorter", "moved")


def side_label(report: MemoryReport) -> str:
    """`name (allocator, scheduler)`: the file a report came from, else its model."""
    source = report.source
    name = Path(source.partition(":")[0] if ".onnx:" in source else source).name
    bits = [x for x in (report.allocator, report.scheduler) if x]
    if ".onnx:" in source:
        bits.append(source.rpartition(":")[2])
    return (name or report.model or "?") + (f" ({', '.join(bits)})" if bits else "")


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


def compare_reports(base: MemoryReport, other: MemoryReport) -> dict[str, Any]:
    """Both sides (label, source, report), mem-diff's diff and the changed-buffer rows."""
    diff = diff_reports(base, other)
    offsets = {("old", b.name): b.offset for b in base.buffers}
    offsets.update({("new", b.name): b.offset for b in other.buffers})
    rows = buffer_rows(diff)
    for r in rows:  # mem-diff's BUF has no offset: take it from the reports
        for side in ("old", "new"):
            if r[side] is not None and r.get(f"{side}_offset") is None:
                r[f"{side}_offset"] = offsets.get((side, r[side]))
    return {
        "base": {"label": side_label(base), "source": base.source, "report": base},
        "other": {"label": side_label(other), "source": other.source, "report": other},
        "diff": diff,
        "rows": rows,
    }


__all__ = ["buffer_rows", "compare_reports", "side_label"]
