"""Compare two memory reports (`MemoryReport`, `glowviz.memory/1`): the one memory diff, behind
`glowviz mem-diff` and the IDE's memory comparison (core layer).

Each side is a report JSON file, a model (`.onnx`, compiled with the default options) or a model
with a configuration, `model.onnx:scheduler=topological,allocator=first-fit,disable=buffer-sharing`
(keys: scheduler, allocator, disable (pass names joined by '+'), input (NAME=1x3x32x32, '+'-joined)).

Buffers are matched by name, then by producer (graph node), then by producing instruction, each
only when the match is unique. The result is `glowviz.memdiff/1`:

    {"schema": "glowviz.memdiff/1",
     "old": SIDE, "new": SIDE,                 SIDE = {source, model, scheduler, allocator,
                                                 peak_bytes, lower_bound_bytes, no_reuse_bytes,
                                                 peak_instruction, live_at_peak: [names],
                                                 buffers: count}
     "peak": DELTA, "lower_bound": DELTA, "no_reuse": DELTA,     DELTA = {old, new, delta, pct}
     "regions": {constant|mutable|activations: DELTA},
     "buffers": {"matched": n, "matched_by": {name: n, producer: n, instruction: n},
                 "grew": [CHANGE], "shrank": [CHANGE], "longer": [CHANGE], "shorter": [CHANGE],
                 "moved": [CHANGE],
                 "appeared": [BUF], "vanished": [BUF]},
     "threshold_pct": PCT | null, "regressed": bool, "exit_code": 0 | 1}

CHANGE = {old, new (names), matched_by, old_size, new_size, size_delta, old_first, old_last,
new_first, new_last, lifetime_delta, lifetime_unit ("operations" when both reports record
lifetimes in operations -- `first_op`, `last_op`, `op_span` -- else "instructions"), old_ops,
new_ops ([first op, last op, span] or null), old_offset, new_offset, producer};
"moved" lists matched buffers whose offset changed (an allocator's doing); BUF = {name, size,
first, last, producer}. `pct` is null when the old value is 0. SIDE also has `config` (what
produced the report: scheduler, allocator, disabled passes, input shapes, model sha256,
version) and `top_buffer`; `warnings` says when two different models (or model files) are
compared. "longer" and "shorter" are in the order the operations run; the other lists are
sorted by the size of the change.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from compiler.memory.report import MemoryReport, ReportBuffer, ReportError, config_bits

SCHEMA = "glowviz.memdiff/1"
CONFIG_KEYS = ("scheduler", "allocator", "disable", "input")


class MemDiffInputError(ReportError):
    """A side of mem-diff is missing, not JSON, not a glowviz.memory/1 report, or a bad spec."""


def split_spec(spec: str) -> tuple[str, dict[str, str]]:
    """`model.onnx:scheduler=topological,allocator=first-fit` -> (path, {key: value})."""
    path, sep, tail = spec.rpartition(":")
    if not sep or "=" not in tail or not path:
        return spec, {}
    config: dict[str, str] = {}
    for item in tail.split(","):
        key, eq, value = item.partition("=")
        key = key.strip()
        if not eq or key not in CONFIG_KEYS:
            raise MemDiffInputError(
                f"bad configuration '{item}' in '{spec}'",
                hint=f"keys: {', '.join(CONFIG_KEYS)}; e.g. "
                "model.onnx:scheduler=topological,allocator=first-fit",
            )
        config[key] = value.strip()
    return path, config


def load_side(spec: str, input_shapes: dict[str, tuple[int, ...]] | None = None) -> MemoryReport:
    """The report of one side, its `source` set to `spec`."""
    path, config = split_spec(spec)
    p = Path(path)
    if not p.exists():
        raise MemDiffInputError(f"file not found: {path}")
    if p.suffix.lower() == ".onnx" or config:
        report = report_for_model(path, config, input_shapes or {})
    else:
        try:
            data = json.loads(p.read_text(encoding="utf-8"))
        except UnicodeDecodeError:
            raise MemDiffInputError(f"{path}: not a JSON file (binary data)") from None
        except json.JSONDecodeError as e:
            raise MemDiffInputError(f"{path}: not JSON ({e.msg}, line {e.lineno})") from None
        except OSError as e:
            raise MemDiffInputError(f"cannot read {path}: {e.strerror}") from None
        try:
            report = MemoryReport.from_json(data, path)
        except ReportError as e:
            raise MemDiffInputError(e.message, hint=e.hint) from None
    return report.with_source(spec)


def report_for_model(
    path: str, config: dict[str, str], input_shapes: dict[str, tuple[int, ...]]
) -> MemoryReport:
    from compiler.pipeline import CompileOptions, compile_model
    from glowviz.core.shapes import parse_shape_args

    shapes = dict(input_shapes)
    if config.get("input"):
        shapes.update(parse_shape_args(config["input"].split("+")))
    options = CompileOptions(input_shapes=shapes)
    if config.get("scheduler"):
        options.scheduler = config["scheduler"]
    if config.get("allocator"):
        options.allocator = config["allocator"]
    if config.get("disable"):
        options.disabled_passes = frozenset(x for x in config["disable"].split("+") if x)
    report = compile_model(path, options).memory_report()
    if report is None:
        raise MemDiffInputError(f"{path}: the pipeline produced no memory plan")
    return report


# ---------------------------------------------------------------------------------------------
# The diff
# ---------------------------------------------------------------------------------------------


def _delta(old: int, new: int) -> dict[str, Any]:
    pct = None if old == 0 else round(100.0 * (new - old) / old, 3)
    return {"old": old, "new": new, "delta": new - old, "pct": pct}


#: What the JSON diff says about each side's report.
_SIDE_FIELDS = (
    "source",
    "model",
    "scheduler",
    "allocator",
    "top_buffer",
    "peak_bytes",
    "lower_bound_bytes",
    "no_reuse_bytes",
    "peak_instruction",
)


def _side(report: MemoryReport) -> dict[str, Any]:
    side = {k: getattr(report, k) for k in _SIDE_FIELDS}
    side["config"] = dict(report.config)
    side["live_at_peak"] = list(report.live_at_peak)
    side["buffers"] = len(report.buffers)
    return side


#: How buffers are matched when their names differ, in order (each only when unique).
_MATCH_KEYS = ("producer", "instruction")


def _index_by(side: dict[str, ReportBuffer], key: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for n, b in side.items():
        v = getattr(b, key)
        if v:
            out.setdefault(v, []).append(n)
    return out


def match_buffers(
    old: tuple[ReportBuffer, ...], new: tuple[ReportBuffer, ...]
) -> tuple[list[tuple[ReportBuffer, ReportBuffer, str]], list[ReportBuffer], list[ReportBuffer]]:
    """(matched (old, new, how), vanished, appeared)."""
    pairs: list[tuple[ReportBuffer, ReportBuffer, str]] = []
    left = {b.name: b for b in old}
    right = {b.name: b for b in new}
    for name in list(left):
        if name in right:
            pairs.append((left.pop(name), right.pop(name), "name"))
    for key in _MATCH_KEYS:
        li, ri = _index_by(left, key), _index_by(right, key)
        for v, names in sorted(li.items()):
            if len(names) == 1 and len(ri.get(v, ())) == 1:
                pairs.append((left.pop(names[0]), right.pop(ri[v][0]), key))
    return pairs, list(left.values()), list(right.values())


def _buf(b: ReportBuffer) -> dict[str, Any]:
    return {k: getattr(b, k) for k in ("name", "size", "first", "last", "producer")}


def diff_reports(
    old: MemoryReport, new: MemoryReport, fail_above: float | None = None
) -> dict[str, Any]:
    """The `glowviz.memdiff/1` data of OLD -> NEW (see the module docstring)."""
    pairs, vanished, appeared = match_buffers(old.buffers, new.buffers)
    changes: list[dict[str, Any]] = []
    for a, b, how in pairs:
        in_ops = a.op_span >= 0 and b.op_span >= 0
        changes.append(
            {
                "old": a.name,
                "new": b.name,
                "matched_by": how,
                "old_size": a.size,
                "new_size": b.size,
                "size_delta": b.size - a.size,
                "old_first": a.first,
                "old_last": a.last,
                "new_first": b.first,
                "new_last": b.last,
                # In operations when both reports know them: instruction indices shift with
                # every marker or copy a change adds, operations only when the lifetime does.
                "lifetime_delta": (
                    b.op_span - a.op_span if in_ops else (b.last - b.first) - (a.last - a.first)
                ),
                "lifetime_unit": "operations" if in_ops else "instructions",
                "old_ops": [a.first_op, a.last_op, a.op_span] if in_ops else None,
                "new_ops": [b.first_op, b.last_op, b.op_span] if in_ops else None,
                "old_offset": a.offset,
                "new_offset": b.offset,
                "producer": b.producer or a.producer,
            }
        )
    by = {"name": 0, "producer": 0, "instruction": 0}
    for _, _, how in pairs:
        by[how] += 1
    grew = sorted(
        (c for c in changes if c["size_delta"] > 0), key=lambda c: (-c["size_delta"], c["new"])
    )
    shrank = sorted(
        (c for c in changes if c["size_delta"] < 0), key=lambda c: (c["size_delta"], c["new"])
    )
    # Lifetime changes in the order the operations run (the new program's), not by size.
    longer = sorted(
        (c for c in changes if c["lifetime_delta"] > 0),
        key=lambda c: (c["new_first"], c["new"]),
    )
    shorter = sorted(
        (c for c in changes if c["lifetime_delta"] < 0),
        key=lambda c: (c["new_first"], c["new"]),
    )
    moved = sorted(
        (c for c in changes if c["old_offset"] != c["new_offset"]),
        key=lambda c: (-(c["new_offset"] + c["new_size"]), c["new"]),
    )
    peak = _delta(old.peak_bytes, new.peak_bytes)
    regions_old, regions_new = old.regions, new.regions
    regions = {
        k: _delta(int(regions_old.get(k, 0)), int(regions_new.get(k, 0)))
        for k in ("constant", "mutable", "activations")
        if k in regions_old or k in regions_new
    }
    regressed = False
    if fail_above is not None and peak["delta"] > 0:
        regressed = peak["pct"] is None or peak["pct"] > fail_above
    return {
        "schema": SCHEMA,
        "old": _side(old),
        "new": _side(new),
        "warnings": comparison_warnings(old, new),
        "peak": peak,
        "lower_bound": _delta(old.lower_bound_bytes, new.lower_bound_bytes),
        "no_reuse": _delta(old.no_reuse_bytes, new.no_reuse_bytes),
        "regions": regions,
        "buffers": {
            "matched": len(pairs),
            "matched_by": by,
            "grew": grew,
            "shrank": shrank,
            "longer": longer,
            "shorter": shorter,
            "moved": moved,
            "appeared": sorted((_buf(b) for b in appeared), key=lambda b: (-b["size"], b["name"])),
            "vanished": sorted((_buf(b) for b in vanished), key=lambda b: (-b["size"], b["name"])),
        },
        "threshold_pct": fail_above,
        "regressed": regressed,
        "exit_code": 1 if regressed else 0,
    }


def comparison_warnings(old: MemoryReport, new: MemoryReport) -> list[str]:
    """What makes a comparison suspect: two different models, or the same name with different
    model files (e.g. a base report recorded before the model was retrained)."""
    out = []
    if old.model and new.model and old.model != new.model:
        out.append(f"comparing two different models: {old.model} and {new.model}")
    else:
        a, b = old.config.get("model_sha256"), new.config.get("model_sha256")
        if a and b and a != b:
            out.append(
                f"the model files differ (sha256 {a[:12]} vs {b[:12]}): "
                "the model changed, not only the compiler"
            )
    return out


def describe_config(side: dict[str, Any]) -> str:
    """`scheduler X, allocator Y; disabled passes: P; input shapes: N=1x3x8x8; glowviz V` of
    a diff side (`config_bits`)."""
    cfg = side.get("config") or {}
    bits = [f"scheduler {side['scheduler'] or '?'}, allocator {side['allocator'] or '?'}"]
    if cfg:
        bits += config_bits(cfg)
    else:
        bits.append("no configuration recorded")
    return "; ".join(bits)


# ---------------------------------------------------------------------------------------------
# Text
# ---------------------------------------------------------------------------------------------


def _b(n: int) -> str:
    sign = "-" if n < 0 else ""
    n = abs(n)
    if n >= 1024 * 1024:
        return f"{sign}{n / 1024 / 1024:.2f} MiB"
    if n >= 1024:
        return f"{sign}{n / 1024:.1f} KiB"
    return f"{sign}{n} B"


def _d(d: dict[str, Any]) -> str:
    sign = "+" if d["delta"] > 0 else ""
    pct = "n/a" if d["pct"] is None else f"{'+' if d['pct'] > 0 else ''}{d['pct']:.1f}%"
    return f"{_b(d['old']):>11} -> {_b(d['new']):>11}  {sign}{_b(d['delta'])} ({pct})"


def format_diff(diff: dict[str, Any], top: int = 10) -> str:
    o, n = diff["old"], diff["new"]
    lines = [
        f"old: {o['source']}  ({describe_config(o)})",
        f"new: {n['source']}  ({describe_config(n)})",
        *(f"warning: {w}" for w in diff.get("warnings", [])),
        f"peak         {_d(diff['peak'])}",
        f"lower bound  {_d(diff['lower_bound'])}",
        f"no reuse     {_d(diff['no_reuse'])}",
    ]
    gap_o = o["peak_bytes"] - o["lower_bound_bytes"]
    gap_n = n["peak_bytes"] - n["lower_bound_bytes"]
    lines.append(f"gap to bound {_b(gap_o):>11} -> {_b(gap_n):>11}")
    for side, label in ((o, "old"), (n, "new")):
        live = side["live_at_peak"]
        shown = ", ".join(live[:8]) + (f", ... (+{len(live) - 8})" if len(live) > 8 else "")
        lines.append(f"{label} peak at instruction {side['peak_instruction']}; live: {shown}")
    b = diff["buffers"]
    mb = ", ".join(f"{k} {v}" for k, v in b["matched_by"].items() if v)
    lines.append(
        f"buffers: {o['buffers']} -> {n['buffers']}; matched {b['matched']}"
        + (f" (by {mb})" if mb else "")
        + f", appeared {len(b['appeared'])}, "
        f"vanished {len(b['vanished'])}"
    )

    def section(title: str, rows: list[str], total: int) -> None:
        if rows:
            lines.append(f"{title}:")
            lines.extend("  " + r for r in rows[:top])
            if total > top:
                lines.append(f"  ... and {total - top} more")

    def name(c: dict[str, Any]) -> str:
        return c["new"] if c["old"] == c["new"] else f"{c['old']} -> {c['new']}"

    section(
        "grew",
        [
            f"%{name(c)}  {_b(c['old_size'])} -> {_b(c['new_size'])} (+{_b(c['size_delta'])})"
            for c in b["grew"]
        ],
        len(b["grew"]),
    )
    section(
        "shrank",
        [
            f"%{name(c)}  {_b(c['old_size'])} -> {_b(c['new_size'])} ({_b(c['size_delta'])})"
            for c in b["shrank"]
        ],
        len(b["shrank"]),
    )

    def lifetime(c: dict[str, Any]) -> str:
        d = c["lifetime_delta"]
        if c.get("lifetime_unit") == "operations":
            (f0, l0, n0), (f1, l1, n1) = c["old_ops"], c["new_ops"]
            return f"%{name(c)}  {f0} .. {l0} ({n0} ops) -> {f1} .. {l1} ({n1} ops)  {d:+d} ops"
        return (
            f"%{name(c)}  [{c['old_first']}, {c['old_last']}] -> "
            f"[{c['new_first']}, {c['new_last']}] ({d:+d} instructions)"
        )

    section(
        "lived longer (in the order the operations run)",
        [lifetime(c) for c in b["longer"]],
        len(b["longer"]),
    )
    section(
        "lived shorter",
        [lifetime(c) for c in b["shorter"]],
        len(b["shorter"]),
    )
    section(
        "moved (offset changed; highest end first)",
        [
            f"%{name(c)}  @{c['old_offset']} -> @{c['new_offset']}  "
            f"(ends at {_b(c['new_offset'] + c['new_size'])})"
            for c in b["moved"]
        ],
        len(b["moved"]),
    )
    section(
        "appeared",
        [
            f"%{x['name']}  {_b(x['size'])}  [{x['first']}, {x['last']}]"
            f"  from {x['producer'] or '?'}"
            for x in b["appeared"]
        ],
        len(b["appeared"]),
    )
    section(
        "vanished",
        [
            f"%{x['name']}  {_b(x['size'])}  [{x['first']}, {x['last']}]"
            f"  from {x['producer'] or '?'}"
            for x in b["vanished"]
        ],
        len(b["vanished"]),
    )
    t = diff["threshold_pct"]
    if t is None:
        lines.append("no threshold (--fail-above): exit 0")
    elif diff["regressed"]:
        lines.append(
            f"REGRESSION: peak grew {_d(diff['peak']).split('  ')[-1]} > {t:g}% threshold: exit 1"
        )
    else:
        lines.append(f"ok: peak change within {t:g}% threshold: exit 0")
    return "\n".join(lines)


__all__ = [
    "CONFIG_KEYS",
    "SCHEMA",
    "MemDiffInputError",
    "comparison_warnings",
    "describe_config",
    "diff_reports",
    "format_diff",
    "load_side",
    "match_buffers",
    "report_for_model",
    "split_spec",
]
