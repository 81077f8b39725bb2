"""LLVM CPU backend: target setup, the JIT engine and the fast kernels the emitter table calls."""

from __future__ import annotations

from compiler.backends.llvm.jit import CompiledModule, JITEngine
from compiler.backends.llvm.target import (
    Isa,
    default_isa,
    host_cpu,
    optimize,
    target_machine,
    vector_width_f32,
)

__all__ = [
    "CompiledModule",
    "Isa",
    "JITEngine",
    "default_isa",
    "host_cpu",
    "optimize",
    "target_machine",
    "vector_width_f32",
]
