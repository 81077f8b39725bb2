"""Step 7 of the pipeline: a linear order of the graph's nodes (see `scheduler.py`), measured
and searched with the low-level memory model (`memory_model.py`, `optimal.py`)."""

from __future__ import annotations

from compiler.scheduling.scheduler import (
    DEFAULT_SCHEDULER,
    FALLBACK_SCHEDULER,
    SCHEDULERS,
    Schedule,
    live_bytes_timeline,
    result_bytes,
    schedule,
)

__all__ = [
    "DEFAULT_SCHEDULER",
    "FALLBACK_SCHEDULER",
    "SCHEDULERS",
    "Schedule",
    "live_bytes_timeline",
    "result_bytes",
    "schedule",
]
