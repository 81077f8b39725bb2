"""The instruction table of the low-level IR: every instruction kind declared once.

Memory and data-movement kinds (allocactivation, tensorview, copy, ...) are written by hand;
every compute kind is derived mechanically from the graph op table (`Conv` -> `conv`,
`MatMul` -> `matmul`): operands `@out dest` then `@in` each graph operand, the same attributes,
and the graph op name kept so kernels and type inference are reused.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from compiler.errors import VerifyError
from compiler.graph.ops import ACCUMULATE, REQUIRED, Attr, OpDef, _coerce, all_ops

MODES = ("in", "out", "inout")


class Kind(StrEnum):
    """The hand-written instruction kinds (compute kinds are derived: `kind_for_graph_op`).

    Members are strings, so they compare equal to the kind text the printer writes and the
    parser reads; code names them through this enum (or asks a trait) instead of spelling them.
    """

    ALLOC = "allocactivation"
    DEALLOC = "deallocactivation"
    VIEW = "tensorview"
    COPY = "copy"
    INSERT = "inserttensor"
    EXTRACT = "extracttensor"


class Trait(StrEnum):
    """Instruction traits, as `InstrDef.traits` holds them."""

    MEMORY = "memory"  # allocation / lifetime marker: allocactivation, deallocactivation
    VIEW = "view"  # a zero-copy alias of other memory: tensorview
    DATA_MOVEMENT = "data_movement"  # copy, inserttensor, extracttensor
    COMPUTE = "compute"  # derived from a graph op; runs its kernel
    INPLACE = "inplace"  # the @out may share the buffer of an @in of the same type
    # The dest may be @inout: the kernel adds its result to what the dest holds (a sum
    # post-op, oneDNN's name), so a residual Add fuses into the producer's epilogue.
    ACCUMULATE = "accumulate"


@dataclass(frozen=True)
class InstrDef:
    """One instruction kind.

    `operands` are (name, mode) pairs; when `variadic`, the last one repeats (>= 1 times).
    `defines_value`: the instruction is itself a memory value (allocactivation, tensorview) and
    carries a result type. `graph_op`: the graph op whose kernel and type inference it uses.
    Traits: see `Trait`.
    """

    kind: str
    operands: tuple[tuple[str, str], ...]
    attrs: dict[str, Attr] = field(default_factory=dict)
    traits: frozenset[str] = frozenset()
    graph_op: str | None = None
    defines_value: bool = False
    variadic: bool = False
    doc: str = ""

    def normalize_attrs(self, attrs: dict[str, Any], name: str | None = None) -> dict[str, Any]:
        if self.graph_op is not None:
            return all_ops()[self.graph_op].normalize_attrs(attrs, name)
        out: dict[str, Any] = {}
        for key in attrs:
            if key not in self.attrs:
                raise VerifyError(f"{self.kind} {name or ''}: unknown attribute '{key}'")
        for key, spec in self.attrs.items():
            if key in attrs:
                out[key] = _coerce(spec.kind, attrs[key])
            elif spec.default is REQUIRED:
                raise VerifyError(f"{self.kind} {name or ''}: missing attribute '{key}'")
            else:
                out[key] = _coerce(spec.kind, spec.default)
        return out

    @property
    def opdef(self) -> OpDef | None:
        return all_ops()[self.graph_op] if self.graph_op else None

    def modes_for(self, n: int) -> list[str]:
        """The mode of each of `n` operands (variadic tail expanded)."""
        modes = [m for _, m in self.operands]
        if self.variadic and n > len(modes):
            modes += [modes[-1]] * (n - len(modes))
        return modes

    def mode_allowed(self, index: int, mode: str, expected: str) -> bool:
        """Whether operand `index` may have `mode` where the table says `expected`: the same,
        or an accumulating kind's dest used @inout."""
        return mode == expected or (
            index == 0 and mode == "inout" and expected == "out" and Trait.ACCUMULATE in self.traits
        )

    def arity_ok(self, n: int) -> bool:
        return n == len(self.operands) or (self.variadic and n > len(self.operands))

    @property
    def is_compute(self) -> bool:
        return self.graph_op is not None

    @property
    def is_marker(self) -> bool:
        """Does no work at run time: a lifetime marker or a view (executors emit no code)."""
        return bool(self.traits & {Trait.MEMORY, Trait.VIEW})

    @property
    def category(self) -> str:
        """The op category it is drawn with: its graph op's; lifetime markers are "io", views
        and data movement "tensor"."""
        if self.opdef is not None:
            return self.opdef.category
        if Trait.MEMORY in self.traits:
            return "io"
        return "tensor" if self.traits & {Trait.VIEW, Trait.DATA_MOVEMENT} else "other"


