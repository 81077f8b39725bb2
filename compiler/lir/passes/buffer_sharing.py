"""Buffer sharing: an in-place capable instruction writes its result into a dying input."""

from __future__ import annotations

from compiler.lir.instructions import Trait
from compiler.lir.ir import LIRFunction
from compiler.lir.passes.analysis import analyze, is_activation, root_of
from compiler.lir.passes.base import LIRPass
from compiler.passes.rewriter import Rewriter


class BufferSharing(LIRPass):
    """For `k @out %b, @in %a, ...` where k has the "inplace" trait (elementwise), %a and %b
    are whole activations of one type, %a is last accessed here and %b first accessed here:
    %b is replaced by %a. Never fires when %a is used by a later instruction."""

    name = "buffer-sharing"

    def run(self, lir: LIRFunction) -> bool:
        # One sweep in code order over one analysis, linear in the program: a merge at
        # instruction i only extends the surviving buffer's lifetime past i, so it never
        # enables one at an earlier instruction. The merged buffers' spans and deallocs are
        # kept here (looking a buffer's accesses up again per instruction costs O(its uses),
        # quadratic on a long in-place chain merged into one buffer). Indices are the
        # sweep's snapshot's: merges only erase markers, which keeps their order.
        rw = Rewriter(lir, rule=self.name)
        acc = analyze(lir)
        span = {k: (a.first, a.last) for k, a in acc.items()}
        deallocs = {k: list(a.deallocs) for k, a in acc.items()}
        for i, ins in enumerate(list(lir.code)):
            if not ins.has_trait(Trait.INPLACE) or not ins.operands:
                continue
            out, mode = ins.operands[0]
            if mode != "out" or not is_activation(out) or span[id(out)][0] != i:
                continue
            for v, m in ins.operands[1:]:
                if m != "in" or not is_activation(v) or v is out or v.type != out.type:
                    continue
                if span[id(v)][1] != i or any(
                    root_of(u) is v and u is not v for u, _ in ins.operands
                ):
                    continue  # dies later, or also read through a view here
                # `v` lives on in `out`'s place: its own deallocs go, `out`'s become its.
                with rw.at(ins):
                    for d in deallocs[id(v)]:
                        rw.erase(d)
                    rw.replace(out, v)
                    rw.erase(out)  # type: ignore[arg-type]
                span[id(v)] = (span[id(v)][0], span.pop(id(out))[1])
                deallocs[id(v)] = deallocs.pop(id(out))
                break
        return rw.changed
