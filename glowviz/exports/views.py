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
from dataclasses import dataclass
from typing import Any

from compiler.errors import CompilerError
from compiler.passes.manager import IR
from compiler.pipeline import CompileOptions
from glowviz.exports.render import GRAPHVIZ_FORMATS, ExportError, render_dot
from glowviz.session import CompileSession, StageRecord

VIEWS = ("graph", "lir", "schedule", "lifetimes", "memory")
FORMATS = ("dot", "svg", "pdf", "png", "json", "txt")

#: Which formats each view supports.
VIEW_FORMATS: dict[str, tuple[str, ...]] = {
    "graph": ("dot", "svg", "pdf", "png", "json"),
    "lir": ("dot", "svg", "pdf", "png", "json", "txt"),
    "schedule": ("svg", "pdf", "png", "json"),
    "lifetimes": ("svg", "pdf", "png", "json"),
    "memory": ("svg", "pdf", "png", "json"),
}


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
    """Compile with the IDE's session (every stage kept); compile errors become CompilerErrors."""
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


def view_data(session: CompileSession, view: str, stage: str = "final") -> tuple[Any, Stage]:
    """(the view's data, the stage it shows). For graph/lir the data is the IR object."""
    from glowviz.exports.json_export import memory_data, schedule_data

    if view == "graph":
        st = resolve_stage(session.stages, stage, want="graph")
        if st.ir_kind != "graph":
            raise ExportError(
                f"stage '{stage}' ({st.label}) holds low-level IR, not a graph",
                hint="use --view lir, or a graph stage such as 'post-lower-opt' or 'final'",
            )
        return st.ir, st
    if view == "lir":
        st = resolve_stage(session.stages, stage, want="lir")
        if st.ir_kind != "lir":
            raise ExportError(
                f"stage '{stage}' ({st.label}) is a graph stage, not low-level IR",
                hint="use --view graph, or a low-level stage such as 'irgen', 'lir-opt' or 'final'",
            )
        return st.ir, st
    st = resolve_stage(session.stages, stage)
    report = session.memory_report(st.index)
    if report is None:
        raise ExportError(
            "this compile has no memory plan",
            hint=session.low_level_reason or "the pipeline stopped early",
        )
    if view == "schedule":
        return schedule_data(session.schedules(st.index), report, stage=st.label), st
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
) -> bytes:
    """The export file's bytes."""
    from glowviz.exports.dot_graph import graph_data, graph_to_dot
    from glowviz.exports.dot_lir import lir_data, lir_text, lir_to_dot
    from glowviz.exports.figures import FIGURES, figure_bytes
    from glowviz.exports.json_export import dumps
    from glowviz.exports.palette import load_palette

    check_combination(view, fmt)
    pal = load_palette(theme)
    data, st = view_data(session, view, stage)
    if view == "graph":
        gdata = graph_data(data, stage=st.label)
        if fmt == "json":
            return dumps(gdata).encode()
        dot = graph_to_dot(gdata, theme=pal, compact=compact, edge_labels=edge_labels, title=title)
        return dot.encode() if fmt == "dot" else render_dot(dot, fmt)
    if view == "lir":
        if fmt == "txt":
            return lir_text(data).encode()
        ldata = lir_data(data, stage=st.label)
        if fmt == "json":
            return dumps(ldata).encode()
        dot = lir_to_dot(ldata, theme=pal, compact=compact, title=title)
        return dot.encode() if fmt == "dot" else render_dot(dot, fmt)
    if fmt == "json":
        return dumps(data).encode()
    assert fmt in GRAPHVIZ_FORMATS
    fig = FIGURES[view](data, theme=pal, wide=wide, title=title)
    return figure_bytes(fig, fmt)


__all__ = [
    "FORMATS",
    "VIEWS",
    "VIEW_FORMATS",
    "Stage",
    "check_combination",
    "compile_session",
    "render_view",
    "resolve_stage",
    "stage_names",
    "view_data",
]
