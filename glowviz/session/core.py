"""The compile session core: the pipeline run once through the observer, every stage kept.

`CompileSession` compiles (in a worker thread if wanted), records each `PassEvent` as a
`StageRecord` and turns failures into a `SessionError`. The plain view data it serves lives in
`glowviz.session.views` (a mixin), the debugger in `glowviz.session.debugger`.
"""

from __future__ import annotations

import hashlib
import threading
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from compiler.errors import CompilerError
from compiler.graph.ir import Module
from compiler.lir.ir import LIRFunction
from compiler.passes.manager import IR, PassStats
from compiler.pipeline import CompileOptions, CompileResult, compile_model, gc_paused, ir_text
from compiler.provenance import ProvenanceRecord
from glowviz import resources
from glowviz.diff import GraphDiff
from glowviz.session.views import SessionViewData

if TYPE_CHECKING:
    from compiler.passes.manager import PassEvent
    from glowviz.session.debugger import Debugger, SteppingExecutor
    from glowviz.session.quant import QuantAnalysis

DEFAULT_MODEL = "sample_models/resnet_small.onnx"


def default_model_path() -> str:
    return str(resources.default_model())


@dataclass
class SessionError:
    """A compile failure as the IDE shows it: message, failing pass and node (where known)."""

    message: str
    kind: str = "CompilerError"
    pass_name: str | None = None
    node: str | None = None
    stage: str | None = None
    internal: bool = False  # not a CompilerError: a bug; the traceback is kept
    traceback: str = ""

    def headline(self) -> str:
        where = []
        if self.pass_name:
            where.append(f"pass {self.pass_name}")
        if self.node:
            where.append(f"node {self.node}")
        return f"{self.kind}" + (f" in {', '.join(where)}" if where else "") + f": {self.message}"


@dataclass
class StageRecord:
    """One observed pass: what the pipeline reported, plus lazily computed text and hash."""

    index: int
    stage: str
    pass_name: str
    changed: bool
    count_before: int
    count_after: int
    time_ms: float
    ir_kind: str
    ir: IR  # the snapshot after the pass: a graph Module or a low-level function
    provenance: list[ProvenanceRecord] = field(default_factory=list)
    stats: PassStats = field(default_factory=PassStats)
    _text: str | None = field(default=None, repr=False)
    _hash: str | None = field(default=None, repr=False)
    #: The stage before, when this one's snapshot is the same object (a pass that changed
    #: nothing shares the previous snapshot): its text and hash are this one's too.
    _same_as: StageRecord | None = field(default=None, repr=False)

    @property
    def label(self) -> str:
        return f"{self.stage}/{self.pass_name}"

    @property
    def module(self) -> Module:
        """The snapshot of a graph stage."""
        assert isinstance(self.ir, Module), f"{self.label} is a {self.ir_kind} stage"
        return self.ir

    @property
    def lir(self) -> LIRFunction:
        """The snapshot of a low-level stage."""
        assert isinstance(self.ir, LIRFunction), f"{self.label} is a {self.ir_kind} stage"
        return self.ir

    @property
    def text(self) -> str:
        if self._text is None:
            same = self._same_as
            self._text = same.text if same is not None else ir_text(self.ir)
        return self._text

    @property
    def has_text(self) -> bool:
        """Whether the text and its hash are computed (printing a big IR takes a while)."""
        return self._hash is not None or (self._same_as is not None and self._same_as.has_text)

    @property
    def ir_hash(self) -> str:
        if self._hash is None:
            same = self._same_as
            if same is not None:
                self._hash = same.ir_hash
            else:
                self._hash = hashlib.sha1(self.text.encode()).hexdigest()[:16]
        return self._hash

    def to_dict(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "stage": self.stage,
            "pass": self.pass_name,
            "changed": self.changed,
            "count_before": self.count_before,
            "count_after": self.count_after,
            "time_ms": round(self.time_ms, 3),
            "ir_kind": self.ir_kind,
        }


ProgressFn = Callable[[StageRecord], None]

