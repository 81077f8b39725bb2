"""Dead code elimination: erase pure nodes whose results nobody uses, then unused constants.

Save is the only side effect in the graph IR, so everything not reachable backwards from a Save
(or another side-effecting node) goes. One sweep in reverse topological order suffices: users are
visited before their producers.
"""

from __future__ import annotations

from compiler.graph.ir import Function
from compiler.passes.manager import GraphPass, register_pass
from compiler.passes.rewriter import is_trivially_dead


@register_pass
class DeadCodeElimination(GraphPass):
    name = "dce"

    def run(self, fn: Function) -> bool:
        changed = False
        for node in reversed(fn.nodes):
            if is_trivially_dead(node):
                fn.erase(node)
                changed = True
        return fn.module.remove_unused_constants() > 0 or changed
