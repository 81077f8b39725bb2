"""The whole compile pipeline, stage by stage, observable after every pass.

import -> graph-opt -> lower -> post-lower-opt -> [quantize] -> schedule -> irgen -> lir-opt ->
memory. The quantize stage runs when `CompileOptions.quantize` gives a profile (or `profile`
asks for profile points; compiler/quantization/).
The IDE's session and every CLI command drive compilation only through `compile_model` and the
observer it calls (see compiler/passes/manager.py: PassEvent).
"""

from __future__ import annotations

import difflib
import gc
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import onnx

from compiler.errors import CompilerError
from compiler.graph.ir import Module
from compiler.limits import DEFAULT_FOLD_LIMIT, DEFAULT_MAX_MEMORY
from compiler.passes.manager import (
    IR,
    Observer,
    PassEvent,
    PipelineContext,
    StopPipeline,
    ir_text,
)
from compiler.scheduling import DEFAULT_SCHEDULER

if TYPE_CHECKING:  # the low-level half is imported only when a compile gets there
    from compiler.lir.ir import LIRFunction
    from compiler.memory.plan import MemoryPlan
    from compiler.memory.report import MemoryReport
    from compiler.scheduling import Schedule

#: Stage names, in pipeline order.
STAGES = (
    "import",
    "graph-opt",
    "lower",
    "post-lower-opt",
    "quantize",
    "schedule",
    "irgen",
    "lir-opt",
    "memory",
)


def step_names() -> frozenset[str]:
    """Every name a PassEvent carries as its stage or pass (what `stop_after` matches)."""
    from compiler.memory.allocators import allocator_names
    from compiler.passes.registry import registered_passes
    from compiler.scheduling import SCHEDULERS

    return frozenset(
        {*STAGES, *registered_passes(), "import-onnx", "irgen", *SCHEDULERS, *allocator_names()}
    )


def check_step_names(names: Iterable[str], what: str, *, passes_only: bool = False) -> None:
    """CompilerError for the first name that is no pass (or stage, unless `passes_only`): a
    misspelt name must not silently stop, disable or print nothing. The one check behind every
    option that names a pass (--stop-after, --print-after, --disable-pass, --pass, disable=)."""
    from compiler.passes.registry import registered_passes

    known = frozenset(registered_passes()) if passes_only else step_names()
    for name in names:
        if name not in known:
            kind = "pass" if passes_only else "pass or stage"
            close = difflib.get_close_matches(name, sorted(known), n=1)
            raise CompilerError(
                f"unknown {kind} '{name}' {what}",
                hint=(f"did you mean {close[0]}? " if close else "")
                + "known: "
                + ", ".join(sorted(known)),
            )


@dataclass
class CompileOptions:
    """Everything that changes what the compiler produces."""

    input_shapes: dict[str, tuple[int, ...]] = field(default_factory=dict)
    # Inputs whose values are fixed at compile time (run-time specialization, --const-input).
    const_inputs: dict[str, Any] = field(default_factory=dict)
    scheduler: str = DEFAULT_SCHEDULER
    allocator: str = "lower-bound"
    lowering: str = "cpu"  # the lowering policy (which nodes the backend keeps)
    verify: bool = False  # run the verifier after every pass
    stop_after: str | None = None  # a pass or stage name
    disabled_passes: frozenset[str] = frozenset()
    low_level: bool = True  # run schedule/IRGen/LIR passes/memory planning
    #: bytes the planned arena (and any single tensor) may take; compiler/limits.py
    max_memory: int = DEFAULT_MAX_MEMORY
    #: bytes one tensor computed at compile time (import folding, constant folding) may take
    fold_limit: int = DEFAULT_FOLD_LIMIT
    # int8 quantization from a profile: a QuantizeOptions, a Profile or a profile path.
    quantize: Any = None
    profile: bool = False  # add profile points (compiler/quantize.py runs them)
    threads: int = 1  # threads the LLVM executor's kernels run on (results do not depend on it)


