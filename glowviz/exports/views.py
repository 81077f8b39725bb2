"""`glowviz export` as a library: compile once (through the IDE's `CompileSession`), pick a stage
by name, take the view's data from the session and render it to DOT / SVG / PDF / PNG / JSON /
text bytes (the exports layer: above the session, below the CLI and the IDE).

Stage names are the pipeline's own: any PassEvent `pass_name` or `stage` (the last occurrence
wins), `stage/pass`, `name#K` for the K-th occurrence (1-based), `@N` for event index N, and
`final`. The graph view needs a graph stage, the lir view a low-level one; schedule, lifetimes
and memory show the session's memory report and schedules of the stage
(`CompileSession.memory_report(i)`: the final plan, a low-level stage's own plan, or for a
graph stage the plan the low-level pipeline makes of that graph).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from compiler.errors import CompilerError
from compiler.passes.manager import IR
from compiler.pipeline import CompileOptions
from glowviz.exports.formats import FORMATS, VIEW_FORMATS, VIEWS
from glowviz.exports.render import GRAPHVIZ_FORMATS, ExportError, render_dot
from glowviz.session import CompileSession, StageRecord


@dataclass
class Stage:
    index: int  # position in the session's stage list (== PassEvent.index)
    stage: str
    pass_name: str
    ir_kind: str
    ir: IR

    @property
    def label(self) -> str:
        return f"{self.stage}/{self.pass_name}"


def check_combination(view: str, fmt: str) -> None:
    if view not in VIEWS:
        raise ExportError(f"unknown view '{view}'", hint=f"views: {', '.join(VIEWS)}")
    if fmt not in VIEW_FORMATS[view]:
        raise ExportError(
            f"the {view} view cannot be exported as {fmt}",
            hint=f"formats for {view}: {', '.join(VIEW_FORMATS[view])}",
        )


def compile_session(model: str, options: CompileOptions) -> CompileSession:
    """Compile with the IDE's session (every stage kept); compile errors become CompilerErrors.
    Names in the options are checked first, so a typo's error keeps its did-you-mean hint."""
    from compiler.pipeline import check_options

    check_options(options)
    session = CompileSession(model, options).compile()
    if session.error is not None:
        err = session.error
        if err.internal:
            raise RuntimeError(f"{err.headline()}\n{err.traceback}")
        raise CompilerError(err.message if err.kind != "ModelLoadError" else err.message)
    return session


def stage_names(stages: list[StageRecord]) -> list[str]:
    """Every name `resolve_stage` accepts, in pipeline order (without the #K / @N forms)."""
    seen: dict[str, None] = {}
    for r in stages:
        seen.setdefault(r.stage, None)
        seen.setdefault(r.pass_name, None)
    return [*seen, "final"]


_OCCURRENCE = re.compile(r"^(?P<name>.+)#(?P<k>\d+)$")


def resolve_stage(stages: list[StageRecord], name: str, *, want: str | None = None) -> Stage:
    """The stage record called `name`. `want` ("graph" | "lir") restricts `final` and plain
    names to stages of that IR kind (a plain name's last occurrence of that kind)."""

    def as_stage(r: StageRecord) -> Stage:
        return Stage(r.index, r.stage, r.pass_name, r.ir_kind, r.ir)

    if not stages:
        raise ExportError("the pipeline produced no stages")
    pool = [r for r in stages if want is None or r.ir_kind == want]
    if name == "final" and want == "graph":
        # The schedule event carries the same graph; name the pass that produced it.
        pool = [r for r in pool if r.stage != "schedule"] or pool
    if name == "final":
        if not pool:
            raise ExportError(f"no {want} stage in this compile")
        return as_stage(pool[-1])
    if name.startswith("@") and name[1:].isdigit():
        k = int(name[1:])
        for r in stages:
            if r.index == k:
                return as_stage(r)
        raise ExportError(f"no stage with index {k}", hint=f"indices 0..{stages[-1].index}")
    m = _OCCURRENCE.match(name)
    if m:
        base, k = m.group("name"), int(m.group("k"))
        hits = [r for r in stages if base in (r.pass_name, r.stage, f"{r.stage}/{r.pass_name}")]
        if 1 <= k <= len(hits):
            return as_stage(hits[k - 1])
        if hits:
            raise ExportError(f"'{base}' occurs {len(hits)} time(s); there is no #{k}")
    else:
        hits = [r for r in stages if name in (r.pass_name, r.stage, f"{r.stage}/{r.pass_name}")]
        typed = [r for r in hits if want is None or r.ir_kind == want]
        if typed:
            return as_stage(typed[-1])
        if hits:
            return as_stage(hits[-1])
    counts: dict[str, int] = {}
    for r in stages:
        counts[r.pass_name] = counts.get(r.pass_name, 0) + 1
    repeated = [f"{n}#1..#{c}" for n, c in counts.items() if c > 1]
    raise ExportError(
        f"unknown stage '{name}'",
        hint="valid: "
        + ", ".join(stage_names(stages))
        + (f"; repeated passes: {', '.join(repeated)}" if repeated else "")
        + f"; or @0..@{stages[-1].index}",
    )


