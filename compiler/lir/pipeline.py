"""The low-level half of the pipeline: schedule -> IRGen -> LIR passes -> memory planning.

Each step emits a `PassEvent` through the pipeline context exactly as `run_graph_passes` does,
so the IDE and the CLI see the schedule, the generated IR, every LIR pass and the memory plan.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from compiler.errors import CompilerError, PassError
from compiler.graph.ir import Module
from compiler.lir.ir import LIRFunction
from compiler.lir.passes.base import LIRPass, get_lir_pass
from compiler.memory.plan import MemoryPlan, plan_memory
from compiler.passes.manager import PassEvent, PipelineContext
from compiler.scheduling import Schedule, schedule

#: The default order of the low-level optimisations (as in Glow's IR optimizer).
DEFAULT_LIR_PASSES = (
    "peephole",
    "dead-store-elimination",
    "copy-elimination",
    "buffer-sharing",
    "dead-alloc-elimination",
    "hoist-dealloc",
    "sink-alloc",
    "make-weights-const",
)


def lir_opt_passes(names: Sequence[str] = DEFAULT_LIR_PASSES) -> list[LIRPass]:
    """Instances of the named low-level passes (default: the standard order)."""
    return [get_lir_pass(n)() for n in names]


@dataclass
class LowLevelResult:
    schedule: Schedule | None = None
    lir: LIRFunction | None = None
    plan: MemoryPlan | None = None


def _snapshot(lir: LIRFunction, ctx: PipelineContext) -> Any:
    return lir.clone() if ctx.wants_snapshots else lir


def _verify(lir: LIRFunction, pass_name: str) -> None:
    from compiler.lir.verifier import verify_lir

    try:
        verify_lir(lir)
    except CompilerError as e:
        raise PassError(f"low-level IR invalid after pass: {e}", pass_name=pass_name) from e


def run_lir_passes(
    lir: LIRFunction, passes: Sequence[LIRPass], ctx: PipelineContext, stage: str = "lir-opt"
) -> bool:
    """Run low-level passes in order, one event each. Returns whether any changed."""
    any_changed = False
    for p in passes:
        if p.name in ctx.disabled:
            continue
        before = len(lir.code)
        lir.meta["journal"] = []
        t0 = time.perf_counter()
        try:
            changed = p.run(lir)
        except CompilerError as e:
            if isinstance(e, PassError):
                raise
            raise PassError(str(e), pass_name=p.name) from e
        dt = (time.perf_counter() - t0) * 1000
        if ctx.verify:
            _verify(lir, p.name)
        prov = list(lir.meta.get("journal", []))
        any_changed |= changed
        ctx.emit(
            PassEvent(
                ctx.next_index(),
                stage,
                p.name,
                "lir",
                _snapshot(lir, ctx),
                changed,
                dt,
                before,
                len(lir.code),
                prov,
            )
        )
        ctx.check_stop(p.name, stage)
    return any_changed


def run_low_level(
    module: Module,
    options: Any,
    ctx: PipelineContext,
    passes: Sequence[LIRPass] | None = None,
    result: LowLevelResult | None = None,
) -> LowLevelResult:
    """Schedule the main function, generate its LIR, optimise it and plan its memory.

    `result` is filled in as stages finish, so a caller that catches StopPipeline keeps them.
    """
    from compiler.lir.irgen import irgen

    scheduler = getattr(options, "scheduler", "child-mem-size") or "child-mem-size"
    allocator = getattr(options, "allocator", "lower-bound") or "lower-bound"
    result = LowLevelResult() if result is None else result
    fn = module.main

    t0 = time.perf_counter()
    sched = schedule(fn, scheduler)
    result.schedule = sched
    n = len(fn)
    ctx.emit(
        PassEvent(
            ctx.next_index(),
            "schedule",
            scheduler,
            "graph",
            module.clone() if ctx.wants_snapshots else module,
            False,
            (time.perf_counter() - t0) * 1000,
            n,
            n,
            [],
            {
                "peak_bytes": sched.peak_bytes,
                "order": sched.names,
                "live_bytes": list(sched.live_bytes),
                "peak_step": sched.peak_step,
            },
        )
    )
    ctx.check_stop(scheduler, "schedule")

    t0 = time.perf_counter()
    lir = irgen(module, sched.order)
    result.lir = lir
    dt = (time.perf_counter() - t0) * 1000
    if ctx.verify:
        _verify(lir, "irgen")
    ctx.emit(
        PassEvent(
            ctx.next_index(),
            "irgen",
            "irgen",
            "lir",
            _snapshot(lir, ctx),
            True,
            dt,
            n,
            len(lir.code),
        )
    )
    ctx.check_stop("irgen", "irgen")

    run_lir_passes(lir, lir_opt_passes() if passes is None else passes, ctx)

    t0 = time.perf_counter()
    plan = plan_memory(lir, allocator)
    result.plan = plan
    stats = {
        "peak_bytes": plan.peak_bytes,
        "lower_bound_bytes": plan.lower_bound_bytes,
        "no_reuse_bytes": plan.no_reuse_bytes,
        "ratio": plan.ratio,
        "regions": dict(plan.region_sizes),
        "strategy": plan.strategy,
        "peak_instruction": plan.peak_instruction,
    }
    ctx.emit(
        PassEvent(
            ctx.next_index(),
            "memory",
            allocator,
            "lir",
            _snapshot(lir, ctx),
            False,
            (time.perf_counter() - t0) * 1000,
            len(lir.code),
            len(lir.code),
            [],
            stats,
        )
    )
    ctx.check_stop(allocator, "memory")
    return result


__all__ = [
    "DEFAULT_LIR_PASSES",
    "LowLevelResult",
    "lir_opt_passes",
    "run_lir_passes",
    "run_low_level",
]
