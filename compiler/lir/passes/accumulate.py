"""In-place accumulation (oneDNN's sum post-op): a residual Add fused into the producer.

    %y = conv @out %y_res, @in %x, ...          %y_res.sum = tensorview @in %r_res {offsets = 0}
    %z = add @out %z_res, @in %y_res, @in %r_res   ->   %y = conv @inout %y_res.sum, @in %x, ...

A Conv / MatMul / FullyConnected (`Trait.ACCUMULATE`) whose result is read only by an Add whose
other operand dies at that Add adds its result to that operand's buffer instead of storing it
(`@inout` dest): the Add disappears, and so does a whole buffer (ResNet's bottleneck output).
The dest becomes a tensorview of the target, so the memory plan and the IDE can name the buffer
the kernel accumulates into. Runs before buffer-sharing, which would otherwise make the Add
in place and hide the pattern.
"""

from __future__ import annotations

from compiler.graph.activations import NONE
from compiler.graph.types import ElemKind
from compiler.lir.instructions import Kind, Trait, kind_for_graph_op
from compiler.lir.ir import Instruction, LIRFunction, LValue
from compiler.lir.passes.analysis import accesses, copied_to_output, is_activation, root_of
from compiler.lir.passes.base import LIRPass
from compiler.lir.passes.copy_elim import merge_into
from compiler.passes.rewriter import Rewriter

ADD = kind_for_graph_op("Add")
#: Uses %y can have and still qualify: p's dest, the add's operand (and dest, in place), its
#: deallocs; anything more is another reader.
_MAX_Y_USES = 6


class SumPostOp(LIRPass):
    """For `p @out %y, ...` (p accumulates: conv, matmul, fullyconnected) and a later
    `add @out %z, @in %y, @in %r` (either operand order) where

    - %y, %r, %z are whole activations of one float type, %y written only by p and read only by
      the add, %r complete before p, untouched between p and the add, and not read by p;
    - %r dies at the add (or the add writes %r itself); %z is first written by the add
      (or is %r);
    - p has no fused activation (an accumulating kernel applies it to the sum);
    - the backend accumulates p's op (`lir.meta["accumulating_ops"]`, recorded by lowering;
      every accumulating kind when absent, as in parsed text):

    p accumulates into %r through a tensorview, the add goes, %z becomes %r. Never fires when %r
    is read after the add, or between p and the add."""

    name = "sum-post-op"

    def run(self, lir: LIRFunction) -> bool:
        rw = Rewriter(lir, rule=self.name)
        allowed = lir.meta.get("accumulating_ops")
        kinds = None if allowed is None else {kind_for_graph_op(op) for op in allowed}
        progress = True
        while progress:  # a rewrite can let an earlier Add qualify: sweep to a fixed point
            progress = False
            for add in [i for i in lir.code if i.kind == ADD and len(i.operands) == 3]:
                if add.function is lir and (match := self._match(lir, add, kinds)) is not None:
                    self._rewrite(lir, rw, add, *match)
                    progress = True
        return rw.changed

    @staticmethod
    def _match(
        lir: LIRFunction, add: Instruction, kinds: set[str] | None
    ) -> tuple[Instruction, LValue, LValue, LValue] | None:
        """(producer p, its dest %y, the target %r, the add's dest %z), or None."""
        k = lir.index_of(add)
        z = add.operand(0)
        for y, r in ((add.operand(1), add.operand(2)), (add.operand(2), add.operand(1))):
            if not (is_activation(y) and is_activation(r)) or y is r:
                continue
            t = y.type
            # float32 only: the accumulating kernels (GEMM, conv) are the float32 ones; the
            # plain loops of other kinds (float64, integer matmul) write their destination.
            if t is None or t != r.type or t != z.type or t.elem != ElemKind.F32:
                continue
            if len(y.users) > _MAX_Y_USES:
                continue  # %y is read by more than the add: O(1), before walking its uses
            ay = accesses(lir, y)
            if ay.views or len(ay.writes) < 1:
                continue
            c = ay.writes[0]
            p = lir.code[c]
            if not (c < k and p.has_trait(Trait.ACCUMULATE) and p.operands[0] == (y, "out")):
                continue
            if kinds is not None and p.kind not in kinds:
                continue
            if p.attrs.get("activation", NONE) != NONE:
                continue  # act(p) + r is not act(p + r), which an accumulating kernel computes
            if any(root_of(v) in (r, y) for v, _ in p.operands[1:]):
                continue  # p reads the target (or its own dest) while it would accumulate
            ar = accesses(lir, r)  # only now: %r may be read by thousands (a shared input)
            y_later = z is y  # the add wrote %y in place: %y lives on as %r
            if ay.writes != ([c, k] if y_later else [c]) or ay.accessed_in(c + 1, k - 1):
                continue
            if not y_later and ay.last != k:
                continue
            if any(w >= c for w in ar.writes) or ar.accessed_in(c, k - 1):
                continue  # %r is not complete before p, or is used between p and the add
            if z is not r and ar.last != k:
                continue  # %r is still read after the add
            if z not in (y, r):
                if not is_activation(z) or accesses(lir, z).first != k:
                    continue
                if copied_to_output(z):
                    continue  # the sum is a graph output too: leave it to copy-elimination
            return p, y, r, z
        return None

    @staticmethod
    def _rewrite(
        lir: LIRFunction,
        rw: Rewriter,
        add: Instruction,
        p: Instruction,
        y: LValue,
        r: LValue,
        z: LValue,
    ) -> None:
        assert isinstance(y, Instruction) and isinstance(r, Instruction) and y.type is not None
        with rw.at(add, "accumulate-into-operand"):
            target = rw.create(
                Kind.VIEW,
                [(r, "in")],
                {"offsets": (0,) * y.type.rank},
                name=f"{y.name}.sum",
                type=y.type,
                meta={"node": p.meta.get("node", "")},
                at=lir.index_of(p),
                origin=[p, add],
            )
            rw.set_operand(p, 0, target, "inout")
            rw.erase(add)
            for gone in dict.fromkeys(v for v in (y, z) if v is not r):
                assert isinstance(gone, Instruction)
                merge_into(lir, rw, gone, r, {id(v): accesses(lir, v) for v in (gone, r)})


__all__ = ["SumPostOp"]
