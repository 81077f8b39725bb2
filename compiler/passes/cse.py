"""Common subexpression elimination: pure nodes with the same op, operands and attributes are
merged (hash-based, one topological sweep). Constants with identical type and bytes are merged
first so that nodes reading equal weights also match.
"""

from __future__ import annotations

from typing import Any

from compiler.graph.ir import Constant, Function
from compiler.passes.manager import GraphPass
from compiler.passes.rewriter import Rewriter, is_pure


def _merge_constants(fn: Function, rw: Rewriter) -> None:
    canon: dict[tuple[Any, ...], Constant] = {}
    for c in list(fn.module.constants.values()):
        if c.data is None or not c.users:
            continue
        key = (c.type, c.digest, c.data.tobytes() if c.data.size <= 64 else b"")
        first = canon.setdefault(key, c)
        if first is not c and first.data is not None and first.data.tobytes() == c.data.tobytes():
            rw.replace(c, first)


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
