"""Constant folding: a pure node whose operands are all Constants becomes Constants, computed by
the reference kernels (`compiler.kernels.reference.evaluate`), so op semantics live in one place.

Folding is skipped when a result would be huge (more than `max_elements`) unless it is no larger
than the operands it replaces, so folding never inflates the weights much.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from compiler.errors import CompilerError
from compiler.graph.ir import Constant, Function, Node
from compiler.passes.manager import GraphPass, register_pass
from compiler.passes.rewriter import is_pure

Evaluate = Callable[[Node, list[np.ndarray]], list[np.ndarray]]

#: Results above this many elements are folded only if they do not grow the weights.
MAX_FOLD_ELEMENTS = 4 * 1024 * 1024


def reference_evaluate() -> Evaluate | None:
    """The reference kernels' `evaluate`, or None while that module is unavailable."""
    try:
        from compiler.kernels.reference import evaluate
    except ImportError:
        return None
    return evaluate


def foldable(node: Node, max_elements: int = MAX_FOLD_ELEMENTS) -> bool:
    if not is_pure(node) or not node.results or not node.operands:
        return False
    if any(r.type.rank == 0 for r in node.results):
        # Constant() stores 0-d data as shape [1] (np.ascontiguousarray), which would change
        # the type; rank-0 values are rare in this IR, so they are left alone.
        return False
    if not all(isinstance(v, Constant) and v.data is not None for v in node.operands):
        return False
    out = sum(r.type.numel for r in node.results)
    return out <= max_elements or out <= sum(v.type.numel for v in node.operands)


class ConstantFolding(GraphPass):
    name = "constant-folding"

    def __init__(
        self, evaluate: Evaluate | None = None, max_elements: int = MAX_FOLD_ELEMENTS
    ) -> None:
        self.evaluate = evaluate
        self.max_elements = max_elements

    def run(self, fn: Function) -> bool:
        evaluate = self.evaluate or reference_evaluate()
        if evaluate is None:
            return False
        changed = False
        for node in list(fn.nodes):
            if node.function is not fn or not foldable(node, self.max_elements):
                continue
            inputs = [v.data for v in node.operands]  # type: ignore[attr-defined]
            try:
                outs = evaluate(node, inputs)
            except (CompilerError, KeyError, NotImplementedError):
                # No reference kernel, or it fails on these values (e.g. an integer division
                # by zero): leave the node for run time, where the error names it properly.
                continue
            consts: list[Any] = []
            for r, data in zip(node.results, outs):
                arr = np.asarray(data, dtype=r.type.np_dtype).reshape(r.type.shape)
                consts.append(fn.module.add_constant(f"{node.name}_folded", arr))
            for r, c in zip(node.results, consts):
                fn.replace(r, c)
            fn.erase(node)
            changed = True
        if changed:
            fn.module.remove_unused_constants()
        return changed


register_pass(ConstantFolding)
