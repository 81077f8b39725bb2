"""A compile session: the pipeline run once through the observer, every stage kept for the views.

Textual-free: the IDE and `glowviz export` share it. View data comes out as plain data
(`graph_nodes`, `diff`, `schedule_data`, `lifetimes`, `memory_map`); the debugger state lives
here too (`Debugger`, over a small stepping-executor interface).
"""

from __future__ import annotations

import hashlib
import threading
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from glowviz.diff import GraphDiff, diff_modules, diff_texts

DEFAULT_MODEL = "sample_models/resnet_small.onnx"

#: The low-level parts of the compiler; when one is missing the views say so.
_LOW_LEVEL_MODULES = ("compiler.lir", "compiler.scheduling", "compiler.memory",
                      "compiler.backends.interpreter")


def default_model_path() -> str:
    here = Path(__file__).resolve().parent.parent / DEFAULT_MODEL
    return str(here if here.exists() else Path(DEFAULT_MODEL))


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
    ir: Any
    provenance: list[Any] = field(default_factory=list)
    stats: dict[str, Any] = field(default_factory=dict)
    _text: str | None = field(default=None, repr=False)
    _hash: str | None = field(default=None, repr=False)

    @property
    def label(self) -> str:
        return f"{self.stage}/{self.pass_name}"

    @property
    def text(self) -> str:
        if self._text is None:
            self._text = ir_text(self.ir, self.ir_kind)
        return self._text

    @property
    def ir_hash(self) -> str:
        if self._hash is None:
            self._hash = hashlib.sha1(self.text.encode()).hexdigest()[:16]
        return self._hash

    def to_dict(self) -> dict[str, Any]:
        return {"index": self.index, "stage": self.stage, "pass": self.pass_name,
                "changed": self.changed, "count_before": self.count_before,
                "count_after": self.count_after, "time_ms": round(self.time_ms, 3),
                "ir_kind": self.ir_kind}


def ir_text(ir: Any, kind: str) -> str:
    """The deterministic text of a graph Module or a low-level IR snapshot."""
    if ir is None:
        return ""
    if kind == "graph":
        from compiler.graph.printer import print_module

        return print_module(ir)
    for mod_name, fn_name in (("compiler.lir.printer", "print_lir"),
                              ("compiler.lir.printer", "print_function"),
                              ("compiler.lir.ir", "print_lir")):
        try:
            mod = __import__(mod_name, fromlist=[fn_name])
            fn = getattr(mod, fn_name, None)
            if fn is not None:
                return fn(ir)
        except Exception:  # noqa: BLE001 - a partial low-level IR must not break the view
            continue
    for meth in ("to_text", "print", "dump"):
        f = getattr(ir, meth, None)
        if callable(f):
            try:
                out = f()
                if isinstance(out, str):
                    return out
            except Exception:  # noqa: BLE001
                pass
    return str(ir)


def fmt_bytes(n: float | int | None) -> str:
    if n is None:
        return "-"
    n = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"


def _get(obj: Any, *names: str, default: Any = None) -> Any:
    """The first attribute (or key) of `obj` among `names` — the low-level APIs are young."""
    for n in names:
        if isinstance(obj, dict) and n in obj:
            return obj[n]
        if hasattr(obj, n):
            return getattr(obj, n)
    return default


def _name_of(v: Any) -> str:
    if isinstance(v, str):
        return v
    return str(_get(v, "name", default=v))


ProgressFn = Callable[[StageRecord], None]


