"""The exact minimum-peak scheduler (pipeline step 7, `--scheduler optimal`).

Dynamic programming over the downward-closed node sets (a node set is closed when it holds every
operand's producer): the bytes live after a set do not depend on the order that ran it, so only
the lowest peak that reaches each set matters. The sets are expanded one node at a time, level by
level, and a set whose peak already exceeds the best known order's (child-mem-size and program
order, measured with the same model) is dropped. The memory model is the low-level one
(`memory_model.py`): views, zero-copy concat slices, accumulating producers and in-place
element-wise nodes cost what they will cost after the low-level passes. A search state is the
node set plus the producers that accumulated and whose Add has not run, since that decides
what is live.

Series compositions (ResNet's blocks, Inception's modules, DenseNet's layers) keep the state count
near the sum of the parts' and not their product, so real models finish in well under a second.
Wide graphs can explode: the search stops after `budget` state expansions (deterministic, unlike
a clock) and reports that it did not finish; the caller falls back (see `scheduler.schedule`).
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

from compiler.graph.ir import Node
from compiler.scheduling.memory_model import MemoryModel

#: State expansions before the search gives up: a deterministic count, not a clock. About
#: 0.1-0.2 s of CPU (1-2 us each, measured on the unrolled recurrent and attention graphs of
#: the ONNX node suite, which exhaust it, on the shared 2-core machine; 3-5 us before the step
#: was split in two halves, 10-13 us before `MemoryModel.step` was written out inline).
DEFAULT_BUDGET = 100_000


@dataclass
class SearchResult:
    """The outcome of one search: the best order found (None if the budget ran out first)."""

    order: list[Node] | None
    peak: int
    finished: bool
    states: int  # distinct (node set, pending accumulations) states reached
    expansions: int
    seconds: float
    bound: int  # the best known peak the search started from


#: Searches remembered (least recently used dropped first), by everything a search reads: the
#: memory model's facts (`MemoryModel.search_facts`), the seeds as node positions and the budget.
MEMO_SIZE = 32


@dataclass(frozen=True)
class _Found:
    """A search's outcome, nodes by position: what `search` returns for the same key."""

    order_idx: tuple[int, ...] | None
    peak: int
    finished: bool
    states: int
    expansions: int
    bound: int


_memo: OrderedDict[tuple, _Found] = OrderedDict()
_memo_lock = threading.Lock()


def forget_searches() -> None:
    """Drop the remembered searches (a timing of the search itself starts from none)."""
    with _memo_lock:
        _memo.clear()


def search(
    model: MemoryModel, seeds: Sequence[Sequence[Node]] = (), budget: int = DEFAULT_BUDGET
) -> SearchResult:
    """Minimum-peak order of `model`'s function. `seeds`: known orders whose peak bounds the
    search (the best one is returned if nothing better exists).

    Two passes over the same states: the first finds the minimum peak P; the second, among
    the orders that never exceed P, minimises the highest step below P (so the parts of the
    program away from the peak run in as little memory as they can: a stem that sets the peak
    does not leave the rest of the order to chance); ties go to the lower sum of live bytes.

    The search is a function of the model's facts, the seeds' orders and the budget, node
    positions for nodes: a search with the same ones as one of the last `MEMO_SIZE` returns its
    result (the same order, peak and counts, a search that ran out included; `seconds` is this
    call's). The same graph reaches the scheduler again when a model is compiled again with
    options that change nothing before scheduling (another lowering policy that lowers none of
    its nodes differently, a run-time specialization to the same shapes), and when the IDE's
    schedule views schedule the graph the compile scheduled: an unrolled recurrent or attention
    graph's search runs out of budget after ~0.1 s of CPU each time."""
    t0 = time.perf_counter()
    index = model.index
    if not all(n in index for order in seeds for n in order):
        return _search(model, seeds, budget, t0)  # a foreign node: simulate says so
    key = (model.search_facts(), tuple(tuple(index[n] for n in o) for o in seeds), budget)
    with _memo_lock:
        found = _memo.get(key)
        if found is not None:
            _memo.move_to_end(key)
    if found is None:
        res = _search(model, seeds, budget, t0)
        order_idx = None if res.order is None else tuple(index[n] for n in res.order)
        found = _Found(order_idx, res.peak, res.finished, res.states, res.expansions, res.bound)
        with _memo_lock:
            _memo[key] = found
            while len(_memo) > MEMO_SIZE:
                _memo.popitem(last=False)
        return res
    nodes = model.nodes
    return SearchResult(
        None if found.order_idx is None else [nodes[i] for i in found.order_idx],
        found.peak,
        found.finished,
        found.states,
        found.expansions,
        time.perf_counter() - t0,
        found.bound,
    )


