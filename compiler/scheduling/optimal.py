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

import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from compiler.graph.ir import Node
from compiler.scheduling.memory_model import MemoryModel

#: State expansions before the search gives up: about a second of Python on the shared machine.
DEFAULT_BUDGET = 300_000


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
    stats: dict = field(default_factory=dict)


def _bits(mask: int):
    while mask:
        low = mask & -mask
        yield low.bit_length() - 1
        mask ^= low


def search(
    model: MemoryModel, seeds: Sequence[Sequence[Node]] = (), budget: int = DEFAULT_BUDGET
) -> SearchResult:
    """Minimum-peak order of `model`'s function. `seeds`: known orders whose peak bounds the
    search (the best one is returned if nothing better exists)."""
    t0 = time.perf_counter()
    n = len(model.nodes)
    best_seed: list[Node] | None = None
    bound = None
    for order in seeds:
        peak = model.peak(order)
        if bound is None or peak < bound:
            bound, best_seed = peak, list(order)
    if bound is None:
        bound = 1 << 62
    info = model.info
    preds = [i.preds for i in info]
    succs = [i.succs for i in info]
    full = (1 << n) - 1
    start_ready = sum(1 << i for i in range(n) if not preds[i])
    # state key (done, acc) -> [peak, live, ready, parent key, node]
    level: dict[tuple[int, int], list] = {(0, 0): [0, 0, start_ready, None, -1]}
    parents: list[dict[tuple[int, int], tuple[tuple[int, int] | None, int]]] = []
    states = expansions = 0
    for _ in range(n):
        nxt: dict[tuple[int, int], list] = {}
        for (done, acc), (peak, live, ready, _parent, _node) in level.items():
            for k in _bits(ready):
                expansions += 1
                if expansions > budget:
                    return SearchResult(
                        None, bound, False, states, expansions, time.perf_counter() - t0, bound
                    )
                st = model.step(k, done, acc, live)
                p = peak if peak >= st.peak else st.peak
                if p > bound:
                    continue
                done2 = done | 1 << k
                key = (done2, st.accumulating)
                cur = nxt.get(key)
                if cur is not None and cur[0] <= p:
                    continue
                ready2 = ready & ~(1 << k)
                for s in succs[k]:
                    if not preds[s] & ~done2:
                        ready2 |= 1 << s
                nxt[key] = [p, st.live, ready2, (done, acc), k]
        states += len(nxt)
        parents.append({key: (v[3], v[4]) for key, v in nxt.items()})
        level = nxt
        if not level:
            break
    finals = [(v[0], key) for key, v in level.items() if key[0] == full]
    seconds = time.perf_counter() - t0
    if not finals:
        # Nothing beats or equals the seeds' bound: the best seed is optimal.
        return SearchResult(best_seed, bound, True, states, expansions, seconds, bound)
    peak, key = min(finals)
    order_idx: list[int] = []
    cur: tuple[int, int] | None = key
    for depth in range(n - 1, -1, -1):
        assert cur is not None
        parent, node = parents[depth][cur]
        order_idx.append(node)
        cur = parent
    order = [model.nodes[i] for i in reversed(order_idx)]
    return SearchResult(order, peak, True, states, expansions, seconds, bound)


__all__ = ["DEFAULT_BUDGET", "SearchResult", "search"]