class CompileSession:
    """One model compiled with one set of options; every stage kept."""

    def __init__(self, model_path: str | None = None, options: Any = None, *,
                 compile_fn: Callable[..., Any] | None = None) -> None:
        self.model_path = model_path or default_model_path()
        self.options = options
        self._compile_fn = compile_fn
        self.stages: list[StageRecord] = []
        self.result: Any = None
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

    # -- compiling ----------------------------------------------------------------------------
    @property
    def model_name(self) -> str:
        return Path(self.model_path).name

    def _options(self) -> Any:
        if self.options is None:
            from compiler.pipeline import CompileOptions

            self.options = CompileOptions()
        return self.options

    def compile(self, progress: ProgressFn | None = None) -> CompileSession:
        """Run the pipeline (callable from a worker thread); `progress` gets each new stage."""
        self.stages, self.result, self.error, self.done = [], None, None, False
        self.low_level_reason = None
        self._diff_cache.clear()
        self._view_cache.clear()
        self.debugger = None

        def observe(ev: Any) -> None:
            rec = StageRecord(ev.index, ev.stage, ev.pass_name, bool(ev.changed),
                              int(ev.count_before), int(ev.count_after), float(ev.time_ms),
                              ev.ir_kind, ev.ir, list(ev.provenance or []),
                              dict(getattr(ev, "stats", None) or {}))
            with self._lock:
                self.stages.append(rec)
            if progress is not None:
                progress(rec)

        try:
            from compiler.errors import CompilerError
        except Exception:  # noqa: BLE001
            CompilerError = RuntimeError  # type: ignore[assignment,misc]  # noqa: N806
        try:
            compile_fn = self._compile_fn
            if compile_fn is None:
                from compiler.pipeline import compile_model as compile_fn
            if not Path(self.model_path).exists():
                raise FileNotFoundError(f"model file not found: {self.model_path}")
            self.result = compile_fn(self.model_path, self._options(), observe)
            self.time_ms = float(getattr(self.result, "time_ms", 0.0) or 0.0)
            self._check_low_level()
        except CompilerError as e:
            self.error = SessionError(
                getattr(e, "message", str(e)) if not getattr(e, "pass_name", None) else str(e),
                type(e).__name__, getattr(e, "pass_name", None) or self._next_pass_guess(),
                getattr(e, "node", None) or getattr(e, "instruction", None),
                self.stages[-1].stage if self.stages else "import")
        except ModuleNotFoundError as e:
            missing = e.name or str(e)
            if self.stages and any(missing.startswith(m) for m in _LOW_LEVEL_MODULES):
                self.low_level_reason = f"low-level stages not built yet ({missing} missing)"
            else:
                self.error = SessionError(f"compiler part not available yet: {missing}",
                                          "NotAvailable", self._next_pass_guess(), None,
                                          internal=False)
        except FileNotFoundError as e:
            self.error = SessionError(str(e), "ModelLoadError", "import-onnx")
        except Exception as e:  # noqa: BLE001 - an internal bug: show it, keep the IDE alive
            self.error = SessionError(f"{type(e).__name__}: {e}", "InternalError",
                                      self._next_pass_guess(), None, internal=True,
                                      traceback=traceback.format_exc())
        self.done = True
        return self

    def _next_pass_guess(self) -> str | None:
        return None if not self.stages else f"after {self.stages[-1].pass_name}"

    def _check_low_level(self) -> None:
        r = self.result
        if r is None:
            return
        if getattr(r, "stopped_after", None):
            self.low_level_reason = f"pipeline stopped after {r.stopped_after}"
        elif getattr(r, "plan", None) is None and getattr(r, "lir", None) is None:
            opts = getattr(r, "options", None)
            if opts is not None and not getattr(opts, "low_level", True):
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

    def stage_table(self) -> list[dict[str, Any]]:
        return [r.to_dict() for r in self.stages]

    # -- graph view data ----------------------------------------------------------------------
    def _cached(self, key: Any, fn: Callable[[], Any]) -> Any:
        """View data computed once per compile (the IR snapshots never change)."""
        try:
            return self._view_cache[key]
        except KeyError:
            val = self._view_cache[key] = fn()
            return val

    def graph_nodes(self, i: int) -> list[dict[str, Any]]:
        """One row per value of a graph stage: placeholders, nodes in order, then constants."""
        return self._cached(("graph_nodes", i), lambda: self._graph_nodes(i))

    def _graph_nodes(self, i: int) -> list[dict[str, Any]]:
        rec = self.stages[i]
        if rec.ir_kind != "graph":
            return []
        from compiler.graph.printer import format_attr

        m = rec.ir
        rows: list[dict[str, Any]] = []
        for p in m.placeholders.values():
            rows.append({"kind": "output" if p.is_output else "input", "name": p.name,
                         "op": "Placeholder", "type": str(p.type), "inputs": [],
                         "users": [u.name for u in p.user_nodes()], "attrs": {}})
        for fn in m.functions:
            for n in fn.nodes:
                users: list[str] = []
                for r in n.results:
                    users.extend(u.name for u in r.user_nodes())
                try:
                    category = n.opdef.category
                except Exception:  # noqa: BLE001
                    category = "other"
                rows.append({"kind": category, "name": n.name, "op": n.op,
                             "type": ", ".join(str(r.type) for r in n.results),
                             "inputs": [v.name for v in n.operands], "users": users,
                             "attrs": {k: format_attr(v) for k, v in n.attrs.items()}})
        for c in m.constants.values():
            rows.append({"kind": "constant", "name": c.name, "op": "Constant",
                         "type": str(c.type), "inputs": [],
                         "users": [u.name for u in c.user_nodes()], "attrs": {}})
        return rows

    def node_detail(self, i: int, name: str) -> dict[str, Any] | None:
        rec = self.stages[i]
        if rec.ir_kind != "graph":
            return None
        row = next((r for r in self.graph_nodes(i) if r["name"] == name), None)
        if row is None:
            return None
        detail = dict(row)
        m = rec.ir
        node = None
        for fn in m.functions:
            node = fn.find(name)
            if node is not None:
                break
        if node is not None:
            try:
                d = node.opdef
                detail["doc"], detail["traits"] = d.doc, sorted(d.traits)
                detail["operand_names"] = list(d.operands)
            except Exception:  # noqa: BLE001
                pass
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
                    out.append(f"{rec.pass_name}: {r.kind} {r.node}"
                               + (f" <- {src}" if src else ""))
        return out

    def neighbourhood(self, i: int, name: str, radius: int = 2,
                      limit: int = 40) -> tuple[list[dict[str, Any]], list[tuple[str, str]]]:
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
        if key not in self._diff_cache:
            ra, rb = self.stages[a], self.stages[b]
            lo, hi = sorted((a, b))
            records = [(self.stages[k].pass_name, r) for k in range(lo + 1, hi + 1)
                       for r in self.stages[k].provenance]
            names = (ra.label, rb.label)
            if ra.ir_kind == rb.ir_kind == "graph":
                d = diff_modules(ra.ir, rb.ir, records=records, before_text=ra.text,
                                 after_text=rb.text, names=names)
            else:
                d = diff_texts(ra.text, rb.text, names=names)
            self._diff_cache[key] = d
        return self._diff_cache[key]

    def diff_prev(self, i: int) -> GraphDiff | None:
        """Stage `i` against the stage before it of the same IR kind."""
        for j in range(i - 1, -1, -1):
            if self.stages[j].ir_kind == self.stages[i].ir_kind:
                return self.diff(j, i)
        return None

    # -- low-level view data ------------------------------------------------------------------
    def _unavailable(self, what: str) -> str:
        if self.error is not None:
            return f"compile failed ({self.error.kind})"
        return self.low_level_reason or f"no {what} in this compile"

    def schedule_data(self) -> dict[str, Any]:
        """{'available', 'reason', 'order': [names], 'live_bytes': [...], 'peak_index', 'peak',
        'alternatives': {scheduler: {order, live_bytes, peak}}}"""
        sched = getattr(self.result, "schedule", None)
        if sched is None:
            return {"available": False, "reason": self._unavailable("schedule")}
        data = _schedule_dict(sched)
        data["scheduler"] = getattr(self.options, "scheduler", "?")
        data["alternatives"] = {}
        alt = "topological" if data["scheduler"] != "topological" else "child-mem-size"
        try:
            other = _compute_schedule(self.result.module, alt)
            if other is not None:
                data["alternatives"][alt] = _schedule_dict(other)
        except Exception as e:  # noqa: BLE001
            data["alternatives_error"] = f"{type(e).__name__}: {e}"
        return data

    def lifetimes(self) -> dict[str, Any]:
        """{'available', 'reason', 'buffers': [{name,size,offset,first,last,producer,users,...}],
        'n_instructions'}"""
        if not self.done:
            return self._lifetimes()
        return self._cached("lifetimes", self._lifetimes)

    def _lifetimes(self) -> dict[str, Any]:
        plan = getattr(self.result, "plan", None)
        if plan is None:
            return {"available": False, "reason": self._unavailable("memory plan")}
        bufs = [_buffer_dict(b) for b in _get(plan, "buffers", default=[])]
        n = max((b["last"] for b in bufs), default=0) + 1
        lir_n = len(self.instructions())
        return {"available": True, "buffers": bufs, "n_instructions": max(n, lir_n)}

    def memory_map(self) -> dict[str, Any]:
        """The allocation map: buffers (offset, size, first, last, region, reason), the figures
        (peak, lower bound, no-reuse, gap) and the buffers live at the peak instruction."""
        plan = getattr(self.result, "plan", None)
        if plan is None:
            return {"available": False, "reason": self._unavailable("memory plan")}
        lt = self.lifetimes()
        bufs = lt["buffers"]
        acts = [b for b in bufs if b["region"] in ("activations", "activation", None, "")]
        peak = int(_get(plan, "peak_bytes", default=0) or 0)
        lb = int(_get(plan, "lower_bound_bytes", default=0) or 0)
        n = lt["n_instructions"]
        live = [0] * max(n, 1)
        for b in acts:
            for k in range(max(0, b["first"]), min(n, b["last"] + 1)):
                live[k] += b["size"]
        peak_at = max(range(len(live)), key=lambda k: live[k]) if live else 0
        at_peak = sorted((b for b in acts if b["first"] <= peak_at <= b["last"]),
                         key=lambda b: -b["size"])
        return {"available": True, "peak_bytes": peak, "lower_bound_bytes": lb,
                "no_reuse_bytes": int(_get(plan, "no_reuse_bytes", default=0) or 0),
                "gap_bytes": peak - lb, "gap_pct": (100.0 * (peak - lb) / lb) if lb else 0.0,
                "buffers": acts, "all_buffers": bufs, "live_bytes": live,
                "peak_instruction": peak_at, "live_at_peak": [b["name"] for b in at_peak],
                "n_instructions": n,
                "allocator": getattr(self.options, "allocator", "?"),
                "scheduler": getattr(self.options, "scheduler", "?")}

    def compare_memory(self, allocator: str | None = None,
                       scheduler: str | None = None) -> dict[str, Any]:
        """Recompile with another allocator/scheduler; the two memory figures side by side."""
        import dataclasses

        base = self._options()
        opts = dataclasses.replace(base, allocator=allocator or base.allocator,
                                   scheduler=scheduler or base.scheduler)
        other = CompileSession(self.model_path, opts, compile_fn=self._compile_fn).compile()
        mine, theirs = self.memory_map(), other.memory_map()
        return {"base": {"allocator": base.allocator, "scheduler": base.scheduler, **_figs(mine)},
                "other": {"allocator": opts.allocator, "scheduler": opts.scheduler,
                          **_figs(theirs)},
                "error": other.error.headline() if other.error else None}

    # -- instructions / debugger --------------------------------------------------------------
    def instructions(self) -> list[dict[str, Any]]:
        """The final LIR's instructions: index, name, kind, operands [(name, mode)], text."""
        if not self.done:
            return self._instructions()
        return self._cached("instructions", self._instructions)

    def _instructions(self) -> list[dict[str, Any]]:
        lir = getattr(self.result, "lir", None)
        if lir is None:
            return []
        instrs = _get(lir, "instructions", "code", "instrs", default=None)
        if instrs is None:
            try:
                instrs = list(lir)
            except TypeError:
                return []
        out = []
        for k, ins in enumerate(instrs):
            ops = []
            for o in _get(ins, "operands", default=[]) or []:
                if isinstance(o, tuple) and len(o) == 2:
                    v, mode = o
                    ops.append((_name_of(v), str(getattr(mode, "value", mode))))
                else:
                    ops.append((_name_of(_get(o, "value", default=o)),
                                str(_get(o, "mode", "kind", default=""))))
            kind = str(_get(ins, "kind", "op", "opcode", default=type(ins).__name__))
            try:
                text = _instr_text(ins)
            except Exception:  # noqa: BLE001
                text = f"{kind} " + ", ".join(f"@{m} %{n}" for n, m in ops)
            out.append({"index": k, "name": _name_of(_get(ins, "name", default=f"i{k}")),
                        "kind": kind, "operands": ops, "text": text})
        return out

    def get_debugger(self) -> Debugger:
        """The debugger (built once: JIT-compiles the LLVM kernels; call from a worker)."""
        with self._debugger_lock:
            if self.debugger is None:
                self.debugger = Debugger(self)
            return self.debugger


