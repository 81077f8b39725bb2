"""The graph interpreter: runs a graph IR Function node by node with the reference kernels.

Like torch.fx's Interpreter: values are freed after their last use, and a failing kernel is
reported as an ExecutionError naming the node. It needs no schedule, LIR or memory plan, so it
can run the graph after any pass (the IDE and the tests compare stages with it).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from compiler.errors import CompilerError, ExecutionError
from compiler.graph.ir import Constant, Function, Module, Node, Placeholder, Value
from compiler.kernels.reference import evaluate
from compiler.runtime import check_inputs


class GraphInterpreter:
    """Runs one Function of a Module. Subclass and override `run_node` to observe or patch."""

    def __init__(self, module: Module, function: Function | None = None) -> None:
        self.module = module
        self.function = function or module.main
        self.input_specs = [(p.name, p.type) for p in module.inputs()]
        self.output_names = [p.name for p in module.outputs()]
        # env size after each node; filled by `run` so tests and the IDE can see freeing work.
        self.live_counts: list[int] = []

    def run_node(self, node: Node, args: list[np.ndarray]) -> list[np.ndarray]:
        return evaluate(node, args)

    def run(
        self, inputs: Mapping[str, Any] | Sequence[Any], aliases: Mapping[str, str] | None = None
    ) -> dict[str, np.ndarray]:
        bound = check_inputs(self.input_specs, inputs, aliases)
        nodes = self.function.nodes
        last_use: dict[int, int] = {}
        for i, node in enumerate(nodes):
            for v in node.operands:
                last_use[id(v)] = i
        env: dict[int, np.ndarray] = {}
        outputs: dict[str, np.ndarray] = {}
        self.live_counts = []
        for i, node in enumerate(nodes):
            if node.op == "Save":
                src, dst = node.operands
                outputs[dst.name] = _owned(self._load(src, env, bound, node))
            else:
                args = [self._load(v, env, bound, node) for v in node.operands]
                try:
                    results = self.run_node(node, args)
                except CompilerError:
                    raise
                except Exception as e:  # noqa: BLE001 - any kernel fault becomes an ExecutionError
                    raise ExecutionError(
                        f"node '{node.name}' ({node.op}): {type(e).__name__}: {e}"
                    ) from e
                for r, arr in zip(node.results, results):
                    if r.users:
                        env[id(r)] = arr
            for v in node.operands:
                if last_use.get(id(v)) == i:
                    env.pop(id(v), None)
            self.live_counts.append(len(env))
        missing = [n for n in self.output_names if n not in outputs]
        if missing:
            raise ExecutionError(
                f"outputs {', '.join(missing)} were never saved by function @{self.function.name}"
            )
        return {n: outputs[n] for n in self.output_names}

    @staticmethod
    def _load(
        v: Value, env: dict[int, np.ndarray], bound: dict[str, np.ndarray], node: Node
    ) -> np.ndarray:
        if isinstance(v, Constant):
            if v.data is None:
                raise ExecutionError(f"node '{node.name}': constant %{v.name} has no data")
            return v.data
        if isinstance(v, Placeholder):
            if v.is_output:
                raise ExecutionError(f"node '{node.name}' reads output placeholder %{v.name}")
            return bound[v.name]
        try:
            return env[id(v)]
        except KeyError:
            raise ExecutionError(
                f"node '{node.name}': operand %{v.name} has no value "
                "(not computed yet, or freed too early)"
            ) from None


def _owned(arr: np.ndarray) -> np.ndarray:
    """A writable array the caller owns (outputs may be views of inputs or of constants)."""
    if arr.base is not None or not arr.flags.writeable or not arr.flags.c_contiguous:
        return np.array(arr, copy=True, order="C")
    return arr


def run_graph(
    module: Module, inputs: Mapping[str, Any] | Sequence[Any], function: Function | None = None
) -> dict[str, np.ndarray]:
    """Run `module` on `inputs` (dict by input placeholder name, or a list in input order).

    Returns the outputs keyed by output placeholder name, in output order.
    """
    return GraphInterpreter(module, function).run(inputs)


__all__ = ["GraphInterpreter", "run_graph"]
