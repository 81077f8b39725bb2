"""Scheduling (pipeline step 7): the order in which IRGen emits the graph's nodes.

`optimal` (the default) is the exact minimum-peak order (`optimal.py`); when its search does not
finish within its budget it falls back to `child-mem-size`, and says so in the Schedule.
`child-mem-size` is Glow's ChildMemSizeBasedScheduler, a generalised Sethi-Ullman order: a post-
order DFS from the outputs that visits a node's operand subtrees in decreasing order of the memory
they need, so the hungriest subtree runs while little else is live. `topological` keeps
`fn.nodes`. Every order is measured with the low-level memory model (`memory_model.py`: what the
activations region holds once the low-level passes have run), which `live_bytes_timeline` gives.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from compiler.errors import CompilerError
from compiler.graph.ir import Function, Node, Result, Value
from compiler.scheduling.memory_model import MemoryModel, is_view
from compiler.scheduling.optimal import DEFAULT_BUDGET, search

#: Every scheduler; the first is the default.
SCHEDULERS = ("optimal", "child-mem-size", "topological")
DEFAULT_SCHEDULER = SCHEDULERS[0]
#: Where `optimal` falls back when its search runs out of budget.
FALLBACK_SCHEDULER = "child-mem-size"


@dataclass
class Schedule:
    """A node order, the live activation bytes while each step runs, and their peak.

    `kind` is the scheduler asked for, `used` the one whose order this is (they differ when
    `optimal` fell back). `proven_optimal`: no order has a lower peak (the exact search
    finished, or the peak equals `lower_bound_bytes`, which every order needs: the largest
    bytes one node keeps live). `stats`: the search's figures.
    """

    kind: str
    order: list[Node]
    live_bytes: list[int] = field(default_factory=list)
    peak_bytes: int = 0
    peak_step: int = -1
    used: str = ""
    proven_optimal: bool = False
    lower_bound_bytes: int = 0
    lower_bound_node: str = ""
    stats: dict = field(default_factory=dict)

    @property
    def names(self) -> list[str]:
        return [n.name for n in self.order]

    def __len__(self) -> int:
        return len(self.order)


def result_bytes(node: Node) -> int:
    """Activation bytes a node's results take (0 for views, which alias their input): the
    size child-mem-size's subtree estimate uses."""
    if is_view(node):
        return 0
    return sum(r.type.size_bytes for r in node.results)


def _producer(v: Value) -> Node | None:
    return v.node if isinstance(v, Result) else None


def live_bytes_timeline(fn: Function, order: Sequence[Node], alignment: int = 64) -> list[int]:
    """Live activation bytes while each step of `order` runs, in the low-level memory model
    (`alignment` as the memory planner's: compiler.memory.regions.ALIGNMENT)."""
    return [s.peak for s in MemoryModel(fn, alignment).simulate(order)]


def _operand_nodes(node: Node) -> list[Node]:
    seen: dict[Node, None] = {}
    for v in node.operands:
        p = _producer(v)
        if p is not None:
            seen.setdefault(p, None)
    return list(seen)


def _child_mem_sizes(nodes: Sequence[Node]) -> dict[Node, int]:
    """Glow's `maxMemSize`: the peak memory needed to compute a node's whole operand subtree.

    Children are visited hungriest first; while child k runs, the results of children 0..k-1 are
    held. `nodes` is topological, so one forward sweep suffices (no recursion on deep graphs).
    """
    mem: dict[Node, int] = {}
    for n in nodes:
        kids = sorted(_operand_nodes(n), key=lambda c: -mem[c])
        peak, held = 0, 0
        for c in kids:
            peak = max(peak, held + mem[c])
            held += result_bytes(c)
        mem[n] = max(peak, held + result_bytes(n))
    return mem


def _child_mem_order(fn: Function) -> list[Node]:
    topo = fn.nodes
    index = {n: i for i, n in enumerate(topo)}
    mem = _child_mem_sizes(topo)
    # Roots: nodes nobody consumes (Saves and other side effects, or dead results), in program
    # order, so outputs are written in the order the model declares them.
    roots = [n for n in topo if not n.has_users()]
    done: set[Node] = set()
    order: list[Node] = []
    for root in roots:
        if root in done:
            continue
        stack: list[tuple[Node, bool]] = [(root, False)]
        while stack:
            n, expanded = stack.pop()
            if n in done:
                continue
            if expanded:
                done.add(n)
                order.append(n)
                continue
            stack.append((n, True))
            kids = [c for c in _operand_nodes(n) if c not in done]
            # Hungriest child first; ties keep program order. Pushed reversed: a stack pops last.
            kids.sort(key=lambda c: (-mem[c], index[c]))
            for c in reversed(kids):
                stack.append((c, False))
    assert len(order) == len(topo), "child-mem-size scheduler lost nodes"
    return order


def schedule(
    fn: Function,
    kind: str = DEFAULT_SCHEDULER,
    *,
    alignment: int = 64,
    budget: int = DEFAULT_BUDGET,
) -> Schedule:
    """Order `fn`'s nodes with the named scheduler and measure that order with the low-level
    memory model (`alignment`: the planner's, compiler.memory.regions.ALIGNMENT; the pipeline
    passes it). `budget`: state expansions the optimal search may use before falling back."""
    if kind not in SCHEDULERS:
        raise CompilerError(
            f"unknown scheduler '{kind}'", hint=f"known schedulers: {', '.join(SCHEDULERS)}"
        )
    model = MemoryModel(fn, alignment)
    bound, bound_node = model.operator_bound()
    stats: dict = {}
    used = kind
    finished = False
    if kind == "topological":
        order = list(fn.nodes)
    elif kind == "child-mem-size":
        order = _child_mem_order(fn)
    else:
        seeds = [_child_mem_order(fn), list(fn.nodes)]
        res = search(model, seeds, budget)
        stats = {
            "finished": res.finished,
            "states": res.states,
            "expansions": res.expansions,
            "budget": budget,
            "search_ms": round(res.seconds * 1000, 1),
            "bound_bytes": res.bound,
        }
        if res.order is not None:
            order = res.order
            # The search's model is optimistic about Saves (see memory_model.py): the order is
            # proven optimal when its exact peak reaches the search's minimum.
            exact = max((st.peak for st in model.simulate(order)), default=0)
            finished = exact <= res.peak
            stats["optimal_bytes"] = res.peak
            if not finished:
                seed = min(
                    seeds, key=lambda o: max((st.peak for st in model.simulate(o)), default=0)
                )
                if max((st.peak for st in model.simulate(seed)), default=0) < exact:
                    order = seed
        else:
            order, used = seeds[0], FALLBACK_SCHEDULER
            stats["fallback"] = (
                f"the search did not finish within {budget} state expansions; "
                f"used {FALLBACK_SCHEDULER}"
            )
    steps = model.simulate(order)
    live = [s.peak for s in steps]
    peak = max(live, default=0)
    return Schedule(
        kind,
        order,
        live,
        peak,
        live.index(peak) if live else -1,
        used=used,
        proven_optimal=finished or peak <= bound,
        lower_bound_bytes=bound,
        lower_bound_node=bound_node,
        stats=stats,
    )
