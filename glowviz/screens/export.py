"""Export the current view through `glowviz.exports`: the file
goes to ./glowviz-exports/, rendered in a worker, with the current theme."""

from __future__ import annotations

from pathlib import Path

#: tab id -> (export view, format)
TAB_EXPORTS = {
    "graph": ("graph", "svg"),
    "diff": ("graph", "svg"),
    "ir": ("lir", "txt"),
    "schedule": ("schedule", "svg"),
    "lifetimes": ("lifetimes", "svg"),
    "memory": ("memory", "svg"),
    "debugger": ("lir", "txt"),
}


def export_current_view(app) -> None:
    from glowviz import themes
    from glowviz.screens.main import MainScreen

    main = next((s for s in app.screen_stack if isinstance(s, MainScreen)), None)
    if main is None or main.index is None:
        return
    tab = main.active_view_id()
    view, fmt = TAB_EXPORTS.get(tab, ("graph", "svg"))
    session = main.session
    rec = session.stages[main.index]
    if tab == "ir" and rec.ir_kind == "graph":
        view = "graph"
    stage = (
        f"@{main.index}"
        if view in ("graph", "lir") and rec.ir_kind == ("graph" if view == "graph" else "lir")
        else "final"
    )
    out = Path("glowviz-exports") / f"{Path(session.model_path).stem}-{view}-{main.index}.{fmt}"
    theme = themes.short_name(app.theme)

    def work() -> None:
        try:
            from glowviz.exports import render_view

            data = render_view(session, view, fmt, stage=stage, theme=theme)
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_bytes(data)
            msg, sev = f"exported {view} to {out}", "information"
        except Exception as e:  # noqa: BLE001 - an export failure is a message, not a crash
            msg, sev = f"export failed: {type(e).__name__}: {e}", "error"
        app.call_from_thread(app.notify, msg, severity=sev)

    app.run_worker(work, thread=True, group="export")
    app.notify(f"exporting {view} ({fmt})…")
