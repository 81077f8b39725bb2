"""Scheduler tests: valid topological orders, and child-mem-size beating program order."""

from __future__ import annotations

import numpy as np
import pytest

from compiler.errors import CompilerError
from compiler.graph.ir import Function, Module, Result
from compiler.graph.types import f32
from compiler.scheduling import SCHEDULERS, Schedule, live_bytes_timeline, schedule
from compiler.scheduling.optimal import forget_searches
from tests.scaling import MAX_TIME_RATIO, NODES_RATIO, assert_not_quadratic


def _assert_topological(fn: Function, order) -> None:
    assert len(order) == len(fn) and set(order) == set(fn.nodes)
    pos = {n: i for i, n in enumerate(order)}
    for n in order:
        for v in n.operands:
            if isinstance(v, Result):
                assert pos[v.node] < pos[n], f"{v.node.name} scheduled after its user {n.name}"


def branchy_module(branches: int = 3) -> Module:
    """Program order computes every big branch head first; a good order finishes each branch."""
    m = Module("branchy")
    x = m.add_placeholder("x", f32(1, 4, 8, 8))
    out = m.add_placeholder("out", f32(1, 4 * branches, 2, 2), is_output=True)
    fn = m.create_function()
    w = m.add_constant("w", np.ones((64, 4, 1, 1), np.float32))
    b = m.add_constant("b", np.zeros(64, np.float32))
    heads = [fn.create("Conv", [x, w, b], name=f"head{i}") for i in range(branches)]
    tails = []
    for i, h in enumerate(heads):
        r = fn.create("Relu", [h.result], name=f"relu{i}")
        p = fn.create("MaxPool", [r.result], {"kernel": (4, 4), "strides": (4, 4)}, name=f"pool{i}")
        w2 = m.add_constant(f"w2_{i}", np.ones((4, 64, 1, 1), np.float32))
        b2 = m.add_constant(f"b2_{i}", np.zeros(4, np.float32))
        tails.append(fn.create("Conv", [p.result, w2, b2], name=f"tail{i}"))
    cat = fn.create("Concat", [t.result for t in tails], {"axis": 1}, name="cat")
    fn.create("Save", [cat.result, out], name="save")
    return m


def chain_module(n: int) -> Module:
    m = Module("chain")
    x = m.add_placeholder("x", f32(1, 16))
    out = m.add_placeholder("out", f32(1, 16), is_output=True)
    fn = m.create_function()
    v = x
    for i in range(n):
        node = fn.create("Relu" if i % 3 else "Sigmoid", [v], name=f"n{i}")
        if i % 7 == 6:
            node = fn.create("Add", [node.result, v], name=f"add{i}")
        v = node.result
    fn.create("Save", [v, out], name="save")
    return m


@pytest.mark.parametrize("kind", SCHEDULERS)
def test_orders_are_topological(kind: str) -> None:
    for m in (branchy_module(), chain_module(50)):
        s = schedule(m.main, kind)
        _assert_topological(m.main, s.order)
        assert s.peak_bytes == max(s.live_bytes)
        assert s.live_bytes == live_bytes_timeline(m.main, s.order)


def test_child_mem_size_beats_program_order_on_branches() -> None:
    m = branchy_module(3)
    topo, cms = schedule(m.main, "topological"), schedule(m.main, "child-mem-size")
    big = 64 * 8 * 8 * 4
    assert topo.peak_bytes >= 3 * big
    assert cms.peak_bytes < topo.peak_bytes
    assert cms.peak_bytes <= 2 * big + 4 * 4 * 2 * 2 * 4 * 3
    # The chosen order finishes a branch before starting the next one.
    names = cms.names
    assert names.index("tail0") < names.index("head1")


def test_reshape_aliases_its_input() -> None:
    m = Module("view")
    x = m.add_placeholder("x", f32(2, 8))
    out = m.add_placeholder("out", f32(16), is_output=True)
    fn = m.create_function()
    r = fn.create("Relu", [x], name="r")
    v = fn.create("Reshape", [r.result], {"shape": (16,)}, name="v")
    s = fn.create("Sigmoid", [v.result], name="s")
    fn.create("Save", [s.result, out], name="save")
    t = schedule(fn, "topological")
    # r (64 B) stays live through its view's use by s; the view adds nothing; s is written
    # straight into the output (copy elimination), so it adds nothing either.
    assert t.live_bytes == [64, 64, 64, 0]
    n = fn.create("Neg", [s.result], name="n")  # s is no longer only saved: it takes 64 B
    out2 = m.add_placeholder("out2", f32(16), is_output=True)
    fn.create("Save", [n.result, out2], name="save2")
    t = schedule(fn, "topological")
    assert t.live_bytes == [64, 64, 128, 64, 64, 0]


def test_unknown_scheduler_is_a_compiler_error() -> None:
    with pytest.raises(CompilerError, match="unknown scheduler"):
        schedule(chain_module(2).main, "random")


