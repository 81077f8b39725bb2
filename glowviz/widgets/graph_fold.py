"""Folding a whole graph for the Graph view's overview: repeated blocks become one box
("16 × Conv·Relu·Conv·Concat") and long chains one box ("Conv → Relu → MaxPool"), so a
900-node DenseNet stays readable. Where the graph can be cut and which blocks repeat is
`glowviz.exports.structure` (the exported figures fold the same way); this module turns the
session's graph rows into the boxes and edges to lay out. Textual-free."""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any

from glowviz.exports.structure import fold_repeats, runs_continue, segment_signature, segments

#: Attributes that say where a slice or insert sits, not what the op is.
POSITION_ATTRS = frozenset({"offsets", "shape", "starts", "ends", "sizes", "count"})
#: Ops that join branches: a long segment is cut again where only they read across.
JOINS = frozenset({"Concat", "Add", "Sum"})
#: A chain of at least this many single boxes folds into one.
CHAIN_MIN = 4
#: The longest repeating unit looked for, in segments (a BERT layer cuts into about 18).
MAX_PERIOD = 32
#: Fold levels: 0 everything shown, 1 repeated blocks and long chains folded.
LEVELS = ("every node", "repeats and chains folded")


@dataclass
class Box:
    """One box of the overview: a node, or a folded group of nodes."""

    name: str  # the node's name, or "group:K"
    label: str
    kind: str  # the op category (a group: its first member's)
    members: list[str] = field(default_factory=list)
    count: int = 1  # repetitions of a folded block

    @property
    def is_group(self) -> bool:
        return bool(self.members)


@dataclass
class Folded:
    boxes: list[Box]
    edges: list[tuple[str, str]]
    labels: dict[tuple[str, str], str]  # edge -> the tensor shape it carries
    owner: dict[str, str]  # node name -> the box that shows it

    def box(self, name: str) -> Box | None:
        return next((b for b in self.boxes if b.name == name), None)


def _sig(row: dict[str, Any]) -> Hashable:
    attrs = tuple(sorted((k, v) for k, v in row["attrs"].items() if k not in POSITION_ATTRS))
    return (row["op"], attrs)


def shape_text(type_text: str) -> str:
    """`f32<1x64x56x56>` -> `1x64x56x56` (what an edge carries)."""
    if "<" in type_text and type_text.endswith(">"):
        return type_text[type_text.index("<") + 1 : -1]
    return type_text


def _ops_summary(rows: Sequence[dict[str, Any]], sep: str, limit: int = 5) -> str:
    ops: list[str] = []
    for r in rows:
        if not ops or ops[-1] != r["op"]:
            ops.append(r["op"])
    more = len(ops) > limit
    return sep.join(ops[:limit]) + (sep + "…" if more else "")


def fold_graph(rows: list[dict[str, Any]], level: int = 1, expanded: Sequence[str] = ()) -> Folded:
    """The boxes and edges of a graph stage's rows (`CompileSession.graph_nodes`): inputs,
    outputs and nodes (weights left out), with repeats and long chains folded at level 1
    unless their group is in `expanded`."""
    values = {r["name"]: r for r in rows if r["kind"] != "constant"}
    items = [r for r in rows if r["kind"] not in ("constant", "input", "output")]
    pos = {r["name"]: i for i, r in enumerate(items)}
    groups: list[tuple[range, int]] = []  # item ranges folded, with their repeat count
    if level >= 1 and len(items) > 1:
        reads = [[pos[x] for x in r["inputs"] if x in pos] for r in items]
        sigs = [_sig(r) for r in items]
        tails = [
            c or (r["kind"] == "activation" and len(reads[i]) == 1)
            for i, (c, r) in enumerate(zip(runs_continue(sigs, reads), items, strict=True))
        ]
        segs = segments(reads, tails, [r["op"] in JOINS for r in items])
        seg_sigs = [segment_signature(s, sigs, reads) for s in segs]
        chain: list[int] = []

        def close_chain() -> None:
            if len(chain) >= CHAIN_MIN:
                groups.append((range(chain[0], chain[-1] + 1), 1))
            chain.clear()

        for run in fold_repeats(seg_sigs, MAX_PERIOD):
            span = range(segs[run.start].start, segs[run.stop - 1].stop)
            if run.count > 1:
                close_chain()
                groups.append((span, run.count))
            elif len(span) == 1 and len(reads[span.start]) <= 1:
                chain.append(span.start)
            else:
                close_chain()
        close_chain()
    owner = {name: name for name in values}
    boxes: list[Box] = []
    folded_at: dict[int, tuple[range, int, str]] = {}
    for k, (span, count) in enumerate(groups):
        gid = f"group:{k}"
        if gid in expanded:
            continue
        folded_at[span.start] = (span, count, gid)
    for r in rows:
        if r["kind"] == "input":
            boxes.append(Box(r["name"], f"input {r['name']}", "input"))
    i = 0
    while i < len(items):
        if i in folded_at:
            span, count, gid = folded_at[i]
            members = [items[j]["name"] for j in span]
            unit = [items[j] for j in span][: max(1, len(span) // max(1, count))]
            if count > 1:
                label = f"{count} × {_ops_summary(unit, '·')}"
            else:
                label = _ops_summary([items[j] for j in span], " → ")
            label += f"  ({len(members)} nodes)"
            boxes.append(Box(gid, label, items[span.start]["kind"], members, count))
            for m in members:
                owner[m] = gid
            i = span.stop
            continue
        r = items[i]
        boxes.append(Box(r["name"], f"{r['op']} {r['name']}", r["kind"]))
        i += 1
    for r in rows:
        if r["kind"] == "output":
            boxes.append(Box(r["name"], f"output {r['name']}", "output"))
    edges: list[tuple[str, str]] = []
    labels: dict[tuple[str, str], str] = {}
    outputs = {r["name"] for r in rows if r["kind"] == "output"}
    for r in rows:
        if r["kind"] == "constant" or r["name"] not in owner:
            continue
        dst = owner[r["name"]]
        for x in r["inputs"]:
            if x not in owner:
                continue
            # A Save reads its output placeholder only to write it: draw the write.
            src, to = (dst, owner[x]) if x in outputs else (owner[x], dst)
            e = (src, to)
            if src == to or e in labels:
                continue
            edges.append(e)
            labels[e] = "" if x in outputs else shape_text(str(values[x]["type"]).split(",")[0])
    return Folded(boxes, edges, labels, owner)
