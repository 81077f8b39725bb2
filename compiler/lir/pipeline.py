"""The low-level half of the pipeline: schedule -> IRGen -> LIR passes -> memory planning.

The LIR passes run in the same runner as the graph passes (`compiler.passes.manager.run_passes`)
and the other steps emit their events through the same `PipelineContext.emit_event`, so the IDE
and the CLI see the schedule, the generated IR, every LIR pass and the memory plan alike.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

from compiler.graph.ir import Module
from compiler.lir.ir import LIRFunction
from compiler.lir.passes.base import LIRPass
from compiler.memory.plan import ALIGNMENT, MemoryPlan, plan_memory
from compiler.passes.manager import PassStats, PipelineContext, run_passes, verify_ir
from compiler.passes.registry import get_pass
from compiler.scheduling import DEFAULT_SCHEDULER, Schedule, schedule

#: The default order of the low-level optimisations (as in Glow's IR optimizer).
DEFAULT_LIR_PASSES = (
    "peephole",
    "dead-store-elimination",
    "copy-elimination",
    "zero-copy-concat",
    "sum-post-op",
    "buffer-sharing",
    "dead-alloc-elimination",
    "hoist-dealloc",
    "sink-alloc",
    "make-weights-const",
)


def lir_opt_passes(names: Sequence[str] = DEFAULT_LIR_PASSES) -> list[LIRPass]:
    """Instances of the named low-level passes (default: the standard order)."""
    out: list[LIRPass] = []
    for n in names:
        p = get_pass(n, "lir")()
        assert isinstance(p, LIRPass)
        out.append(p)
    return out


@dataclass
class LowLevelResult:
    schedule: Schedule | None = None
    lir: LIRFunction | None = None
    plan: MemoryPlan | None = None


def run_low_level(
    module: Module,
    options: object,
    ctx: PipelineContext,
    passes: Sequence[LIRPass] | None = None,
    result: LowLevelResult | None = None,
) -> LowLevelResult:
    """Schedule the main function, generate its LIR, optimise it and plan its memory.

    `options` is read for `scheduler` and `allocator` (CompileOptions, or anything with them).
    `result` is filled in as stages finish, so a caller that catches StopPipeline keeps them.
    """
    from compiler.lir.irgen import irgen

    scheduler = getattr(options, "scheduler", None) or DEFAULT_SCHEDULER
    allocator = getattr(options, "allocator", None) or "lower-bound"
    result = LowLevelResult() if result is None else result
    fn = module.main

    t0 = time.perf_counter()
    sched = schedule(fn, scheduler, alignment=ALIGNMENT)
    result.schedule = sched
    n = len(fn)
    sched_stats = PassStats(
        peak_bytes=sched.peak_bytes,
        order=sched.names,
        live_bytes=list(sched.live_bytes),
        peak_step=sched.peak_step,
        # Which scheduler's order this is (optimal falls back when its search runs out), and
        # whether no order can do better.
        scheduler_used=sched.used,
        proven_optimal=sched.proven_optimal,
        lower_bound_bytes=sched.lower_bound_bytes,
        lower_bound_node=sched.lower_bound_node,
    )
    if sched.stats:
        sched_stats["search"] = dict(sched.stats)
    ctx.emit_event(
        stage="schedule",
        pass_name=scheduler,
        ir=module,
        changed=False,
        time_ms=(time.perf_counter() - t0) * 1000,
        count_before=n,
        count_after=n,
        stats=sched_stats,
    )
    ctx.check_stop(scheduler, "schedule")

    t0 = time.perf_counter()
    lir = irgen(module, sched.order)
    lir.meta["alignment"] = ALIGNMENT  # what the planner aligns to; zero-copy slices keep it
    result.lir = lir
    dt = (time.perf_counter() - t0) * 1000
    if ctx.verify:
        verify_ir(lir, "irgen")
    lir.journal.clear()  # IRGen's instructions are new, not provenance of a pass
    ctx.emit_event(
        stage="irgen", pass_name="irgen", ir=lir, changed=True, time_ms=dt, count_before=n
    )
    ctx.check_stop("irgen", "irgen")

    run_passes(lir, lir_opt_passes() if passes is None else passes, "lir-opt", ctx)

    t0 = time.perf_counter()
    plan = plan_memory(lir, allocator, schedule=sched)
    result.plan = plan
    ctx.emit_event(
        stage="memory",
        pass_name=allocator,
        ir=lir,
        changed=False,
        time_ms=(time.perf_counter() - t0) * 1000,
        count_before=len(lir.code),
        stats=PassStats(
            peak_bytes=plan.peak_bytes,
            lower_bound_bytes=plan.lower_bound_bytes,
            no_reuse_bytes=plan.no_reuse_bytes,
            ratio=plan.ratio,
            regions=dict(plan.region_sizes),
            strategy=plan.strategy,
            peak_instruction=plan.peak_instruction,
            aliases=len(plan.aliases),
            # How far from the best any allocator and any schedule could do, and why.
            certificate=plan.certificate.to_json() if plan.certificate else None,
        ),
    )
    ctx.check_stop(allocator, "memory")
    return result


__all__ = [
    "DEFAULT_LIR_PASSES",
    "LowLevelResult",
    "lir_opt_passes",
    "run_low_level",
]
