"""Peephole rewrites of the low-level IR: self-copies, views of views, identity views."""

from __future__ import annotations

import numpy as np

from compiler.lir.ir import Instruction, LIRFunction, view_root
from compiler.lir.passes.base import LIRPass, erase, record, register_lir_pass


def _same_memory(a, b) -> bool:
    ra, oa = view_root(a)
    rb, ob = view_root(b)
    return ra is rb and oa == ob and a.type == b.type


@register_lir_pass
class Peephole(LIRPass):
    """`copy` of a buffer onto itself is removed; a tensorview of a tensorview is folded into
    one view of the root; a tensorview with its source's type and zero offsets is its source."""

    name = "peephole"

    def run(self, lir: LIRFunction) -> bool:
        changed = False
        for ins in list(lir.code):
            if ins.function is not lir:
                continue
            if ins.kind == "copy" and _same_memory(ins.operand(0), ins.operand(1)):
                erase(lir, ins)
                changed = True
            elif ins.kind == "tensorview":
                changed |= self._fold_view(lir, ins)
        return changed

    def _fold_view(self, lir: LIRFunction, view: Instruction) -> bool:
        src = view.operand(0)
        if src.type == view.type and not any(view.attrs["offsets"]):
            view.replace_all_uses_with(src)
            erase(lir, view)
            return True
        if isinstance(src, Instruction) and src.kind == "tensorview":
            inner = src.operand(0)
            assert inner.type is not None and view.type is not None
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
            view.set_operand(0, inner)
            view.attrs = {**view.attrs, "offsets": offs}
            record(lir, "replace", view.name, "tensorview", (inner.name,))
            return True
        return False