def _instr_text(ins: Any) -> str:
    try:
        from compiler.lir.printer import format_instruction  # type: ignore

        return format_instruction(ins)
    except Exception:  # noqa: BLE001
        return str(ins)


def _figs(m: dict[str, Any]) -> dict[str, Any]:
    if not m.get("available"):
        return {"available": False, "reason": m.get("reason")}
    return {"available": True, "peak_bytes": m["peak_bytes"],
            "lower_bound_bytes": m["lower_bound_bytes"], "no_reuse_bytes": m["no_reuse_bytes"]}


def _buffer_dict(b: Any) -> dict[str, Any]:
    users = _get(b, "users", default=()) or ()
    return {"name": _name_of(_get(b, "name", default="?")),
            "size": int(_get(b, "size", default=0) or 0),
            "offset": int(_get(b, "offset", default=0) or 0),
            "region": str(_get(b, "region", default="activations") or "activations"),
            "first": int(_get(b, "first", default=0) or 0),
            "last": int(_get(b, "last", default=0) or 0),
            "producer": _name_of(_get(b, "producer", default="") or ""),
            "users": [_name_of(u) for u in users],
            "reason": str(_get(b, "reason", default="") or ""),
            "shape": str(_get(b, "type", "shape", default="") or "")}


def _schedule_dict(sched: Any) -> dict[str, Any]:
    order = [_name_of(n) for n in (_get(sched, "order", "nodes", default=[]) or [])]
    live = list(_get(sched, "live_bytes", "live", default=[]) or [])
    live = [int(x) for x in live]
    peak_index = _get(sched, "peak_step", default=None)
    if peak_index is None or peak_index < 0:
        peak_index = max(range(len(live)), key=lambda k: live[k]) if live else None
    peak = live[peak_index] if peak_index is not None else int(
        _get(sched, "peak_bytes", "peak", default=0) or 0)
    return {"available": True, "order": order, "live_bytes": live, "peak_index": peak_index,
            "peak": peak}


