"""The numpy interpreters: the graph interpreter (reference kernels node by node) and, later,
the low-level arena interpreter."""

from compiler.backends.interpreter.graph_interpreter import GraphInterpreter, run_graph

__all__ = ["GraphInterpreter", "run_graph"]