_INSTRS: dict[str, InstrDef] = {}


def register_instr(d: InstrDef) -> InstrDef:
    assert d.kind not in _INSTRS, d.kind
    object.__setattr__(d, "kind", str(d.kind))  # plain text, whether given as a Kind or not
    _INSTRS[d.kind] = d
    return d


def get_instr(kind: str) -> InstrDef:
    try:
        return _INSTRS[kind]
    except KeyError:
        _sync_with_graph_ops()  # a graph op registered after this module was imported
        if kind in _INSTRS:
            return _INSTRS[kind]
        raise VerifyError(f"unknown instruction kind '{kind}'") from None


def has_instr(kind: str) -> bool:
    return kind in _INSTRS


def all_instrs() -> dict[str, InstrDef]:
    _sync_with_graph_ops()
    return dict(_INSTRS)


def kind_for_graph_op(op: str) -> str:
    """The instruction kind that computes graph op `op` (mechanical: lower case)."""
    return op.lower()


_MEM = frozenset({Trait.MEMORY})

register_instr(
    InstrDef(
        Kind.ALLOC,
        (),
        traits=_MEM,
        defines_value=True,
        doc="a new activation buffer of the result type",
    )
)
register_instr(
    InstrDef(
        Kind.DEALLOC,
        (("buffer", "out"),),
        traits=_MEM,
        doc="end of an activation buffer's lifetime",
    )
)
register_instr(
    InstrDef(
        Kind.VIEW,
        (("source", "in"),),
        {"offsets": Attr("ints", doc="element offsets per dim of the source")},
        frozenset({Trait.VIEW}),
        defines_value=True,
        doc="zero-copy alias: the result type's elements, contiguous, starting at the offsets",
    )
)
register_instr(
    InstrDef(
        Kind.COPY,
        (("dest", "out"), ("source", "in")),
        traits=frozenset({Trait.DATA_MOVEMENT}),
        doc="dest = source (same type)",
    )
)
register_instr(
    InstrDef(
        Kind.INSERT,
        (("dest", "inout"), ("source", "in")),
        {"offsets": Attr("ints"), "count": Attr("int", 1), "axis": Attr("int", 0)},
        frozenset({Trait.DATA_MOVEMENT}),
        doc="write source into dest at offsets, `count` times along axis (dest is partly written)",
    )
)
register_instr(
    InstrDef(
        Kind.EXTRACT,
        (("dest", "out"), ("source", "in")),
        {"offsets": Attr("ints")},
        frozenset({Trait.DATA_MOVEMENT}),
        doc="dest = source[offsets : offsets + dest.shape]",
    )
)

#: Kinds that do no work at run time (lifetime markers and views): executors emit no code.
MARKER_KINDS = frozenset(kind for kind, d in _INSTRS.items() if d.is_marker)

#: Graph ops IRGen never turns into a generic instruction (they have special forms).
NOT_COMPUTE = frozenset({"Save", "Split"})


def _sync_with_graph_ops() -> None:
    for op in all_ops().values():
        kind = kind_for_graph_op(op.name)
        if op.name in NOT_COMPUTE or kind in _INSTRS:
            continue
        traits = {Trait.COMPUTE}
        if "elementwise" in op.traits:
            traits.add(Trait.INPLACE)
        if ACCUMULATE in op.traits:
            traits.add(Trait.ACCUMULATE)
        register_instr(
            InstrDef(
                kind,
                (("dest", "out"),) + tuple((o, "in") for o in op.operands),
                dict(op.attrs),
                frozenset(traits),
                graph_op=op.name,
                variadic=op.variadic,
                doc=op.doc,
            )
        )


_sync_with_graph_ops()

__all__ = [
    "MARKER_KINDS",
    "MODES",
    "NOT_COMPUTE",
    "InstrDef",
    "Kind",
    "Trait",
    "all_instrs",
    "get_instr",
    "has_instr",
    "kind_for_graph_op",
    "register_instr",
]
