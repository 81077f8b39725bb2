"""Memory planning (pipeline step 10): liveness, allocators, the plan and its report."""

from __future__ import annotations

from compiler.memory.allocators import Interval, allocate, allocator_names
from compiler.memory.liveness import BufferLiveness, compute_liveness
from compiler.memory.plan import BufferPlacement, MemoryPlan, check_plan, plan_memory
from compiler.memory.regions import ALIGNMENT, REGIONS, align
from compiler.memory.report import MemoryReport, ReportBuffer, format_report

__all__ = [
    "ALIGNMENT",
    "BufferLiveness",
    "BufferPlacement",
    "Interval",
    "MemoryPlan",
    "MemoryReport",
    "REGIONS",
    "ReportBuffer",
    "align",
    "allocate",
    "allocator_names",
    "check_plan",
    "compute_liveness",
    "format_report",
    "plan_memory",
]