def _compute_schedule(module: Any, name: str) -> Any:
    """Run a named scheduler on the final graph, if compiler.scheduling offers a way."""
    from compiler.scheduling import schedule  # type: ignore

    return schedule(module.functions[0], name)


# ---------------------------------------------------------------------------------------------
# Debugger
# ---------------------------------------------------------------------------------------------


class SteppingExecutor:
    """What the debugger needs from an executor: `pc`, `reset(inputs)`, `step()` (returning the
    names it wrote, or None), `read(name)`. LLVM executors add `llvm_ir(k)`, `assembly(k)`."""

    name = "abstract"

    @property
    def pc(self) -> int:  # pragma: no cover - interface
        raise NotImplementedError

    def reset(self, inputs: dict[str, Any]) -> None:  # pragma: no cover
        raise NotImplementedError

    def step(self) -> list[str] | None:  # pragma: no cover
        raise NotImplementedError

    def read(self, name: str) -> Any:  # pragma: no cover
        raise NotImplementedError


class ArenaStepper(SteppingExecutor):
    """Adapter over compiler.backends.interpreter.arena.ArenaInterpreter(lir, plan)."""

    name = "interpreter"

    def __init__(self, lir: Any, plan: Any) -> None:
        from compiler.backends.interpreter.arena import ArenaInterpreter  # type: ignore

        self.interp = ArenaInterpreter(lir, plan)

    @property
    def pc(self) -> int:
        return int(self.interp.pc)

    def reset(self, inputs: dict[str, Any]) -> None:
        self.interp.reset(inputs)

    def step(self) -> list[str] | None:
        info = self.interp.step()
        return list(getattr(info, "written", None) or []) if info is not None else None

    def read(self, name: str) -> Any:
        return self.interp.read(name)


