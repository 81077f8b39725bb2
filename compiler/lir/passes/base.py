"""Base class and registry of low-level IR passes (mirrors `compiler.passes.manager`'s GraphPass).

A pass has a kebab-case `name` and `run(lir) -> changed`. Passes record what they erased,
created and replaced in `lir.meta["journal"]` (graph `ProvenanceRecord`s) for the IDE.
"""

from __future__ import annotations

from typing import ClassVar

from compiler.errors import CompilerError
from compiler.graph.ir import ProvenanceRecord
from compiler.lir.ir import LIRFunction


class LIRPass:
    """A low-level IR pass: a kebab-case `name` and `run(lir) -> changed`."""

    name: ClassVar[str] = ""
    #: Passes that can change memory use (the per-pass memory report follows these).
    affects_memory: ClassVar[bool] = True

    def run(self, lir: LIRFunction) -> bool:  # pragma: no cover - abstract
        raise NotImplementedError


_REGISTRY: dict[str, type[LIRPass]] = {}


def register_lir_pass(cls: type[LIRPass]) -> type[LIRPass]:
    """Class decorator: make a low-level pass available by name."""
    assert cls.name and cls.name not in _REGISTRY, cls.name
    _REGISTRY[cls.name] = cls
    return cls


def get_lir_pass(name: str) -> type[LIRPass]:
    _ensure_loaded()
    try:
        return _REGISTRY[name]
    except KeyError:
        known = ", ".join(sorted(_REGISTRY))
        raise CompilerError(f"unknown low-level pass '{name}' (known passes: {known})") from None


def registered_lir_passes() -> dict[str, type[LIRPass]]:
    _ensure_loaded()
    return dict(_REGISTRY)


def _ensure_loaded() -> None:
    import compiler.lir.passes  # noqa: F401  (registers the built-in passes)


def record(
    lir: LIRFunction, kind: str, name: str, op: str = "", sources: tuple[str, ...] = ()
) -> None:
    """Append a provenance record to the function's journal (see PassEvent.provenance)."""
    lir.meta.setdefault("journal", []).append(ProvenanceRecord(kind, name, op, sources))


def erase(lir: LIRFunction, instr, *, force: bool = False) -> None:
    record(lir, "erase", instr.name, instr.kind)
    lir.erase(instr, force=force)
