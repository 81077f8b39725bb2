"""Base class of low-level IR passes: the low-level side of `compiler.passes.manager.Pass`.

A pass has a kebab-case `name` and `run(lir) -> changed`, and changes the IR only through a
`Rewriter` (compiler.passes.rewriter), whose changes the function's journal records for the IDE.
Passes are listed by name in `compiler.passes.registry`.
"""

from __future__ import annotations

from compiler.lir.ir import LIRFunction
from compiler.passes.manager import Pass


class LIRPass(Pass):
    """A low-level IR pass: a kebab-case `name` and `run(lir) -> changed`."""

    ir_kind = "lir"

    def run(self, lir: LIRFunction) -> bool:  # pragma: no cover - abstract
        raise NotImplementedError

    def apply(self, ir: LIRFunction) -> bool:
        return self.run(ir)


__all__ = ["LIRPass"]
