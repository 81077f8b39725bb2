"""Property tests of memory planning: on generated interval sets and on generated graphs under
every scheduler and allocator, no two buffers that are live at the same time share a byte.

The oracle is written here from scratch (pairwise, quadratic) instead of reusing
`check_allocation`, and on graphs it recomputes every buffer's live range from the low-level code
itself; the arena interpreter in poison mode then shows the plan keeps every value intact.
"""

from __future__ import annotations

import itertools

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from compiler.backends.interpreter.arena import run_lir
from compiler.backends.interpreter.graph_interpreter import run_graph
from compiler.graph.ir import Result
from compiler.lir import LIRFunction, view_root
from compiler.lir.ir import Instruction
from compiler.memory import ALIGNMENT, Interval, align, allocate, allocator_names, check_plan
from compiler.memory.plan import MemoryPlan
from compiler.pipeline import CompileOptions, compile_model
from compiler.scheduling import SCHEDULERS
from tests.graph_strategies import EXECUTABLE_OPS, GraphCase, graphs


def _overlaps(
    ranges: dict[str, tuple[int, int]], offsets: dict[str, int], sizes: dict[str, int]
) -> list[str]:
    """Pairs of buffers live at a common instruction whose byte ranges intersect."""
    bad = []
    for a, b in itertools.combinations(sorted(ranges), 2):
        (a0, a1), (b0, b1) = ranges[a], ranges[b]
        if a0 <= b1 and b0 <= a1 and sizes[a] and sizes[b]:
            if offsets[a] < offsets[b] + sizes[b] and offsets[b] < offsets[a] + sizes[a]:
                bad.append(
                    f"%{a} {ranges[a]} @{offsets[a]}+{sizes[a]} vs %{b} {ranges[b]} @{offsets[b]}+{sizes[b]}"
                )
    return bad


@st.composite
def interval_sets(draw) -> list[Interval]:
    n = draw(st.integers(0, 24))
    out = []
    for i in range(n):
        first = draw(st.integers(0, 30))
        size = align(draw(st.sampled_from([1, 64, 100, 256, 1000, 4096, 20000])))
        out.append(Interval(f"b{i}", size, first, first + draw(st.integers(0, 12))))
    return out


@settings(max_examples=150)
@given(interval_sets())
def test_allocators_never_overlap_live_intervals(intervals: list[Interval]) -> None:
    ranges = {iv.name: (iv.first, iv.last) for iv in intervals}
    sizes = {iv.name: iv.size for iv in intervals}
    for name in allocator_names():
        alloc = allocate(intervals, name)
        assert set(alloc.offsets) == set(ranges), name
        assert all(off % ALIGNMENT == 0 for off in alloc.offsets.values()), name
        assert not _overlaps(ranges, alloc.offsets, sizes), name
        ends = [alloc.offsets[iv.name] + iv.size for iv in intervals]
        assert alloc.size == max(ends, default=0), name
        assert alloc.size >= alloc.lower_bound, name


def _live_ranges(lir: LIRFunction) -> dict[str, tuple[int, int]]:
    """Every activation buffer's [first, last] instruction index: where it is allocated, freed,
    or an operand (directly or through a tensorview)."""
    ranges: dict[str, tuple[int, int]] = {}

    def touch(name: str, i: int) -> None:
        lo, hi = ranges.get(name, (i, i))
        ranges[name] = (min(lo, i), max(hi, i))

    for i, ins in enumerate(lir.code):
        if ins.kind == "allocactivation":
            touch(ins.name, i)
        for v, _mode in ins.operands:
            root, _ = view_root(v)
            if isinstance(root, Instruction) and root.kind == "allocactivation":
                touch(root.name, i)
    return ranges


def _assert_plan_sound(lir: LIRFunction, plan: MemoryPlan) -> None:
    assert check_plan(plan) == []
    ranges = _live_ranges(lir)
    by_name = {b.name: b for b in plan.buffers}
    assert set(ranges) == set(by_name)
    for name, (lo, hi) in ranges.items():
        b = by_name[name]
        assert b.first <= lo and hi <= b.last, (
            f"%{name} used over {lo}..{hi}, planned {b.first}..{b.last}"
        )
    offsets = {b.name: b.offset for b in plan.buffers}
    sizes = {b.name: b.raw_size for b in plan.buffers}
    assert not _overlaps(ranges, offsets, sizes)


@settings(max_examples=30)
@given(graphs(EXECUTABLE_OPS, max_nodes=20))  # enough nodes that several buffers are live at once
def test_every_scheduler_and_allocator_plans_without_overlap(case: GraphCase) -> None:
    optimized = compile_model(case.module.clone(), CompileOptions(low_level=False)).module
    want = run_graph(case.module, case.inputs)
    for scheduler, allocator in itertools.product(SCHEDULERS, allocator_names()):
        options = CompileOptions(scheduler=scheduler, allocator=allocator)
        result = compile_model(optimized.clone(), options)
        order = result.schedule.order
        assert sorted(n.name for n in order) == sorted(n.name for n in result.module.main.nodes)
        pos = {n: i for i, n in enumerate(order)}
        for n in order:
            for v in n.operands:
                if isinstance(v, Result):
                    assert pos[v.node] < pos[n], (
                        f"{scheduler}: {v.node.name} after its user {n.name}"
                    )
        _assert_plan_sound(result.lir, result.plan)
        got = run_lir(result.lir, case.inputs, result.plan, poison=True)
        for k in want:
            np.testing.assert_allclose(
                got[k], want[k], rtol=1e-4, atol=1e-5, err_msg=f"{k}: {scheduler}/{allocator}"
            )
