"""Step 7 of the pipeline: a linear order of the graph's nodes (see `scheduler.py`)."""

from __future__ import annotations

from compiler.scheduling.scheduler import (
    SCHEDULERS,
    Schedule,
    live_bytes_timeline,
    result_bytes,
    schedule,
)

__all__ = ["SCHEDULERS", "Schedule", "live_bytes_timeline", "result_bytes", "schedule"]
