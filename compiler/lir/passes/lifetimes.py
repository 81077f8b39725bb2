"""Lifetime tightening: hoist deallocs, sink allocs, erase allocs nobody uses."""

from __future__ import annotations

from compiler.lir.ir import LIRFunction
from compiler.lir.passes.analysis import accesses, analyze
from compiler.lir.passes.base import LIRPass
from compiler.passes.rewriter import Rewriter


class HoistDealloc(LIRPass):
    """Move each deallocactivation right after the last access of its buffer."""

    name = "hoist-dealloc"

    def run(self, lir: LIRFunction) -> bool:
        rw = Rewriter(lir, rule=self.name)
        for alloc in lir.allocs():
            acc = accesses(lir, alloc)
            for d in acc.deallocs:
                target = max(acc.last, lir.index_of(alloc))
                if lir.index_of(d) != target + 1:
                    anchor = lir.code[target]
                    if anchor is d:
                        continue
                    rw.move_after(d, anchor)
        return rw.changed


class SinkAlloc(LIRPass):
    """Move each allocactivation right before the first access of its buffer."""

    name = "sink-alloc"

    def run(self, lir: LIRFunction) -> bool:
        rw = Rewriter(lir, rule=self.name)
        for alloc in lir.allocs():
            acc = accesses(lir, alloc)
            first = acc.first
            if first < 0:
                continue
            if first != lir.index_of(alloc) + 1:
                rw.move_before(alloc, lir.code[first])
        return rw.changed


class DeadAllocElimination(LIRPass):
    """Erase tensorviews nobody uses, then allocactivations used only by their deallocs."""

    name = "dead-alloc-elimination"

    def run(self, lir: LIRFunction) -> bool:
        rw = Rewriter(lir, rule=self.name)
        for ins in reversed(list(lir.code)):
            if ins.is_view and not ins.users:
                rw.erase(ins)
        for alloc in lir.allocs():
            if all(u.is_dealloc for u, _ in alloc.users):
                with rw.at(alloc):
                    for d in {id(u): u for u, _ in alloc.users}.values():
                        rw.erase(d)
                    rw.erase(alloc)
        return rw.changed


__all__ = ["DeadAllocElimination", "HoistDealloc", "SinkAlloc", "analyze"]