class LLVMStepper(ArenaStepper):
    """Adapter over compiler.backends.llvm.executor.LLVMExecutor: JIT-compiled kernels, one
    entry per instruction; the kernel's LLVM IR and host assembly for the code views."""

    name = "llvm"

    def __init__(self, lir: Any, plan: Any) -> None:
        from compiler.backends.llvm.executor import LLVMExecutor  # type: ignore

        self.interp = LLVMExecutor(lir, plan)
        self._code: dict[tuple[str, int], str] = {}
        self._code_lock = threading.Lock()

    @property
    def timings(self) -> dict[str, float]:
        return dict(getattr(self.interp, "timings", {}) or {})

    def code(self, kind: str, k: int) -> str:
        """`kind` "llvm" (optimized LLVM IR) or "asm" (host assembly) of instruction `k`."""
        key = (kind, k)
        with self._code_lock:
            if key not in self._code:
                ex = self.interp
                self._code[key] = ex.llvm_ir(k) if kind == "llvm" else ex.assembly(k)
            return self._code[key]

    def llvm_ir(self, k: int) -> str:
        return self.code("llvm", k)

    def assembly(self, k: int) -> str:
        return self.code("asm", k)

    def strategy(self, k: int) -> str:
        return str(self.interp.strategy(k) or "")

    def kernels_of(self, k: int) -> list[str]:
        return list(self.interp.kernels_of(k))


#: Default tolerance of "run to first divergence" (numpy.allclose semantics).
RTOL, ATOL = 1e-4, 1e-5


