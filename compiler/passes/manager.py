"""The pass manager: runs named passes in order and calls an observer after every one.

The observer is the only way the IDE and the CLI see the pipeline: each `PassEvent` carries the
stage, the pass name, a snapshot of the IR after the pass, whether it changed anything, the time
and the node/instruction counts before and after, and the provenance the pass recorded.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from compiler.errors import CompilerError, PassError
from compiler.graph.ir import Function, Module, ProvenanceRecord


@dataclass
class PassEvent:
    """What the observer receives after each pass (and after import, lowering, IRGen, ...)."""

    index: int  # position in the whole pipeline, 0-based
    stage: str  # "import", "graph-opt", "lower", "post-lower-opt", "schedule", "irgen", ...
    pass_name: str
    ir_kind: str  # "graph" | "lir"
    ir: Any  # a snapshot (Module clone, or the low-level IR's clone) — safe to keep
    changed: bool
    time_ms: float
    count_before: int
    count_after: int
    provenance: list[ProvenanceRecord] = field(default_factory=list)
    stats: dict[str, Any] = field(default_factory=dict)  # extra figures (e.g. peak bytes)


Observer = Callable[[PassEvent], None]


class GraphPass:
    """Base class of graph passes: a kebab-case `name` and `run(fn) -> changed`."""

    name: ClassVar[str] = ""
    #: Passes that can change memory use (the per-pass memory report follows these).
    affects_memory: ClassVar[bool] = True

    def run(self, fn: Function) -> bool:  # pragma: no cover - abstract
        raise NotImplementedError

    def run_on_module(self, module: Module) -> bool:
        changed = False
        for fn in module.functions:
            changed |= self.run(fn)
        return changed


_REGISTRY: dict[str, type[GraphPass]] = {}


def register_pass(cls: type[GraphPass]) -> type[GraphPass]:
    """Class decorator: make a graph pass available by name."""
    assert cls.name and cls.name not in _REGISTRY, cls.name
    _REGISTRY[cls.name] = cls
    return cls


def get_pass(name: str) -> type[GraphPass]:
    _ensure_loaded()
    try:
        return _REGISTRY[name]
    except KeyError:
        known = ", ".join(sorted(_REGISTRY))
        raise CompilerError(f"unknown pass '{name}' (known passes: {known})") from None


def registered_passes() -> dict[str, type[GraphPass]]:
    _ensure_loaded()
    return dict(_REGISTRY)


def _ensure_loaded() -> None:
    import compiler.passes  # noqa: F401  (registers the built-in passes)


class StopPipeline(Exception):
    """Raised by the pass manager after `stop_after` ran; the pipeline catches it."""

    def __init__(self, pass_name: str) -> None:
        super().__init__(pass_name)
        self.pass_name = pass_name


@dataclass
class PipelineContext:
    """Shared state of one pipeline run: the observer, the running index, options."""

    observer: Observer | None = None
    verify: bool = False
    stop_after: str | None = None
    disabled: frozenset[str] = frozenset()
    index: int = 0
    events: list[PassEvent] = field(default_factory=list)
    keep_events: bool = False

    def emit(self, event: PassEvent) -> None:
        if self.keep_events:
            self.events.append(event)
        if self.observer is not None:
            self.observer(event)
        self.index += 1

    @property
    def wants_snapshots(self) -> bool:
        return self.observer is not None or self.keep_events

    def next_index(self) -> int:
        return self.index

    def check_stop(self, name: str, stage: str) -> None:
        if self.stop_after is not None and self.stop_after in (name, stage):
            raise StopPipeline(name)


def run_graph_passes(
    module: Module, passes: Sequence[GraphPass], stage: str, ctx: PipelineContext
) -> bool:
    """Run graph passes in order, emitting one event each. Returns whether any changed."""
    from compiler.graph.verifier import verify_module

    any_changed = False
    for p in passes:
        if p.name in ctx.disabled:
            continue
        before = module.node_count()
        for fn in module.functions:
            fn.journal.clear()
        t0 = time.perf_counter()
        try:
            changed = p.run_on_module(module)
        except CompilerError as e:
            if isinstance(e, PassError):
                raise
            raise PassError(str(e), pass_name=p.name) from e
        dt = (time.perf_counter() - t0) * 1000
        if ctx.verify:
            try:
                verify_module(module)
            except CompilerError as e:
                raise PassError(f"IR invalid after pass: {e}", pass_name=p.name) from e
        prov = [r for fn in module.functions for r in fn.journal]
        any_changed |= changed
        ctx.emit(
            PassEvent(
                ctx.next_index(),
                stage,
                p.name,
                "graph",
                module.clone() if ctx.wants_snapshots else module,
                changed,
                dt,
                before,
                module.node_count(),
                prov,
            )
        )
        ctx.check_stop(p.name, stage)
    return any_changed
