"""The one rewriter of both IRs and its worklist driver (as in xDSL/MLIR's greedy driver).

A pattern is `(item, rewriter) -> bool`, where `item` is the graph Node or low-level Instruction
it matched. A pass gives a `PatternTable` (op or instruction kind -> patterns, its keys checked
against the op / instruction table when it is built, so a mistyped name fails at import) and
`apply_patterns` drives it to a fixed point with one worklist.

Every change goes through the `Rewriter`. It calls the IR's own create / replace / erase / move,
which notify the function's journal (`compiler.provenance`); it opens one rewrite per pattern
that fires, so the journal stamps the rule's name on its records; it makes the matched item the
default `origin` of whatever it creates, so provenance cannot be forgotten; and it re-queues
exactly the items a change can affect: the new ones, the users of replaced values and the
producers and remaining users of an erased item's operands. Each item is therefore visited a
bounded number of times; nothing rescans the whole function.

Passes that are not pattern tables use the same Rewriter: `with rw.at(item, "rule"):` opens a
rewrite rooted at `item` (see the low-level passes).
"""

from __future__ import annotations

import difflib
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from functools import partial
from typing import Any, ClassVar

import numpy as np

from compiler.errors import CompilerError, PassError
from compiler.graph.ir import Constant, Function, Module, Node, Result, Value
from compiler.graph.types import TensorType
from compiler.lir.ir import Instruction, LIRFunction, LValue, value_kind
from compiler.passes.manager import GraphPass

Item = Node | Instruction  # what a pattern matches
IRValue = Value | LValue  # what an item reads and defines
Target = Function | LIRFunction  # what a rewriter changes
#: `(matched item, rewriter) -> fired?` (the item is typed by the table's IR).
Pattern = Callable[[Any, "Rewriter"], bool]

#: Key of a pattern table entry whose patterns are tried on every op.
ANY_OP = "*"


# -- graph helpers patterns share ------------------------------------------------------------


def is_pure(node: Node) -> bool:
    traits = node.opdef.traits
    return "pure" in traits and "side_effect" not in traits


def is_trivially_dead(node: Node) -> bool:
    return is_pure(node) and not node.has_users()


def producer(value: Value) -> Node | None:
    return value.node if isinstance(value, Result) else None


def same_op_producer(node: Node) -> Node | None:
    """The node that makes `node`'s first operand when it is of `node`'s own op (the inner
    Reshape of Reshape(Reshape(x)), ...), else None."""
    inner = producer(node.operands[0])
    return inner if inner is not None and inner.op == node.op else None


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


# -- pattern tables --------------------------------------------------------------------------


@dataclass(frozen=True)
class PatternTable:
    """Patterns by op (graph) or instruction kind (low-level); build with `graph_patterns` or
    `lir_patterns`, which check every key against the IR's table."""

    ir: str  # "graph" | "lir"
    patterns: Mapping[str, tuple[Pattern, ...]]

    def for_key(self, key: str) -> tuple[Pattern, ...]:
        return self.patterns.get(key, ())


def _checked(ir: str, table: Mapping[str, Sequence[Pattern]], known: Iterable[str]) -> PatternTable:
    names = set(known)
    for key in table:
        if key != ANY_OP and key not in names:
            near = difflib.get_close_matches(key, sorted(names), n=1)
            hint = f" (did you mean '{near[0]}'?)" if near else ""
            what = "op" if ir == "graph" else "instruction kind"
            raise CompilerError(f"pattern table names unknown {what} '{key}'{hint}")
    return PatternTable(ir, {k: tuple(v) for k, v in table.items()})


def graph_patterns(table: Mapping[str, Sequence[Pattern]]) -> PatternTable:
    """A graph pattern table; raises CompilerError now if a key is not an op of the op table."""
    from compiler.graph.ops import all_ops

    return _checked("graph", table, all_ops())


def lir_patterns(table: Mapping[str, Sequence[Pattern]]) -> PatternTable:
    """A low-level pattern table; raises CompilerError now if a key is not an instruction kind."""
    from compiler.lir.instructions import all_instrs

    return _checked("lir", table, all_instrs())