# ---------------------------------------------------------------------------------------------
# The view data: the session's (glowviz.session.views), never rebuilt here
# ---------------------------------------------------------------------------------------------


#: The IR views: what a stage of the other IR is, and what to ask for instead.
_WRONG_IR = {
    "graph": (
        "holds low-level IR, not a graph",
        "use --view lir, or a graph stage such as 'post-lower-opt' or 'final'",
    ),
    "lir": (
        "is a graph stage, not low-level IR",
        "use --view graph, or a low-level stage such as 'irgen', 'lir-opt' or 'final'",
    ),
}


def view_data(session: CompileSession, view: str, stage: str = "final") -> tuple[Any, Stage]:
    """(the view's data, the stage it shows). For graph/lir the data is the IR object."""
    from glowviz.exports.json_export import memory_data, schedule_data

    if view in _WRONG_IR:
        st = resolve_stage(session.stages, stage, want=view)
        if st.ir_kind != view:
            what, hint = _WRONG_IR[view]
            raise ExportError(f"stage '{stage}' ({st.label}) {what}", hint=hint)
        return st.ir, st
    st = resolve_stage(session.stages, stage)
    report = session.memory_report(st.index)
    if report is None:
        raise ExportError(
            "this compile has no memory plan",
            hint=session.low_level_reason or "the pipeline stopped early",
        )
    if view == "schedule":
        return (
            schedule_data(
                session.schedules(st.index),
                report,
                stage=st.label,
                reports=session.scheduler_reports(st.index),
            ),
            st,
        )
    return memory_data(report, stage=st.label), st


def render_view(
    session: CompileSession,
    view: str,
    fmt: str,
    *,
    stage: str = "final",
    theme: str | None = None,
    compact: bool = False,
    wide: bool = False,
    edge_labels: bool = True,
    title: str | None = None,
    width: str | float | None = None,
    detail: str = "auto",
    subgraph: str | None = None,
    radius: int | None = None,
    pass_name: str | None = None,
) -> bytes:
    """The export file's bytes (deterministic: the same bytes for the same compile)."""
    from glowviz.exports.drawing import DETAILS, WIDE_WIDTH_IN
    from glowviz.exports.json_export import dumps
    from glowviz.exports.palette import load_palette

    check_combination(view, fmt)
    if detail not in DETAILS:
        raise ExportError(f"unknown detail '{detail}'", hint=f"one of: {', '.join(DETAILS)}")
    if radius is not None and radius < 0:
        raise ExportError("--radius must be >= 0")
    if (subgraph or pass_name) and view not in ("graph", "lir"):
        raise ExportError(
            "--subgraph and --pass draw graph or lir views",
            hint=f"the {view} view shows a whole stage; use --stage",
        )
    if subgraph and pass_name:
        raise ExportError("give --subgraph or --pass, not both")
    if width is None and wide:
        width = WIDE_WIDTH_IN
    pal = load_palette(theme)
    focus: set[str] | None = None
    highlight: set[str] = set()
    notes: list[str] = []
    if pass_name:
        stage, focus, highlight, notes = pass_focus(
            session, view, pass_name, stage, 1 if radius is None else radius
        )
    data, st = view_data(session, view, stage)
    if view in ("graph", "lir"):
        if fmt == "txt":
            from glowviz.exports.dot_lir import lir_text

            return lir_text(data).encode()
        from glowviz.exports.dot_graph import graph_boxes, graph_data, graph_to_dot
        from glowviz.exports.dot_lir import lir_boxes, lir_data, lir_to_dot

        # The two views share the box model (`boxes`) and the DOT options; only the source differs.
        to_dot: Callable[..., str]
        if view == "graph":
            vdata = graph_data(data, stage=st.label)
            boxes_of, to_dot = graph_boxes, graph_to_dot
        else:
            vdata = lir_data(data, stage=st.label)
            boxes_of, to_dot = lir_boxes, lir_to_dot
        if fmt == "json":
            return dumps(vdata).encode()
        if subgraph:
            focus = neighbourhood_of(boxes_of(vdata), subgraph, 2 if radius is None else radius)
        dot = to_dot(
            vdata,
            theme=pal,
            compact=compact,
            edge_labels=edge_labels,
            title=title,
            width=width,
            detail=detail,
            focus=focus,
            highlight=highlight,
            notes=notes,
        )
        return dot.encode() if fmt == "dot" else render_dot(dot, fmt)
    if fmt == "json":
        return dumps(data).encode()
    assert fmt in GRAPHVIZ_FORMATS
    # matplotlib only here: a third of a second of `glowviz export`'s start that the DOT,
    # Graphviz and JSON exports do not need.
    from glowviz.exports.figures import FIGURES, figure_bytes

    fig = FIGURES[view](data, theme=pal, width=width, title=title)
    return figure_bytes(fig, fmt)


