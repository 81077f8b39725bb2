"""Zero-copy concat (Glow's tensorview into the destination): producers write their slice.

    %a_res = allocactivation : f32<1x8x4x4>          %a_res.slice = tensorview @in %cat_res
    %a = conv @out %a_res, ...                          {offsets = [0, 8, 0, 0]} : f32<1x8x4x4>
    %cat.insert1 = inserttensor @inout %cat_res,   ->  %a = conv @out %a_res.slice, ...
                   @in %a_res {offsets = [0, 8, 0, 0]}

Each input of a concat that can live inside the destination becomes a tensorview of its slice:
its producer writes there, the copy disappears, and so does the input's own buffer. The
destination is allocated from its first input's production, so the memory plan sees the
inputs as sub-buffers nested in it (same bytes, an interval inside its interval). A concat
that is itself an input of a concat nests the same way, so DenseNet's growing feature maps
end up in one buffer per dense block.
"""

from __future__ import annotations

import math

from compiler.lir.instructions import Kind
from compiler.lir.ir import Instruction, LIRFunction, LValue, view_byte_offset
from compiler.lir.passes.analysis import (
    Access,
    accesses,
    copied_to_output,
    is_activation,
    root_of,
    views_of,
)
from compiler.lir.passes.base import LIRPass
from compiler.passes.rewriter import Rewriter


def slice_range(insert: Instruction) -> tuple[int, int] | None:
    """Byte range [start, end) an inserttensor writes in its destination, when that range is
    contiguous (one copy, every dimension before the axis of extent 1); else None."""
    dest, src = insert.operand(0), insert.operand(1)
    assert dest.type is not None and src.type is not None
    axis, offs = insert.attrs["axis"], insert.attrs["offsets"]
    if insert.attrs["count"] != 1 or math.prod(dest.type.shape[:axis]) != 1:
        return None
    if any(o for d, o in enumerate(offs) if d != axis):
        return None
    if src.type.shape[axis + 1 :] != dest.type.shape[axis + 1 :]:
        return None
    start = sum(o * s for o, s in zip(offs, dest.type.strides())) * dest.type.elem.itemsize
    return start, start + src.type.size_bytes


def written_range(ins: Instruction, root: LValue) -> tuple[int, int] | None:
    """Byte range of `root` that `ins` may write (None: it writes nothing of `root`)."""
    assert root.type is not None
    lo, hi = None, None
    for idx, (v, mode) in enumerate(ins.operands):
        if mode == "in" or root_of(v) is not root:
            continue
        if ins.kind == Kind.INSERT and idx == 0 and v is root:
            rng = slice_range(ins) or (0, root.type.size_bytes)
        else:
            off = _offset_in_root(v)
            assert v.type is not None
            rng = (off, off + v.type.size_bytes)
        lo = rng[0] if lo is None else min(lo, rng[0])
        hi = rng[1] if hi is None else max(hi, rng[1])
    return None if lo is None or hi is None else (lo, hi)


def _offset_in_root(v: LValue) -> int:
    off = 0
    while isinstance(v, Instruction) and v.is_view:
        src = v.operand(0)
        off += view_byte_offset(v, src.type)
        v = src
    return off


class ZeroCopyConcat(LIRPass):
    """For `inserttensor @inout %d, @in %s` (one copy, into a contiguous slice of %d) where

    - %d and %s are distinct whole activations, %d is not copied to an output, and the slice
      starts on the memory planner's alignment (`lir.meta["alignment"]`, set by the pipeline);
    - %s is inserted nowhere else, is not copied to an output (a graph output too), is written
      only before the insert, and nothing else writes its slice of %d while %s lives:

    %s becomes a tensorview of its slice of %d (placed where %s was allocated, %d's allocation
    moved before it), the insert goes, and %d is freed after the later of the two last uses."""

    name = "zero-copy-concat"

    def run(self, lir: LIRFunction) -> bool:
        rw = Rewriter(lir, rule=self.name)
        for ins in [i for i in lir.code if i.kind == Kind.INSERT]:
            if ins.function is lir and self._can_elide(lir, ins):
                self._elide(lir, rw, ins)
        return rw.changed

    @staticmethod
    def _can_elide(lir: LIRFunction, ins: Instruction) -> bool:
        dest, src = ins.operand(0), ins.operand(1)
        if not (is_activation(dest) and is_activation(src)) or dest is src:
            return False
        rng = slice_range(ins)
        if rng is None or copied_to_output(dest) or copied_to_output(src):
            return False
        if rng[0] % lir.meta.get("alignment", 1):
            return False  # every buffer, slices too, starts on the planner's alignment
        k = lir.index_of(ins)
        inserts = [u for u, i in src.users if u.kind == Kind.INSERT and i == 1]
        if inserts != [ins] or any(
            u.kind == Kind.INSERT for v in views_of(src) for u, _ in v.users
        ):
            return False  # two views of one buffer would overlap
        a = accesses(lir, src)
        if not a.writes or a.writes[-1] >= k:
            return False
        return not _slice_written(lir, dest, rng, a, ins)

    @staticmethod
    def _elide(lir: LIRFunction, rw: Rewriter, ins: Instruction) -> None:
        dest, src = ins.operand(0), ins.operand(1)
        assert isinstance(dest, Instruction) and isinstance(src, Instruction)
        assert src.type is not None
        with rw.at(ins, "write-into-concat-slice"):
            if lir.index_of(dest) > lir.index_of(src):
                rw.move_before(dest, src)
            view = rw.create(
                Kind.VIEW,
                [(dest, "in")],
                {"offsets": ins.attrs["offsets"]},
                name=f"{src.name}.slice",
                type=src.type,
                meta={"node": src.meta.get("node", "")},
                at=lir.index_of(src),
                origin=[src, ins],
            )
            rw.erase(ins)
            # The destination now lives as long as the input did: keep the later dealloc.
            deallocs = accesses(lir, dest).deallocs + accesses(lir, src).deallocs
            deallocs.sort(key=lir.index_of)
            for d in deallocs[:-1]:
                rw.erase(d)
            if deallocs and deallocs[-1].operand(0) is not dest:
                rw.set_operand(deallocs[-1], 0, dest)
            rw.replace(src, view)
            rw.erase(src)


def _slice_written(
    lir: LIRFunction, dest: LValue, rng: tuple[int, int], src: Access, insert: Instruction
) -> bool:
    """Whether anything but `insert` writes bytes `rng` of `dest` while the source lives."""
    lo, hi = src.first, max(src.last, lir.index_of(insert))
    d = accesses(lir, dest)
    for i in d.writes:
        if not lo <= i <= hi or lir.code[i] is insert:
            continue
        w = written_range(lir.code[i], dest)
        if w is not None and w[0] < rng[1] and rng[0] < w[1]:
            return True
    return False


__all__ = ["ZeroCopyConcat", "slice_range", "written_range"]
