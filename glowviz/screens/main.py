"""The workspace: Pipeline pane on the left, the views (tabs) on the right, all following the
selected stage. Compilation runs in a thread worker; stages appear as they are produced."""

from __future__ import annotations

from pathlib import Path, PurePath
from typing import TYPE_CHECKING, ClassVar, cast

from textual import events, on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import Screen
from textual.widgets import Footer, Header, Input, ProgressBar, TabbedContent, TabPane

from glowviz.session import CompileSession, StageRecord
from glowviz.widgets.debugger_view import DebuggerView
from glowviz.widgets.diff_view import DiffView
from glowviz.widgets.error_pane import ErrorPane
from glowviz.widgets.graph_view import GraphView
from glowviz.widgets.ir_view import IRView
from glowviz.widgets.lifetimes_view import LifetimesView
from glowviz.widgets.memory_view import MemoryView
from glowviz.widgets.pipeline_pane import PipelinePane
from glowviz.widgets.schedule_view import ScheduleView

if TYPE_CHECKING:  # the app above pushes this screen; only its type is needed here
    from glowviz.app import GlowvizApp

_HERE = Path(__file__).resolve().parent
_WIDGETS = _HERE.parent / "widgets"

#: (tab id, title, view class); the order of the tabs and of the 1..7 keys.
VIEWS = (
    ("graph", "Graph", GraphView),
    ("diff", "Diff", DiffView),
    ("ir", "IR", IRView),
    ("schedule", "Schedule", ScheduleView),
    ("lifetimes", "Lifetimes", LifetimesView),
    ("memory", "Memory", MemoryView),
    ("debugger", "Debugger", DebuggerView),
)


