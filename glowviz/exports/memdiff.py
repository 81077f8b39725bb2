"""Compare two memory reports (`glowviz.memory/1`): the regression check behind `glowviz mem-diff`.

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
new_first, new_last, lifetime_delta (in instructions), old_offset, new_offset, producer};
"moved" lists matched buffers whose offset changed (an allocator's doing); BUF = {name, size, first, last,
producer}. `pct` is null when the old value is 0. Lists are sorted by the size of the change.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from compiler.errors import CompilerError

SCHEMA = "glowviz.memdiff/1"
REPORT_SCHEMA = "glowviz.memory/1"
_BUFFER_KEYS = ("name", "size", "offset", "first", "last")
CONFIG_KEYS = ("scheduler", "allocator", "disable", "input")


class MemDiffInputError(CompilerError):
    """A side of mem-diff is missing, not JSON, not a glowviz.memory/1 report, or a bad spec."""


def validate_report(data: Any, source: str) -> dict[str, Any]:
    if not isinstance(data, dict):
        raise MemDiffInputError(f"{source}: not a glowviz.memory/1 report (a JSON object)")
    if data.get("schema") != REPORT_SCHEMA:
        raise MemDiffInputError(
            f"{source}: schema is {data.get('schema')!r}, expected {REPORT_SCHEMA!r}"
        )
    for key in ("peak_bytes", "lower_bound_bytes", "no_reuse_bytes"):
        if not isinstance(data.get(key), int):
            raise MemDiffInputError(f"{source}: '{key}' missing or not an integer")
    bufs = data.get("buffers")
    if not isinstance(bufs, list):
        raise MemDiffInputError(f"{source}: 'buffers' missing or not a list")
    for i, b in enumerate(bufs):
        if (
            not isinstance(b, dict)
            or not isinstance(b.get("name"), str)
            or not all(isinstance(b.get(k), int) for k in _BUFFER_KEYS[1:])
        ):
            raise MemDiffInputError(f"{source}: buffers[{i}] needs name, size, offset, first, last")
    return data


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


def load_side(spec: str, input_shapes: dict[str, tuple[int, ...]] | None = None) -> dict[str, Any]:
    """A report dict for one side (with a `source` key added for the diff)."""
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
        report = validate_report(data, path)
    return {**report, "source": spec}


def report_for_model(
    path: str, config: dict[str, str], input_shapes: dict[str, tuple[int, ...]]
) -> dict[str, Any]:
    from compiler.memory.report import memory_report
    from compiler.pipeline import CompileOptions, compile_model
    from glowviz.cli import parse_shape_args

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
    result = compile_model(path, options)
    if result.plan is None:
        raise MemDiffInputError(f"{path}: the pipeline produced no memory plan")
    return memory_report(result.plan, result.lir, path, options.scheduler, options.allocator)


# ---------------------------------------------------------------------------------------------
# The diff
# ---------------------------------------------------------------------------------------------


def _delta(old: int, new: int) -> dict[str, Any]:
    pct = None if old == 0 else round(100.0 * (new - old) / old, 3)
    return {"old": old, "new": new, "delta": new - old, "pct": pct}


def _peak_info(report: dict[str, Any]) -> tuple[int, list[str]]:
    bufs = report["buffers"]
    at = report.get("peak_instruction")
    if not isinstance(at, int) or at < 0:
        n = max((b["last"] for b in bufs), default=-1) + 1
        diff = [0] * (n + 1)
        for b in bufs:
            diff[b["first"]] += b["size"]
            diff[b["last"] + 1] -= b["size"]
        best, acc, at = -1, 0, -1
        for i in range(n):
            acc += diff[i]
            if acc > best:
                best, at = acc, i
    live = report.get("live_at_peak")
    if not isinstance(live, list):
        live = [
            b["name"]
            for b in sorted(
                (b for b in bufs if b["first"] <= at <= b["last"]),
                key=lambda b: (-b["size"], b["name"]),
            )
        ]
    return at, live


def _side(report: dict[str, Any]) -> dict[str, Any]:
    at, live = _peak_info(report)
    return {
        "source": report.get("source", ""),
        "model": report.get("model", ""),
        "scheduler": report.get("scheduler", ""),
        "allocator": report.get("allocator", ""),
        "peak_bytes": report["peak_bytes"],
        "lower_bound_bytes": report["lower_bound_bytes"],
        "no_reuse_bytes": report["no_reuse_bytes"],
        "peak_instruction": at,
        "live_at_peak": live,
        "buffers": len(report["buffers"]),
    }


def _index_by(side: dict[str, dict[str, Any]], key: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for n, b in side.items():
        v = b.get(key)
        if isinstance(v, str) and v:
            out.setdefault(v, []).append(n)
    return out


def match_buffers(
    old: list[dict[str, Any]], new: list[dict[str, Any]]
) -> tuple[
    list[tuple[dict[str, Any], dict[str, Any], str]], list[dict[str, Any]], list[dict[str, Any]]
]:
    """(matched (old, new, how), vanished, appeared)."""
    pairs: list[tuple[dict[str, Any], dict[str, Any], str]] = []
    left = {b["name"]: b for b in old}
    right = {b["name"]: b for b in new}
    for name in list(left):
        if name in right:
            pairs.append((left.pop(name), right.pop(name), "name"))
    for key in ("producer", "instruction"):
        li, ri = _index_by(left, key), _index_by(right, key)
        for v, names in sorted(li.items()):
            if len(names) == 1 and len(ri.get(v, ())) == 1:
                pairs.append((left.pop(names[0]), right.pop(ri[v][0]), key))
    return pairs, list(left.values()), list(right.values())


def _buf(b: dict[str, Any]) -> dict[str, Any]:
    return {
        "name": b["name"],
        "size": b["size"],
        "first": b["first"],
        "last": b["last"],
        "producer": b.get("producer", ""),
    }


def diff_reports(
    old: dict[str, Any], new: dict[str, Any], fail_above: float | None = None
) -> dict[str, Any]:
    pairs, vanished, appeared = match_buffers(old["buffers"], new["buffers"])
    changes = []
    for a, b, how in pairs:
        changes.append(
            {
                "old": a["name"],
                "new": b["name"],
                "matched_by": how,
                "old_size": a["size"],
                "new_size": b["size"],
                "size_delta": b["size"] - a["size"],
                "old_first": a["first"],
                "old_last": a["last"],
                "new_first": b["first"],
                "new_last": b["last"],
                "lifetime_delta": (b["last"] - b["first"]) - (a["last"] - a["first"]),
                "old_offset": a["offset"],
                "new_offset": b["offset"],
                "producer": b.get("producer") or a.get("producer", ""),
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
    longer = sorted(
        (c for c in changes if c["lifetime_delta"] > 0),
        key=lambda c: (-c["lifetime_delta"], c["new"]),
    )
    shorter = sorted(
        (c for c in changes if c["lifetime_delta"] < 0),
        key=lambda c: (c["lifetime_delta"], c["new"]),
    )
    moved = sorted(
        (c for c in changes if c["old_offset"] != c["new_offset"]),
        key=lambda c: (-(c["new_offset"] + c["new_size"]), c["new"]),
    )
    peak = _delta(old["peak_bytes"], new["peak_bytes"])
    regions_old, regions_new = old.get("regions") or {}, new.get("regions") or {}
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
        "peak": peak,
        "lower_bound": _delta(old["lower_bound_bytes"], new["lower_bound_bytes"]),
        "no_reuse": _delta(old["no_reuse_bytes"], new["no_reuse_bytes"]),
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
        f"old: {o['source']}  ({o['scheduler']}, {o['allocator']})",
        f"new: {n['source']}  ({n['scheduler']}, {n['allocator']})",
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
    section(
        "lived longer",
        [
            f"%{name(c)}  [{c['old_first']}, {c['old_last']}] -> "
            f"[{c['new_first']}, {c['new_last']}] (+{c['lifetime_delta']} "
            "instructions)"
            for c in b["longer"]
        ],
        len(b["longer"]),
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
    "diff_reports",
    "format_diff",
    "load_side",
    "match_buffers",
    "split_spec",
    "validate_report",
]
