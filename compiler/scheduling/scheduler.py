"""Scheduling (pipeline step 7): the order in which IRGen emits the graph's nodes.

`child-mem-size` is Glow's ChildMemSizeBasedScheduler, a generalised Sethi-Ullman order: a post-
order DFS from the outputs that visits a node's operand subtrees in decreasing order of the memory
they need, so the hungriest subtree runs while little else is live. `topological` keeps
`fn.nodes`. Memory model (shared with `live_bytes_timeline`): a node's results are allocated when
it runs and freed after their last user ran; view nodes (Reshape) alias their input and cost
nothing; constants and placeholders are not activations.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from compiler.errors import CompilerError
from compiler.graph.ir import Function, Node, Result, Value

SCHEDULERS = ("child-mem-size", "topological")


@dataclass
class Schedule:
    """A node order plus the live activation bytes after each step and their peak."""

    kind: str
    order: list[Node]
    live_bytes: list[int] = field(default_factory=list)
    peak_bytes: int = 0
    peak_step: int = -1

    @property
    def names(self) -> list[str]:
        return [n.name for n in self.order]

    def __len__(self) -> int:
        return len(self.order)


def _is_view(node: Node) -> bool:
    return "view" in node.opdef.traits


def result_bytes(node: Node) -> int:
    """Activation bytes a node allocates when it runs (0 for views, which alias their input)."""
    if _is_view(node):
        return 0
    return sum(r.type.size_bytes for r in node.results)


def _producer(v: Value) -> Node | None:
    return v.node if isinstance(v, Result) else None


def _buffer_root(v: Value) -> Value:
    """The value owning the memory `v` lives in: views are followed back to their source."""
    while isinstance(v, Result) and _is_view(v.node) and v.node.operands:
        v = v.node.operands[0]
    return v


def live_bytes_timeline(fn: Function, order: Sequence[Node]) -> list[int]:
    """Live activation bytes at every step of `order` (the step's results and operands included)."""
    pos = {n: i for i, n in enumerate(order)}
    if len(pos) != len(order):
        raise CompilerError("schedule lists a node twice")
    last: dict[int, int] = {}  # id(root result) -> last step it is needed
    roots: dict[int, Result] = {}
    for i, n in enumerate(order):
        if not _is_view(n):
            for r in n.results:
                roots[id(r)] = r
                last[id(r)] = max(last.get(id(r), i), i)
        for v in n.operands:
            root = _buffer_root(v)
            if isinstance(root, Result):
                last[id(root)] = max(last.get(id(root), i), i)
    diff = [0] * (len(order) + 1)
    for key, r in roots.items():
        first = pos[r.node]
        diff[first] += r.type.size_bytes
        diff[last[key] + 1] -= r.type.size_bytes
    out, acc = [], 0
    for i in range(len(order)):
        acc += diff[i]
        out.append(acc)
    return out


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


def schedule(fn: Function, kind: str = "child-mem-size") -> Schedule:
    """Order `fn`'s nodes with the named scheduler and measure the live bytes of that order."""
    if kind == "topological":
        order = list(fn.nodes)
    elif kind == "child-mem-size":
        order = _child_mem_order(fn)
    else:
        raise CompilerError(
            f"unknown scheduler '{kind}'", hint=f"known schedulers: {', '.join(SCHEDULERS)}"
        )
    live = live_bytes_timeline(fn, order)
    peak = max(live, default=0)
    return Schedule(kind, order, live, peak, live.index(peak) if live else -1)