def compare_arrays(got: Any, ref: Any, rtol: float = RTOL, atol: float = ATOL) -> dict[str, Any]:
    """The largest absolute and relative error of `got` against `ref`, and whether they agree
    within `atol + rtol * |ref|` (NaN matches NaN). The relative error divides by
    max(|ref|, atol / rtol) so that values near zero do not blow it up; rel <= rtol implies
    agreement."""
    import numpy as np

    a = np.asarray(got)
    b = np.asarray(ref)
    if a.shape != b.shape:
        return {"abs": float("inf"), "rel": float("inf"), "ok": False,
                "why": f"shape {a.shape} vs {b.shape}"}
    if a.size == 0:
        return {"abs": 0.0, "rel": 0.0, "ok": True}
    if a.dtype.kind not in "fiub" or b.dtype.kind not in "fiub":
        same = bool(np.array_equal(a, b))
        return {"abs": 0.0 if same else float("inf"), "rel": 0.0 if same else float("inf"),
                "ok": same}
    fa, fb = a.astype(np.float64), b.astype(np.float64)
    nan_a, nan_b = np.isnan(fa), np.isnan(fb)
    nan_mismatch = int((nan_a != nan_b).sum())
    both = nan_a | nan_b
    with np.errstate(invalid="ignore", over="ignore"):
        diff = np.where(both, 0.0, np.abs(fa - fb))
        diff = np.where(np.isnan(diff), 0.0, diff)  # inf - inf of equal infinities
        mag = np.abs(np.where(both, 0.0, fb))
        rel = diff / np.maximum(mag, atol / rtol if rtol > 0 else atol)
        bad = diff > atol + rtol * mag
    worst = int(np.argmax(diff))
    out = {"abs": float(diff.max()), "rel": float(rel.max()),
           "ok": not bool(bad.any()) and nan_mismatch == 0,
           "n_bad": int(bad.sum()) + nan_mismatch, "size": int(a.size),
           "worst_index": tuple(int(x) for x in np.unravel_index(worst, a.shape)),
           "got": float(fa.flat[worst]), "want": float(fb.flat[worst])}
    if nan_mismatch:
        out["why"] = f"{nan_mismatch} NaN mismatches"
    return out


