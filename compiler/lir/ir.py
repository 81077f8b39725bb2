"""The low-level IR (Glow's instruction IR): a function of WeightVars and ordered Instructions.

Address-only: every operand is a memory value (a WeightVar, an `allocactivation` or a
`tensorview`) used `@in`, `@out` or `@inout`. Values keep use lists of (instruction, operand
index), updated by the IR itself on creation, `set_operand`, insertion and erasure, so the
memory passes can rewrite in O(users). Instruction indices are positions in `code`.
Placing, erasing, replacing and moving instructions notify the function's journal
(compiler.provenance), as the graph IR's Function does.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from math import isqrt
from typing import Any, TypedDict, Unpack

import numpy as np

from compiler.graph.ir import fresh_name
from compiler.graph.types import TensorType
from compiler.graph.uses import Used, content_digest
from compiler.lir.instructions import MODES, InstrDef, Kind, Trait, get_instr
from compiler.provenance import Journal

Operand = tuple["LValue", str]


class LValue(Used["Instruction"]):
    """Anything an instruction operand can name. `users`: (instruction, operand index) pairs."""

    __slots__ = ()

    @property
    def is_memory(self) -> bool:
        """Whether the value names memory (can be an operand)."""
        return True

    @property
    def type_(self) -> TensorType:
        """The type of a value that names memory: weights, allocations and views have one,
        compute instructions (never operands) have none."""
        assert self.type is not None, self.name
        return self.type


class WeightFields(TypedDict, total=False):
    """WeightVar's optional fields, as `LFunction.add_weight` forwards them."""

    role: str | None
    data: np.ndarray | None
    digest: str | None


class WeightVar(LValue):
    """A weight of the `declare` section.

    Constant weights carry the graph Constant's data (shared, read-only, never copied);
    mutable weights are the model's inputs (`role="input"`) and outputs (`role="output"`).
    """

    __slots__ = ("mutability", "role", "data", "_digest")

    def __init__(
        self,
        name: str,
        type: TensorType,
        mutability: str = "constant",
        *,
        role: str | None = None,
        data: np.ndarray | None = None,
        digest: str | None = None,
    ) -> None:
        assert mutability in ("constant", "mutable"), mutability
        assert role in (None, "input", "output"), role
        super().__init__(name, type)
        self.mutability = mutability
        self.role = role
        self.data = data
        self._digest = digest

    @property
    def is_constant(self) -> bool:
        return self.mutability == "constant"

    @property
    def is_input(self) -> bool:
        return self.role == "input"

    @property
    def is_output(self) -> bool:
        return self.role == "output"

    @property
    def digest(self) -> str:
        if self._digest is None:
            self._digest = content_digest(self.data)
        return self._digest

    def __repr__(self) -> str:
        return f"<weight {self.mutability} %{self.name}: {self.type}>"


