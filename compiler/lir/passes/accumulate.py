"""In-place accumulation (oneDNN's sum post-op): a residual Add fused into the producer.

    %y = conv @out %y_res, @in %x, ...          %y_res.sum = tensorview @in %r_res {offsets = 0}
    %z = add @out %z_res, @in %y_res, @in %r_res   ->   %y = conv @inout %y_res.sum, @in %x, ...

A Conv / MatMul / FullyConnected (`Trait.ACCUMULATE`) whose result is read only by an Add whose
other operand dies at that Add adds its result to that operand's buffer instead of storing it
(`@inout` dest): the Add disappears, and so does a whole buffer (ResNet's bottleneck output).
The dest becomes a tensorview of the target, so the memory plan and the IDE can name the buffer
the kernel accumulates into. Runs before buffer-sharing, which would otherwise make the Add
in place and hide the pattern.

int8 (a QConv read only by a QAdd): the QConv takes the QAdd's output parameters and the
target's as `sum_scale` / `sum_offset`, and requantizes its result plus the target's real value
once (compiler/kernels/reference_quant.py). The target holds the target's int8 numbers before
and the sum's after, two quantizations of one buffer: the sum is a tensorview of the target
with the sum's type, and every later reader reads that view (the target lives until the sum's
last use). A target that is itself such a view (the next residual block's input) qualifies.
Only where the quantize stage made the graph (`lir.meta["int8_sum_post_op"]`, set by IRGen):
an imported QDQ model's int8 arithmetic is onnxruntime's, which rounds the conv and the add
apart, and the project matches it bit for bit.
"""

from __future__ import annotations

from typing import NamedTuple

from compiler.graph.activations import NONE
from compiler.graph.ops_quant import QMAX, QMIN
from compiler.graph.types import ElemKind, TensorType
from compiler.lir.instructions import Kind, Trait, kind_for_graph_op
from compiler.lir.ir import Instruction, LIRFunction, LValue
from compiler.lir.passes.analysis import accesses, copied_to_output, is_activation, root_of
from compiler.lir.passes.base import LIRPass
from compiler.lir.passes.copy_elim import merge_into
from compiler.passes.rewriter import Rewriter

ADD = kind_for_graph_op("Add")
QADD = kind_for_graph_op("QAdd")
QCONV = kind_for_graph_op("QConv")
#: Uses %y can have and still qualify: p's dest, the add's operand (and dest, in place), its
#: deallocs; anything more is another reader.
_MAX_Y_USES = 6


class _Sum(NamedTuple):
    """A match: the add, its producer p, p's dest %y, the target %r, the add's dest %z."""

    add: Instruction
    p: Instruction
    y: LValue
    r: LValue
    z: LValue


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
        kinds_of_add = (ADD, QADD) if lir.meta.get("int8_sum_post_op") else (ADD,)
        progress = True
        while progress:  # a rewrite can let an earlier Add qualify: sweep to a fixed point
            progress = False
            adds = [i for i in lir.code if i.kind in kinds_of_add and len(i.operands) == 3]
            for add in adds:
                if add.function is lir and (match := self._match(lir, add, kinds)) is not None:
                    self._rewrite(lir, rw, _Sum(add, *match))
                    progress = True
        return rw.changed

    @staticmethod
    def _match(
        lir: LIRFunction, add: Instruction, kinds: set[str] | None
    ) -> tuple[Instruction, LValue, LValue, LValue] | None:
        """(producer p, its dest %y, the target %r, the add's dest %z), or None."""
        k = lir.index_of(add)
        z = add.operand(0)
        quant = add.kind == QADD
        for y, r in ((add.operand(1), add.operand(2)), (add.operand(2), add.operand(1))):
            # int8: the target may be the whole-buffer view an earlier int8 sum left
            root = root_of(r) if quant else r
            if not (is_activation(y) and is_activation(root)) or y is r:
                continue
            t = y.type
            if quant:
                if r is not root and not _whole_view(r, root):
                    continue
                if t is None or r.type is None or z.type is None:
                    continue
                if not t.shape == r.type.shape == z.type.shape:
                    continue
            # float32 only: the accumulating kernels (GEMM, conv) are the float32 ones; the
            # plain loops of other kinds (float64, integer matmul) write their destination.
            elif t is None or t != r.type or t != z.type or t.elem != ElemKind.F32:
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
            if quant and not _int8_sum_fits(p):
                continue
            if (p.kind == QCONV) != quant:
                continue
            if any(root_of(v) in (root, y) for v, _ in p.operands[1:]):
                continue  # p reads the target (or its own dest) while it would accumulate
            ar = accesses(lir, root)  # only now: %r may be read by thousands (a shared input)
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
    def _rewrite(lir: LIRFunction, rw: Rewriter, m: _Sum) -> None:
        if m.add.kind == QADD:
            _rewrite_int8(lir, rw, m)
            return
        add, p, y, r, z = m
        assert isinstance(y, Instruction) and isinstance(r, Instruction) and y.type is not None
        with rw.at(add, "accumulate-into-operand"):
            _accumulate_into(lir, rw, add, p, y, r, y.type)
            rw.erase(add)
            for gone in dict.fromkeys(v for v in (y, z) if v is not r):
                assert isinstance(gone, Instruction)
                merge_into(lir, rw, gone, r, {id(v): accesses(lir, v) for v in (gone, r)})