class Debugger:
    """Instruction-level stepping with breakpoints (by index, by op kind, on writes to a buffer).

    The primary executor is the LLVM one (the product's); the arena interpreter runs in
    lock-step as the reference, so every step can be compared and "run to first divergence"
    works. If LLVM code generation fails with a CompilerError, the interpreter is the primary
    (`fallback_error` says why) and there is no reference.
    """

    def __init__(self, session: CompileSession, executor: SteppingExecutor | None = None,
                 reference: SteppingExecutor | None = None) -> None:
        self.session = session
        self.instrs = session.instructions()
        self.breakpoints: set[int] = set()
        self.op_breakpoints: set[str] = set()
        self.write_breakpoints: set[str] = set()
        self.last_written: list[str] = []
        self.last_index: int | None = None  # the instruction executed by the last step
        self.comparison: list[dict[str, Any]] | None = None  # of last_index, vs the reference
        self.divergence: dict[str, Any] | None = None
        self.stop_reason = ""
        self.reason_unavailable: str | None = None
        self.fallback_error: str | None = None  # LLVM codegen failed: the interpreter runs
        self.rtol, self.atol = RTOL, ATOL
        self.executor = executor
        self.reference = reference
        self._roots = self._buffer_roots()
        if self.executor is None and session.executor_factory is not None:
            self.executor = session.executor_factory(session)
            if self.reference is None and session.reference_factory is not None:
                self.reference = session.reference_factory(session)
        if self.executor is None:
            self._make_executors()
        if self.executor is not None:
            self.restart()

    def _make_executors(self) -> None:
        lir, plan = (getattr(self.session.result, "lir", None),
                     getattr(self.session.result, "plan", None))
        if lir is None or plan is None:
            self.reason_unavailable = self.session._unavailable("low-level IR / memory plan")
            return
        try:
            from compiler.errors import CompilerError
        except Exception:  # noqa: BLE001
            CompilerError = RuntimeError  # type: ignore[assignment,misc]  # noqa: N806
        try:
            self.executor = LLVMStepper(lir, plan)
        except CompilerError as e:
            self.fallback_error = f"{type(e).__name__}: {e}"
        except ModuleNotFoundError as e:
            self.fallback_error = f"LLVM backend not available ({e.name})"
        try:
            interp = ArenaStepper(lir, plan)
        except ModuleNotFoundError as e:
            if self.executor is None:
                self.reason_unavailable = f"arena interpreter not built yet ({e.name})"
            return
        except Exception as e:  # noqa: BLE001
            if self.executor is None:
                self.reason_unavailable = f"arena interpreter failed: {type(e).__name__}: {e}"
            return
        if self.executor is None:
            self.executor = interp
        else:
            self.reference = interp

    def _buffer_roots(self) -> dict[str, str]:
        """Operand name -> the buffer it lives in (tensorviews resolve to their source)."""
        lir = getattr(self.session.result, "lir", None)
        get = getattr(lir, "get", None)
        roots: dict[str, str] = {}
        if get is None:
            return roots
        try:
            from compiler.lir.ir import view_root
        except Exception:  # noqa: BLE001
            return roots
        for ins in self.instrs:
            for n, _m in ins["operands"]:
                if n in roots:
                    continue
                try:
                    roots[n] = view_root(get(n))[0].name
                except Exception:  # noqa: BLE001
                    roots[n] = n
        return roots

    @property
    def available(self) -> bool:
        return self.executor is not None

    @property
    def executor_name(self) -> str:
        return str(getattr(self.executor, "name", "?"))

    @property
    def has_code(self) -> bool:
        """Whether the executor can show generated code (LLVM IR, assembly)."""
        return callable(getattr(self.executor, "llvm_ir", None))

    def code(self, kind: str, k: int) -> str:
        """LLVM IR ("llvm") or assembly ("asm") of instruction `k` (may take a moment)."""
        if not self.has_code:
            why = self.fallback_error or f"the {self.executor_name} executor generates no code"
            return f"; no generated code: {why}\n"
        if kind == "llvm":
            return self.executor.llvm_ir(k)  # type: ignore[union-attr]
        return self.executor.assembly(k)  # type: ignore[union-attr]

    def strategy(self, k: int) -> str:
        f = getattr(self.executor, "strategy", None)
        try:
            return str(f(k)) if callable(f) else ""
        except Exception:  # noqa: BLE001
            return ""

    @property
    def pc(self) -> int:
        return self.executor.pc if self.executor else 0

    @property
    def finished(self) -> bool:
        return self.pc >= len(self.instrs)

    def inputs(self) -> dict[str, Any]:
        """The sample model's recorded input (`<model>.input.npz`), else seeded random data."""
        import numpy as np

        p = Path(self.session.model_path)
        npz = p.with_name(p.stem + ".input.npz")
        if npz.exists():
            with np.load(npz) as f:
                return {k: f[k] for k in f.files}
        rng = np.random.default_rng(0)
        out = {}
        module = getattr(self.session.result, "module", None)
        for ph in (module.inputs() if module is not None else []):
            out[ph.name] = rng.standard_normal(ph.type.shape).astype(ph.type.np_dtype)
        return out

    def restart(self) -> None:
        assert self.executor is not None
        inputs = self.inputs()
        self.executor.reset(inputs)
        if self.reference is not None:
            self.reference.reset(inputs)
        self.last_written, self.stop_reason = [], "restarted"
        self.last_index, self.comparison, self.divergence = None, None, None

    def toggle_breakpoint(self, index: int) -> bool:
        if index in self.breakpoints:
            self.breakpoints.discard(index)
            return False
        self.breakpoints.add(index)
        return True

    def _writes(self, k: int) -> list[str]:
        if k >= len(self.instrs) or self.instrs[k]["kind"] == "deallocactivation":
            return []
        return [n for n, m in self.instrs[k]["operands"] if "out" in m]

    def written_buffers(self, names: list[str] | None = None) -> list[str]:
        """The buffers (tensorviews resolved) behind `names` (default: the last step's writes)."""
        names = self.last_written if names is None else names
        return list(dict.fromkeys(self._roots.get(n, n) for n in names))

    def step(self, compare: bool = True) -> None:
        if self.executor is None or self.finished:
            self.stop_reason = "finished" if self.executor else "unavailable"
            return
        k = self.pc
        written = self.executor.step()
        if self.reference is not None and self.reference.pc == k:
            self.reference.step()
        self.last_index = k
        self.last_written = list(written) if written is not None else self._writes(k)
        self.comparison = self.compare(k) if compare else None
        self.stop_reason = f"stepped {self.instrs[k]['name'] if k < len(self.instrs) else k}"

    def compare(self, k: int | None = None) -> list[dict[str, Any]] | None:
        """Each buffer instruction `k` (default: the last executed) wrote: the executor's value
        against the reference's, with the largest absolute and relative error. None without a
        reference or when the reference is not at the same point."""
        k = self.last_index if k is None else k
        if self.reference is None or k is None or self.reference.pc != self.pc:
            return None
        names = self.last_written if k == self.last_index else self._writes(k)
        out = []
        for n in names:
            row: dict[str, Any] = {"name": n}
            try:
                got, ref = self.executor.read(n), self.reference.read(n)  # type: ignore[union-attr]
                row.update(compare_arrays(got, ref, self.rtol, self.atol))
                row["ref_stats"] = array_stats(ref)
            except Exception as e:  # noqa: BLE001
                row.update({"ok": True, "error": f"{type(e).__name__}: {e}"})
            out.append(row)
        return out

    def _hits(self, k: int) -> str | None:
        if k in self.breakpoints:
            return f"breakpoint at #{k}"
        ins = self.instrs[k]
        if ins["kind"] in self.op_breakpoints:
            return f"breakpoint on op {ins['kind']}"
        hit = set(self.written_buffers(self._writes(k))) & self.write_breakpoints
        hit |= set(self._writes(k)) & self.write_breakpoints
        if hit:
            return f"breakpoint on write to {', '.join(sorted(hit))}"
        return None

    def cont(self) -> None:
        """Run until a breakpoint (not the one we stand on) or the end."""
        if self.executor is None:
            return
        first = True
        while not self.finished:
            if not first:
                why = self._hits(self.pc)
                if why:
                    self.comparison = self.compare()
                    self.stop_reason = why
                    return
            first = False
            self.step(compare=False)
        self.comparison = self.compare()
        self.stop_reason = "finished"

    def run_to_divergence(self, rtol: float | None = None, atol: float | None = None) -> bool:
        """Step executor and reference together until an instruction's output differs beyond
        the tolerance; stop right after it. True if a divergence was found."""
        if self.executor is None:
            return False
        if self.reference is None:
            self.stop_reason = "no reference executor to compare with"
            return False
        if rtol is not None:
            self.rtol = rtol
        if atol is not None:
            self.atol = atol
        n = 0
        self.divergence = None
        while not self.finished:
            self.step(compare=True)
            n += 1
            bad = [r for r in self.comparison or [] if not r.get("ok", True)]
            if bad:
                k = self.last_index
                worst = max(bad, key=lambda r: r["abs"])
                self.divergence = {"index": k, "name": self.instrs[k]["name"], **worst}
                self.stop_reason = (f"diverged at #{k} {self.instrs[k]['kind']}: "
                                    f"%{worst['name']} abs {worst['abs']:.3g} "
                                    f"rel {worst['rel']:.3g} "
                                    f"(rtol {self.rtol:g}, atol {self.atol:g})")
                return True
        self.stop_reason = (f"no divergence, {n} instructions "
                            f"(rtol {self.rtol:g}, atol {self.atol:g})")
        return False

    def operands(self, k: int | None = None) -> list[dict[str, Any]]:
        """The operands of instruction `k` (default: current) with offset, shape and stats."""
        import numpy as np

        k = self.pc if k is None else k
        if k >= len(self.instrs):
            return []
        bufs = {b["name"]: b for b in self.session.lifetimes().get("buffers", [])}
        out = []
        ops = self.instrs[k]["operands"] or [(self.instrs[k]["name"], "def")]
        for name, mode in ops:
            b = bufs.get(name) or bufs.get(self._roots.get(name, name), {})
            row: dict[str, Any] = {"name": name, "mode": mode,
                                   "offset": b.get("offset"), "size": b.get("size")}
            try:
                arr = np.asarray(self.executor.read(name)) if self.executor else None
            except Exception as e:  # noqa: BLE001
                arr, row["error"] = None, str(e)
            if arr is not None:
                row.update(array_stats(arr))
                row["array"] = arr
            out.append(row)
        return out


def array_stats(arr: Any) -> dict[str, Any]:
    import numpy as np

    a = np.asarray(arr)
    out: dict[str, Any] = {"shape": tuple(a.shape), "dtype": str(a.dtype)}
    if a.size and a.dtype.kind in "fiub":
        f = a.astype(np.float64, copy=False)
        finite = np.isfinite(f)
        out["nan"] = int(np.isnan(f).sum())
        out["inf"] = int(np.isinf(f).sum())
        if finite.any():
            fv = f[finite]
            out["min"], out["max"], out["mean"] = float(fv.min()), float(fv.max()), float(fv.mean())
    return out


def slice_2d(arr: Any, max_rows: int = 8, max_cols: int = 8) -> list[list[float]]:
    """A 2-D slice of an array for display: the last two dims at index 0 of the rest."""
    import numpy as np

    a = np.asarray(arr)
    while a.ndim > 2:
        a = a[0]
    if a.ndim == 1:
        a = a[None, :]
    if a.ndim == 0:
        a = a.reshape(1, 1)
    return a[:max_rows, :max_cols].tolist()
