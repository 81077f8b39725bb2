"""Kernels a test emits itself (not through an executor), compiled under a key computed before
any IR exists, as the executor's programs are (``cache.program_key``).

A module of a test's own kernels used to be keyed by its IR text: a run whose objects were all
in the tests' kept cache (tests/llvm_cache.py) still emitted and printed every kernel to learn
the key (the conv strategy grid: ~1 s of each strategy's 1.1 s). Here the key covers what
decides the module: the code generator's sources and versions (``codegen_version``), its
module-level switches now (``switches_digest``: a test's ``monkeypatch`` of a tile size
included), the target CPU and features, the sources of the test files that emit, and the test's
own description of its inputs (``what``: shapes, options, the seed its weights come from). On a
hit nothing is emitted: the object is loaded and each kernel's strategy and packed weights come
from the entry, stored by the run that emitted them. Any edit to an emitter, a kernel or the
test misses, and the kernels are emitted and compiled again.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
from llvmlite import ir

import compiler.backends.llvm.target as target
from compiler.backends.llvm.cache import codegen_version, sources_digest, switches_digest
from compiler.backends.llvm.jit import CompiledModule, JITEngine
from compiler.backends.llvm.kernels.conv import ConvKernel


def emitted_key(what: str, sources: Sequence[str]) -> str:
    cpu = target.host_cpu()
    h = hashlib.sha256()
    parts = (
        "glowviz test kernels",
        codegen_version(),
        switches_digest(),
        f"cpu {cpu.name} {cpu.features}",
        sources_digest(sorted({Path(__file__), *(Path(s) for s in sources)})),
        what,
    )
    for part in parts:
        h.update(part.encode() + b"\0")
    return "test-" + h.hexdigest()


def compile_emitted(
    what: str, emit: Callable[[ir.Module], Sequence[ConvKernel]], *sources: str
) -> tuple[CompiledModule, list[tuple[str, np.ndarray]]]:
    """The module ``emit`` fills (called only on a miss) compiled, and (strategy, packed
    weights) of each kernel it returned, in order. ``what`` must name everything ``emit``
    reads besides the code generator and the ``sources`` files (the calling test's
    ``__file__`` and any module it emits through)."""

    def build() -> tuple[str, dict[str, bytes]]:
        module = ir.Module()
        kernels = emit(module)
        meta = [[k.strategy, k.packed_weights.dtype.str, k.packed_weights.shape] for k in kernels]
        extras = {"kernels": json.dumps(meta).encode()}
        for i, k in enumerate(kernels):
            extras[f"w{i}"] = np.ascontiguousarray(k.packed_weights).tobytes()
        return str(module), extras

    program = JITEngine().compile_keyed(emitted_key(what, sources), build)
    out = []
    for i, (strategy, dtype, shape) in enumerate(json.loads(bytes(program.extras["kernels"]))):
        packed = np.frombuffer(bytes(program.extras[f"w{i}"]), dtype=np.dtype(dtype))
        out.append((strategy, packed.reshape(shape)))
    return program.module, out
