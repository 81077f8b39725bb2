"""The pass manager of both IRs: one runner that runs named passes in order and calls an
observer after every one.

The observer is the only way the IDE and the CLI see the pipeline: each `PassEvent` carries the
stage, the pass name, a snapshot of the IR after the pass, whether it changed anything, the time
and the node/instruction counts before and after, and the provenance the IR's journal collected
while the pass ran. `PipelineContext.emit_event` is the one place events are built, for passes
and for the stages that are not passes (import, schedule, IRGen, memory planning).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypedDict

import numpy as np

from compiler.errors import CompilerError, PassError
from compiler.graph.ir import Function, Module
from compiler.lir.ir import LIRFunction
from compiler.provenance import Journal, ProvenanceRecord

IR = Module | LIRFunction


class PassStats(TypedDict, total=False):
    """The figures a stage adds to its event: the scheduler's and the memory planner's."""

    peak_bytes: int
    order: list[str]  # schedule: node names in the chosen order
    live_bytes: list[int]  # schedule: live activation bytes after each step
    peak_step: int
    lower_bound_bytes: int  # memory: the plan's bounds and the allocator's result
    no_reuse_bytes: int
    ratio: float
    regions: dict[str, int]
    strategy: str
    peak_instruction: int
    scheduler_used: str  # schedule: optimal falls back when its search runs out
    proven_optimal: bool  # schedule: no order of this function has a lower peak
    lower_bound_node: str  # schedule: the operator behind the all-schedules bound
    search: dict[str, Any]  # schedule: the optimal search's deterministic figures
    aliases: int  # memory: buffers sharing bytes with another by design
    certificate: dict[str, Any] | None  # memory: compiler.memory.certificate.Certificate


@dataclass(kw_only=True)
class PassEvent:
    """What the observer receives after each pass (and after import, lowering, IRGen, ...)."""

    index: int  # position in the whole pipeline, 0-based
    stage: str  # "import", "graph-opt", "lower", "post-lower-opt", "schedule", "irgen", ...
    pass_name: str
    ir_kind: str  # "graph" | "lir"
    ir: Module | LIRFunction  # a snapshot (a clone when anyone keeps events) — safe to keep
    changed: bool
    time_ms: float
    count_before: int
    count_after: int
    provenance: list[ProvenanceRecord] = field(default_factory=list)
    stats: PassStats = field(default_factory=PassStats)  # extra figures


Observer = Callable[[PassEvent], None]


# -- what the runner needs to know about each IR ---------------------------------------------


def ir_kind(ir: IR) -> str:
    return "graph" if isinstance(ir, Module) else "lir"


def ir_size(ir: IR) -> int:
    """Nodes of a Module, instructions of a low-level function."""
    return ir.node_count() if isinstance(ir, Module) else ir.instruction_count()


def journals(ir: IR) -> list[Journal]:
    return [fn.journal for fn in ir.functions] if isinstance(ir, Module) else [ir.journal]


def ir_text(ir: IR) -> str:
    """Text of a snapshot from a PassEvent: graph IR Module or low-level IR function."""
    from compiler.graph.printer import print_module
    from compiler.lir.printer import print_lir

    return print_module(ir) if isinstance(ir, Module) else print_lir(ir)


def verify_ir(ir: IR, pass_name: str) -> None:
    """Run the IR's verifier; a failure is the pass's fault."""
    from compiler.graph.verifier import verify_module
    from compiler.lir.verifier import verify_lir

    try:
        if isinstance(ir, Module):
            verify_module(ir)
        else:
            verify_lir(ir)
    except CompilerError as e:
        what = "IR" if isinstance(ir, Module) else "low-level IR"
        raise PassError(f"{what} invalid after pass: {e}", pass_name=pass_name) from e


# -- passes ----------------------------------------------------------------------------------


class Pass:
    """A pass: a kebab-case `name`, typed options (constructor arguments or dataclass fields)
    and `apply(ir) -> changed`. Listed by name in `compiler.passes.registry`."""

    name: ClassVar[str] = ""
    ir_kind: ClassVar[str] = ""  # "graph" | "lir": the IR `apply` takes
    #: Passes that can change memory use (the per-pass memory report follows these).
    affects_memory: ClassVar[bool] = True

    def apply(self, ir: Any) -> bool:  # pragma: no cover - abstract
        raise NotImplementedError


class GraphPass(Pass):
    """A graph pass: `run(fn) -> changed` on each Function of the Module."""

    ir_kind = "graph"

    def run(self, fn: Function) -> bool:  # pragma: no cover - abstract
        raise NotImplementedError

    def run_on_module(self, module: Module) -> bool:
        changed = False
        for fn in module.functions:
            changed |= self.run(fn)
        return changed

    def apply(self, ir: Module) -> bool:
        return self.run_on_module(ir)


# -- the pipeline ----------------------------------------------------------------------------


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
    #: (the IR, the last event's copy of it): what an unchanged pass's event shares.
    _last_snapshot: tuple[IR, IR] | None = field(default=None, repr=False)

    def emit(self, event: PassEvent) -> None:
        if self.keep_events:
            self.events.append(event)
        if self.observer is not None:
            self.observer(event)
        self.index += 1

    def emit_event(
        self,
        *,
        stage: str,
        pass_name: str,
        ir: IR,
        changed: bool,
        time_ms: float,
        count_before: int,
        count_after: int | None = None,
        provenance: Iterable[ProvenanceRecord] = (),
        stats: PassStats | None = None,
    ) -> None:
        """Build the event of one pass or stage (the IR as it is now) and emit it."""
        records = list(provenance)
        self.emit(
            PassEvent(
                index=self.index,
                stage=stage,
                pass_name=pass_name,
                ir_kind=ir_kind(ir),
                ir=self._snapshot(ir, changed, records, pass_name),
                changed=changed,
                time_ms=time_ms,
                count_before=count_before,
                count_after=ir_size(ir) if count_after is None else count_after,
                provenance=records,
                stats=PassStats(**(stats or {})),
            )
        )

    def _snapshot(
        self, ir: IR, changed: bool, records: list[ProvenanceRecord], pass_name: str
    ) -> IR:
        """The IR as the event carries it: a copy (snapshots are never modified), or after a
        pass that changed nothing (and recorded nothing) the previous event's copy of the same
        IR: a DenseNet-121 compile copied a 1,000-node graph 42 times, 33 of them unchanged
        (~0.1 s of its ~0.45 s). With `verify`, the pass's word is checked: the IR must still
        print as the shared copy does."""
        if not self.wants_snapshots:
            return ir
        last = self._last_snapshot
        if not changed and not records and last is not None and last[0] is ir:
            snapshot = last[1]
            if self.verify and ir_text(ir) != ir_text(snapshot):
                raise PassError(
                    "the pass changed the IR but reported no change", pass_name=pass_name
                )
        else:
            snapshot = ir.clone()
        self._last_snapshot = (ir, snapshot)
        return snapshot

    @property
    def wants_snapshots(self) -> bool:
        return self.observer is not None or self.keep_events

    def check_stop(self, name: str, stage: str) -> None:
        if self.stop_after is not None and self.stop_after in (name, stage):
            raise StopPipeline(name)


def run_passes(ir: IR, passes: Sequence[Pass], stage: str, ctx: PipelineContext) -> bool:
    """Run passes of either IR in order, emitting one event each. Returns whether any changed.

    The IR's journals are cleared before each pass, so an event's provenance is exactly what
    that pass did.
    """
    kind = ir_kind(ir)
    any_changed = False
    for p in passes:
        if p.name in ctx.disabled:
            continue
        if p.ir_kind != kind:
            raise PassError(f"a {p.ir_kind} pass cannot run on the {kind} IR", pass_name=p.name)
        before = ir_size(ir)
        for journal in journals(ir):
            journal.clear()
        t0 = time.perf_counter()
        try:
            # Passes compute on constants with numpy, where NaN and Inf are data (NaN weights,
            # a negative BatchNorm variance fold into NaN as onnxruntime computes them).
            with np.errstate(all="ignore"):
                changed = p.apply(ir)
        except CompilerError as e:
            if isinstance(e, PassError):
                raise
            raise PassError(str(e), pass_name=p.name) from e
        dt = (time.perf_counter() - t0) * 1000
        if ctx.verify:
            verify_ir(ir, p.name)
        any_changed |= changed
        ctx.emit_event(
            stage=stage,
            pass_name=p.name,
            ir=ir,
            changed=changed,
            time_ms=dt,
            count_before=before,
            provenance=[r for journal in journals(ir) for r in journal],
        )
        ctx.check_stop(p.name, stage)
    return any_changed


__all__ = [
    "GraphPass",
    "IR",
    "Observer",
    "Pass",
    "PassEvent",
    "PipelineContext",
    "StopPipeline",
    "ir_kind",
    "ir_size",
    "ir_text",
    "journals",
    "run_passes",
    "verify_ir",
]
