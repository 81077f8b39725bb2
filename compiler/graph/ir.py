"""The high-level graph IR: Module (Constants, Placeholders, Functions), Function, Node, values.

Nodes keep their operands' use lists up to date (as torch.fx does), so rewrites are cheap and
`replace_all_uses_with` is O(users). Every node creation, erasure and replacement goes through
the Function, which notifies its journal (compiler.provenance) of what came from what.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from compiler.graph.types import ElemKind, TensorType
from compiler.graph.uses import Used, content_digest
from compiler.provenance import Journal, ProvenanceRecord

if TYPE_CHECKING:
    from compiler.graph.ops import OpDef

AttrValue = Any  # int | float | str | bool | tuple[int, ...] | tuple[float, ...]


class Value(Used["Node"]):
    """Anything a node can consume: a Constant, a Placeholder or a node Result."""

    __slots__ = ()
    type: TensorType  # graph values are always typed

    def __init__(self, name: str, type: TensorType) -> None:
        super().__init__(name, type)

    @property
    def has_users(self) -> bool:
        return bool(self.users)

    def user_nodes(self) -> list[Node]:
        seen: dict[int, Node] = {}
        for node, _ in self.users:
            seen.setdefault(id(node), node)
        return list(seen.values())


class Constant(Value):
    """A weight whose value is known at compile time. `data` is never mutated in place."""

    __slots__ = ("data", "_digest")

    def __init__(
        self,
        name: str,
        data: np.ndarray | None,
        type: TensorType | None = None,
        digest: str | None = None,
    ) -> None:
        if data is not None and not (
            isinstance(data, np.ndarray) and data.flags.c_contiguous and not data.flags.writeable
        ):
            data = np.ascontiguousarray(data).reshape(np.shape(data))
            data.setflags(write=False)
        # (data already read-only and contiguous -- another constant's, a clone's -- is kept as
        # is: the same array object, so `content_digest` hashes it once for all of them)
        if data is not None:
            type = type or TensorType.of(data)
        assert type is not None
        super().__init__(name, type)
        self.data: np.ndarray | None = data
        self._digest = digest

    @property
    def digest(self) -> str:
        if self._digest is None:
            self._digest = content_digest(self.data)
        return self._digest


class Placeholder(Value):
    """A mutable weight: a model input or output, bound at run time."""

    __slots__ = ("is_output",)

    def __init__(self, name: str, type: TensorType, is_output: bool = False) -> None:
        super().__init__(name, type)
        self.is_output = is_output


class Result(Value):
    """Result `index` of a node."""

    __slots__ = ("node", "index")

    def __init__(self, name: str, type: TensorType, node: Node, index: int) -> None:
        super().__init__(name, type)
        self.node = node
        self.index = index


class Node:
    """One operation of a Function. `op` names an entry of the op table (compiler.graph.ops)."""

    __slots__ = ("op", "name", "operands", "attrs", "results", "function", "meta", "_seq")

    def __init__(self, op: str, name: str, attrs: dict[str, AttrValue]) -> None:
        self.op = op
        self.name = name
        self.attrs = attrs
        self.operands: list[Value] = []
        self.results: list[Result] = []
        self.function: Function | None = None
        self.meta: dict[str, Any] = {}
        self._seq = 0

    @property
    def result(self) -> Result:
        assert len(self.results) == 1, f"{self.name} has {len(self.results)} results"
        return self.results[0]

    @property
    def opdef(self) -> OpDef:
        from compiler.graph.ops import get_op

        return get_op(self.op)

    def set_operand(self, idx: int, value: Value) -> None:
        old = self.operands[idx]
        old.remove_use(self, idx)
        self.operands[idx] = value
        value.add_use(self, idx)
        if self.function is not None:
            self.function._invalidate()

    def has_users(self) -> bool:
        return any(r.users for r in self.results)

    def __repr__(self) -> str:
        ops = ", ".join(f"%{v.name}" for v in self.operands)
        return f"<{self.op} {self.name}({ops})>"


class Function:
    """An ordered set of nodes. Iteration is topological, stable in insertion order."""

    def __init__(self, name: str, module: Module) -> None:
        self.name = name
        self.module = module
        self._nodes: dict[Node, None] = {}
        self._order: list[Node] | None = None
        self._seq = itertools.count()
        #: The listener of this function's changes; the pass runner reads and clears it.
        self.journal = Journal()

    # -- construction -------------------------------------------------------------------------
    def create(
        self,
        op: str,
        operands: Sequence[Value],
        attrs: dict[str, AttrValue] | None = None,
        *,
        name: str | None = None,
        origin: Iterable[Node | str] | None = None,
        result_types: Sequence[TensorType] | None = None,
    ) -> Node:
        """Create a node; attributes are normalised and result types inferred from the op table.

        `origin` names the nodes the new node was made from (recorded as provenance).
        """
        from compiler.graph.ops import get_op

        opdef = get_op(op)
        full_attrs = opdef.normalize_attrs(attrs or {}, node_name=name)
        node = Node(op, self.module.unique_name(name or op.lower()), full_attrs)
        if result_types is None:
            result_types = opdef.infer_types([v.type for v in operands], full_attrs, node.name)
        for i, v in enumerate(operands):
            node.operands.append(v)
            v.add_use(node, i)
        for i, t in enumerate(result_types):
            rname = node.name if len(result_types) == 1 else f"{node.name}#{i}"
            node.results.append(Result(rname, t, node, i))
        node.function = self
        node._seq = next(self._seq)
        self._nodes[node] = None
        self._invalidate()
        srcs = tuple(o if isinstance(o, str) else o.name for o in (origin or ()))
        self.journal.created(node.name, op, srcs)
        if origin:
            node.meta["origin"] = srcs
        return node

    def erase(self, node: Node) -> None:
        """Remove a node that has no users left."""
        assert not node.has_users(), f"erasing {node.name} which still has users"
        for i, v in enumerate(node.operands):
            v.remove_use(node, i)
        node.operands = []
        del self._nodes[node]
        node.function = None
        self._invalidate()
        self.journal.erased(node.name, node.op)

    def replace(self, old: Value, new: Value) -> None:
        """Replace every use of `old` with `new`, recording it."""
        old.replace_all_uses_with(new)
        self.journal.replaced(old.name, "", (new.name,))

    # -- iteration ----------------------------------------------------------------------------
    def _invalidate(self) -> None:
        self._order = None

    @property
    def nodes(self) -> list[Node]:
        """Nodes in a stable topological order (inputs before users, then insertion order)."""
        if self._order is None:
            self._order = _topo_order(self._nodes)
        return self._order

    def __iter__(self) -> Iterator[Node]:
        return iter(self.nodes)

    def __len__(self) -> int:
        return len(self._nodes)

    def __contains__(self, node: Node) -> bool:
        return node in self._nodes

    def find(self, name: str) -> Node | None:
        for n in self._nodes:
            if n.name == name:
                return n
        return None


def _topo_order(nodes: dict[Node, None]) -> list[Node]:
    import heapq

    indeg: dict[Node, int] = {}
    for n in nodes:
        indeg[n] = sum(1 for v in n.operands if isinstance(v, Result) and v.node in nodes)
    heap = [(n._seq, id(n), n) for n, d in indeg.items() if d == 0]
    heapq.heapify(heap)
    out: list[Node] = []
    while heap:
        _, _, n = heapq.heappop(heap)
        out.append(n)
        for r in n.results:
            for user, _ in r.users:
                if user in indeg:
                    indeg[user] -= 1
                    if indeg[user] == 0:
                        heapq.heappush(heap, (user._seq, id(user), user))
    if len(out) != len(nodes):
        raise ValueError("graph has a cycle")
    return out


@dataclass
class Module:
    """Owns Constants, Placeholders (inputs and outputs) and Functions; names are unique in it."""

    name: str = "module"
    constants: dict[str, Constant] = field(default_factory=dict)
    placeholders: dict[str, Placeholder] = field(default_factory=dict)
    functions: list[Function] = field(default_factory=list)
    _names: set[str] = field(default_factory=set, repr=False)
    _counters: dict[str, int] = field(default_factory=dict, repr=False)
    meta: dict[str, Any] = field(default_factory=dict, repr=False)

    # -- names --------------------------------------------------------------------------------
    def unique_name(self, base: str) -> str:
        return fresh_name(base, self._names, self._counters)

    # -- storage ------------------------------------------------------------------------------
    def add_constant(self, name: str, data: np.ndarray, type: TensorType | None = None) -> Constant:
        """A new constant; `type` gives quantized data its scale and offset."""
        c = Constant(self.unique_name(name), data, type)
        self.constants[c.name] = c
        return c

    def add_placeholder(
        self, name: str, type: TensorType, *, is_output: bool = False
    ) -> Placeholder:
        p = Placeholder(self.unique_name(name), type, is_output)
        self.placeholders[p.name] = p
        return p

    def create_function(self, name: str = "main") -> Function:
        f = Function(name, self)
        self.functions.append(f)
        return f

    @property
    def main(self) -> Function:
        return self.functions[0]

    def inputs(self) -> list[Placeholder]:
        return [p for p in self.placeholders.values() if not p.is_output]

    def outputs(self) -> list[Placeholder]:
        return [p for p in self.placeholders.values() if p.is_output]

    def remove_unused_constants(self) -> int:
        dead = [n for n, c in self.constants.items() if not c.users]
        for n in dead:
            del self.constants[n]
        return len(dead)

    def node_count(self) -> int:
        return sum(len(f) for f in self.functions)

    # -- copying ------------------------------------------------------------------------------
    def clone(self) -> Module:
        """A deep copy of the structure; constant data arrays are shared (they are read-only)."""
        m = Module(self.name)
        m._names = set(self._names)
        m._counters = dict(self._counters)
        m.meta = dict(self.meta)
        vmap: dict[int, Value] = {}
        for c in self.constants.values():
            nc = Constant(c.name, c.data, c.type, c._digest)
            m.constants[c.name] = nc
            vmap[id(c)] = nc
        for p in self.placeholders.values():
            np_ = Placeholder(p.name, p.type, p.is_output)
            m.placeholders[p.name] = np_
            vmap[id(p)] = np_
        for f in self.functions:
            nf = Function(f.name, m)
            m.functions.append(nf)
            for n in f.nodes:
                nn = Node(n.op, n.name, dict(n.attrs))
                nn.meta = dict(n.meta)
                nn.function = nf
                nn._seq = n._seq
                for i, v in enumerate(n.operands):
                    nv = vmap[id(v)]
                    nn.operands.append(nv)
                    nv.add_use(nn, i)
                for r in n.results:
                    nr = Result(r.name, r.type, nn, r.index)
                    nn.results.append(nr)
                    vmap[id(r)] = nr
                nf._nodes[nn] = None
            nf._seq = itertools.count(max((n._seq for n in nf._nodes), default=-1) + 1)
        return m


def fresh_name(base: str, names: set[str], counters: dict[str, int]) -> str:
    """`base` (sanitised), or `base_N` for the first free N; records the name in `names`.

    Names are never reused within a compile, so provenance stays unambiguous.
    """
    base = _sanitize(base)
    if base not in names:
        names.add(base)
        return base
    n = counters.get(base, 0)
    while True:
        n += 1
        cand = f"{base}_{n}"
        if cand not in names:
            counters[base] = n
            names.add(cand)
            return cand


def _sanitize(name: str) -> str:
    out = []
    for ch in name:
        out.append(ch if (ch.isalnum() or ch in "_.-") else "_")
    s = "".join(out).strip(".") or "v"
    if s[0].isdigit() or s[0] in "-.":
        s = "v" + s
    return s


__all__ = [
    "AttrValue",
    "Constant",
    "ElemKind",
    "Function",
    "Module",
    "Node",
    "Placeholder",
    "ProvenanceRecord",
    "Result",
    "TensorType",
    "Value",
]