def rule_name(pattern: Pattern) -> str:
    """The name provenance gives a pattern: its function's name (with its class for a method)."""
    fn = pattern.func if isinstance(pattern, partial) else pattern
    qualname = getattr(fn, "__qualname__", None) or repr(fn)
    return str(qualname).rsplit("<locals>.", 1)[-1]


# -- how the rewriter sees each IR -----------------------------------------------------------


class _GraphView:
    """Graph IR: a node reads `operands` and defines `results`; pure unused nodes are dead."""

    ir = "graph"

    @staticmethod
    def key(item: Any) -> str:
        return item.op

    @staticmethod
    def operands(item: Any) -> list[Any]:
        return list(item.operands)

    @staticmethod
    def results(item: Any) -> list[Any]:
        return list(item.results)

    @staticmethod
    def producer(value: Any) -> Node | None:
        return producer(value)

    @staticmethod
    def is_dead(item: Any) -> bool:
        return is_trivially_dead(item)

    @staticmethod
    def op_of(item: Any) -> str:
        return item.op

    @staticmethod
    def values_of(new: Any) -> list[Any]:
        if isinstance(new, Node):
            return list(new.results)
        if isinstance(new, Value):
            return [new]
        return list(new)


class _LIRView:
    """Low-level IR: an instruction reads its operands; memory kinds are values themselves.
    Nothing is erased for being unused (dead-alloc-elimination decides that)."""

    ir = "lir"

    @staticmethod
    def key(item: Any) -> str:
        return item.kind

    @staticmethod
    def operands(item: Any) -> list[Any]:
        return [v for v, _ in item.operands]

    @staticmethod
    def results(item: Any) -> list[Any]:
        return [item] if item.is_memory else []

    @staticmethod
    def producer(value: Any) -> Instruction | None:
        return value if isinstance(value, Instruction) else None

    @staticmethod
    def is_dead(item: Any) -> bool:
        return False

    @staticmethod
    def op_of(item: Any) -> str:
        return value_kind(item)

    @staticmethod
    def values_of(new: Any) -> list[Any]:
        return [new] if isinstance(new, LValue) else list(new)


_View = type[_GraphView] | type[_LIRView]


