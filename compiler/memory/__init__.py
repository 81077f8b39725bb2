"""Memory planning (pipeline step 10): liveness, allocators, the plan and its report."""

from __future__ import annotations

from compiler.memory.allocators import ALIGNMENT, Interval, align, allocate, allocator_names
from compiler.memory.liveness import BufferLiveness, compute_liveness
from compiler.memory.plan import BufferPlacement, MemoryPlan, check_plan, plan_memory
from compiler.memory.report import format_report, memory_report

__all__ = [
    "ALIGNMENT",
    "BufferLiveness",
    "BufferPlacement",
    "Interval",
    "MemoryPlan",
    "align",
    "allocate",
    "allocator_names",
    "check_plan",
    "compute_liveness",
    "format_report",
    "memory_report",
    "plan_memory",
]
