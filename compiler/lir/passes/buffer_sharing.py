"""Buffer sharing: an in-place capable instruction writes its result into a dying input."""

from __future__ import annotations

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
        rw = Rewriter(lir, rule=self.name)
        progress = True
        while progress:
            progress = False
            acc = analyze(lir)
            for i, ins in enumerate(lir.code):
                if not ins.has_trait("inplace") or not ins.operands:
                    continue
                out, mode = ins.operands[0]
                if mode != "out" or not is_activation(out) or acc[id(out)].first != i:
                    continue
                for v, m in ins.operands[1:]:
                    if m != "in" or not is_activation(v) or v is out or v.type != out.type:
                        continue
                    a = acc[id(v)]
                    if a.last != i or any(root_of(u) is v and u is not v for u, _ in ins.operands):
                        continue  # dies later, or also read through a view here
                    # `v` lives on in `out`'s place: its own deallocs go, `out`'s become its.
                    with rw.at(ins):
                        for d in a.deallocs:
                            rw.erase(d)
                        rw.replace(out, v)
                        rw.erase(out)  # type: ignore[arg-type]
                    progress = True
                    break
                if progress:
                    break
        return rw.changed