class CompileSession(SessionViewData):
    """One model compiled with one set of options; every stage kept."""

    def __init__(
        self,
        model_path: str | None = None,
        options: CompileOptions | None = None,
        *,
        compile_fn: Callable[..., CompileResult] | None = None,
    ) -> None:
        self.model_path = model_path or default_model_path()
        self.options = options
        self._compile_fn = compile_fn or compile_model
        self.stages: list[StageRecord] = []
        self.result: CompileResult | None = None
        self.error: SessionError | None = None
        self.low_level_reason: str | None = None  # why schedule/LIR/memory are missing
        self.done = False
        self.time_ms = 0.0
        self._diff_cache: dict[tuple[int, int], GraphDiff] = {}
        self._lock = threading.Lock()
        self.debugger: Debugger | None = None
        self._debugger_lock = threading.Lock()
        #: Builds the debugger's executor; None means LLVM (the interpreter if codegen fails).
        self.executor_factory: Callable[[CompileSession], SteppingExecutor] | None = None
        #: With `executor_factory`: the reference run in lock-step (None: no comparison).
        self.reference_factory: Callable[[CompileSession], SteppingExecutor] | None = None
        self._view_cache: dict[Any, Any] = {}
        self._quant: QuantAnalysis | None = None
        #: How many computations a user is waiting for right now (`foreground`): background
        #: work (the IDE's warm-up) pauses for them. Threads share one interpreter lock, so a
        #: warm-up running beside a view's computation would halve its speed.
        self._foreground = 0
        self._idle = threading.Condition()

    # -- compiling ----------------------------------------------------------------------------
    @property
    def model_name(self) -> str:
        return Path(self.model_path).name

    @property
    def notes(self) -> list[str]:
        """What the frontend noted about the model (an opset upgrade, the inputs it was
        specialized on), from the imported module's `meta["notes"]`."""
        for rec in self.stages:
            if isinstance(rec.ir, Module):
                return list(rec.ir.meta.get("notes", ()))
        return []

    def _options(self) -> CompileOptions:
        if self.options is None:
            self.options = CompileOptions()
        return self.options

    def _recompile(self, options: CompileOptions) -> CompileSession:
        return CompileSession(self.model_path, options, compile_fn=self._compile_fn).compile()

    def compile(self, progress: ProgressFn | None = None) -> CompileSession:
        """Run the pipeline (callable from a worker thread); `progress` gets each new stage."""
        self.stages, self.result, self.error, self.done = [], None, None, False
        self.low_level_reason = None
        self._diff_cache.clear()
        self._view_cache.clear()
        self.debugger = None

        def observe(ev: PassEvent) -> None:
            rec = StageRecord(
                ev.index,
                ev.stage,
                ev.pass_name,
                ev.changed,
                ev.count_before,
                ev.count_after,
                ev.time_ms,
                ev.ir_kind,
                ev.ir,
                list(ev.provenance),
                PassStats(**ev.stats),
            )
            with self._lock:
                if self.stages and self.stages[-1].ir is rec.ir:
                    rec._same_as = self.stages[-1]
                self.stages.append(rec)
            if progress is not None:
                progress(rec)

        try:
            if not Path(self.model_path).exists():
                raise FileNotFoundError(f"model file not found: {self.model_path}")
            with gc_paused():
                self.result = self._compile_fn(self.model_path, self._options(), observe)
            self.time_ms = self.result.time_ms
            self._check_low_level()
        except CompilerError as e:
            self.error = SessionError(
                e.message if not getattr(e, "pass_name", None) else str(e),
                type(e).__name__,
                getattr(e, "pass_name", None) or self._next_pass_guess(),
                getattr(e, "node", None) or getattr(e, "instruction", None),
                self.stages[-1].stage if self.stages else "import",
            )
        except FileNotFoundError as e:
            self.error = SessionError(str(e), "ModelLoadError", "import-onnx")
        except Exception as e:  # noqa: BLE001 - an internal bug: show it, keep the IDE alive
            self.error = SessionError(
                f"{type(e).__name__}: {e}",
                "InternalError",
                self._next_pass_guess(),
                None,
                internal=True,
                traceback=traceback.format_exc(),
            )
        self.done = True
        return self

    def _next_pass_guess(self) -> str | None:
        return None if not self.stages else f"after {self.stages[-1].pass_name}"

    def _check_low_level(self) -> None:
        r = self.result
        assert r is not None
        if r.stopped_after:
            self.low_level_reason = f"pipeline stopped after {r.stopped_after}"
        elif r.plan is None and r.lir is None:
            if not r.options.low_level:
                self.low_level_reason = "low-level stages disabled (options.low_level=False)"
            else:
                self.low_level_reason = "low-level stages produced nothing"

    # -- stages -------------------------------------------------------------------------------
    def stage(self, i: int) -> StageRecord:
        return self.stages[i]

    def stage_index(self, name: str) -> int | None:
        """The last stage whose pass or stage name (or label) is `name`."""
        for rec in reversed(self.stages):
            if name in (rec.pass_name, rec.stage, rec.label):
                return self.stages.index(rec)
        return None

    def graph_stage_at_or_before(self, i: int) -> int | None:
        for j in range(min(i, len(self.stages) - 1), -1, -1):
            if self.stages[j].ir_kind == "graph":
                return j
        return None

    def prefetch(self, i: int) -> None:
        """Compute (and cache) what the views show for stage `i` (from a worker thread)."""
        rec = self.stages[i]
        rec.ir_hash  # noqa: B018 - computes the text and its hash
        if rec.ir_kind == "graph":
            self.graph_nodes(i)
        self.diff_prev(i)

    def prefetch_plans(self, i: int) -> None:
        """Compute (and cache) what the Schedule, Lifetimes and Memory views plan for stage
        `i` (from a worker thread): a graph stage's schedules and memory plan run the
        low-level pipeline (~0.1 s of CPU on DenseNet-121, which the first of those views
        shown on the stage waited for)."""
        rec = self.stages[i]
        self.schedules(i)
        if rec.ir_kind == "graph" and rec.stage != "schedule":
            self.program_order(i)
        self.memory_report(i)

    @contextmanager
    def foreground(self) -> Iterator[None]:
        """Mark a computation a user waits for (a view's data): `wait_for_foreground` holds
        background work until none is running."""
        with self._idle:
            self._foreground += 1
        try:
            yield
        finally:
            with self._idle:
                self._foreground -= 1
                self._idle.notify_all()

    def wait_for_foreground(self, timeout: float = 30.0) -> None:
        """Background work calls this between its items: it returns when no foreground
        computation runs (or after `timeout`, so background work is never starved forever)."""
        with self._idle:
            self._idle.wait_for(lambda: self._foreground == 0, timeout=timeout)

    def prefetch_order(self, around: int | None) -> list[int]:
        """Every stage, nearest to `around` first (the stages a user steps to next)."""
        n = len(self.stages)
        if around is None:
            return list(range(n))
        return sorted(range(n), key=lambda i: (abs(i - around), i < around))

    def stage_table(self) -> list[dict[str, Any]]:
        return [r.to_dict() for r in self.stages]

    # -- debugger -----------------------------------------------------------------------------
    def get_debugger(self) -> Debugger:
        """The debugger (built once: JIT-compiles the LLVM kernels; call from a worker)."""
        from glowviz.session.debugger import Debugger

        with self._debugger_lock:
            if self.debugger is None:
                self.debugger = Debugger(self)
            return self.debugger

    # -- quantization -------------------------------------------------------------------------
    @property
    def quantized(self) -> bool:
        """Whether the session compiles with --quantize."""
        return self.options is not None and self.options.quantize is not None

    def quant(self) -> QuantAnalysis | None:
        """The quantization data (per-node SQNR, histograms, what-ifs) of a --quantize session,
        built once; None when not quantizing. Its report is slow: call it from a worker."""
        if not self.quantized:
            return None
        from glowviz.session.quant import QuantAnalysis

        assert self.options is not None
        with self._lock:
            if self._quant is None:
                self._quant = QuantAnalysis(self.model_path, self.options)
            return self._quant