class Instruction(LValue):
    """One instruction of the `code` section.

    `kind` names an entry of the instruction table; `operands` are (value, mode) pairs;
    `attrs` are normalised by the table. Memory-defining kinds (allocactivation, tensorview)
    are values themselves and carry `type`; other kinds have `type = None`.
    `meta["node"]` names the graph node it came from.
    """

    __slots__ = ("kind", "operands", "attrs", "meta", "function")

    def __init__(
        self,
        kind: str,
        name: str,
        operands: Sequence[Operand] = (),
        attrs: dict[str, Any] | None = None,
        type: TensorType | None = None,
        meta: dict[str, Any] | None = None,
        *,
        normalize: bool = True,
    ) -> None:
        super().__init__(name, type)
        idef = get_instr(kind)
        self.kind = str(kind)
        self.attrs = idef.normalize_attrs(attrs or {}, name) if normalize else dict(attrs or {})
        self.meta: dict[str, Any] = dict(meta or {})
        self.function: LIRFunction | None = None
        self.operands: list[Operand] = []
        for i, (v, mode) in enumerate(operands):
            assert mode in MODES, mode
            self.operands.append((v, mode))
            v.add_use(self, i)

    # -- table ----------------------------------------------------------------------------------
    @property
    def idef(self) -> InstrDef:
        return get_instr(self.kind)

    @property
    def is_memory(self) -> bool:
        """A memory value itself (allocactivation, tensorview), with a type."""
        return self.idef.defines_value

    @property
    def is_alloc(self) -> bool:
        return self.kind == Kind.ALLOC

    @property
    def is_dealloc(self) -> bool:
        return self.kind == Kind.DEALLOC

    @property
    def is_view(self) -> bool:
        return self.kind == Kind.VIEW

    @property
    def is_marker(self) -> bool:
        """Does no work at run time: a lifetime marker or a view."""
        return self.idef.is_marker

    @property
    def graph_op(self) -> str | None:
        return self.idef.graph_op

    def has_trait(self, trait: str) -> bool:
        return trait in self.idef.traits

    @property
    def accumulates(self) -> bool:
        """A sum post-op: the kernel adds its result to its @inout dest instead of storing."""
        return (
            bool(self.operands)
            and self.operands[0][1] == "inout"
            and self.has_trait(Trait.ACCUMULATE)
        )

    # -- operands -------------------------------------------------------------------------------
    def operand(self, idx: int) -> LValue:
        return self.operands[idx][0]

    def mode(self, idx: int) -> str:
        return self.operands[idx][1]

    def set_operand(self, idx: int, value: LValue, mode: str | None = None) -> None:
        old, old_mode = self.operands[idx]
        old.remove_use(self, idx)
        self.operands[idx] = (value, mode or old_mode)
        value.add_use(self, idx)

    def inputs(self) -> list[LValue]:
        """Operands read (@in and @inout)."""
        return [v for v, m in self.operands if m in ("in", "inout")]

    def outputs(self) -> list[LValue]:
        """Operands written (@out and @inout)."""
        return [v for v, m in self.operands if m in ("out", "inout")]

    def dest(self) -> LValue:
        """The first written operand (the destination of compute and data-movement kinds)."""
        for v, m in self.operands:
            if m in ("out", "inout"):
                return v
        raise ValueError(f"{self.kind} %{self.name} writes nothing")

    def _drop_operands(self) -> None:
        for i, (v, _) in enumerate(self.operands):
            v.remove_use(self, i)
        self.operands = []

    @property
    def index(self) -> int:
        """Position in the function's code (O(1) amortised: cached until the code changes)."""
        assert self.function is not None, f"%{self.name} is not in a function"
        return self.function.index_of(self)

    def __repr__(self) -> str:
        ops = ", ".join(f"@{m} %{v.name}" for v, m in self.operands)
        return f"<{self.kind} %{self.name} {ops}>"


def value_kind(value: LValue) -> str:
    """What provenance calls a value: its instruction kind, or "weight"."""
    return value.kind if isinstance(value, Instruction) else "weight"


def view_root(value: LValue) -> tuple[LValue, int]:
    """The non-view value under `value` and the byte offset of `value` inside it."""
    off = 0
    while isinstance(value, Instruction) and value.is_view:
        src = value.operands[0][0]
        off += view_byte_offset(value, src.type)
        value = src
    return value, off


def view_byte_offset(view: Instruction, source_type: TensorType | None) -> int:
    assert source_type is not None
    strides = source_type.strides()
    offs = view.attrs["offsets"]
    lin = sum(o * s for o, s in zip(offs, strides))
    return lin * source_type.elem.itemsize