def check_pass_names(names: Sequence[str] | frozenset[str], what: str = "pass") -> None:
    """`check_step_names` for options that name passes only (`what`: the option)."""
    check_step_names(sorted(names), f"({what})", passes_only=True)


def check_stage_name(name: str, what: str = "--stop-after") -> None:
    """`check_step_names` for an option that names one pass or stage (`what`: the option)."""
    check_step_names([name], f"({what})")


def check_options(options: CompileOptions) -> None:
    """Names in the options that match nothing are errors (exit 2 in the CLI), never ignored."""
    if options.stop_after is not None:
        check_step_names([options.stop_after], "to stop after")
    check_step_names(sorted(options.disabled_passes), "to disable", passes_only=True)


def run_config(options: CompileOptions, source: str = "") -> dict[str, Any]:
    """The configuration a memory report records (`config` in `glowviz.memory/1`): what
    produced the plan, so two reports can be compared knowingly (glowviz mem-diff)."""
    import hashlib
    from importlib import metadata

    try:
        version = metadata.version("glowviz")
    except metadata.PackageNotFoundError:  # pragma: no cover - running from a bare checkout
        version = "unknown"
    digest = None
    if source and Path(source).is_file():
        h = hashlib.sha256()
        with open(source, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                h.update(chunk)
        digest = h.hexdigest()
    return {
        "scheduler": options.scheduler,
        "allocator": options.allocator,
        "disabled_passes": sorted(options.disabled_passes),
        "input_shapes": {k: list(v) for k, v in sorted(options.input_shapes.items())},
        "lowering": options.lowering,
        "model_sha256": digest,
        "version": version,
    }


@dataclass
class CompileResult:
    """What a compile produced; fields are None when the pipeline stopped before them."""

    module: Module  # the graph IR at the end of the graph stages
    source: str
    options: CompileOptions
    schedule: Schedule | None = None
    lir: LIRFunction | None = None
    plan: MemoryPlan | None = None
    events: list[PassEvent] = field(default_factory=list)
    stopped_after: str | None = None
    time_ms: float = 0.0

    def memory_report(self) -> MemoryReport | None:
        """The plan as a `MemoryReport` with this compile's configuration (None: no plan)."""
        if self.plan is None:
            return None
        from compiler.memory.report import MemoryReport

        return MemoryReport.from_plan(
            self.plan,
            self.lir,
            self.source,
            self.options.scheduler,
            self.options.allocator,
            schedule=self.schedule,
            config=run_config(self.options, self.source),
        )


_gc_lock = threading.Lock()
_gc_pauses = 0
_gc_was_enabled = True


@contextmanager
def gc_paused() -> Iterator[None]:
    """No automatic cycle collection while compiling (nestable, from any thread): every
    `compile_model` runs in one, and the IDE holds one until a compile is drawn.

    A compile only adds objects that live as long as its stages (the snapshots): on
    DenseNet-121 the collector ran five full collections over the growing heap, 0.4-0.7 s of
    a 1 s compile, and found about 1,500 unreachable objects in all (peak memory the same on
    DenseNet-121 and BERT-base). In a process that compiles many small models beside a large
    heap (the ONNX node suite: 1,884 cases loaded) the collections were 1.6 s of its 11 s.
    What little garbage there is goes at the next collection."""
    global _gc_pauses, _gc_was_enabled
    with _gc_lock:
        if _gc_pauses == 0:
            _gc_was_enabled = gc.isenabled()
            gc.disable()
        _gc_pauses += 1
    try:
        yield
    finally:
        with _gc_lock:
            _gc_pauses -= 1
            if _gc_pauses == 0 and _gc_was_enabled:
                gc.enable()


def import_model(
    model: onnx.ModelProto | str | Path | bytes, options: CompileOptions | None = None
) -> tuple[Module, str]:
    from compiler.frontend import import_onnx

    options = options or CompileOptions()
    source = str(model) if isinstance(model, str | Path) else "<memory>"
    shapes: dict[str, Sequence[int]] = dict(options.input_shapes)
    module = import_onnx(
        model,  # loaded there: the checker then reads the file's bytes, not a re-serialization
        input_shapes=shapes or None,
        const_inputs=options.const_inputs or None,
        name=Path(source).stem if source != "<memory>" else None,
        fold_limit=options.fold_limit,
        source=source if source != "<memory>" else None,
    )
    module.meta.setdefault("source", source)
    return module, source


def compile_model(
    model: onnx.ModelProto | str | Path | bytes | Module,
    options: CompileOptions | None = None,
    observer: Observer | None = None,
    *,
    keep_events: bool = False,
) -> CompileResult:
    """Run the pipeline. `observer` is called after every pass with a PassEvent (snapshots).
    The cycle collector waits meanwhile (`gc_paused`)."""
    with gc_paused():
        return _compile_model(model, options, observer, keep_events=keep_events)


def _compile_model(
    model: onnx.ModelProto | str | Path | bytes | Module,
    options: CompileOptions | None,
    observer: Observer | None,
    *,
    keep_events: bool,
) -> CompileResult:
    from compiler.passes.manager import journals, run_passes
    from compiler.passes.pipelines import graph_opt_passes, lowering_pass, post_lowering_passes

    options = options or CompileOptions()
    check_options(options)
    ctx = PipelineContext(
        observer=observer,
        verify=options.verify,
        stop_after=options.stop_after,
        disabled=options.disabled_passes,
        keep_events=keep_events,
    )
    t_start = time.perf_counter()
    t0 = time.perf_counter()
    if isinstance(model, Module):
        module, source = model, str(model.meta.get("source", "<module>"))
    else:
        module, source = import_model(model, options)
    module.meta["fold_limit"] = options.fold_limit
    check_tensor_sizes(module, options.max_memory)
    if options.verify:
        from compiler.graph.verifier import verify_module

        verify_module(module)
    result = CompileResult(module=module, source=source, options=options)
    ctx.emit_event(
        stage="import",
        pass_name="import-onnx",
        ir=module,
        changed=True,
        time_ms=(time.perf_counter() - t0) * 1000,
        count_before=0,
        provenance=[r for journal in journals(module) for r in journal],
    )
    for journal in journals(module):
        journal.clear()
    low = None
    try:
        ctx.check_stop("import-onnx", "import")
        run_passes(module, graph_opt_passes(), "graph-opt", ctx)
        run_passes(module, [lowering_pass(options.lowering)], "lower", ctx)
        run_passes(module, post_lowering_passes(), "post-lower-opt", ctx)
        if options.profile or options.quantize is not None:
            from compiler.passes.pipelines import quantize_passes

            run_passes(module, quantize_passes(options), "quantize", ctx)
        if options.low_level:
            from compiler.lir.pipeline import LowLevelResult, run_low_level

            low = LowLevelResult()
            run_low_level(module, options, ctx, result=low)
    except StopPipeline as stop:
        result.stopped_after = stop.pass_name
    if low is not None:
        result.schedule, result.lir, result.plan = low.schedule, low.lir, low.plan
        if low.plan is not None:
            from compiler.limits import check_memory

            sizes = low.plan.region_sizes
            check_memory(
                "the memory plan ("
                + ", ".join(
                    f"{r} {sizes.get(r, 0)} B" for r in ("constant", "mutable", "activations")
                )
                + ")",
                sum(sizes.values()),
                options.max_memory,
            )
    result.events = ctx.events
    result.time_ms = (time.perf_counter() - t_start) * 1000
    return result


def check_tensor_sizes(module: Module, limit: int) -> None:
    """Refuse a graph with any single tensor above `limit` bytes, before any pass or kernel
    could try to allocate it (an input dim of 1e9, a Tile or Resize to a huge shape)."""
    from compiler.limits import check_memory

    for p in module.placeholders.values():
        check_memory(
            f"{'output' if p.is_output else 'input'} '{p.name}' ({p.type})",
            p.type.size_bytes,
            limit,
        )
    for fn in module.functions:
        for node in fn.nodes:
            for r in node.results:
                check_memory(
                    f"node '{node.name}' ({node.op}) result {r.type}", r.type.size_bytes, limit
                )


