"""Dead code elimination: erase pure nodes whose results nobody uses, then unused constants.

Save is the only side effect in the graph IR, so everything not reachable backwards from a Save
(or another side-effecting node) goes. One sweep in reverse topological order suffices: users are
visited before their producers.
"""

from __future__ import annotations

from compiler.graph.ir import Function
from compiler.passes.manager import GraphPass
from compiler.passes.rewriter import Rewriter, is_trivially_dead


class DeadCodeElimination(GraphPass):
    name = "dce"

    def run(self, fn: Function) -> bool:
        rw = Rewriter(fn, rule=self.name)
        for node in reversed(fn.nodes):
            if is_trivially_dead(node):
                rw.erase(node)
        return fn.module.remove_unused_constants() > 0 or rw.changed
