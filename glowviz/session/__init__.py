"""A compile session: the pipeline run once through the observer, every stage kept for the views
(the session layer: above glowviz.core, below the exports, the CLI and the IDE).

Textual-free: the IDE and `glowviz export` share it. View data comes out as plain data or the
compiler's own objects (`graph_nodes`, `diff`, `schedules`, `memory_report` — a
`compiler.memory.report.MemoryReport` for any stage —, `instructions`, `compare_memory_report`);
the debugger state lives here too (`Debugger`, over a small stepping-executor interface).

Modules: `core` (stages, compile, errors), `views` (the view data, a mixin of the session),
`memcompare` (the Memory view's side-by-side comparison data), `debugger` (stepping executors,
breakpoints, comparison with the reference), `util` (byte formatting). Every public name is
importable from `glowviz.session`.
"""

from __future__ import annotations

from glowviz.session.core import (
    DEFAULT_MODEL,
    CompileSession,
    ProgressFn,
    SessionError,
    StageRecord,
    default_model_path,
    gc_paused,
)
from glowviz.session.debugger import (
    ATOL,
    RTOL,
    ULPS,
    ArenaStepper,
    Debugger,
    LLVMStepper,
    SteppingExecutor,
    array_stats,
    compare_arrays,
    divergence_text,
    full_precision,
    parse_slice,
    slice_2d,
    slice_spec,
    slice_view,
)
from glowviz.session.util import fmt_bytes

__all__ = [
    "ATOL",
    "DEFAULT_MODEL",
    "RTOL",
    "ULPS",
    "ArenaStepper",
    "CompileSession",
    "Debugger",
    "LLVMStepper",
    "ProgressFn",
    "SessionError",
    "StageRecord",
    "SteppingExecutor",
    "array_stats",
    "compare_arrays",
    "divergence_text",
    "default_model_path",
    "fmt_bytes",
    "full_precision",
    "gc_paused",
    "parse_slice",
    "slice_2d",
    "slice_spec",
    "slice_view",
]
