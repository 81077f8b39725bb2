"""Weight passes: mutable weights that nothing writes and nobody binds become constants."""

from __future__ import annotations

import numpy as np

from compiler.lir.ir import LIRFunction
from compiler.lir.passes.analysis import analyze
from compiler.lir.passes.base import LIRPass
from compiler.passes.rewriter import Rewriter


class MakeWeightsConst(LIRPass):
    """A mutable weight that is neither an input nor an output and is never written holds
    nothing but its initial (zero) contents: it becomes a constant weight of zeros."""

    name = "make-weights-const"

    def run(self, lir: LIRFunction) -> bool:
        acc = analyze(lir)
        rw = Rewriter(lir, rule=self.name)
        for w in lir.weights.values():
            if w.is_constant or w.role is not None or acc[id(w)].writes:
                continue
            w.mutability = "constant"
            data = np.zeros(w.type_.shape, w.type_.np_dtype)
            data.setflags(write=False)
            w.data = data
            w._digest = None
            rw.changed_in_place(w)
        return rw.changed
