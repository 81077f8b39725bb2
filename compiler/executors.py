"""Executors: one interface over every way to run a compiled model (interpreters, LLVM JIT).

`make_executor(result, kind)` picks an entry of the `EXECUTORS` table; backends add entries.
Every executor takes inputs as a dict (by input placeholder name, or by the ONNX graph's input
name) or as a list in input order, and returns outputs keyed by output placeholder name, in the
model's output order.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np

from compiler.errors import CompilerError
from compiler.graph.ir import Module
from compiler.graph.types import TensorType
from compiler.runtime import io_specs

if TYPE_CHECKING:
    from compiler.pipeline import CompileResult

Inputs = Mapping[str, Any] | Sequence[Any]


@runtime_checkable
class Executor(Protocol):
    """A runnable compiled model."""

    kind: str
    aliases: dict[str, str]  # ONNX input name -> input placeholder name, where they differ
    input_names: list[str]
    output_names: list[str]
    input_types: dict[str, TensorType]
    output_types: dict[str, TensorType]

    def run(self, inputs: Inputs) -> dict[str, np.ndarray]: ...


class GraphInterpreterExecutor:
    """Runs the final graph IR with the reference kernels (no schedule, LIR or plan needed)."""

    kind = "graph"

    def __init__(self, module: Module) -> None:
        from compiler.backends.interpreter.graph_interpreter import GraphInterpreter

        self.module = module
        self._interp = GraphInterpreter(module)
        in_specs, out_specs, self.aliases = io_specs(module)
        self._interp.input_specs = in_specs
        self._interp.output_names = [n for n, _ in out_specs]
        self.input_names = [n for n, _ in in_specs]
        self.output_names = [n for n, _ in out_specs]
        self.input_types = dict(in_specs)
        self.output_types = dict(out_specs)

    def run(self, inputs: Inputs) -> dict[str, np.ndarray]:
        return self._interp.run(inputs, self.aliases)


def _graph(result: CompileResult | Module) -> Executor:
    module = result if isinstance(result, Module) else result.module
    return GraphInterpreterExecutor(module)


def _arena(result: CompileResult | Module) -> Executor:
    from compiler.backends.interpreter.arena import ArenaExecutor

    return ArenaExecutor(result)


#: kind -> factory(CompileResult) -> Executor. "interpreter" runs the low-level IR on the
#: planned byte arena (the reference); "graph" walks the graph IR (no memory plan involved).
def _llvm(result: CompileResult | Module) -> Executor:
    from compiler.backends.llvm.target import load_llvm

    load_llvm()  # a refusal, not a loader's OSError, when memory is short
    from compiler.backends.llvm.executor import make_llvm_executor

    return make_llvm_executor(result)


EXECUTORS: dict[str, Callable[[Any], Executor]] = {
    "interpreter": _arena,
    "graph": _graph,
    "llvm": _llvm,
}

#: Kinds that need the pipeline's low-level stages (schedule, LIR, memory plan); callers that
#: compile for one executor (the ONNX backend, `glowviz run`) skip those stages for the others.
LOW_LEVEL_EXECUTORS: set[str] = {"interpreter", "llvm"}


def make_executor(result: CompileResult | Module, kind: str = "interpreter") -> Executor:
    """An executor of `kind` for a compile result (a bare graph Module is accepted too)."""
    try:
        factory = EXECUTORS[kind]
    except KeyError:
        raise CompilerError(
            f"unknown executor '{kind}'; known executors: {', '.join(sorted(EXECUTORS))}"
        ) from None
    return factory(result)


__all__ = [
    "EXECUTORS",
    "LOW_LEVEL_EXECUTORS",
    "Executor",
    "GraphInterpreterExecutor",
    "Inputs",
    "make_executor",
]