@pytest.mark.parametrize("kind", SCHEDULERS)
def test_large_graph_scheduling_is_not_quadratic(kind: str) -> None:
    small, big = chain_module(500), chain_module(500 * NODES_RATIO)  # 573 and 2,287 nodes
    # Five repeats (the minimum counts). The optimal scheduler's search is n log n on a chain:
    # 4 x log(2287)/log(573) = 4.9x, measured 4.5x on a quiet machine and 6.3x in CI with the
    # other test worker sharing the caches, so it gets 8x (n^2 would be 16x, n^2 log n 19x).
    def work(m: Module) -> Schedule:
        forget_searches()  # every repeat times the search, not its remembered result
        return schedule(m.main, kind)

    assert_not_quadratic(
        lambda: small,
        lambda: big,
        work,
        f"{kind} scheduler",
        repeats=5,
        max_ratio=8.0 if kind == "optimal" else MAX_TIME_RATIO,
    )
    _assert_topological(big.main, schedule(big.main, kind).order)


@pytest.mark.parametrize("kind", SCHEDULERS)
def test_sample_models_schedule_validly(kind: str) -> None:
    from pathlib import Path

    from compiler.pipeline import import_model

    for path in sorted((Path(__file__).resolve().parents[2] / "sample_models").glob("*.onnx")):
        module, _ = import_model(str(path))
        s = schedule(module.main, kind)
        _assert_topological(module.main, s.order)


def shared_input_module() -> Module:
    """r feeds a wide-then-narrow branch and a short one, joined by a concat (slices)."""
    m = Module("shared")
    x = m.add_placeholder("x", f32(1, 8, 8, 8))
    out = m.add_placeholder("out", f32(1, 16, 8, 8), is_output=True)
    fn = m.create_function()

    def conv(v, cin: int, cout: int, name: str):
        w = m.add_constant(f"w_{name}", np.ones((cout, cin, 1, 1), np.float32) * 0.01)
        b = m.add_constant(f"b_{name}", np.zeros(cout, np.float32))
        return fn.create("Conv", [v, w, b], name=name).result

    r = fn.create("Relu", [x], name="r").result  # an activation both branches read
    short = conv(r, 8, 8, "short")
    wide = conv(r, 8, 64, "wide")
    narrow = conv(wide, 64, 8, "narrow")
    cat = fn.create("Concat", [short, narrow], {"axis": 1}, name="cat")
    fn.create("Save", [cat.result, out], name="save")
    return m


def test_optimal_is_exact_and_never_worse() -> None:
    for m in (branchy_module(3), chain_module(40), shared_input_module()):
        scheds = {kind: schedule(m.main, kind) for kind in SCHEDULERS}
        opt = scheds["optimal"]
        assert opt.used == "optimal" and opt.proven_optimal and opt.stats["finished"]
        assert opt.peak_bytes == opt.stats["optimal_bytes"]
        assert opt.peak_bytes <= min(s.peak_bytes for s in scheds.values())
        assert opt.lower_bound_bytes <= opt.peak_bytes
        # Brute force over every topological order of the small graph agrees.
        if len(m.main) <= 8:
            assert opt.peak_bytes == min(
                max(live_bytes_timeline(m.main, order)) for order in _all_orders(m.main)
            )


def _all_orders(fn: Function):
    nodes = fn.nodes

    def rec(done: list, left: list):
        if not left:
            yield list(done)
            return
        for n in left:
            if all(not isinstance(v, Result) or v.node in done for v in n.operands):
                yield from rec([*done, n], [k for k in left if k is not n])

    yield from rec([], list(nodes))


def test_optimal_beats_child_mem_size_where_the_order_matters() -> None:
    """ShuffleNet-v2 1.0x (at 32x32, its stem split by channel-split): the exact search finds a
    lower peak than child-mem-size, and the low-level plan reaches it."""
    import sys
    from pathlib import Path

    from compiler.pipeline import CompileOptions, compile_model

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    from models import BUILDERS

    model = BUILDERS["shufflenet"](image=32, classes=10)
    opt = compile_model(model, CompileOptions(scheduler="optimal"))
    cms = compile_model(model, CompileOptions(scheduler="child-mem-size"))
    assert opt.schedule.proven_optimal and opt.plan.certificate.schedule_proven_optimal
    assert opt.plan.peak_bytes == opt.schedule.peak_bytes < cms.plan.peak_bytes


def test_optimal_falls_back_past_its_budget_and_says_so() -> None:
    fn = branchy_module(3).main
    s = schedule(fn, "optimal", budget=3)
    assert s.kind == "optimal" and s.used == "child-mem-size"
    assert not s.stats["finished"] and "child-mem-size" in s.stats["fallback"]
    assert s.order == schedule(fn, "child-mem-size").order


