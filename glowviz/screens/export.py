"""Export the current view (ctrl+e, or the palette): a dialog asks for the format, the theme
and the path, each with a default (the view's first figure format, the current theme,
`glowviz-exports/<model>-<view>-<stage>.<format>`); Enter exports through `glowviz.exports`
(rendered in a worker, written atomically) and says where the file went."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from textual import on
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.widgets import Button, Input, Label, Select

from glowviz.screens.dialog import Dialog

#: tab id -> the export view that draws it
TAB_EXPORTS = {
    "graph": "graph",
    "diff": "graph",
    "ir": "lir",
    "schedule": "schedule",
    "lifetimes": "lifetimes",
    "memory": "memory",
    "debugger": "lir",
}
#: The format offered first, in this order of preference.
PREFERRED = ("svg", "pdf", "png", "dot", "json", "txt")


@dataclass
class ExportRequest:
    view: str
    fmt: str
    theme: str
    path: str
    stage: str  # an export stage name: "@N" or "final"


def export_target(main) -> tuple[str, str, str]:
    """(view, stage name, stage tag for the file name) of what the workspace shows."""
    tab = main.active_view_id()
    view = TAB_EXPORTS.get(tab, "graph")
    rec = main.session.stages[main.index]
    if view in ("graph", "lir"):
        view = "graph" if rec.ir_kind == "graph" else "lir"
    return view, f"@{main.index}", str(main.index)


def default_path(model: str, view: str, tag: str, fmt: str) -> str:
    return str(Path("glowviz-exports") / f"{Path(model).stem}-{view}-{tag}.{fmt}")


class ExportScreen(Dialog[ExportRequest]):
    DEFAULT_CSS = """
    ExportScreen > Vertical { width: 84; max-width: 98%; }
    ExportScreen Horizontal { height: auto; }
    ExportScreen Select { width: 1fr; }
    ExportScreen Label.field { width: 8; padding: 1 0 0 0; }
    ExportScreen #export-buttons { height: auto; align-horizontal: right; }
    ExportScreen .hint { color: $text-muted; }
    """

    def __init__(
        self,
        model: str,
        view: str,
        stage: str,
        tag: str,
        formats: list[str],
        theme_names: list[str],
        theme: str,
    ) -> None:
        super().__init__()
        self.model, self.view, self.stage, self.tag = model, view, stage, tag
        self.formats = formats
        self.fmt = next((f for f in PREFERRED if f in formats), formats[0])
        self.theme_names, self.theme_name = theme_names, theme
        self._auto_path = default_path(model, view, tag, self.fmt)

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label(f"Export the {self.view} view of stage {self.tag}", classes="title")
            with Horizontal():
                yield Label("format", classes="field")
                yield Select(
                    [(f.upper(), f) for f in self.formats],
                    value=self.fmt,
                    allow_blank=False,
                    id="export-format",
                )
            with Horizontal():
                yield Label("theme", classes="field")
                yield Select(
                    [(t, t) for t in self.theme_names],
                    value=self.theme_name,
                    allow_blank=False,
                    id="export-theme",
                )
            with Horizontal():
                yield Label("path", classes="field")
                yield Input(value=self._auto_path, id="export-path")
            yield Label("Enter: export   Esc: cancel", classes="hint")
            with Horizontal(id="export-buttons"):
                yield Button("Export", variant="primary", id="export-ok")
                yield Button("Cancel", id="export-cancel")

    def on_mount(self) -> None:
        self.query_one("#export-path", Input).focus()

    @on(Select.Changed, "#export-format")
    def _format(self, event: Select.Changed) -> None:
        fmt = str(event.value)
        path = self.query_one("#export-path", Input)
        if path.value == self._auto_path:  # not edited by hand: follow the format
            self._auto_path = default_path(self.model, self.view, self.tag, fmt)
            path.value = self._auto_path
        elif Path(path.value).suffix.lstrip(".") in self.formats:
            path.value = str(Path(path.value).with_suffix(f".{fmt}"))
        self.fmt = fmt

    @on(Select.Changed, "#export-theme")
    def _theme(self, event: Select.Changed) -> None:
        self.theme_name = str(event.value)

    @on(Input.Submitted, "#export-path")
    @on(Button.Pressed, "#export-ok")
    def _ok(self) -> None:
        path = self.query_one("#export-path", Input).value.strip()
        if not path:
            self.notify("give a path to write", severity="warning")
            return
        self.dismiss(ExportRequest(self.view, self.fmt, self.theme_name, path, self.stage))

    @on(Button.Pressed, "#export-cancel")
    def _cancel(self) -> None:
        self.dismiss(None)


def export_current_view(app) -> None:
    """Ask for format, theme and path, then export the current view of the current stage."""
    from glowviz import themes
    from glowviz.exports import VIEW_FORMATS
    from glowviz.screens.main import MainScreen

    main = next((s for s in app.screen_stack if isinstance(s, MainScreen)), None)
    if main is None or main.index is None:
        app.notify("nothing to export yet", severity="warning")
        return
    view, stage, tag = export_target(main)
    session = main.session
    screen = ExportScreen(
        session.model_path,
        view,
        stage,
        tag,
        list(VIEW_FORMATS[view]),
        app.glowviz_theme_names(),
        themes.short_name(app.theme),
    )

    def chosen(req: ExportRequest | None) -> None:
        if req is not None:
            run_export(app, session, req)

    app.push_screen(screen, chosen)


def run_export(app, session, req: ExportRequest) -> None:
    """Render and write in a worker; the result (or the error) is a notification."""

    def work() -> None:
        try:
            from glowviz.exports import atomic_write, render_view

            data = render_view(session, req.view, req.fmt, stage=req.stage, theme=req.theme)
            out = Path(req.path).expanduser()
            out.parent.mkdir(parents=True, exist_ok=True)
            atomic_write(out, data)
            msg, sev = f"exported {req.view} ({req.fmt}, {req.theme}) to {out}", "information"
        except Exception as e:  # noqa: BLE001 - an export failure is a message, not a crash
            msg, sev = f"export failed: {type(e).__name__}: {e}", "error"
        app.call_from_thread(app.notify, msg, severity=sev, timeout=8)

    app.run_worker(work, thread=True, group="export")
    app.notify(f"exporting {req.view} ({req.fmt})…")