def _accumulate_into(
    lir: LIRFunction,
    rw: Rewriter,
    add: Instruction,
    p: Instruction,
    y: Instruction,
    target: Instruction,
    t: TensorType,
) -> Instruction:
    """p's destination becomes `@inout` a whole view of `target` typed `t` (named %y.sum)."""
    view = rw.create(
        Kind.VIEW,
        [(target, "in")],
        {"offsets": (0,) * t.rank},
        name=f"{y.name}.sum",
        type=t,
        meta={"node": p.meta.get("node", "")},
        at=lir.index_of(p),
        origin=[p, add],
    )
    rw.set_operand(p, 0, view, "inout")
    return view


def _whole_view(v: LValue, root: LValue) -> bool:
    """`v` is a view of all of `root` (zero offsets, as many elements)."""
    return (
        isinstance(v, Instruction)
        and v.is_view
        and not any(v.attrs.get("offsets", ()))
        and v.type is not None
        and root.type is not None
        and v.type.numel == root.type.numel
    )


def _int8_sum_fits(p: Instruction) -> bool:
    """The int8 kernels accumulate for a QConv that is not depthwise (those run on float32
    planes) and has no activation folded into its clamp (relu(p) + r is not the fused sum)."""
    if p.kind != QCONV:
        return False
    x = p.operand(1)
    channels = x.type.shape[1] if x.type is not None and x.type.rank == 4 else 0
    depthwise = p.attrs["group"] > 1 and p.attrs["group"] == channels
    return not depthwise and (p.attrs["qmin"], p.attrs["qmax"]) == (QMIN, QMAX)


def _rewrite_int8(lir: LIRFunction, rw: Rewriter, m: _Sum) -> None:
    """The int8 form (module docstring): p requantizes to the add's parameters into a view of
    the target typed as the sum; later readers of the sum read that view."""
    add, p, y, r, z = m
    root = root_of(r)
    assert isinstance(y, Instruction) and isinstance(root, Instruction)
    assert z.type is not None and r.type is not None
    z_deallocs = [] if z is r or z is root else list(accesses(lir, z).deallocs)
    root_deallocs = [] if z is r or z is root else list(accesses(lir, root).deallocs)
    y_deallocs = [] if y is z else list(accesses(lir, y).deallocs)
    with rw.at(add, "accumulate-into-operand"):
        target = _accumulate_into(lir, rw, add, p, y, root, z.type)
        # The sum's parameters are the add's; the target's come along for the requantization.
        p.attrs = {
            **p.attrs,
            **{a: add.attrs[a] for a in ("scale", "offset", "qmin", "qmax")},
            "sum_scale": r.type.scale,
            "sum_offset": r.type.offset,
        }
        rw.erase(add)
        # The target now lives as long as the sum: its deallocs go, the sum's free it.
        for d in root_deallocs + y_deallocs:
            rw.erase(d)
        for d in z_deallocs:
            rw.set_operand(d, 0, root, "out")
        for gone in dict.fromkeys(v for v in (y, z) if v is not r and v is not root):
            assert isinstance(gone, Instruction)
            if gone.users:
                rw.replace(gone, target)
            rw.erase(gone)


__all__ = ["SumPostOp"]
