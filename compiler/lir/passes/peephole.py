"""Peephole rewrites of the low-level IR: self-copies, views of views, identity views.

A pattern table on instruction kinds, driven to a fixed point by the same worklist driver and
rewriter as the graph passes.
"""

from __future__ import annotations

import numpy as np

from compiler.lir.instructions import Kind
from compiler.lir.ir import Instruction, LIRFunction, LValue, view_root
from compiler.lir.passes.base import LIRPass
from compiler.passes.rewriter import Rewriter, apply_patterns, lir_patterns


def _same_memory(a: LValue, b: LValue) -> bool:
    ra, oa = view_root(a)
    rb, ob = view_root(b)
    return ra is rb and oa == ob and a.type == b.type


def drop_self_copy(ins: Instruction, rw: Rewriter) -> bool:
    """`copy` of a buffer onto itself does nothing."""
    if not _same_memory(ins.operand(0), ins.operand(1)):
        return False
    rw.erase(ins)
    return True


def fold_view(view: Instruction, rw: Rewriter) -> bool:
    """A tensorview with its source's type and zero offsets is its source; a tensorview of a
    tensorview becomes one view of the inner source."""
    src = view.operand(0)
    if src.type == view.type and not any(view.attrs["offsets"]):
        rw.replace_node(view, src)
        return True
    if isinstance(src, Instruction) and src.is_view:
        inner = src.operand(0)
        assert inner.type is not None and src.type is not None and view.type is not None
        # Views are contiguous, so offsets compose linearly (in elements of the root).
        lin = (
            int(np.ravel_multi_index(src.attrs["offsets"], inner.type.shape))
            if inner.type.shape
            else 0
        )
        lin += (
            int(np.ravel_multi_index(view.attrs["offsets"], src.type.shape))
            if src.type.shape
            else 0
        )
        if lin >= max(inner.type.numel, 1):
            return False
        offs = (
            tuple(int(x) for x in np.unravel_index(lin, inner.type.shape))
            if inner.type.shape
            else ()
        )
        view.attrs = {**view.attrs, "offsets": offs}
        rw.set_operand(view, 0, inner)
        return True
    return False


PATTERNS = lir_patterns({Kind.COPY: [drop_self_copy], Kind.VIEW: [fold_view]})


class Peephole(LIRPass):
    """`copy` of a buffer onto itself is removed; a tensorview of a tensorview is folded into
    one view of the root; a tensorview with its source's type and zero offsets is its source."""

    name = "peephole"

    def run(self, lir: LIRFunction) -> bool:
        return apply_patterns(lir, PATTERNS)