def neighbourhood_of(boxes: list[Any], key: str, radius: int) -> set[str]:
    """Keys of the boxes within `radius` edges of `key` (either direction); an unknown key is
    an ExportError naming the closest names."""
    import difflib

    keys = [b.key for b in boxes]
    if key not in keys:
        close = difflib.get_close_matches(key, keys, n=3)
        raise ExportError(
            f"no node or instruction named '{key}' at this stage",
            hint=(
                f"did you mean {', '.join(close)}?"
                if close
                else f"{len(keys)} names, e.g. " + ", ".join(keys[:5])
            ),
        )
    adj: dict[str, set[str]] = {k: set() for k in keys}
    for b in boxes:
        for r in b.reads:
            if r in adj:
                adj[b.key].add(r)
                adj[r].add(b.key)
    keep, frontier = {key}, {key}
    for _ in range(radius):
        frontier = {n for f in frontier for n in adj[f]} - keep
        keep |= frontier
    return keep


def pass_focus(
    session: CompileSession, view: str, pass_name: str, stage: str, radius: int
) -> tuple[str, set[str], set[str], list[str]]:
    """(the stage after the pass, the boxes to draw, those the pass changed, notes) for
    `--pass PASS` (`PASS#K` for its K-th run): what the pass created, changed or moved
    (its provenance, and for graphs the computed diff) plus `radius` boxes of context."""
    from compiler.passes.registry import registered_passes

    kind = "graph" if view == "graph" else "lir"
    base = _OCCURRENCE.match(pass_name)
    name = base.group("name") if base else pass_name
    known = registered_passes()
    if name not in known:
        from compiler.pipeline import check_pass_names

        check_pass_names([name], "--pass")
    if known[name].ir_kind != kind:
        other = "lir" if kind == "graph" else "graph"
        raise ExportError(
            f"'{name}' is a {'low-level' if kind == 'graph' else 'graph'} pass",
            hint=f"use --view {other} with --pass {name}",
        )
    if stage != "final":
        raise ExportError("--pass picks the stage (the one after the pass); leave out --stage")
    runs = [r for r in session.stages if r.pass_name == name]
    if not runs:
        raise ExportError(
            f"pass '{name}' did not run in this compile",
            hint="it was disabled, or the pipeline stopped before it",
        )
    if base:
        st = resolve_stage(session.stages, pass_name, want=kind)
    else:  # the last run that changed something (else the last run)
        pick = next((r for r in reversed(runs) if r.changed), runs[-1])
        st = resolve_stage(session.stages, f"@{pick.index}")
    rec = session.stages[st.index]
    prev = next((j for j in range(st.index - 1, -1, -1) if session.stages[j].ir_kind == kind), None)
    changed: set[str] = set()
    removed: list[str] = []
    for r in rec.provenance:
        if r.kind == "erase":
            removed.append(r.node)
        else:
            changed.add(r.node)
            if r.kind == "replace":
                changed.update(r.sources)
    if kind == "graph" and prev is not None:
        d = session.diff(prev, st.index)
        changed.update(n.name for n in d.added)
        changed.update(c.name for c in d.changed)
        removed.extend(n.name for n in d.removed)
    if kind == "graph":
        from glowviz.exports.dot_graph import graph_boxes, graph_data

        boxes = graph_boxes(graph_data(rec.module))
    else:
        from glowviz.exports.dot_lir import lir_boxes, lir_data

        boxes = lir_boxes(lir_data(rec.ir))
    # Markers folded into a box count as that box.
    owner = {alias: b.key for b in boxes for alias in (b.key, *b.folded)}
    highlight = {owner[n] for n in changed if n in owner}
    removed = sorted(set(removed) - set(owner))
    focus: set[str] = set()
    for k in sorted(highlight):
        focus |= neighbourhood_of(boxes, k, radius)
    label = f"{name}" + (f" (run {base.group('k')})" if base else "")
    notes = [
        f"{label}: {len(highlight)} changed (thick border)"
        + (f", {radius} edge{'s' if radius != 1 else ''} of context" if highlight else "")
    ]
    if removed:
        shown = ", ".join(removed[:6]) + (f" … (+{len(removed) - 6})" if len(removed) > 6 else "")
        notes.append(f"removed: {shown}")
    if not highlight and not removed:
        notes = [f"{label} changed nothing at this point of the pipeline"]
    return f"@{st.index}", focus, highlight, notes


__all__ = [
    "FORMATS",
    "VIEWS",
    "VIEW_FORMATS",
    "Stage",
    "neighbourhood_of",
    "pass_focus",
    "check_combination",
    "compile_session",
    "render_view",
    "resolve_stage",
    "stage_names",
    "view_data",
]
