"""The pattern-rewrite driver of the graph passes (as in xDSL/MLIR's greedy driver).

A pattern is `(node, rewriter) -> bool`; a pass gives a table from op name to patterns and
`apply_patterns` drives it to a fixed point with one worklist. Every mutation goes through the
`Rewriter`, which calls `Function.create/replace/erase` (so provenance lands in the journal) and
re-queues exactly the nodes a change can affect: the new nodes, the users of replaced values and
the producers and remaining users of an erased node's operands. Each node is therefore visited
a bounded number of times; nothing rescans the whole graph.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

from compiler.errors import PassError
from compiler.graph.ir import Constant, Function, Node, Result, Value
from compiler.graph.types import TensorType

Pattern = Callable[[Node, "Rewriter"], bool]
PatternTable = dict[str, Sequence[Pattern]]

#: Key of a PatternTable entry whose patterns are tried on every op.
ANY_OP = "*"


def is_pure(node: Node) -> bool:
    traits = node.opdef.traits
    return "pure" in traits and "side_effect" not in traits


def is_trivially_dead(node: Node) -> bool:
    return is_pure(node) and not node.has_users()


def producer(value: Value) -> Node | None:
    return value.node if isinstance(value, Result) else None


def single_use(value: Value) -> bool:
    return len(value.users) == 1


def const_data(value: Value) -> np.ndarray | None:
    """The data of a Constant operand, or None if the value is not a constant with data."""
    if isinstance(value, Constant) and value.data is not None:
        return value.data
    return None


def is_splat(value: Value, x: float) -> bool:
    """A constant whose every element equals `x`."""
    data = const_data(value)
    return data is not None and data.size > 0 and bool(np.all(data == x))


class Rewriter:
    """The one way patterns change the graph; tracks what to revisit."""

    def __init__(self, fn: Function) -> None:
        self.fn = fn
        self.module = fn.module
        self.changed = False
        self._queue: deque[Node] = deque()
        self._queued: set[Node] = set()
        self.rewrites = 0

    # -- worklist -----------------------------------------------------------------------------
    def push(self, node: Node | None) -> None:
        if node is not None and node.function is self.fn and node not in self._queued:
            self._queued.add(node)
            self._queue.append(node)

    def push_users(self, value: Value) -> None:
        for user, _ in value.users:
            self.push(user)

    def pop(self) -> Node | None:
        while self._queue:
            node = self._queue.popleft()
            self._queued.discard(node)
            if node.function is self.fn:
                return node
        return None

    # -- mutations ----------------------------------------------------------------------------
    def create(
        self,
        op: str,
        operands: Sequence[Value],
        attrs: dict[str, Any] | None = None,
        *,
        name: str | None = None,
        origin: Iterable[Node] = (),
    ) -> Node:
        node = self.fn.create(op, operands, attrs, name=name, origin=list(origin))
        self.changed = True
        self.push(node)
        return node

    def constant(self, name: str, data: np.ndarray, like: TensorType | None = None) -> Constant:
        """Add a constant to the module (cast to `like`'s element type when given)."""
        data = np.asarray(data, dtype=like.np_dtype if like is not None else None)
        if data.ndim == 0:
            # Constant() would store 0-d data as [1] anyway (np.ascontiguousarray); be explicit.
            data = data.reshape(1)
        return self.module.add_constant(name, np.ascontiguousarray(data))

    def replace(self, old: Value, new: Value) -> None:
        """Replace all uses of `old`; the node defining it is erased once it is dead."""
        if old is new:
            return
        if old.type != new.type:
            raise PassError(
                f"replacing %{old.name} : {old.type} by %{new.name} : {new.type}",
                pass_name="rewriter",
            )
        users = [u for u, _ in old.users]
        self.fn.replace(old, new)
        self.changed = True
        for u in users:
            self.push(u)
        self.push(producer(new))
        self.push_users(new)
        src = producer(old)
        if src is not None and is_trivially_dead(src):
            self.erase(src)

    def replace_node(self, node: Node, new: Node | Sequence[Value] | Value) -> None:
        """Replace every result of `node` by the matching new value, then erase `node`."""
        if isinstance(new, Node):
            values: Sequence[Value] = new.results
        elif isinstance(new, Value):
            values = [new]
        else:
            values = new
        assert len(values) == len(node.results), node
        for old, nv in zip(list(node.results), values):
            self.replace(old, nv)
        if node.function is self.fn and not node.has_users():
            self.erase(node)

    def erase(self, node: Node) -> None:
        operands = list(node.operands)
        self.fn.erase(node)
        self.changed = True
        for v in operands:
            self.push(producer(v))
            self.push_users(v)

    def set_operand(self, node: Node, idx: int, value: Value) -> None:
        old = node.operands[idx]
        node.set_operand(idx, value)
        self.changed = True
        self.push(node)
        self.push(producer(old))
        self.push_users(old)


def apply_patterns(
    fn: Function, table: PatternTable, *, erase_dead: bool = True, max_rewrites: int | None = None
) -> bool:
    """Drive the patterns to a fixed point; returns whether anything changed.

    `erase_dead` also removes pure nodes without users that the worklist meets (MLIR's
    greedy driver does the same), so a rewrite only has to replace values.
    """
    rw = Rewriter(fn)
    for node in fn.nodes:
        rw.push(node)
    generic = list(table.get(ANY_OP, ()))
    limit = max_rewrites if max_rewrites is not None else 20 * (len(fn) + 16)
    while (node := rw.pop()) is not None:
        if erase_dead and is_trivially_dead(node):
            rw.erase(node)
            continue
        for pattern in (*table.get(node.op, ()), *generic):
            if pattern(node, rw):
                rw.rewrites += 1
                if rw.rewrites > limit:
                    raise PassError(
                        f"pattern rewriting did not converge after {limit} rewrites "
                        f"(last: {getattr(pattern, '__name__', pattern)} on "
                        f"{node.name})",
                        pass_name="rewriter",
                        node=node.name,
                    )
                break
    return rw.changed
