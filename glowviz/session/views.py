"""The view data of a compile session, as plain data: graph rows, node detail and history,
stage diffs, the schedule, buffer lifetimes, the memory map, the final LIR's instructions.

`SessionViewData` is a mixin of `CompileSession` (it reads `stages`, `result`, `options`,
`error`, `low_level_reason`, `done` and the caches the session resets on every compile).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from glowviz.diff import GraphDiff, diff_modules, diff_texts
from glowviz.session.util import _get, _name_of


class SessionViewData:
    """Graph, diff, schedule, lifetimes, memory and instruction data of a `CompileSession`."""

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
                try:
                    category = n.opdef.category
                except Exception:  # noqa: BLE001
                    category = "other"
                rows.append(
                    {
                        "kind": category,
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
        if key not in self._diff_cache:
            ra, rb = self.stages[a], self.stages[b]
            lo, hi = sorted((a, b))
            records = [
                (self.stages[k].pass_name, r)
                for k in range(lo + 1, hi + 1)
                for r in self.stages[k].provenance
            ]
            names = (ra.label, rb.label)
            if ra.ir_kind == rb.ir_kind == "graph":
                d = diff_modules(
                    ra.ir,
                    rb.ir,
                    records=records,
                    before_text=ra.text,
                    after_text=rb.text,
                    names=names,
                )
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
        at_peak = sorted(
            (b for b in acts if b["first"] <= peak_at <= b["last"]), key=lambda b: -b["size"]
        )
        return {
            "available": True,
            "peak_bytes": peak,
            "lower_bound_bytes": lb,
            "no_reuse_bytes": int(_get(plan, "no_reuse_bytes", default=0) or 0),
            "gap_bytes": peak - lb,
            "gap_pct": (100.0 * (peak - lb) / lb) if lb else 0.0,
            "buffers": acts,
            "all_buffers": bufs,
            "live_bytes": live,
            "peak_instruction": peak_at,
            "live_at_peak": [b["name"] for b in at_peak],
            "n_instructions": n,
            "allocator": getattr(self.options, "allocator", "?"),
            "scheduler": getattr(self.options, "scheduler", "?"),
        }

    def compare_memory(
        self, allocator: str | None = None, scheduler: str | None = None
    ) -> dict[str, Any]:
        """Recompile with another allocator/scheduler; the two memory figures side by side."""
        import dataclasses

        base = self._options()
        opts = dataclasses.replace(
            base, allocator=allocator or base.allocator, scheduler=scheduler or base.scheduler
        )
        other = type(self)(self.model_path, opts, compile_fn=self._compile_fn).compile()
        mine, theirs = self.memory_map(), other.memory_map()
        return {
            "base": {"allocator": base.allocator, "scheduler": base.scheduler, **_figs(mine)},
            "other": {"allocator": opts.allocator, "scheduler": opts.scheduler, **_figs(theirs)},
            "error": other.error.headline() if other.error else None,
            "comparison": (
                self.compare_memory_with(other.memory_report())
                if mine.get("available") and theirs.get("available")
                else None
            ),
        }

    def memory_report(self) -> dict[str, Any]:
        """The `glowviz.memory/1` report of the final memory plan (raises without a plan)."""
        from glowviz.session.memcompare import session_report

        return self._cached("memory_report", lambda: session_report(self))

    def compare_memory_with(self, other: dict[str, Any]) -> dict[str, Any]:
        """This compile's memory plan (old) against a `glowviz.memory/1` report (new): both
        sides' figures and maps, mem-diff's diff and the changed buffers
        (`glowviz.session.memcompare`)."""
        from glowviz.session.memcompare import compare_reports

        return compare_reports({**self.memory_report(), "source": self.model_path}, other)

    def compare_memory_report(self, spec: str) -> dict[str, Any]:
        """Compare with a second report: a glowviz.memory/1 JSON file, an .onnx model or a
        mem-diff spec `model.onnx:scheduler=...,allocator=...,disable=PASS+PASS`. Raises a
        CompilerError (MemDiffInputError for a missing file, bad JSON, wrong schema)."""
        from glowviz.exports.memdiff import load_side

        shapes = dict(getattr(self.options, "input_shapes", None) or {})
        return self.compare_memory_with(load_side(spec.strip(), shapes))

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
                    ops.append(
                        (
                            _name_of(_get(o, "value", default=o)),
                            str(_get(o, "mode", "kind", default="")),
                        )
                    )
            kind = str(_get(ins, "kind", "op", "opcode", default=type(ins).__name__))
            try:
                text = _instr_text(ins)
            except Exception:  # noqa: BLE001
                text = f"{kind} " + ", ".join(f"@{m} %{n}" for n, m in ops)
            out.append(
                {
                    "index": k,
                    "name": _name_of(_get(ins, "name", default=f"i{k}")),
                    "kind": kind,
                    "operands": ops,
                    "text": text,
                }
            )
        return out


def _instr_text(ins: Any) -> str:
    try:
        from compiler.lir.printer import format_instruction  # type: ignore

        return format_instruction(ins)
    except Exception:  # noqa: BLE001
        return str(ins)


def _figs(m: dict[str, Any]) -> dict[str, Any]:
    if not m.get("available"):
        return {"available": False, "reason": m.get("reason")}
    return {
        "available": True,
        "peak_bytes": m["peak_bytes"],
        "lower_bound_bytes": m["lower_bound_bytes"],
        "no_reuse_bytes": m["no_reuse_bytes"],
    }


def _buffer_dict(b: Any) -> dict[str, Any]:
    users = _get(b, "users", default=()) or ()
    return {
        "name": _name_of(_get(b, "name", default="?")),
        "size": int(_get(b, "size", default=0) or 0),
        "offset": int(_get(b, "offset", default=0) or 0),
        "region": str(_get(b, "region", default="activations") or "activations"),
        "first": int(_get(b, "first", default=0) or 0),
        "last": int(_get(b, "last", default=0) or 0),
        "producer": _name_of(_get(b, "producer", default="") or ""),
        "users": [_name_of(u) for u in users],
        "reason": str(_get(b, "reason", default="") or ""),
        "shape": str(_get(b, "type", "shape", default="") or ""),
    }


def _schedule_dict(sched: Any) -> dict[str, Any]:
    order = [_name_of(n) for n in (_get(sched, "order", "nodes", default=[]) or [])]
    live = list(_get(sched, "live_bytes", "live", default=[]) or [])
    live = [int(x) for x in live]
    peak_index = _get(sched, "peak_step", default=None)
    if peak_index is None or peak_index < 0:
        peak_index = max(range(len(live)), key=lambda k: live[k]) if live else None
    peak = (
        live[peak_index]
        if peak_index is not None
        else int(_get(sched, "peak_bytes", "peak", default=0) or 0)
    )
    return {
        "available": True,
        "order": order,
        "live_bytes": live,
        "peak_index": peak_index,
        "peak": peak,
    }


def _compute_schedule(module: Any, name: str) -> Any:
    """Run a named scheduler on the final graph, if compiler.scheduling offers a way."""
    from compiler.scheduling import schedule  # type: ignore

    return schedule(module.functions[0], name)
