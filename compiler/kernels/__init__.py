"""Reference kernels: numpy semantics of every graph op (constant folding, interpreters)."""

from compiler.kernels.reference import KERNELS, evaluate

__all__ = ["KERNELS", "evaluate"]
