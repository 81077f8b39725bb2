"""Common subexpression elimination: pure nodes with the same op, operands and attributes are
merged (hash-based, one topological sweep). Constants with identical type and bytes are merged
first so that nodes reading equal weights also match.
"""

from __future__ import annotations

from typing import Any

from compiler.graph.ir import Constant, Function
from compiler.passes.manager import GraphPass
from compiler.passes.rewriter import Rewriter, is_pure


def _sample(c: Constant) -> bytes:
    """A few of the constant's elements (first, middle, last): constants that differ there
    need no digest of all their bytes (sha1 of ResNet-50's weights, twice: 0.1 s)."""
    assert c.data is not None
    d = c.data.reshape(-1)
    if d.size <= 64:
        return d.tobytes()
    mid = d.size // 2
    return d[:16].tobytes() + d[mid : mid + 16].tobytes() + d[-16:].tobytes()


def _merge_constants(fn: Function, rw: Rewriter) -> None:
    groups: dict[tuple[Any, ...], list[Constant]] = {}
    for c in list(fn.module.constants.values()):
        if c.data is None or not c.users:
            continue
        groups.setdefault((c.type, _sample(c)), []).append(c)
    for group in groups.values():
        if len(group) < 2:
            continue
        canon: dict[str, Constant] = {}
        for c in group:
            first = canon.setdefault(c.digest, c)
            if first is not c and _bytes(first) == _bytes(c):
                rw.replace(c, first)


def _bytes(c: Constant) -> bytes:
    assert c.data is not None
    return c.data.tobytes()


class CommonSubexpressionElimination(GraphPass):
    name = "cse"

    def run(self, fn: Function) -> bool:
        rw = Rewriter(fn, rule=self.name)
        _merge_constants(fn, rw)
        seen: dict[tuple[Any, ...], Any] = {}
        for node in list(fn.nodes):
            if not is_pure(node) or not node.results:
                continue
            ids = tuple(id(v) for v in node.operands)
            if "commutative" in node.opdef.traits:
                ids = tuple(sorted(ids))
            key = (
                node.op,
                ids,
                tuple(sorted(node.attrs.items())),
                tuple(r.type for r in node.results),
            )
            other = seen.setdefault(key, node)
            if other is node:
                continue
            rw.replace_node(node, other)
        return rw.changed
