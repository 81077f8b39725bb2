"""Constant folding: a pure node whose operands are all Constants becomes Constants, computed by
the reference kernels (`compiler.kernels.reference.evaluate`), so op semantics live in one place.

Folding is skipped when a result would be huge (more than `max_elements`) unless it is no larger
than the operands it replaces, so folding never inflates the weights much.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from compiler.errors import CompilerError
from compiler.graph.ir import Constant, Function, Node, Value
from compiler.kernels.reference import evaluate
from compiler.limits import DEFAULT_FOLD_LIMIT
from compiler.passes.manager import GraphPass
from compiler.passes.rewriter import Rewriter, is_pure

#: Results above this many elements are folded only if they do not grow the weights.
MAX_FOLD_ELEMENTS = 4 * 1024 * 1024


def foldable(
    node: Node, max_elements: int = MAX_FOLD_ELEMENTS, max_bytes: int = DEFAULT_FOLD_LIMIT
) -> bool:
    if not is_pure(node) or not node.results or not node.operands:
        return False
    if any(r.type.rank == 0 for r in node.results):
        # Constant() stores 0-d data as shape [1] (np.ascontiguousarray), which would change
        # the type; rank-0 values are rare in this IR, so they are left alone.
        return False
    if not all(isinstance(v, Constant) and v.data is not None for v in node.operands):
        return False
    if sum(r.type.size_bytes for r in node.results) > max_bytes:
        return False  # the per-compile budget (CompileOptions.fold_limit): left for run time
    out = sum(r.type.numel for r in node.results)
    return out <= max_elements or out <= sum(v.type.numel for v in node.operands)


@dataclass(frozen=True)
class ConstantFolding(GraphPass):
    name = "constant-folding"

    max_elements: int = MAX_FOLD_ELEMENTS

    def run(self, fn: Function) -> bool:
        rw = Rewriter(fn, rule=self.name)
        budget = int(fn.module.meta.get("fold_limit", DEFAULT_FOLD_LIMIT))
        for node in list(fn.nodes):
            if node.function is not fn or not foldable(node, self.max_elements, budget):
                continue
            inputs = [v.data for v in node.operands]  # type: ignore[attr-defined]
            try:
                outs = evaluate(node, inputs)
            except (CompilerError, KeyError, NotImplementedError):
                # No reference kernel, or it fails on these values (e.g. an integer division
                # by zero): leave the node for run time, where the error names it properly.
                continue
            consts: list[Value] = []
            for r, data in zip(node.results, outs):
                arr = np.asarray(data, dtype=r.type.np_dtype).reshape(r.type.shape)
                consts.append(fn.module.add_constant(f"{node.name}_folded", arr, r.type))
            with rw.at(node):
                rw.replace_node(node, consts)
        if rw.changed:
            fn.module.remove_unused_constants()
        return rw.changed
