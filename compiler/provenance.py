"""Provenance shared by both IRs: the record of one change and the journal that collects them.

Both IR containers (graph `Function`, low-level `LIRFunction`) notify their journal whenever
something is created, erased, replaced or moved, so no pass can change the IR unrecorded. The
rewriter (`compiler.passes.rewriter`) frames each rewrite with the rule that fired, which the
journal stamps on the records it collects; the pass runner hands them to the IDE in
`PassEvent.provenance`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

#: Kinds of ProvenanceRecord. An in-place change (an operand swapped, a weight made constant)
#: is a "replace" of the thing by what it now reads, as the IDE has always shown it.
KINDS = ("create", "erase", "replace", "move")


@dataclass
class ProvenanceRecord:
    """One change: what was created, erased, replaced or moved, and from what."""

    kind: str  # one of KINDS
    node: str  # the node, instruction or value concerned
    op: str = ""  # its op / instruction kind ("" for a replaced graph value)
    sources: tuple[str, ...] = ()  # "create": what it came from; "replace": the new value(s)
    rule: str = ""  # the pattern or pass function that made the change ("" outside a rewrite)
    rewrite: int = 0  # 1-based index of that rewrite within its journal (0: outside one)


class RewriteListener(Protocol):
    """What the IR containers and the rewriter notify (xDSL's rewriter listener, by name)."""

    def created(self, node: str, op: str, sources: tuple[str, ...] = ()) -> None: ...

    def erased(self, node: str, op: str) -> None: ...

    def replaced(self, node: str, op: str, by: tuple[str, ...]) -> None: ...

    def moved(self, node: str, op: str) -> None: ...


class Journal(list[ProvenanceRecord]):
    """The listener every IR function owns: it collects ProvenanceRecords in order.

    A rewrite (`with journal.rewrite("fold_batchnorm"):`) stamps its rule and its index on the
    records made inside it; the index is taken only when the rewrite records something, so a
    pattern that tries and declines leaves no gap.
    """

    def __init__(self) -> None:
        super().__init__()
        self._rule = ""
        self._open = False  # inside a rewrite that has not recorded yet
        self._index = 0  # the current rewrite's index, once it recorded
        self._count = 0

    # -- framing -----------------------------------------------------------------------------
    def rewrite(self, rule: str) -> _Rewrite:
        """`with journal.rewrite(rule):` groups the records made inside into one rewrite by
        `rule`. Re-entrant: the outer rewrite wins, so helpers that open their own stay part
        of their caller's."""
        return _Rewrite(self, rule)

    def begin(self, rule: str) -> bool:
        """Open a rewrite unless one is open; returns whether this call opened it."""
        if self._open:
            return False
        self._rule, self._open, self._index = rule, True, 0
        return True

    def end(self) -> None:
        self._rule, self._open, self._index = "", False, 0

    def clear(self) -> None:
        super().clear()
        self._count = 0

    def _add(self, kind: str, node: str, op: str, sources: tuple[str, ...]) -> None:
        if self._open and not self._index:
            self._count += 1
            self._index = self._count
        self.append(ProvenanceRecord(kind, node, op, sources, self._rule, self._index))

    # -- RewriteListener ---------------------------------------------------------------------
    def created(self, node: str, op: str, sources: tuple[str, ...] = ()) -> None:
        self._add("create", node, op, sources)

    def erased(self, node: str, op: str) -> None:
        self._add("erase", node, op, ())

    def replaced(self, node: str, op: str, by: tuple[str, ...]) -> None:
        self._add("replace", node, op, by)

    def moved(self, node: str, op: str) -> None:
        self._add("move", node, op, ())


class _Rewrite:
    """The context manager of `Journal.rewrite` (a class: it runs once per pattern tried)."""

    __slots__ = ("journal", "rule", "opened")

    def __init__(self, journal: Journal, rule: str) -> None:
        self.journal, self.rule, self.opened = journal, rule, False

    def __enter__(self) -> None:
        self.opened = self.journal.begin(self.rule)

    def __exit__(self, *exc: object) -> None:
        if self.opened:
            self.journal.end()


__all__ = ["KINDS", "Journal", "ProvenanceRecord", "RewriteListener"]