class LIRFunction:
    """A low-level function: `weights` (the declare section) and `code` (ordered instructions)."""

    def __init__(self, name: str = "main") -> None:
        self.name = name
        self.weights: dict[str, WeightVar] = {}
        self.code: list[Instruction] = []
        self._names: set[str] = set()
        self._counters: dict[str, int] = {}
        self._values: dict[str, LValue] = {}
        self._index: dict[int, int] | None = None
        self._removed_since_index = 0  # instructions taken out since `_index` was built
        self.meta: dict[str, Any] = {}
        #: The listener of this function's changes; the pass runner reads and clears it.
        self.journal = Journal()

    # -- names ----------------------------------------------------------------------------------
    def unique_name(self, base: str) -> str:
        return fresh_name(base, self._names, self._counters)

    def get(self, name: str) -> LValue:
        """The weight or instruction called `name` (KeyError if none)."""
        return self._values[name]

    def __contains__(self, name: str) -> bool:
        return name in self._values

    def _claim_name(self, name: str, exact: bool) -> str:
        """`name` itself when `exact` (an error if taken), else a fresh variant of it."""
        if not exact:
            return self.unique_name(name)
        if name in self._names:
            raise ValueError(f"name '%{name}' is already used")
        self._names.add(name)
        return name

    # -- weights --------------------------------------------------------------------------------
    def add_weight(
        self,
        name: str,
        type: TensorType,
        mutability: str = "constant",
        *,
        exact_name: bool = False,
        **fields: Unpack[WeightFields],
    ) -> WeightVar:
        """A new weight (`fields`: WeightVar's role, data and digest) named `name`, made unique
        unless `exact_name`."""
        name = self._claim_name(name, exact_name)
        w = WeightVar(name, type, mutability, **fields)
        self.weights[name] = w
        self._values[name] = w
        return w

    def inputs(self) -> list[WeightVar]:
        return [w for w in self.weights.values() if w.is_input]

    def outputs(self) -> list[WeightVar]:
        return [w for w in self.weights.values() if w.is_output]

    # -- instructions ---------------------------------------------------------------------------
    def create(
        self,
        kind: str,
        operands: Sequence[Operand] = (),
        attrs: dict[str, Any] | None = None,
        *,
        name: str | None = None,
        type: TensorType | None = None,
        meta: dict[str, Any] | None = None,
        at: int | None = None,
        exact_name: bool = False,
        origin: Sequence[LValue | str] = (),
    ) -> Instruction:
        """Create an instruction and insert it at index `at` (default: append).

        `origin` names what it was made from (recorded as provenance, and in `meta["origin"]`).
        """
        iname = self._claim_name(str(name or kind), exact_name)
        instr = Instruction(kind, iname, operands, attrs, type, meta)
        if origin:
            instr.meta["origin"] = tuple(o if isinstance(o, str) else o.name for o in origin)
        return self.insert(len(self.code) if at is None else at, instr)

    def insert(self, index: int, instr: Instruction) -> Instruction:
        """Insert an (already built, not yet placed) instruction at position `index`."""
        self._place(index, instr)
        self.journal.created(instr.name, instr.kind, tuple(instr.meta.get("origin", ())))
        return instr

    def _place(self, index: int, instr: Instruction) -> Instruction:
        assert instr.function is None, f"%{instr.name} is already in a function"
        if instr.name in self._values and self._values[instr.name] is not instr:
            raise ValueError(f"name '%{instr.name}' is already used")
        self._names.add(instr.name)
        self.code.insert(index, instr)
        instr.function = self
        self._values[instr.name] = instr
        self._index = None
        return instr

    def insert_before(self, anchor: Instruction, instr: Instruction) -> Instruction:
        return self.insert(self.index_of(anchor), instr)

    def insert_after(self, anchor: Instruction, instr: Instruction) -> Instruction:
        return self.insert(self.index_of(anchor) + 1, instr)

    def erase(self, instr: Instruction, *, force: bool = False) -> None:
        """Remove an instruction; its operands' use lists are updated.

        An instruction that is a value (allocactivation, tensorview) must have no users left,
        unless `force` (then its users keep dangling references: the caller fixes them).
        """
        if instr.users and not force:
            raise ValueError(f"erasing %{instr.name} which still has users")
        self.journal.erased(instr.name, instr.kind)
        self.code.pop(self.index_of(instr))
        instr._drop_operands()
        instr.function = None
        self._values.pop(instr.name, None)
        self._removed_since_index += 1

    def replace(self, old: LValue, new: LValue) -> None:
        """Replace every use of `old` with `new`, recording it."""
        old.replace_all_uses_with(new)
        self.journal.replaced(old.name, value_kind(old), (new.name,))

    def remove(self, instr: Instruction) -> Instruction:
        """Take an instruction out of the code keeping its operands: the first half of a move
        (not recorded; `move_*` record the whole move)."""
        self.code.pop(self.index_of(instr))
        instr.function = None
        self._values.pop(instr.name, None)
        self._removed_since_index += 1
        return instr

    def move_before(self, instr: Instruction, anchor: Instruction) -> None:
        self.remove(instr)
        self._place(self.index_of(anchor), instr)
        self.journal.moved(instr.name, instr.kind)

    def move_after(self, instr: Instruction, anchor: Instruction) -> None:
        self.remove(instr)
        self._place(self.index_of(anchor) + 1, instr)
        self.journal.moved(instr.name, instr.kind)

    def move_to(self, instr: Instruction, index: int) -> None:
        """Move `instr` so that it ends up at position `index`."""
        self.remove(instr)
        self._place(index, instr)
        self.journal.moved(instr.name, instr.kind)

    def index_of(self, instr: Instruction) -> int:
        # Removals since the index was built only move instructions towards the front, by at
        # most the number removed: look back that far from the recorded position, and rebuild
        # once that window passes ~sqrt(len): a pass erasing n markers one by one then costs
        # O(n sqrt(n)) lookups instead of n full rebuilds (quadratic on a 3000-node chain).
        code = self.code
        if self._index is not None and self._removed_since_index <= max(32, isqrt(len(code))):
            n = self._index.get(id(instr))
            if n is not None:
                for k in range(min(n, len(code) - 1), n - self._removed_since_index - 1, -1):
                    if k >= 0 and code[k] is instr:
                        return k
        self._index = {id(i): n for n, i in enumerate(code)}
        self._removed_since_index = 0
        try:
            return self._index[id(instr)]
        except KeyError:
            raise ValueError(f"%{instr.name} is not in @{self.name}") from None

    def invalidate(self) -> None:
        """Call after editing `code` directly (e.g. reordering it in place)."""
        self._index = None
        self._removed_since_index = 0

    def __iter__(self) -> Iterator[Instruction]:
        return iter(self.code)

    def __len__(self) -> int:
        return len(self.code)

    def allocs(self) -> list[Instruction]:
        return [i for i in self.code if i.is_alloc]

    def find(self, name: str) -> Instruction | None:
        v = self._values.get(name)
        return v if isinstance(v, Instruction) else None

    # -- copying --------------------------------------------------------------------------------
    def clone(self) -> LIRFunction:
        """A deep copy of the structure; weight data arrays are shared (read-only)."""
        f = LIRFunction(self.name)
        f._names = set(self._names)
        f._counters = dict(self._counters)
        f.meta = dict(self.meta)
        vmap: dict[int, LValue] = {}
        for w in self.weights.values():
            nw = WeightVar(
                w.name, w.type_, w.mutability, role=w.role, data=w.data, digest=w._digest
            )
            f.weights[w.name] = nw
            f._values[w.name] = nw
            vmap[id(w)] = nw
        # Two passes so that even an invalid snapshot (a use before its definition) clones.
        for ins in self.code:
            ni = Instruction(
                ins.kind, ins.name, (), dict(ins.attrs), ins.type, dict(ins.meta), normalize=False
            )
            ni.function = f
            f.code.append(ni)
            f._values[ni.name] = ni
            vmap[id(ins)] = ni
        for ins, ni in zip(self.code, f.code):
            for i, (v, m) in enumerate(ins.operands):
                nv = vmap.get(id(v), v)
                ni.operands.append((nv, m))
                nv.add_use(ni, i)
        return f

    def instruction_count(self) -> int:
        return len(self.code)


__all__ = [
    "Instruction",
    "LIRFunction",
    "LValue",
    "Operand",
    "WeightVar",
    "value_kind",
    "view_byte_offset",
    "view_root",
]
