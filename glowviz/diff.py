"""Computed diffs between two graph-IR snapshots (nodes matched by name) and their IR text.

Shared by the IDE's Diff view and the exports: plain data, no Textual. Provenance comes from
the journal records the passes in between wrote, not from guessing.
"""

from __future__ import annotations

import difflib
import re
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
    if a_lines == b_lines:  # a pass that changed nothing: what difflib says, without matching
        return [], [SideBySideRow("equal", k, line, k, line) for k, line in enumerate(a_lines, 1)]
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
    summaries: tuple[dict[str, NodeSummary], dict[str, NodeSummary]] | None = None,
) -> GraphDiff:
    """Diff two graph Modules: nodes by name, constants by name, plus text and provenance.
    `summaries`: the two modules' `summarize_nodes`, if the caller has them already."""
    a, b = summaries if summaries is not None else (summarize_nodes(before), summarize_nodes(after))
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


# -- changes inside a line ----------------------------------------------------------------------

_TOKEN = re.compile(r"[%@]?[A-Za-z0-9_.#\-]+|\s+|.")


def inline_changes(a: str, b: str) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """The character ranges of `a` and of `b` that differ, token by token (an identifier, a
    number or a punctuation mark is one token), so `activation = "none"` -> `"relu"` marks the
    word, not scattered letters."""
    ta, tb = _TOKEN.findall(a), _TOKEN.findall(b)
    sm = difflib.SequenceMatcher(None, ta, tb, autojunk=False)
    pa = [0]
    for t in ta:
        pa.append(pa[-1] + len(t))
    pb = [0]
    for t in tb:
        pb.append(pb[-1] + len(t))
    ra: list[tuple[int, int]] = []
    rb: list[tuple[int, int]] = []
    for tag, i1, i2, j1, j2 in sm.get_opcodes():
        if tag == "equal":
            continue
        if i2 > i1:
            ra.append((pa[i1], pa[i2]))
        if j2 > j1:
            rb.append((pb[j1], pb[j2]))
    return ra, rb


# -- one rewrite at a time ----------------------------------------------------------------------

#: `%name = ...` (graph nodes, LIR instructions and weights, with the LIR's index in front) or
#: `placeholder %name :` / `constant %name :` (graph values).
_DEF = re.compile(r"^\s*(?:\d+\s+)?(?:placeholder\s+|constant\s+)?%([A-Za-z0-9_.#\-]+)\s*[=:]")
_USE = re.compile(r"%([A-Za-z0-9_.#\-]+)")


class TextIndex:
    """Where each value of an IR text (graph or LIR) is defined and used, by line number."""

    def __init__(self, text: str) -> None:
        self.lines = text.splitlines()
        self.defs: dict[str, int] = {}
        self.uses: dict[str, list[int]] = {}
        for k, line in enumerate(self.lines):
            m = _DEF.match(line)
            own = m.group(1) if m else None
            if own is not None:
                self.defs.setdefault(own, k)
            for name in dict.fromkeys(_USE.findall(line)):
                if name != own:
                    self.uses.setdefault(name, []).append(k)

    def owner(self, line: int) -> str | None:
        m = _DEF.match(self.lines[line])
        return m.group(1) if m else None


@dataclass
class Rewrite:
    """One rewrite of a pass: the records the journal stamped with one rewrite index (the rule
    that fired, what it consumed and what it produced). `index` 0 is a change made outside
    any rewrite."""

    index: int
    rule: str
    records: list[Any] = field(default_factory=list)

    @property
    def produced(self) -> list[str]:
        out = [r.node for r in self.records if r.kind == "create"]
        for r in self.records:
            if r.kind == "replace":
                out.extend(s for s in r.sources if s not in out)
        return list(dict.fromkeys(out))

    @property
    def consumed(self) -> list[str]:
        out: list[str] = []
        for r in self.records:
            if r.kind == "create":
                out.extend(r.sources)
            elif r.kind in ("erase", "replace"):
                out.append(r.node)
        made = {r.node for r in self.records if r.kind == "create"}
        return [n for n in dict.fromkeys(out) if n not in made]

    @property
    def moved(self) -> list[str]:
        return list(dict.fromkeys(r.node for r in self.records if r.kind == "move"))

    def describe(self) -> str:
        """`conv1 + bn1 -> conv1_bn` (or `- dead`, `moved x`)."""
        cons, prod = self.consumed, self.produced
        if cons and prod:
            return f"{' + '.join(cons)} -> {', '.join(prod)}"
        if prod:
            return "+ " + ", ".join(prod)
        if cons:
            return "- " + ", ".join(cons)
        if self.moved:
            return "moved " + ", ".join(self.moved)
        return "(no change)"


def group_rewrites(records: Iterable[Any]) -> list[Rewrite]:
    """The pass's records grouped into rewrites, in the order they fired. Records made outside
    a rewrite (index 0) are one step each."""
    out: list[Rewrite] = []
    by_index: dict[int, Rewrite] = {}
    for r in records:
        k = getattr(r, "rewrite", 0)
        if k <= 0:
            out.append(Rewrite(0, getattr(r, "rule", "") or "", [r]))
            continue
        rw = by_index.get(k)
        if rw is None:
            rw = by_index[k] = Rewrite(k, r.rule, [])
            out.append(rw)
        rw.records.append(r)
    return out


@dataclass
class RewriteDiff:
    """The red/green lines of one rewrite: ("-" before / "+" after, line number, text) and
    notes on what is not in either snapshot (made and unmade inside the same pass)."""

    lines: list[tuple[str, int, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def rewrite_diff(rw: Rewrite, before: TextIndex, after: TextIndex) -> RewriteDiff:
    """The lines of the pass's before and after snapshots one rewrite touched: the definitions
    it erased (red), created (green) or moved, and the users of each value it replaced (their
    line before, red, and after, green). The snapshots frame the whole pass, so a value that a
    later rewrite of the same pass changed again shows as it is at the end of the pass."""
    out = RewriteDiff()
    erased = [r.node for r in rw.records if r.kind == "erase"]
    created = [r.node for r in rw.records if r.kind == "create"]
    replaced = [r.node for r in rw.records if r.kind == "replace"]
    users: list[str] = []
    for v in replaced:
        for k in before.uses.get(v, ()):
            owner = before.owner(k)
            if owner is not None and owner not in erased:
                users.append(owner)
    seen: set[tuple[str, int]] = set()

    def emit(tag: str, index: TextIndex, name: str) -> bool:
        k = index.defs.get(name)
        if k is None:
            return False
        if (tag, k) not in seen:
            seen.add((tag, k))
            out.lines.append((tag, k + 1, index.lines[k]))
        return True

    for name in dict.fromkeys(erased):
        if not emit("-", before, name) and name not in created:
            out.notes.append(f"{name}: made earlier in this pass, erased by this rewrite")
    for name in dict.fromkeys([*users, *rw.moved]):
        emit("-", before, name)
        emit("+", after, name)
    for name in dict.fromkeys(created):
        if not emit("+", after, name) and name not in erased:
            out.notes.append(f"{name}: created here, changed again later in this pass")
    return out
