"""Copy elimination (Glow's): let producers write where a copy would have put their result.

- `copy @out %W, @in %a` with %W an output weight and %a an activation whose every access
  happens no later than the copy, and %W untouched during %a's life: %a becomes %W (its
  producer writes the output directly); the copy, alloc and deallocs go.
- `copy @out %b, @in %a` between two activations of one type, where %b is first accessed by the
  copy and either %a dies at the copy or neither is written while both live: %b becomes %a.
- `copy @out %b, @in %W` with %W an input weight and %b written only by the copy: reads of %b
  read %W directly.
"""

from __future__ import annotations

from compiler.lir.instructions import Kind
from compiler.lir.ir import Instruction, LIRFunction, LValue, WeightVar
from compiler.lir.passes.analysis import Access, analyze, is_activation
from compiler.lir.passes.base import LIRPass
from compiler.passes.rewriter import Rewriter


def merge_into(
    lir: LIRFunction, rw: Rewriter, gone: Instruction, keep: LValue, acc: dict[int, Access]
) -> None:
    """Replace activation `gone` by `keep`, dropping `gone`'s alloc and (when needed) deallocs."""
    g = acc[id(gone)]
    if isinstance(keep, WeightVar):
        for d in g.deallocs:
            rw.erase(d)
    else:
        # `keep` lives on until the later of the two buffers' deallocs: keep only that one.
        k = acc[id(keep)]
        ds = sorted(g.deallocs + k.deallocs, key=lir.index_of)
        for d in ds[:-1]:
            rw.erase(d)
    rw.replace(gone, keep)
    rw.erase(gone)


class CopyElimination(LIRPass):
    name = "copy-elimination"

    def run(self, lir: LIRFunction) -> bool:
        rw = Rewriter(lir)
        progress = True
        while progress:
            progress = False
            acc = analyze(lir)
            for c, ins in enumerate(lir.code):
                if ins.kind != Kind.COPY:
                    continue
                dst, src = ins.operand(0), ins.operand(1)
                if dst.type != src.type:
                    continue
                if self._try(lir, rw, ins, c, dst, src, acc):
                    progress = True
                    break
        return rw.changed

    def _try(
        self,
        lir: LIRFunction,
        rw: Rewriter,
        copy: Instruction,
        c: int,
        dst: LValue,
        src: LValue,
        acc: dict[int, Access],
    ) -> bool:
        if isinstance(dst, WeightVar) and dst.is_output and is_activation(src):
            a, w = acc[id(src)], acc[id(dst)]
            if a.first < 0 or a.last > c or w.accessed_in(a.first, c, exclude=c):
                return False
            with rw.at(copy, "copy-into-output"):
                rw.erase(copy)
                merge_into(lir, rw, src, dst, acc)  # type: ignore[arg-type]
            return True
        if is_activation(dst) and is_activation(src):
            a, b = acc[id(src)], acc[id(dst)]
            if b.first != c or src is dst:
                return False
            a_dies = a.last == c
            frozen = not a.written_in(c, max(a.last, b.last), exclude=None) and not b.written_in(
                c + 1, max(a.last, b.last)
            )
            if not (a_dies or frozen):
                return False
            with rw.at(copy, "copy-between-activations"):
                rw.erase(copy)
                merge_into(lir, rw, dst, src, analyze(lir))  # type: ignore[arg-type]
            return True
        if is_activation(dst) and isinstance(src, WeightVar) and src.is_input:
            b, w = acc[id(dst)], acc[id(src)]
            if b.writes != [c] or w.written_in(c, b.last):
                return False
            with rw.at(copy, "copy-from-input"):
                rw.erase(copy)
                merge_into(lir, rw, dst, src, acc)  # type: ignore[arg-type]
            return True
        return False
