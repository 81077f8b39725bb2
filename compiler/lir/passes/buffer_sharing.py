"""Buffer sharing: an in-place capable instruction writes its result into a dying input."""

from __future__ import annotations

from compiler.lir.instructions import Trait
from compiler.lir.ir import Instruction, LIRFunction
from compiler.lir.passes.analysis import accesses, is_activation, root_of
from compiler.lir.passes.base import LIRPass
from compiler.passes.rewriter import Rewriter


class BufferSharing(LIRPass):
    """For `k @out %b, @in %a, ...` where k has the "inplace" trait (elementwise), %a and %b
    are whole activations of one type, %a is last accessed here and %b first accessed here:
    %b is replaced by %a. Never fires when %a is used by a later instruction."""

    name = "buffer-sharing"

    def run(self, lir: LIRFunction) -> bool:
        rw = Rewriter(lir, rule=self.name)
        # One sweep in code order: a rewrite only merges the two buffers of the instruction
        # it rewrote, so later candidates see every earlier decision through the use lists.
        for ins in [i for i in lir.code if i.has_trait(Trait.INPLACE) and i.operands]:
            self._share(lir, rw, ins)
        return rw.changed

    @staticmethod
    def _share(lir: LIRFunction, rw: Rewriter, ins: Instruction) -> None:
        out, mode = ins.operands[0]
        if mode != "out" or not is_activation(out):
            return
        i = lir.index_of(ins)
        if accesses(lir, out).first != i:
            return
        for v, m in ins.operands[1:]:
            if m != "in" or not is_activation(v) or v is out or v.type != out.type:
                continue
            a = accesses(lir, v)
            if a.last != i or any(root_of(u) is v and u is not v for u, _ in ins.operands):
                continue  # dies later, or also read through a view here
            # `v` lives on in `out`'s place: its own deallocs go, `out`'s become its.
            with rw.at(ins):
                for d in a.deallocs:
                    rw.erase(d)
                rw.replace(out, v)
                rw.erase(out)  # type: ignore[arg-type]
            return