class Rewriter:
    """The one way passes change either IR; tracks what to revisit and frames rewrites."""

    def __init__(self, fn: Target, *, rule: str = "", worklist: bool = False) -> None:
        self.fn = fn
        self.view: _View = _GraphView if isinstance(fn, Function) else _LIRView
        #: The item the current rewrite matched: the default origin of what it creates.
        self.matched: Item | None = None
        #: The rule named for changes made outside `at` (default: none).
        self.rule = rule
        self.changed = False
        self.rewrites = 0
        #: Whether a driver pops what changes touch (`apply_patterns`); without one, pushing
        #: the users of every changed value would cost O(users) per change for nothing.
        self.worklist = worklist
        self._queue: deque[Item] = deque()
        self._queued: set[Item] = set()

    @property
    def module(self) -> Module:
        """The graph Module (graph rewriters only: constants live there)."""
        assert isinstance(self.fn, Function), "low-level functions have no module"
        return self.fn.module

    # -- rewrites -----------------------------------------------------------------------------
    def at(self, item: Item, rule: str | None = None) -> _At:
        """`with rw.at(item, rule):` is one rewrite rooted at `item`: what it creates comes
        from `item` unless told otherwise, and every record it makes carries `rule` (default:
        the rewriter's)."""
        return _At(self, item, self.rule if rule is None else rule)

    def _change(self) -> AbstractContextManager[None]:
        """A change outside `at` is a rewrite of its own, under the rewriter's rule."""
        return self.fn.journal.rewrite(self.rule)

    def _origin(self, origin: Iterable[Item | IRValue | str] | None) -> list[Any]:
        if origin is not None:
            return list(origin)
        return [self.matched] if self.matched is not None else []

    # -- worklist -----------------------------------------------------------------------------
    def push(self, item: Item | None) -> None:
        if (
            self.worklist
            and item is not None
            and item.function is self.fn
            and item not in self._queued
        ):
            self._queued.add(item)
            self._queue.append(item)

    def push_users(self, value: IRValue) -> None:
        if self.worklist:
            for user, _ in value.users:
                self.push(user)

    def pop(self) -> Item | None:
        while self._queue:
            item = self._queue.popleft()
            self._queued.discard(item)
            if item.function is self.fn:
                return item
        return None

    # -- mutations ----------------------------------------------------------------------------
    def create(
        self,
        op: str,
        operands: Sequence[Any],
        attrs: dict[str, Any] | None = None,
        *,
        name: str | None = None,
        origin: Iterable[Item | IRValue | str] | None = None,
        **ir_options: Any,
    ) -> Any:
        """Create a node (graph: operands are values) or an instruction (low-level: operands
        are (value, mode) pairs; `type`, `meta`, `at` as `LIRFunction.create`). `origin`
        defaults to the matched item."""
        with self._change():
            item = self.fn.create(
                op, operands, attrs, name=name, origin=self._origin(origin), **ir_options
            )
        self.changed = True
        self.push(item)
        return item

    def constant(self, name: str, data: np.ndarray, like: TensorType | None = None) -> Constant:
        """Add a constant to the module (cast to `like`'s element type when given)."""
        data = np.asarray(data, dtype=like.np_dtype if like is not None else None)
        if data.ndim == 0:
            # Constant() would store 0-d data as [1] anyway (np.ascontiguousarray); be explicit.
            data = data.reshape(1)
        return self.module.add_constant(name, np.ascontiguousarray(data))

    def replace(self, old: Any, new: Any) -> None:
        """Replace all uses of `old`; a graph node defining it is erased once it is dead."""
        self._replace(old, new, erase_dead=True)

    def _replace(self, old: Any, new: Any, *, erase_dead: bool) -> None:
        if old is new:
            return
        if old.type != new.type:
            raise PassError(
                f"replacing %{old.name} : {old.type} by %{new.name} : {new.type}",
                pass_name="rewriter",
            )
        users = [u for u, _ in old.users]
        with self._change():
            self.fn.replace(old, new)
            self.changed = True
            for u in users:
                self.push(u)
            self.push(self.view.producer(new))
            self.push_users(new)
            src = self.view.producer(old)
            if (
                erase_dead
                and src is not None
                and src.function is self.fn
                and self.view.is_dead(src)
            ):
                self.erase(src)

    def replace_node(self, item: Item, new: Item | IRValue | Sequence[IRValue]) -> None:
        """Replace every value `item` defines by the matching new value, then erase `item`."""
        values = self.view.values_of(new)
        olds = self.view.results(item)
        assert len(values) == len(olds), item
        with self._change():
            for old, nv in zip(olds, values):
                self._replace(old, nv, erase_dead=False)
            if item.function is self.fn and not any(v.users for v in olds):
                self.erase(item)

    def erase(self, item: Item) -> None:
        operands = self.view.operands(item)
        with self._change():
            self.fn.erase(item)  # type: ignore[arg-type]
        self.changed = True
        for v in operands:
            self.push(self.view.producer(v))
            self.push_users(v)

    def move_before(self, item: Instruction, anchor: Instruction) -> None:
        """Move a low-level instruction (graph order is derived from use-def, never moved)."""
        assert isinstance(self.fn, LIRFunction), "graph nodes are not moved"
        with self._change():
            self.fn.move_before(item, anchor)
        self.changed = True

    def move_after(self, item: Instruction, anchor: Instruction) -> None:
        assert isinstance(self.fn, LIRFunction), "graph nodes are not moved"
        with self._change():
            self.fn.move_after(item, anchor)
        self.changed = True

    def set_operand(self, item: Item, idx: int, value: Any, mode: str | None = None) -> None:
        """Make operand `idx` of `item` read `value` (recorded as a replace of `item`); a
        low-level operand can change its `mode` too."""
        old = self.view.operands(item)[idx]
        if mode is None:
            item.set_operand(idx, value)
        else:
            item.set_operand(idx, value, mode)  # type: ignore[call-arg]
        self.changed_in_place(item, by=[value])
        self.push(self.view.producer(old))
        self.push_users(old)

    def changed_in_place(self, item: Item | IRValue, by: Iterable[Item | IRValue] = ()) -> None:
        """Record a change the IR cannot see (attributes, operands, a weight's contents) as a
        replace of `item` by what it now reads (`by`, default: itself)."""
        names = tuple(v.name for v in by) or (item.name,)
        with self._change():
            self.fn.journal.replaced(item.name, self.view.op_of(item), names)
        self.changed = True
        if isinstance(item, Node | Instruction):
            self.push(item)


