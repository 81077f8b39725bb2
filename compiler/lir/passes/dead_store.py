"""Dead-store elimination: instructions whose written activations are never read afterwards."""

from __future__ import annotations

from compiler.lir.ir import Instruction, LIRFunction
from compiler.lir.passes.analysis import is_activation, root_of
from compiler.lir.passes.base import LIRPass
from compiler.passes.rewriter import Rewriter


class DeadStoreElimination(LIRPass):
    """Walks the code backwards keeping the set of activations whose value is still needed; an
    instruction writing only activations outside that set is erased. Weights (inputs, outputs)
    are always needed. A full write of a buffer (not through a view) ends its need."""

    name = "dead-store-elimination"

    def run(self, lir: LIRFunction) -> bool:
        needed: set[int] = set()
        dead: list[Instruction] = []
        for ins in reversed(lir.code):
            if ins.is_marker:
                continue
            outs = [(v, m) for v, m in ins.operands if m in ("out", "inout")]
            roots = [root_of(v) for v, _ in outs]
            if outs and all(is_activation(r) and id(r) not in needed for r in roots):
                dead.append(ins)
                continue
            for (v, m), r in zip(outs, roots):
                if m == "out" and v is r:
                    needed.discard(id(r))
            for v, m in ins.operands:
                if m in ("in", "inout"):
                    needed.add(id(root_of(v)))
        rw = Rewriter(lir, rule=self.name)
        for ins in dead:
            rw.erase(ins)
        return bool(dead)