class MainScreen(Screen):
    CSS_PATH: ClassVar[list[str | PurePath]] = [
        str(_HERE / "main.tcss"),
        *sorted(str(p) for p in _WIDGETS.glob("*.tcss")),
    ]
    BINDINGS = [
        Binding("n", "step_stage(1)", "Next stage", id="stage.next"),
        Binding("p", "step_stage(-1)", "Prev stage", id="stage.prev"),
        Binding("u", "toggle_unchanged", "Hide unchanged", id="stage.hide_unchanged"),
        Binding("ctrl+f", "focus_filter", "Filter passes", show=False, id="stage.filter"),
        Binding("ctrl+o", "open_model", "Open model", show=False, id="app.open"),
        *[
            Binding(str(k + 1), f"show_view('{v[0]}')", v[1], show=False, id=f"view.{v[0]}")
            for k, v in enumerate(VIEWS)
        ],
    ]

    def __init__(self, session: CompileSession) -> None:
        super().__init__()
        self.session = session
        self.index: int | None = None
        self._shown: dict[str, tuple[int, int | None]] = {}
        self._focus_pending: str | None = None  # the view to focus once its tab is shown

    def compose(self) -> ComposeResult:
        yield Header()
        yield ProgressBar(total=None, show_eta=False, id="compile-progress")
        yield ErrorPane(id="error-pane", classes="hidden")
        with Horizontal(id="workspace"):
            yield PipelinePane(id="pipeline")
            with Vertical(id="views"):
                with TabbedContent(id="tabs"):
                    for tab_id, title, cls in VIEWS:
                        with TabPane(title, id=tab_id):
                            yield cls(id=f"view-{tab_id}")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#pipeline-table").focus()
        self.start_compile()

    # -- compiling ----------------------------------------------------------------------------
    def start_compile(self, session: CompileSession | None = None) -> None:
        if session is not None:
            self.session = session
        self.index, self._shown = None, {}
        self.query_one(PipelinePane).set_records([])
        self.query_one(PipelinePane).set_notes([])
        self.query_one(ErrorPane).show_error(None)
        bar = self.query_one("#compile-progress", ProgressBar)
        bar.remove_class("hidden")
        bar.update(total=None, progress=0)
        self.set_status("compiling…")
        self._compile(self.session)

    @work(thread=True, exclusive=True, group="compile")
    def _compile(self, session: CompileSession) -> None:
        session.compile(progress=lambda rec: self.app.call_from_thread(self._on_stage, rec))
        self.app.call_from_thread(self._on_compiled, session)
        self._warm_up(session)

    def _warm_up(self, session: CompileSession) -> None:
        """Off the UI thread, after compiling: JIT-compile the debugger's LLVM kernels, then
        compute every stage's view data (text, graph rows, diff with the previous stage) so
        that moving between stages only draws."""
        from textual.worker import get_current_worker

        worker = get_current_worker()
        if session.error is None and session.result is not None:
            try:
                session.get_debugger()
            except Exception:  # noqa: BLE001 - the debugger view shows its own error
                pass
        try:
            for i in range(len(session.stages)):
                if worker.is_cancelled or session is not self.session:
                    return
                session.prefetch(i)
        except Exception:  # noqa: BLE001 - a view computes its data itself when shown
            pass

    def _on_stage(self, rec: StageRecord) -> None:
        pane = self.query_one(PipelinePane)
        pane.add_record(rec)
        self.query_one("#compile-progress", ProgressBar).advance(1)
        self.set_status(f"compiling… {rec.label}")
        if self.index is None:
            pane.select(0)

    def _on_compiled(self, session: CompileSession) -> None:
        if session is not self.session:
            return
        pane = self.query_one(PipelinePane)
        if len(pane.records) != len(session.stages):
            pane.set_records(session.stages)
        pane.set_notes(session.notes)
        bar = self.query_one("#compile-progress", ProgressBar)
        bar.update(total=max(1, len(session.stages)), progress=len(session.stages))
        bar.add_class("hidden")
        self.query_one(ErrorPane).show_error(session.error, len(session.stages))
        if session.error is not None:
            self.set_status(
                f"FAILED: {session.error.kind}"
                + (f" in {session.error.pass_name}" if session.error.pass_name else "")
            )
        else:
            extra = f"; {session.low_level_reason}" if session.low_level_reason else ""
            self.set_status(f"{len(session.stages)} stages in {session.time_ms:.0f} ms{extra}")
        self._shown = {}
        if session.stages:
            last_graph = session.graph_stage_at_or_before(len(session.stages) - 1)
            pane.select(last_graph if last_graph is not None else len(session.stages) - 1)

    def set_status(self, status: str) -> None:
        self.app.sub_title = f"{self.session.model_name} — {status}"

    # -- following the selected stage ---------------------------------------------------------
    @on(PipelinePane.StageSelected)
    def _stage_selected(self, event: PipelinePane.StageSelected) -> None:
        self.index = event.index
        self.refresh_active_view()

    @on(TabbedContent.TabActivated)
    def _tab(self, event: TabbedContent.TabActivated) -> None:
        self.refresh_active_view()
        if event.pane.id is not None and event.pane.id == self._focus_pending:
            # Focus once the pane is displayed: focusing a widget of a still-hidden pane is a
            # no-op, and hiding the old pane then blurs its widget, leaving no focus at all.
            self._focus_pending = None
            self.call_after_refresh(self._focus_view, event.pane.id)

    def active_view_id(self) -> str:
        return self.query_one(TabbedContent).active or "graph"

    def view(self, tab_id: str):
        return self.query_one(f"#view-{tab_id}")

    def refresh_active_view(self) -> None:
        if self.index is None or not self.session.stages:
            return
        tab = self.active_view_id()
        stage_bound = tab in ("graph", "diff", "ir")
        key = (id(self.session), self.index if stage_bound else None)
        if self._shown.get(tab) == key:
            return
        if not stage_bound and not self.session.done:
            return
        self._shown[tab] = key
        try:
            self.view(tab).show(self.session, self.index)
        except Exception as e:  # noqa: BLE001 - one view's trouble must not take the IDE down
            self.notify(f"{tab} view failed: {type(e).__name__}: {e}", severity="error")

    # -- actions ------------------------------------------------------------------------------
    def action_step_stage(self, delta: int) -> None:
        self.query_one(PipelinePane).step(delta)

    def action_toggle_unchanged(self) -> None:
        self.query_one(PipelinePane).toggle_hide_unchanged()

    def action_focus_filter(self) -> None:
        self.query_one("#pipeline-filter").focus()

    def action_show_view(self, tab_id: str) -> None:
        tabs = self.query_one(TabbedContent)
        if tabs.active == tab_id:
            self.call_after_refresh(self._focus_view, tab_id)
        else:
            self._focus_pending = tab_id  # focused when TabActivated says it is shown
            tabs.active = tab_id

    def on_descendant_blur(self, event: events.DescendantBlur) -> None:
        self.call_after_refresh(self._keep_focus)

    def _keep_focus(self) -> None:
        """Never leave the workspace without focus, or with the focus in a hidden tab: when the
        focused widget was hidden (a Hide can reach a view's widget after its tab was shown and
        the widget focused, and Textual then moves the focus to a sibling or to nothing),
        focus the active view again."""
        focused = self.focused
        hidden = focused is not None and not all(
            getattr(node, "display", True) for node in focused.ancestors_with_self
        )
        if self.is_current and (focused is None or hidden):
            self._focus_view(self.active_view_id())

    def _focus_view(self, tab_id: str) -> None:
        """Keys go to the view just shown (its table or text), not to the filter box."""
        from textual.widgets import DataTable, TextArea

        from glowviz.widgets.node_list import NodeList

        for w in self.view(tab_id).query("NodeList, DataTable, TextArea"):
            if isinstance(w, NodeList | DataTable | TextArea) and w.display:
                w.focus()
                return

    def goto_stage(self, index: int) -> None:
        pane = self.query_one(PipelinePane)
        if not pane.shows(self.session.stages[index]):
            pane.filter_text = ""
            self.query_one("#pipeline-filter", Input).value = ""
            if pane.hide_unchanged:
                pane.toggle_hide_unchanged()
            pane.rebuild()
        pane.select(index)

    def goto_node(self, name: str) -> None:
        self.action_show_view("graph")
        self.refresh_active_view()
        if not self.view("graph").select_node(name):
            self.notify(f"node {name} is not in this stage", severity="warning")

    def goto_buffer(self, name: str) -> None:
        self.action_show_view("memory")
        self.refresh_active_view()
        self.view("memory").select(name)

    def goto_instruction(self, k: int) -> None:
        self.action_show_view("debugger")
        self.refresh_active_view()
        from textual.widgets import DataTable

        t = self.view("debugger").query_one(DataTable)
        t.move_cursor(row=k)
        t.focus()

    def action_open_model(self) -> None:
        from glowviz.screens.open_model import OpenModelScreen

        def opened(path: str | None) -> None:
            if path:
                cast("GlowvizApp", self.app).open_model(path)

        self.app.push_screen(OpenModelScreen(), opened)

    @on(MemoryView.ReportRequested)
    def _report_requested(self, event: MemoryView.ReportRequested) -> None:
        """The Memory view wants a second report to compare with: ask for it."""
        from glowviz.screens.compare_report import CompareReportScreen

        view = event.view

        def chosen(spec: str | None) -> None:
            if spec:
                view.compare_report(spec)

        self.app.push_screen(CompareReportScreen(event.last), chosen)

    @on(GraphView.NodeOpened)
    def _node_opened(self, event: GraphView.NodeOpened) -> None:
        from glowviz.screens.node_detail import NodeDetailScreen

        if self.index is None:
            return
        d = self.session.node_detail(self.index, event.name)
        if d is not None:
            self.app.push_screen(NodeDetailScreen(d))