class _At:
    """The context manager of `Rewriter.at` (a class: the driver enters one per pattern)."""

    __slots__ = ("rw", "item", "rule", "outer", "opened")

    def __init__(self, rw: Rewriter, item: Item, rule: str) -> None:
        self.rw, self.item, self.rule = rw, item, rule
        self.outer: Item | None = None
        self.opened = False

    def __enter__(self) -> Rewriter:
        self.outer, self.rw.matched = self.rw.matched, self.item
        self.opened = self.rw.fn.journal.begin(self.rule)
        return self.rw

    def __exit__(self, *exc: object) -> None:
        self.rw.matched = self.outer
        if self.opened:
            self.rw.fn.journal.end()


def apply_patterns(
    fn: Target,
    table: PatternTable | Mapping[str, Sequence[Pattern]],
    *,
    erase_dead: bool = True,
    max_rewrites: int | None = None,
) -> bool:
    """Drive the patterns to a fixed point; returns whether anything changed.

    Each pattern that fires is one rewrite in the journal, named after it. `erase_dead` also
    removes graph nodes without users that the worklist meets (MLIR's greedy driver does the
    same), so a rewrite only has to replace values.
    """
    rw = Rewriter(fn, worklist=True)
    if not isinstance(table, PatternTable):
        table = graph_patterns(table) if rw.view.ir == "graph" else lir_patterns(table)
    if table.ir != rw.view.ir:
        raise PassError(
            f"a {table.ir} pattern table applied to the {rw.view.ir} IR", pass_name="rewriter"
        )
    first: Sequence[Item] = fn.nodes if isinstance(fn, Function) else list(fn.code)
    for each in first:
        rw.push(each)
    generic = table.for_key(ANY_OP)
    limit = max_rewrites if max_rewrites is not None else 20 * (len(fn) + 16)
    while (item := rw.pop()) is not None:
        if erase_dead and rw.view.is_dead(item):
            with rw.at(item, "erase-dead"):
                rw.erase(item)
            continue
        for pattern in (*table.for_key(rw.view.key(item)), *generic):
            with rw.at(item, rule_name(pattern)):
                fired = pattern(item, rw)
            if fired:
                rw.rewrites += 1
                if rw.rewrites > limit:
                    raise PassError(
                        f"pattern rewriting did not converge after {limit} rewrites "
                        f"(last: {rule_name(pattern)} on {item.name})",
                        pass_name="rewriter",
                        node=item.name,
                    )
                break
    return rw.changed


class PatternPass(GraphPass):
    """A graph pass that is one pattern table driven to a fixed point.

    `patterns` is the table (or override `table(fn)` when it is built per run); with
    `prune_constants` the weights the rewrites left without users are dropped afterwards.
    """

    patterns: ClassVar[PatternTable]
    prune_constants: ClassVar[bool] = True

    def table(self, fn: Function) -> PatternTable | Mapping[str, Sequence[Pattern]]:
        return self.patterns

    def run(self, fn: Function) -> bool:
        changed = apply_patterns(fn, self.table(fn))
        if changed and self.prune_constants:
            fn.module.remove_unused_constants()
        return changed


__all__ = [
    "ANY_OP",
    "PatternPass",
    "PatternTable",
    "Rewriter",
    "apply_patterns",
    "const_data",
    "graph_patterns",
    "is_pure",
    "is_splat",
    "is_trivially_dead",
    "lir_patterns",
    "producer",
    "rule_name",
    "same_op_producer",
    "single_use",
]
