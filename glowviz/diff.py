"""Computed diffs between two graph-IR snapshots (nodes matched by name) and their IR text.

Shared by the IDE's Diff view and the exports: plain data, no Textual. Provenance comes from
the journal records the passes in between wrote, not from guessing.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from compiler.graph.ir import Module
    from compiler.provenance import ProvenanceRecord

#: Fields compared for a node present on both sides.
NODE_FIELDS = ("op", "attrs", "operands", "types")


@dataclass(frozen=True)
class NodeSummary:
    name: str
    op: str
    attrs: str
    operands: tuple[str, ...]
    types: tuple[str, ...]

    def get(self, fld: str) -> Any:
        return getattr(self, fld)


@dataclass
class NodeChange:
    name: str
    fields: dict[str, tuple[Any, Any]]  # field -> (before, after)

    def describe(self) -> str:
        parts = []
        for fld, (a, b) in self.fields.items():
            if fld in ("operands", "types"):
                a, b = ", ".join(a), ", ".join(b)
            parts.append(f"{fld}: {a} -> {b}")
        return f"{self.name}: " + "; ".join(parts)


@dataclass
class SideBySideRow:
    tag: str  # "equal" | "replace" | "delete" | "insert"
    left_no: int | None
    left: str
    right_no: int | None
    right: str


@dataclass
class GraphDiff:
    added: list[NodeSummary] = field(default_factory=list)
    removed: list[NodeSummary] = field(default_factory=list)
    changed: list[NodeChange] = field(default_factory=list)
    provenance: list[str] = field(default_factory=list)
    constants_added: list[str] = field(default_factory=list)
    constants_removed: list[str] = field(default_factory=list)
    unified: list[str] = field(default_factory=list)
    side_by_side: list[SideBySideRow] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not (
            self.added
            or self.removed
            or self.changed
            or self.constants_added
            or self.constants_removed
        )

    def summary(self) -> str:
        s = (
            f"+{len(self.added)} added, -{len(self.removed)} removed, "
            f"~{len(self.changed)} changed nodes"
        )
        if self.constants_added or self.constants_removed:
            s += f"; constants +{len(self.constants_added)} -{len(self.constants_removed)}"
        return s

    def to_dict(self) -> dict[str, Any]:
        return {
            "added": [n.name for n in self.added],
            "removed": [n.name for n in self.removed],
            "changed": {
                c.name: {k: [str(v[0]), str(v[1])] for k, v in c.fields.items()}
                for c in self.changed
            },
            "provenance": list(self.provenance),
            "constants_added": list(self.constants_added),
            "constants_removed": list(self.constants_removed),
        }


def summarize_nodes(module: Module) -> dict[str, NodeSummary]:
    """Name -> NodeSummary of every node of every function of a graph Module."""
    from compiler.graph.printer import format_attr

    out: dict[str, NodeSummary] = {}
    for fn in module.functions:
        for n in fn.nodes:
            attrs = ", ".join(f"{k}={format_attr(v)}" for k, v in n.attrs.items())
            out[n.name] = NodeSummary(
                n.name,
                n.op,
                attrs,
                tuple(v.name for v in n.operands),
                tuple(str(r.type) for r in n.results),
            )
    return out


def provenance_lines(records: Iterable[tuple[str, ProvenanceRecord]]) -> list[str]:
    """Readable provenance from (pass name, ProvenanceRecord) pairs, in order.

    "conv_3 + relu_3 -> conv_3_relu  [fuse-activations]"; erasures already explained by a
    creation from the same pass are folded into it.
    """
    items = list(records)
    explained: set[tuple[str, str]] = set()
    for pname, r in items:
        if r.kind == "create":
            for s in r.sources:
                explained.add((pname, s))
    lines: list[str] = []
    for pname, r in items:
        if r.kind == "create":
            if r.sources:
                lines.append(f"{' + '.join(r.sources)} -> {r.node} ({r.op})  [{pname}]")
            else:
                lines.append(f"+ {r.node} ({r.op})  [{pname}]")
        elif r.kind == "erase":
            if (pname, r.node) not in explained:
                lines.append(f"- {r.node} ({r.op}) erased  [{pname}]")
        elif r.kind == "replace":
            new = ", ".join(r.sources)
            lines.append(f"uses of {r.node} -> {new}  [{pname}]")
    return lines


def side_by_side(a_lines: Sequence[str], b_lines: Sequence[str]) -> list[SideBySideRow]:
    rows: list[SideBySideRow] = []
    sm = difflib.SequenceMatcher(None, a_lines, b_lines, autojunk=False)
    for tag, i1, i2, j1, j2 in sm.get_opcodes():
        if tag == "equal":
            for k in range(i2 - i1):
                rows.append(
                    SideBySideRow("equal", i1 + k + 1, a_lines[i1 + k], j1 + k + 1, b_lines[j1 + k])
                )
            continue
        n = max(i2 - i1, j2 - j1)
        for k in range(n):
            li, ri = i1 + k, j1 + k
            has_l, has_r = li < i2, ri < j2
            t = "replace" if has_l and has_r else ("delete" if has_l else "insert")
            rows.append(
                SideBySideRow(
                    t,
                    li + 1 if has_l else None,
                    a_lines[li] if has_l else "",
                    ri + 1 if has_r else None,
                    b_lines[ri] if has_r else "",
                )
            )
    return rows


def text_diff(
    a_text: str, b_text: str, a_name: str = "before", b_name: str = "after"
) -> tuple[list[str], list[SideBySideRow]]:
    a_lines, b_lines = a_text.splitlines(), b_text.splitlines()
    unified = list(difflib.unified_diff(a_lines, b_lines, a_name, b_name, lineterm=""))
    return unified, side_by_side(a_lines, b_lines)


def diff_modules(
    before: Module,
    after: Module,
    *,
    records: Iterable[tuple[str, ProvenanceRecord]] = (),
    before_text: str | None = None,
    after_text: str | None = None,
    names: tuple[str, str] = ("before", "after"),
) -> GraphDiff:
    """Diff two graph Modules: nodes by name, constants by name, plus text and provenance."""
    a, b = summarize_nodes(before), summarize_nodes(after)
    d = GraphDiff()
    d.added = [b[n] for n in b if n not in a]
    d.removed = [a[n] for n in a if n not in b]
    for name, na in a.items():
        nb = b.get(name)
        if nb is None:
            continue
        fields = {f: (na.get(f), nb.get(f)) for f in NODE_FIELDS if na.get(f) != nb.get(f)}
        if fields:
            d.changed.append(NodeChange(name, fields))
    ca, cb = set(before.constants), set(after.constants)
    d.constants_added = sorted(cb - ca)
    d.constants_removed = sorted(ca - cb)
    d.provenance = provenance_lines(records)
    if before_text is not None and after_text is not None:
        d.unified, d.side_by_side = text_diff(before_text, after_text, *names)
    return d


def diff_texts(
    before_text: str, after_text: str, *, names: tuple[str, str] = ("before", "after")
) -> GraphDiff:
    """A text-only diff (for low-level IR snapshots, which have no node summaries here)."""
    d = GraphDiff()
    d.unified, d.side_by_side = text_diff(before_text, after_text, *names)
    return d