def _search(
    model: MemoryModel, seeds: Sequence[Sequence[Node]], budget: int, t0: float
) -> SearchResult:
    best_seed: list[Node] | None = None
    bound = 1 << 62
    for order in seeds:
        peak = model.peak(order)
        if best_seed is None or peak < bound:
            bound, best_seed = peak, list(order)
    first = _dp(model, bound, None, budget)
    if first.order_idx is None:
        return SearchResult(
            None, bound, False, first.states, first.expansions, time.perf_counter() - t0, bound
        )
    peak = first.value if first.order_idx else bound
    second = _dp(model, peak, peak, budget - first.expansions)
    best = second if second.order_idx else first
    states, expansions = first.states + second.states, first.expansions + second.expansions
    seconds = time.perf_counter() - t0
    if not best.order_idx:
        # Nothing beats or equals the seeds' bound: the best seed is optimal.
        return SearchResult(best_seed, bound, True, states, expansions, seconds, bound)
    order = [model.nodes[i] for i in best.order_idx]
    return SearchResult(order, peak, True, states, expansions, seconds, bound)


@dataclass
class _Pass:
    order_idx: list[int] | None  # None: out of budget; []: no order within the bound
    value: int
    states: int
    expansions: int


def _dp(model: MemoryModel, bound: int, cap: int | None, budget: int) -> _Pass:
    """Orders whose every step stays <= `bound`, minimising the highest step (below `cap`
    when given: steps reaching it count as 0), then the sum of live bytes.

    Every (state, ready node) pair of a level is expanded, whatever the bound then prunes, so
    the level's expansions are known before it starts (its states' ready counts): a level that
    would pass the budget is not started. The outcome is the one of counting expansion by
    expansion and stopping at budget + 1 (the count reported), without the work of the
    unfinished level -- most of an exhausted search's time, the levels grow as it goes."""
    n = len(model.nodes)
    info = model.info
    preds = [i.preds for i in info]
    succs = [i.succs for i in info]
    full = (1 << n) - 1
    start_ready = sum(1 << i for i in range(n) if not preds[i])
    # A state is the set of nodes run (`done`) and the producers whose sum post-op is pending
    # (`acc`), keyed as one int, done | acc << n (for the same `done`, keys order as `acc`s).
    # state key -> [value, area, live, ready, parent key, node]
    level: dict[int, list] = {0: [0, 0, 0, start_ready, None, -1]}
    # Every level's states: their parent keys and nodes give the order back.
    levels: list[dict[int, list]] = []
    # The step in two halves: the tail (the bytes live after the node) only for a state that
    # is kept; most expansions go over the bound or reach a state already reached as well.
    heads, tails = model.search_steppers()
    # Steps past the bound are dropped first, so without a cap every kept step is below this.
    capv = bound + 1 if cap is None else cap
    states = expansions = 0
    for _ in range(n):
        expansions += sum(v[3].bit_count() for v in level.values())
        if expansions > budget:
            return _Pass(None, 0, states, budget + 1)
        nxt: dict[int, list] = {}
        seen_get = nxt.get
        for key, (value, area, live, ready, _parent, _node) in level.items():
            done = key & full
            acc = key >> n
            mask = ready
            while mask:
                low = mask & -mask
                mask ^= low
                k = low.bit_length() - 1
                peak, acc2 = heads[k](done, acc, live)
                if peak > bound:
                    continue
                v = peak if peak < capv else 0
                if v < value:
                    v = value
                done2 = done | low
                key2 = done2 | acc2 << n
                area2 = area + peak
                seen = seen_get(key2)
                # (seen's value, area) <= (v, area2): the state is reached as well already
                if seen is not None and (seen[0] < v or (seen[0] == v and seen[1] <= area2)):
                    continue
                live2 = tails[k](done, acc, acc2, live)
                ready2 = ready & ~low
                for s in succs[k]:
                    if not preds[s] & ~done2:
                        ready2 |= 1 << s
                nxt[key2] = [v, area2, live2, ready2, key, k]
        states += len(nxt)
        levels.append(nxt)
        level = nxt
        if not level:
            return _Pass([], 0, states, expansions)
    finals = [(v[0], v[1], key) for key, v in level.items() if key & full == full]
    if not finals:
        return _Pass([], 0, states, expansions)
    value, _area, key = min(finals)
    order_idx: list[int] = []
    cur: int | None = key
    for depth in range(n - 1, -1, -1):
        assert cur is not None
        entry = levels[depth][cur]
        order_idx.append(entry[5])
        cur = entry[4]
    return _Pass(order_idx[::-1], value, states, expansions)


__all__ = ["DEFAULT_BUDGET", "MEMO_SIZE", "SearchResult", "forget_searches", "search"]
