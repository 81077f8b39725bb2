"""The backend contract: which graph nodes a backend runs as they are, and which fused
activations its Conv / FullyConnected kernels run (Glow's `Backend::shouldLower` and
`isOpSupported`). The lowering pass asks a backend instead of keeping its own list, so what is
kept can never disagree with what the backend can execute:

- the interpreter keeps every node its reference kernel table has a kernel for, runs every
  fused activation (compiler/graph/activations.py) and accumulates (sum post-op) in every
  kernel that may;
- the LLVM backend keeps a node when its emitter table has an emitter for the node's instruction
  kind that takes the node's element kinds, and runs the fused activations its GEMM and
  convolution kernels have in their epilogue.

So the emitter table is the CPU keep-set: an op is lowered for the CPU exactly when it has no
emitter. A node whose float16/float64 element kind no emitter takes, but whose float32 form
one does, is computed in float32 between Casts (`float_fallback`); with neither, code
generation refuses it with a CodegenError naming the instruction and the element kind. The LLVM emitter table imports llvmlite; it is loaded on the first question, not when
the graph passes are imported.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable

from compiler.graph.activations import ACTIVATIONS
from compiler.graph.ir import Node
from compiler.graph.ops import ACCUMULATE, all_ops
from compiler.graph.types import ElemKind
from compiler.lir.instructions import NOT_COMPUTE, kind_for_graph_op


class Backend(ABC):
    """What one backend executes without lowering."""

    name: str

    @abstractmethod
    def runs(self, op: str, elems: Iterable[ElemKind]) -> bool:
        """It has a kernel for graph op `op` whose operands and results have these kinds."""

    @property
    @abstractmethod
    def fused_activations(self) -> frozenset[str]:
        """Activations its Conv / FullyConnected kernels run fused (besides "none")."""

    @property
    @abstractmethod
    def accumulating_ops(self) -> frozenset[str]:
        """Graph ops whose kernels can add their result to the destination (the sum post-op,
        `@inout` dest in the low-level IR); the `sum-post-op` pass fuses residual Adds only
        into these."""

    def keeps(self, node: Node) -> bool:
        """It runs `node` as it is, so lowering should leave it alone."""
        elems = [v.type.elem for v in node.operands] + [r.type.elem for r in node.results]
        return self.runs(node.op, elems)

    def float_fallback(self, node: Node) -> ElemKind | None:
        """The float kind it runs `node` in when it has no kernel for the node's own one.

        A node whose float operands and results are all float16 (or all float64) and that the
        backend runs in float32: lowering then computes it in float32 between Casts (what
        onnxruntime's CPU kernels do for float16). None when there is no such kernel either.
        """
        elems = [v.type.elem for v in node.operands] + [r.type.elem for r in node.results]
        floats = {e for e in elems if e.is_float}
        if len(floats) != 1 or ElemKind.F32 in floats:
            return None
        widened = [ElemKind.F32 if e.is_float else e for e in elems]
        return ElemKind.F32 if self.runs(node.op, widened) else None


class InterpreterBackend(Backend):
    """The numpy interpreters: a reference kernel for every op, every activation."""

    name = "interpreter"

    def runs(self, op: str, elems: Iterable[ElemKind]) -> bool:
        from compiler.kernels.reference import has_kernel

        return has_kernel(op)

    @property
    def fused_activations(self) -> frozenset[str]:
        return frozenset(ACTIVATIONS)

    @property
    def accumulating_ops(self) -> frozenset[str]:
        return frozenset(op.name for op in all_ops().values() if ACCUMULATE in op.traits)


class LLVMBackend(Backend):
    """The CPU executor: whatever its emitter table can emit (compiler/backends/llvm/emitters)."""

    name = "llvm"

    def runs(self, op: str, elems: Iterable[ElemKind]) -> bool:
        if op in NOT_COMPUTE:  # IRGen gives these their own data-movement form
            return True
        from compiler.backends.llvm.emitters import accepts

        return accepts(kind_for_graph_op(op), elems)

    @property
    def fused_activations(self) -> frozenset[str]:
        from compiler.backends.llvm.emitters.elementwise import EPILOGUE_ACTIVATIONS

        return EPILOGUE_ACTIVATIONS

    @property
    def accumulating_ops(self) -> frozenset[str]:
        from compiler.backends.llvm.emitters import ACCUMULATING

        return frozenset(
            op.name
            for op in all_ops().values()
            if ACCUMULATE in op.traits and kind_for_graph_op(op.name) in ACCUMULATING
        )


INTERPRETER = InterpreterBackend()
LLVM = LLVMBackend()
BACKENDS: dict[str, Backend] = {b.name: b for b in (INTERPRETER, LLVM)}

__all__ = ["BACKENDS", "INTERPRETER", "LLVM", "Backend", "InterpreterBackend", "LLVMBackend"]
