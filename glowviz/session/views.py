"""The view data of a compile session: graph rows, node detail and history, stage diffs, the
schedules, the memory report of any stage, the final LIR's instructions, the memory comparison.

The IDE's views and the exports both read it (the exports never rebuild what is here).
`SessionViewData` is a mixin of `CompileSession` (it reads `stages`, `result`, `options`,
`error`, `low_level_reason`, `done` and the caches the session resets on every compile).
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from compiler.errors import CompilerError
from compiler.lir.pipeline import LowLevelResult
from compiler.memory.report import MemoryReport
from compiler.scheduling import SCHEDULERS, Schedule, schedule
from glowviz.diff import (
    GraphDiff,
    NodeSummary,
    Rewrite,
    RewriteDiff,
    TextIndex,
    diff_modules,
    diff_texts,
    group_rewrites,
    rewrite_diff,
    summarize_nodes,
)

if TYPE_CHECKING:
    from compiler.pipeline import CompileOptions, CompileResult
    from glowviz.session.core import SessionError, StageRecord


_LOCKS_LOCK = threading.Lock()
#: The low-level passes that only tighten lifetimes (markers next to the first and last use,
#: allocations nobody uses gone): `stage_memory` applies them to every stage it plans.
TIGHTENING_PASSES = ("dead-alloc-elimination", "hoist-dealloc", "sink-alloc")


class SessionViewData:
    """Graph, diff, schedule, memory and instruction data of a `CompileSession`."""

    stages: list[StageRecord]
    result: CompileResult | None
    error: SessionError | None
    low_level_reason: str | None
    done: bool
    model_path: str
    _view_cache: dict[Any, Any]
    #: Called (from whichever thread computed it) with (key, value) for each piece of view
    #: data computed and cached: how the IDE shows progress of a long series (the memory
    #: timeline plans one stage after another).
    view_data_listener: Callable[[Any, Any], None] | None = None
    _diff_cache: dict[tuple[int, int], GraphDiff]

    def _options(self) -> CompileOptions:  # pragma: no cover - CompileSession's
        raise NotImplementedError

    def _recompile(self, options: CompileOptions) -> SessionViewData:  # pragma: no cover
        """The same model compiled with `options` (CompileSession's)."""
        raise NotImplementedError

    def _cached(self, key: Any, fn: Callable[[], Any]) -> Any:
        """View data computed once per compile (the IR snapshots never change); what depends on
        the compile's result is not kept before the compile is done. Computed once even when
        several threads ask at the same time (a view's worker and the memory timeline's)."""
        if not self.done and self._needs_result(key):
            return fn()
        try:
            return self._view_cache[key]
        except KeyError:
            pass
        with self._key_lock(key):
            if key not in self._view_cache:
                self._view_cache[key] = fn()
                listener = self.view_data_listener
                if listener is not None:
                    listener(key, self._view_cache[key])
            return self._view_cache[key]

    def _needs_result(self, key: Any) -> bool:
        """Whether the view data `key` reads the compile's result (final plan, final LIR)."""
        if key[0] == "instructions":
            return True
        if key[0] in ("low_level", "memory_report", "schedules", "buffer_info"):
            return self._is_final(key[1])
        return False

    def _key_lock(self, key: Any) -> threading.Lock:
        with _LOCKS_LOCK:
            locks = self.__dict__.setdefault("_key_locks", {})
            return locks.setdefault(key, threading.Lock())

    def is_cached(self, what: str, i: int | None = None) -> bool:
        """Whether view data `what` ("memory_report", "schedules", ...) of stage `i` is ready,
        so a view can draw it at once instead of asking a worker."""
        key = (what, i)
        return key in self._view_cache and (self.done or not self._needs_result(key))

    # -- graph view data ----------------------------------------------------------------------
    def _same_snapshot(self, i: int) -> int | None:
        """The first of the stages before `i` that share its IR snapshot (passes that changed
        nothing keep the snapshot object): what is computed from the snapshot alone is the
        same for all of them, and computed once. None if stage `i` has its own."""
        j = None
        same = self.stages[i]._same_as
        while same is not None:
            j, same = same.index, same._same_as
        return j

    def graph_nodes(self, i: int) -> list[dict[str, Any]]:
        """One row per value of a graph stage: placeholders, nodes in order, then constants."""
        j = self._same_snapshot(i)
        if j is not None:
            return self.graph_nodes(j)
        return self._cached(("graph_nodes", i), lambda: self._graph_nodes(i))

    def node_summaries(self, i: int) -> dict[str, NodeSummary]:
        """`summarize_nodes` of graph stage `i`'s snapshot (what diffs compare), made once."""
        j = self._same_snapshot(i)
        if j is not None:
            return self.node_summaries(j)
        return self._cached(("node_summaries", i), lambda: summarize_nodes(self.stages[i].module))

    def _graph_nodes(self, i: int) -> list[dict[str, Any]]:
        rec = self.stages[i]
        if rec.ir_kind != "graph":
            return []
        from compiler.graph.printer import format_attr

        m = rec.module
        rows: list[dict[str, Any]] = []
        for p in m.placeholders.values():
            rows.append(
                {
                    "kind": "output" if p.is_output else "input",
                    "name": p.name,
                    "op": "Placeholder",
                    "type": str(p.type),
                    "inputs": [],
                    "users": [u.name for u in p.user_nodes()],
                    "attrs": {},
                }
            )
        for fn in m.functions:
            for n in fn.nodes:
                users: list[str] = []
                for r in n.results:
                    users.extend(u.name for u in r.user_nodes())
                rows.append(
                    {
                        "kind": n.opdef.category,
                        "name": n.name,
                        "op": n.op,
                        "type": ", ".join(str(r.type) for r in n.results),
                        "inputs": [v.name for v in n.operands],
                        "users": users,
                        "attrs": {k: format_attr(v) for k, v in n.attrs.items()},
                    }
                )
        for c in m.constants.values():
            rows.append(
                {
                    "kind": "constant",
                    "name": c.name,
                    "op": "Constant",
                    "type": str(c.type),
                    "inputs": [],
                    "users": [u.name for u in c.user_nodes()],
                    "attrs": {},
                }
            )
        return rows

    def node_detail(self, i: int, name: str) -> dict[str, Any] | None:
        rec = self.stages[i]
        if rec.ir_kind != "graph":
            return None
        row = next((r for r in self.graph_nodes(i) if r["name"] == name), None)
        if row is None:
            return None
        detail = dict(row)
        node = next((n for fn in rec.module.functions if (n := fn.find(name)) is not None), None)
        if node is not None:
            d = node.opdef
            detail["doc"], detail["traits"] = d.doc, sorted(d.traits)
            detail["operand_names"] = list(d.operands)
            detail["input_types"] = [str(v.type) for v in node.operands]
            detail["origin"] = list(node.meta.get("origin", ()))
        detail["history"] = self.node_history(name, upto=i)
        return detail

    def node_history(self, name: str, upto: int | None = None) -> list[str]:
        """Every provenance record that mentions `name`, with the pass that wrote it."""
        out = []
        for rec in self.stages[: (upto + 1) if upto is not None else None]:
            for r in rec.provenance:
                if r.node == name or name in r.sources:
                    src = " + ".join(r.sources)
                    out.append(
                        f"{rec.pass_name}: {r.kind} {r.node}" + (f" <- {src}" if src else "")
                    )
        return out

    def neighbourhood(
        self, i: int, name: str, radius: int = 2, limit: int = 40
    ) -> tuple[list[dict[str, Any]], list[tuple[str, str]]]:
        """Nodes within `radius` edges of `name` (constants left out), and the edges among them."""
        rows = {r["name"]: r for r in self.graph_nodes(i) if r["kind"] != "constant"}
        if name not in rows:
            return [], []
        keep = {name}
        frontier = {name}
        for _ in range(radius):
            nxt: set[str] = set()
            for n in frontier:
                r = rows[n]
                nxt.update(x for x in r["inputs"] + r["users"] if x in rows)
            nxt -= keep
            keep |= set(sorted(nxt)[: max(0, limit - len(keep))])
            frontier = nxt
        nodes = [rows[n] for n in rows if n in keep]
        edges = [(src, n["name"]) for n in nodes for src in n["inputs"] if src in keep]
        return nodes, edges

    # -- diffs --------------------------------------------------------------------------------
    def diff(self, a: int, b: int) -> GraphDiff:
        """What changed from stage `a` to stage `b` (cached); provenance of the passes between."""
        key = (a, b)
        if key in self._diff_cache:
            return self._diff_cache[key]
        with self._key_lock(("diff", a, b)):  # a view's worker and the warm-up compute it once
            if key not in self._diff_cache:
                self._diff_cache[key] = self._diff(a, b)
        return self._diff_cache[key]

    def has_diff(self, a: int, b: int) -> bool:
        """Whether `diff(a, b)` is computed (a view then draws it at once)."""
        return (a, b) in self._diff_cache

    def _diff(self, a: int, b: int) -> GraphDiff:
        ra, rb = self.stages[a], self.stages[b]
        lo, hi = sorted((a, b))
        records = [
            (self.stages[k].pass_name, r)
            for k in range(lo + 1, hi + 1)
            for r in self.stages[k].provenance
        ]
        names = (ra.label, rb.label)
        if ra.ir_kind == rb.ir_kind == "graph":
            return diff_modules(
                ra.module,
                rb.module,
                records=records,
                before_text=ra.text,
                after_text=rb.text,
                names=names,
                summaries=(self.node_summaries(a), self.node_summaries(b)),
            )
        return diff_texts(ra.text, rb.text, names=names)

    def diff_prev(self, i: int) -> GraphDiff | None:
        """Stage `i` against the stage its pass started from (`started_from`)."""
        j = self.started_from(i)
        return self.diff(j, i) if j is not None else None

    # -- low-level view data (schedule, memory) of any stage ----------------------------------
    def unavailable(self, what: str) -> str:
        """Why this compile has no `what` (schedule, memory plan, ...)."""
        if self.error is not None:
            return f"compile failed ({self.error.kind})"
        return self.low_level_reason or f"no {what} in this compile"

    def _is_final(self, i: int | None) -> bool:
        """Whether stage `i` stands for the compile's own result (its plan, its LIR). While
        compiling, the last stage so far is not: it is planned from its snapshot."""
        if i is None or self.stages[i].stage == "memory":
            return True
        return self.done and i == len(self.stages) - 1

    def low_level(self, i: int | None = None) -> LowLevelResult | None:
        """(schedule, LIR, memory plan) as of stage `i` (None: the end of the compile).

        The final stage (and the memory stage) is the compile's own plan; a low-level stage's
        LIR snapshot is planned as it is, with the same allocator; a graph stage is run through
        the whole low-level pipeline (a clone, same options) — the plan you would get if graph
        optimisation stopped there. None when the compile has no plan (see `unavailable`)."""
        return self._cached(("low_level", i), lambda: self._low_level(i))

    def _low_level(self, i: int | None) -> LowLevelResult | None:
        r = self.result
        if self._is_final(i):
            if r is None or r.plan is None:
                return None
            return LowLevelResult(r.schedule, r.lir, r.plan)
        assert i is not None
        return self._plan_stage(i, self._options().scheduler, tighten_only=False)

    def _plan_stage(self, i: int, scheduler: str, *, tighten_only: bool) -> LowLevelResult:
        """The one way a stage is planned (the memory view of a stage and every per-pass row):
        a low-level stage's LIR snapshot as it is (`tighten_only`: after `TIGHTENING_PASSES`);
        a graph stage through the low-level pipeline with `scheduler` (`tighten_only`: IRGen
        then `TIGHTENING_PASSES` instead of every low-level pass). A clone, same allocator and
        disabled passes as the compile."""
        from compiler.lir.pipeline import lir_opt_passes, run_low_level
        from compiler.memory.plan import plan_memory
        from compiler.passes.manager import PipelineContext, run_passes

        rec, options = self.stages[i], self._options()
        ctx = PipelineContext(disabled=options.disabled_passes)
        passes = lir_opt_passes(TIGHTENING_PASSES) if tighten_only else None
        if rec.ir_kind == "lir":
            lir = rec.lir.clone()
            if passes is not None:
                run_passes(lir, passes, "lir-opt", ctx)
            r = self.result
            return LowLevelResult(
                r.schedule if r is not None else None, lir, plan_memory(lir, options.allocator)
            )
        options = dataclasses.replace(options, scheduler=scheduler)
        return run_low_level(rec.module.clone(), options, ctx, passes=passes)

    def _report(self, low: LowLevelResult | None, scheduler: str) -> MemoryReport | None:
        """The memory report of a plan made with `scheduler` and the compile's other options."""
        if low is None or low.plan is None:
            return None
        from compiler.pipeline import run_config

        options = dataclasses.replace(self._options(), scheduler=scheduler)
        config = self._cached(
            ("run_config", scheduler), lambda: run_config(options, self.model_path)
        )
        return MemoryReport.from_plan(
            low.plan,
            low.lir,
            self.model_path,
            scheduler,
            options.allocator,
            low.schedule,
            config=config,
        )

    def memory_report(self, i: int | None = None) -> MemoryReport | None:
        """The memory report as of stage `i` (see `low_level`); None without a plan."""
        return self._cached(
            ("memory_report", i), lambda: self._report(self.low_level(i), self._options().scheduler)
        )

    def stage_memory(self, i: int) -> MemoryReport | None:
        """Stage `i` planned the one way every row of the per-pass table is (so their deltas
        add up and each lands on the step that caused it): a graph stage is scheduled in
        plain topological order (the `schedule` stage uses the compile's scheduler instead,
        which makes that row the scheduler's own delta), then IRGen; a low-level stage is its
        snapshot; then the lifetime-tightening passes (`TIGHTENING_PASSES`, unless disabled)
        and the compile's allocator (`_plan_stage`). The final stage is the compile's own plan."""
        return self._cached(("stage_memory", i), lambda: self._stage_memory(i))

    def _stage_memory(self, i: int) -> MemoryReport | None:
        rec = self.stages[i]
        if rec.stage == "memory" or self.result is None:
            return self.memory_report(i)
        used = self._options().scheduler
        kind = used if rec.stage == "schedule" or rec.ir_kind == "lir" else "topological"
        return self._report(self._plan_stage(i, kind, tighten_only=True), kind)

    def schedules(self, i: int | None = None) -> list[Schedule]:
        """The schedule the compile used as of stage `i`, then every other scheduler on the
        same graph. A graph stage is scheduled as it is (no IRGen or planning: the order the
        low-level pipeline would start from); a low-level stage has the compile's schedule.
        Empty without a graph to schedule."""
        return self._cached(("schedules", i), lambda: self._schedules(i))

    def _schedules(self, i: int | None) -> list[Schedule]:
        module = self._graph_module(i)
        if module is None:
            return []
        fn = module.functions[0]
        kind = self._options().scheduler
        r = self.result
        graph_stage = i is not None and self.stages[i].ir_kind == "graph"
        if not graph_stage and self.done and r is not None and r.schedule is not None:
            used = r.schedule
        else:
            used = schedule(fn, kind)
        return [used, *(schedule(fn, k) for k in SCHEDULERS if k != used.kind)]

    def _graph_module(self, i: int | None) -> Any:
        """The graph a stage schedules: its own (a graph stage) or the last graph stage's."""
        j = len(self.stages) - 1 if i is None else i
        while j >= 0 and self.stages[j].ir_kind != "graph":
            j -= 1
        if j < 0:
            return self.result.module if self.result is not None else None
        return self.stages[j].ir

    def program_order(self, i: int) -> Schedule | None:
        """The live bytes of graph stage `i`'s nodes in program order (the function's node
        list): the memory curve before any scheduler ran. None for a low-level stage."""
        return self._cached(("program_order", i), lambda: self._program_order(i))

    def _program_order(self, i: int) -> Schedule | None:
        rec = self.stages[i]
        if rec.ir_kind != "graph":
            return None
        from compiler.scheduling import live_bytes_timeline

        fn = rec.module.functions[0]
        order = list(fn.nodes)
        live = live_bytes_timeline(fn, order)
        peak = max(live, default=0)
        return Schedule("program order", order, live, peak, live.index(peak) if live else -1)

    def buffer_info(self, i: int | None, name: str) -> dict[str, Any]:
        """What the memory card adds to a report buffer of stage `i`: shape and element type
        (from that stage's LIR), the unpadded bytes and the padding the alignment costs."""
        return self._cached(("buffer_info", i, name), lambda: self._buffer_info(i, name))

    def _buffer_info(self, i: int | None, name: str) -> dict[str, Any]:
        low = self.low_level(i)
        report = self.memory_report(i)
        b = report.buffer(name) if report is not None else None
        out: dict[str, Any] = {}
        if low is None or low.lir is None or b is None:
            return out
        try:
            v = low.lir.get(name)
        except Exception:  # noqa: BLE001 - a buffer the LIR does not name: no shape to show
            return out
        t = getattr(v, "type", None) or getattr(v, "type_", None)
        if t is not None:
            out["shape"] = tuple(t.shape)
            out["dtype"] = str(t).split("<", 1)[0]
            out["raw_bytes"] = int(t.size_bytes)
            out["padding"] = max(0, int(b.size) - int(t.size_bytes))
        return out

    # -- rewrites -----------------------------------------------------------------------------
    def text_index(self, i: int) -> TextIndex:
        """Where each value of stage `i`'s IR text is defined and used (for rewrite diffs)."""
        return self._cached(("text_index", i), lambda: TextIndex(self.stages[i].text))

    def rewrites(self, i: int) -> list[Rewrite]:
        """The rewrites of stage `i`'s pass, in the order they fired (its provenance journal)."""
        return self._cached(("rewrites", i), lambda: group_rewrites(self.stages[i].provenance))

    def started_from(self, i: int) -> int | None:
        """The stage stage `i`'s pass started from: the one before it with the same IR kind;
        for the first stage of a kind (IRGen's), the stage just before it, in the other IR (the
        scheduled graph beside the instructions generated from it). None for the import."""
        for j in range(i - 1, -1, -1):
            if self.stages[j].ir_kind == self.stages[i].ir_kind:
                return j
        return i - 1 if i > 0 else None

    def rewrite_diff(self, i: int, k: int) -> RewriteDiff:
        """The red/green lines of rewrite `k` (a position in `rewrites(i)`) of stage `i`."""
        rw = self.rewrites(i)[k]
        j = self.started_from(i)
        before = self.text_index(j) if j is not None else TextIndex("")
        return rewrite_diff(rw, before, self.text_index(i))

    def scheduler_reports(self, i: int | None = None) -> list[MemoryReport]:
        """The memory report of stage `i` (the scheduler the compile used), then, for every
        other scheduler, the plan of the same graph through the whole low-level pipeline with
        that scheduler: the schedule figure's curves, all on one instruction axis."""
        return self._cached(("scheduler_reports", i), lambda: self._scheduler_reports(i))

    def _scheduler_reports(self, i: int | None) -> list[MemoryReport]:
        used = self.memory_report(i)
        if used is None:
            return []
        # The graph the schedulers order: stage i's, or the final graph for a low-level stage.
        g = i if i is not None and self.stages[i].ir_kind == "graph" else None
        if g is None and self.result is not None:
            g = max(k for k, rec in enumerate(self.stages) if rec.ir_kind == "graph")
        out = [used]
        for kind in SCHEDULERS:
            if kind == self._options().scheduler or g is None:
                continue
            report = self._report(self._plan_stage(g, kind, tighten_only=False), kind)
            if report is not None:
                out.append(report)
        return out

    # -- memory comparison --------------------------------------------------------------------
    def compare_memory(
        self, allocator: str | None = None, scheduler: str | None = None
    ) -> dict[str, Any]:
        """Recompile with another allocator/scheduler; the two memory figures side by side."""
        base = self._options()
        opts = dataclasses.replace(
            base, allocator=allocator or base.allocator, scheduler=scheduler or base.scheduler
        )
        other = self._recompile(opts)
        mine, theirs = self.memory_report(), other.memory_report()
        return {
            "base": {"allocator": base.allocator, "scheduler": base.scheduler, **_figs(self, mine)},
            "other": {
                "allocator": opts.allocator,
                "scheduler": opts.scheduler,
                **_figs(other, theirs),
            },
            "error": other.error.headline() if other.error else None,
            "comparison": (
                self.compare_memory_with(theirs)
                if mine is not None and theirs is not None
                else None
            ),
        }

    def compare_memory_with(self, other: MemoryReport) -> dict[str, Any]:
        """This compile's memory plan (old) against another report (new): both reports, labelled,
        mem-diff's diff and the changed buffers (`glowviz.session.memcompare`)."""
        from glowviz.session.memcompare import compare_reports

        mine = self.memory_report()
        if mine is None:
            raise CompilerError(
                f"this compile has no memory plan: {self.unavailable('memory plan')}"
            )
        return compare_reports(mine.with_source(self.model_path), other)

    def compare_memory_report(self, spec: str) -> dict[str, Any]:
        """Compare with a second report: a glowviz.memory/1 JSON file, an .onnx model or a
        mem-diff spec `model.onnx:scheduler=...,allocator=...,disable=PASS+PASS`. Raises a
        CompilerError (MemDiffInputError for a missing file, bad JSON, wrong schema)."""
        from glowviz.core.memdiff import load_side

        shapes = dict(self._options().input_shapes)
        return self.compare_memory_with(load_side(spec.strip(), shapes))

    # -- instructions / debugger --------------------------------------------------------------
    def instructions(self) -> list[dict[str, Any]]:
        """The final LIR's instructions: index, name, kind, operands [(name, mode)], text."""
        return self._cached(("instructions",), self._instructions)

    def _instructions(self) -> list[dict[str, Any]]:
        from compiler.lir.printer import format_instruction

        lir = self.result.lir if self.result is not None else None
        if lir is None:
            return []
        return [
            {
                "index": k,
                "name": ins.name,
                "kind": ins.kind,
                "operands": [(v.name, m) for v, m in ins.operands],
                "text": format_instruction(ins),
            }
            for k, ins in enumerate(lir.code)
        ]


def _figs(session: SessionViewData, report: MemoryReport | None) -> dict[str, Any]:
    if report is None:
        return {"available": False, "reason": session.unavailable("memory plan")}
    return {
        "available": True,
        "peak_bytes": report.peak_bytes,
        "lower_bound_bytes": report.lower_bound_bytes,
        "no_reuse_bytes": report.no_reuse_bytes,
    }