def _search_states(model, limit: int):
    """Up to `limit` (done, acc, live) states of the optimal search's space, breadth first."""
    ready0 = [i for i, inf in enumerate(model.info) if not inf.preds]
    seen = {(0, 0)}
    level = [(0, 0, 0)]
    out = []
    while level and len(out) < limit:
        nxt = []
        for done, acc, live in level:
            out.append((done, acc, live))
            ready = [
                i
                for i, inf in enumerate(model.info)
                if not done >> i & 1 and not inf.preds & ~done
            ] if done else ready0
            for k in ready:
                st = model.step(k, done, acc, live)
                key = (done | 1 << k, st.accumulating)
                if key not in seen:
                    seen.add(key)
                    nxt.append((*key, st.live))
        level = nxt
    return out


def test_the_search_steppers_are_step() -> None:
    """`MemoryModel.search_steppers` (the optimal search's step, in two halves) give `step`'s
    figures from every state, on graphs with views, zero-copy concats, in-place element-wise
    nodes and sum post-ops (ResNet's residual adds) and on an unrolled LSTM (the search runs
    out there)."""
    import sys
    from pathlib import Path

    from compiler.pipeline import CompileOptions, compile_model
    from compiler.scheduling.memory_model import MemoryModel

    root = Path(__file__).resolve().parents[2]
    sys.path.insert(0, str(root / "benchmarks"))
    sys.path.insert(0, str(root / "tests" / "frontend"))
    from models import BUILDERS
    from test_recurrent_vs_ort import recurrent_model

    fns = [m.main for m in (branchy_module(3), chain_module(40), shared_input_module())]
    for model in (
        BUILDERS["resnet50"](image=32, classes=10),
        BUILDERS["inception"](image=32, classes=10),
        recurrent_model("LSTM", "bidirectional")[0],
    ):
        fns.append(compile_model(model, CompileOptions(stop_after="schedule")).module.main)
    accumulated = 0
    for fn in fns:
        mm = MemoryModel(fn, 64)
        heads, tails = mm.search_steppers()
        for done, acc, live in _search_states(mm, 3000):
            accumulated += acc != 0
            for k, inf in enumerate(mm.info):
                if not done >> k & 1 and not inf.preds & ~done:
                    peak, acc2 = heads[k](done, acc, live)
                    fast = (peak, tails[k](done, acc, acc2, live), acc2)
                    assert fast == tuple(mm.step(k, done, acc, live))
    assert accumulated  # the sum post-op paths were taken


def test_a_search_that_runs_out_reports_budget_plus_one() -> None:
    """The search counts a level's expansions before running it and does not start a level
    that would pass the budget; it reports what counting one by one would: budget + 1
    expansions, the first one past the budget. Just enough budget finishes."""
    fn = branchy_module(3).main
    need = next(b for b in range(1, 10_000) if schedule(fn, "optimal", budget=b).stats["finished"])
    for budget in (1, need // 2, need - 1):
        s = schedule(fn, "optimal", budget=budget)
        assert not s.stats["finished"] and s.stats["expansions"] == budget + 1
    assert schedule(fn, "optimal", budget=need).peak_bytes == schedule(fn, "optimal").peak_bytes


def test_a_repeated_search_is_remembered(monkeypatch: pytest.MonkeyPatch) -> None:
    """The optimal search of a graph with the memory facts, seeds and budget of a recent one
    gives that one's result without searching again: the unrolled bidirectional LSTM (whose
    search runs out) and ResNet's blocks (sum post-ops, found optimal), each compiled twice into
    new Function objects. A graph with other facts, or another budget, is searched."""
    import sys
    from pathlib import Path

    from compiler.pipeline import CompileOptions, compile_model
    from compiler.scheduling import optimal

    root = Path(__file__).resolve().parents[2]
    sys.path.insert(0, str(root / "benchmarks"))
    sys.path.insert(0, str(root / "tests" / "frontend"))
    from models import BUILDERS
    from test_recurrent_vs_ort import recurrent_model

    def graph(model):
        return compile_model(model, CompileOptions(stop_after="schedule")).module.main

    def fields(s: Schedule) -> tuple:
        stats = {k: v for k, v in s.stats.items() if k != "search_ms"}
        return (s.names, s.live_bytes, s.peak_bytes, s.used, s.proven_optimal, stats)

    searches = []
    real_dp = optimal._dp
    monkeypatch.setattr(optimal, "_dp", lambda *a: searches.append(1) or real_dp(*a))
    forget_searches()
    lstm = recurrent_model("LSTM", "bidirectional")[0]
    resnet = BUILDERS["resnet50"](image=32, classes=10)
    first = {name: schedule(graph(m)) for name, m in (("lstm", lstm), ("resnet", resnet))}
    assert first["lstm"].used == "child-mem-size" and first["resnet"].used == "optimal"
    searched = len(searches)
    assert searched >= 3
    for name, m in (("lstm", lstm), ("resnet", resnet)):
        again = schedule(graph(m))
        assert fields(again) == fields(first[name]), name
    assert len(searches) == searched  # both remembered
    fn = graph(resnet)
    assert schedule(fn, budget=10**6).names == first["resnet"].names  # another key: searched
    assert len(searches) > searched
    searched = len(searches)
    schedule(chain_module(40).main)
    assert len(searches) > searched
