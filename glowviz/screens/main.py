"""The workspace: Pipeline pane on the left, the views (tabs) on the right, every view following
the selected stage. Compilation runs in a thread worker; stages stream into the pipeline as
they are produced and the first one is shown at once, so a big model is explorable before its
last pass finished. The user's stage and view stay where they are when the compile ends."""

from __future__ import annotations

import gc
import threading
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path, PurePath
from typing import TYPE_CHECKING, ClassVar, cast

from textual import events, on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.reactive import Reactive
from textual.screen import Screen
from textual.timer import Timer
from textual.widget import Widget
from textual.widgets import Header, Input, ProgressBar, TabbedContent, TabPane, Tabs

from glowviz import keymap
from glowviz.session import CompileSession, StageRecord, gc_paused
from glowviz.widgets.debugger_view import DebuggerView
from glowviz.widgets.diff_view import DiffView
from glowviz.widgets.error_pane import ErrorPane
from glowviz.widgets.footer import WorkspaceFooter
from glowviz.widgets.graph_view import GraphView
from glowviz.widgets.ir_view import IRView
from glowviz.widgets.lifetimes_view import LifetimesView
from glowviz.widgets.memory_view import MemoryView
from glowviz.widgets.pipeline_pane import PipelinePane, fmt_ms
from glowviz.widgets.quant_view import QuantView
from glowviz.widgets.schedule_view import ScheduleView
from glowviz.widgets.stage_view import StageView

if TYPE_CHECKING:  # the app above pushes this screen; only its type is needed here
    from glowviz.app import GlowvizApp

_HERE = Path(__file__).resolve().parent
_WIDGETS = _HERE.parent / "widgets"

#: (tab id, title, view class); the order of the tabs and of the 1..8 keys.
VIEWS = (
    ("graph", "Graph", GraphView),
    ("diff", "Diff", DiffView),
    ("ir", "IR", IRView),
    ("schedule", "Schedule", ScheduleView),
    ("lifetimes", "Lifetimes", LifetimesView),
    ("memory", "Memory", MemoryView),
    ("debugger", "Debugger", DebuggerView),
    ("quant", "Quant", QuantView),
)
#: Tab titles in the compact layout: eight full titles do not fit the workspace at 100x30.
SHORT_TITLES = {"schedule": "Sched", "lifetimes": "Life", "memory": "Mem", "debugger": "Debug"}
#: Under these sizes the layout gets compact (first-class at 100x30).
NARROW_WIDTH, SHORT_HEIGHT = 140, 40
#: The pipeline pane adds the stages that finished at most this often while compiling.
STAGE_BATCH_S = 0.2
#: Full cycle collections wait for this long a pause in the keys and clicks (checked every
#: GC_CHECK_S), unless this many young collections went by without one (keys held down).
GC_IDLE_S, GC_CHECK_S, GC_FORCE_AFTER = 1.0, 0.5, 100


class _WarmUpStopped(Exception):
    """The warm-up's compile was replaced or cancelled: stop between two items."""


class MainScreen(Screen):
    CSS_PATH: ClassVar[list[str | PurePath]] = [
        str(_HERE / "main.tcss"),
        *sorted(str(p) for p in _WIDGETS.glob("*.tcss")),
    ]
    BINDINGS = [
        *keymap.bindings("MainScreen"),
        # 1..N show the views, in the order of VIEWS.
        *[
            Binding(str(k + 1), f"show_view('{v[0]}')", v[1], show=False, id=f"view.{v[0]}")
            for k, v in enumerate(VIEWS)
        ],
    ]

    #: Textual's Screen repaints itself whole when the focus moves (its `focused` reactive
    #: repaints by default): 25-55 ms at 180x50 and twice per view switch, though a focus
    #: change restyles only the widgets it concerns (`:focus` rules, which refresh
    #: themselves). The same reactive without the repaint.
    focused: Reactive[Widget | None] = Reactive(None, repaint=False)

    def __init__(self, session: CompileSession) -> None:
        super().__init__()
        self.session = session
        self.index: int | None = None
        self._shown: dict[str, tuple[int, int | None]] = {}
        #: The stage the screen last selected by itself; a selection of another stage is the
        #: user's, and the end of the compile leaves it alone.
        self._auto_index: int | None = None
        self._user_chose = False
        self._t0 = time.perf_counter()
        self._ticker: Timer | None = None
        #: Stages the compile thread finished that the pipeline pane does not list yet.
        self._arrived: deque[StageRecord] = deque()
        self._flush_posted = False
        self._last_flush = 0.0
        #: The view last asked for, views being built and what to do with them once shown.
        self._wanted_view = VIEWS[0][0]
        self._building: set[str] = set()
        self._then: dict[str, list[Callable[[StageView], object]]] = {}

    def compose(self) -> ComposeResult:
        yield Header()
        yield ProgressBar(total=None, show_eta=False, id="compile-progress")
        yield ErrorPane(id="error-pane", classes="hidden")
        with Horizontal(id="workspace"):
            yield PipelinePane(id="pipeline")
            with Vertical(id="views"):
                with TabbedContent(id="tabs"):
                    for k, (tab_id, title, cls) in enumerate(VIEWS):
                        with TabPane(title, id=tab_id):
                            # the first view is shown at once; the others mount their
                            # widgets when first shown (`show_view`)
                            yield cls(id=f"view-{tab_id}", lazy=k > 0)
        yield WorkspaceFooter()

    def on_mount(self) -> None:
        self._size_classes(self.app.size.width, self.app.size.height)
        self.query_one("#pipeline-table").focus()
        # Python's full collections came whenever enough objects had survived -- Textual's
        # line caches churn -- and scanned every unfrozen object (~100,000 once the views
        # are drawn): 50-115 ms pauses, loaded, landing on any key press, a view switch's
        # frame among them. They now run when the input pauses (young collections as ever).
        self._gc_thresholds = gc.get_threshold()
        gc.set_threshold(self._gc_thresholds[0], self._gc_thresholds[1], 1 << 30)
        self.set_interval(GC_CHECK_S, self._collect_when_idle)
        self.start_compile()

    def on_unmount(self) -> None:
        gc.set_threshold(*self._gc_thresholds)

    def _collect_when_idle(self) -> None:
        if not gc.isenabled():  # a compile runs (`gc_paused`): it collects when done
            return
        young = gc.get_count()[2]  # young collections since the last full one
        if young < self._gc_thresholds[2]:
            return
        last = getattr(self.app, "last_input", 0.0)
        if time.monotonic() - last >= GC_IDLE_S or young >= GC_FORCE_AFTER:
            gc.collect()

    def on_resize(self, event: events.Resize) -> None:
        self._size_classes(event.size.width, event.size.height)

    def _size_classes(self, width: int, height: int) -> None:
        self.set_class(width < NARROW_WIDTH, "-narrow")
        self.set_class(height < SHORT_HEIGHT, "-short")
        self.query_one(WorkspaceFooter).compact = width < NARROW_WIDTH
        tabs = self.query_one(TabbedContent)
        for tab_id, title, _cls in VIEWS:
            short = SHORT_TITLES.get(tab_id, title) if width < NARROW_WIDTH else title
            tab = tabs.get_tab(tab_id)
            if tab.label_text != short:
                tab.label = short

    # -- compiling ----------------------------------------------------------------------------
    def start_compile(self, session: CompileSession | None = None) -> None:
        if session is not None:
            self.session = session
        self.index, self._shown = None, {}
        self._auto_index, self._user_chose = None, False
        for tab_id, _title, _cls in VIEWS:
            self.view(tab_id).reset()
        self._arrived.clear()
        self.query_one(PipelinePane).set_records([])
        self.query_one(PipelinePane).set_notes([])
        self.query_one(ErrorPane).show_error(None)
        bar = self.query_one("#compile-progress", ProgressBar)
        bar.remove_class("hidden")
        bar.update(total=None, progress=0)
        self._t0 = time.perf_counter()
        self.set_status("compiling…")
        if self._ticker is not None:
            self._ticker.stop()
        self._ticker = self.set_interval(0.5, self._tick)
        self._compile(self.session)

    @work(thread=True, exclusive=True, group="compile")
    def _compile(self, session: CompileSession) -> None:
        # The cycle collector scanned the whole heap -- a compiled DenseNet-121 is a million
        # objects -- in pauses of 0.7-1.6 s (under load) that landed on any key press. The
        # compile pauses it (`gc_paused`); the stages live as long as the session: once the
        # whole pipeline is listed and drawn, collect once and freeze them out of later
        # collections (unfrozen when another compile starts, so its garbage can go).
        gc.unfreeze()
        with gc_paused():  # until the collection below (a collection would start at once)
            session.compile(progress=self._stage_arrived)
            self.app.call_from_thread(self._on_compiled, session)
            self._wait_for_refresh()
            gc.collect()
            gc.freeze()
        self._warm_up(session)
        gc.freeze()  # the views' data the warm-up cached lives as long too

    def _wait_for_refresh(self, timeout: float = 1.0) -> None:
        """From a worker: wait until the screen has drawn what the UI thread did last (the
        worker's next work holds the interpreter lock and would delay that frame)."""
        drawn = threading.Event()
        try:
            self.app.call_from_thread(self.call_after_refresh, drawn.set)
        except RuntimeError:  # the app is closing
            return
        drawn.wait(timeout)

    def _warm_up(self, session: CompileSession) -> None:
        """Off the UI thread, after compiling: compute every stage's view data (text, graph
        rows, diff with the previous stage), the stages next to the selected one first, so
        that moving between stages only draws, and the selected stage's schedules and memory
        plan; then the memory timeline's plans (a stage
        each: 0.6 s of CPU on DenseNet-121, which the Memory view's first frame waited for);
        then JIT-compile the debugger's LLVM kernels. Background work: it pauses while a view
        computes what the user is waiting for."""
        from textual.worker import get_current_worker

        from glowviz.exports.per_pass import per_pass_memory

        worker = get_current_worker()

        def between() -> None:
            session.wait_for_foreground()
            if worker.is_cancelled or session is not self.session:
                raise _WarmUpStopped

        try:
            for i in session.prefetch_order(self.index):
                between()
                session.prefetch(i)
                if i == self.index:  # the stage shown: its plans too (the others on demand)
                    between()
                    session.prefetch_plans(i)
            if session.error is None and session.result is not None:
                per_pass_memory(session, between)
        except _WarmUpStopped:
            return
        except Exception:  # noqa: BLE001 - a view computes its data itself when shown
            pass
        session.wait_for_foreground()
        if session.error is None and session.result is not None and not worker.is_cancelled:
            try:
                # and what the debugger view's first frame reads: the final memory plan's
                # report and the first instruction's operands (their first read of the
                # arena's pages); ~35 ms of that frame on DenseNet-121 otherwise
                session.get_debugger().operands()
            except Exception:  # noqa: BLE001 - the debugger view shows its own error
                pass

    # -- stages streaming in ----------------------------------------------------------------
    # Each new stage re-laid out the whole screen (the pipeline table grows): on BERT that was
    # as much CPU on the UI thread as the compile itself, and `call_from_thread` made the
    # compile wait for every redraw. The compile thread now queues its stages and posts one
    # message; the UI adds whatever is queued, at most every STAGE_BATCH_S (the first stage
    # at once).
    class _StagesArrived(Message):
        """Stages are queued for the pipeline pane (posted from the compile thread)."""

    def _stage_arrived(self, rec: StageRecord) -> None:
        """The compile thread's progress callback: queue `rec`, never wait for the UI."""
        self._arrived.append(rec)
        if not self._flush_posted:
            self._flush_posted = True
            self.post_message(self._StagesArrived())

    @on(_StagesArrived)
    def _stages_arrived(self) -> None:
        wait = self._last_flush + STAGE_BATCH_S - time.perf_counter()
        if wait > 0:
            self.set_timer(wait, self._flush_stages)
        else:
            self._flush_stages()

    def _flush_stages(self) -> None:
        self._flush_posted = False  # before draining: a stage queued from now on posts again
        batch = []
        while self._arrived:
            batch.append(self._arrived.popleft())
        self._last_flush = time.perf_counter()
        for rec in batch:
            self._on_stage(rec)
        if batch:
            self._tick()

    def _on_stage(self, rec: StageRecord) -> None:
        if not self.is_attached:
            return
        pane = self.query_one(PipelinePane)
        stages = self.session.stages
        # another compile's stage, or one the end of the compile has already listed
        if not (rec.index < len(stages) and stages[rec.index] is rec):
            return
        if rec.index != len(pane.records):
            return
        pane.add_record(rec)
        self.query_one("#compile-progress", ProgressBar).advance(1)
        if self.index is None:
            self._auto_select(0)

    def _auto_select(self, index: int) -> None:
        self._auto_index = index
        self.query_one(PipelinePane).select(index)

    def _tick(self) -> None:
        """While compiling: how many stages, which one finished last, the time so far (the
        pass running now is not known until it finishes: never show its predecessor's name as
        if it were running)."""
        if self.session.done or not self.is_attached:
            if self._ticker is not None:
                self._ticker.stop()
                self._ticker = None
            return
        n = len(self.session.stages)
        dt = time.perf_counter() - self._t0
        # the last stage done is the list's last row; before the first one, say what runs
        what = f"{n} stages" if n else self._importing()
        self.query_one(PipelinePane).set_status(f"compiling… {what} · {dt:.1f} s")
        self.set_status(f"compiling… {what}, {dt:.1f} s")

    def _importing(self) -> str:
        """Before the first stage: the import reads, parses and checks the whole file (a
        340 MiB BERT takes seconds), so say so and how big it is."""
        try:
            size = Path(self.session.model_path).stat().st_size
        except OSError:
            return "importing"
        return f"importing {size / 2**20:.0f} MiB"

    def _on_compiled(self, session: CompileSession) -> None:
        if session is not self.session or not self.is_attached:
            return
        if self._ticker is not None:
            self._ticker.stop()
            self._ticker = None
        pane = self.query_one(PipelinePane)
        if len(pane.records) != len(session.stages):
            pane.set_records(session.stages)
        pane.set_notes(session.notes)
        bar = self.query_one("#compile-progress", ProgressBar)
        bar.update(total=max(1, len(session.stages)), progress=len(session.stages))
        bar.add_class("hidden")
        self.query_one(ErrorPane).show_error(session.error, len(session.stages))
        n = len(session.stages)
        if session.error is not None:
            where = f" in {session.error.pass_name}" if session.error.pass_name else ""
            self.set_status(f"FAILED: {session.error.kind}{where}")
            pane.set_status(f"failed after {n} stage{'s' if n != 1 else ''}")
        else:
            # fmt_ms says "12.3s" itself past 10 s
            unit = "" if fmt_ms(session.time_ms).endswith("s") else " ms"
            self.set_status(f"{n} stages, {fmt_ms(session.time_ms)}{unit}")
            extra = f"; {session.low_level_reason}" if session.low_level_reason else ""
            pane.set_status(f"{n} stages · {session.time_ms / 1000:.1f} s{extra}")
        # The views that wait for the whole compile (the debugger) may draw now; the user's
        # stage and view stay where they are.
        self._shown = {k: v for k, v in self._shown.items() if k != "debugger"}
        if session.stages and not self._user_chose:
            last_graph = session.graph_stage_at_or_before(n - 1)
            self._auto_select(last_graph if last_graph is not None else n - 1)
        else:
            self.refresh_active_view()

    def set_status(self, status: str) -> None:
        """The header: the model and a short status (the details are in the pipeline pane)."""
        self.app.sub_title = f"{self.session.model_name} · {status}"

    # -- following the selected stage ---------------------------------------------------------
    @on(PipelinePane.StageSelected)
    def _stage_selected(self, event: PipelinePane.StageSelected) -> None:
        self._select_stage(event.index)

    def _select_stage(self, index: int) -> None:
        if index != self._auto_index:
            self._user_chose = True
        self.index = index
        self.refresh_active_view()

    @on(PipelinePane.FilterLeft)
    def _filter_left(self) -> None:
        self.query_one("#pipeline-table").focus()

    @on(TabbedContent.TabActivated)
    def _tab(self, event: TabbedContent.TabActivated) -> None:
        self.refresh_active_view()

    def active_view_id(self) -> str:
        return self.query_one(TabbedContent).active or "graph"

    def view(self, tab_id: str):
        return self.query_one(f"#view-{tab_id}")

    def refresh_active_view(self) -> None:
        tab = self.active_view_id()
        if not self.view(tab).built:  # its tab was clicked: build it, then show it
            self._build_view(tab)
            return
        if self.index is None or not self.session.stages:
            return
        # The debugger runs the compiled program; every other view shows the selected stage.
        stage_bound = tab != "debugger"
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

    def action_toggle_pipeline(self) -> None:
        """Collapse the pipeline pane (the views get its width: at 100x30 the debugger's
        instruction text and the diff's columns need it); n/p still step the stages."""
        hide = not self.has_class("-no-pipeline")
        self.set_class(hide, "-no-pipeline")
        if (
            hide
            and self.focused is not None
            and self.query_one(PipelinePane) in (self.focused.ancestors_with_self)
        ):
            self._focus_view(self.active_view_id())

    def action_toggle_unchanged(self) -> None:
        self.query_one(PipelinePane).toggle_hide_unchanged()

    def action_focus_filter(self) -> None:
        self.query_one("#pipeline-filter").focus()

    def action_export(self) -> None:
        cast("GlowvizApp", self.app).action_export_view()

    async def action_show_view(self, tab_id: str) -> None:
        """The view's key: show it (a view shown the first time mounts its widgets first, in
        the same frame)."""
        self._wanted_view = tab_id
        view = self.view(tab_id)
        if not view.built and tab_id not in self._building:
            await self._build(tab_id)
            return
        self.show_view(tab_id)

    def show_view(self, tab_id: str, then: Callable[[StageView], object] | None = None) -> None:
        """Show a view and, once it shows the selected stage, call `then(view)` (a jump's next
        step: select a buffer, a node, an instruction). A view shown the first time is built
        first, so `then` may run later, and only if the user did not ask for another view
        meanwhile."""
        self._wanted_view = tab_id
        view = self.view(tab_id)
        if not view.built:
            if then is not None:
                self._then.setdefault(tab_id, []).append(then)
            self._build_view(tab_id)
            return
        self._switch_to(tab_id)
        self.refresh_active_view()
        if then is not None:
            then(view)

    def _build_view(self, tab_id: str) -> None:
        if tab_id not in self._building:
            self._building.add(tab_id)
            self.call_later(self._build, tab_id)

    async def _build(self, tab_id: str) -> None:
        """Build a view, then show it: one layout and frame for both (the screen would lay
        itself out and draw, for nothing, while the hidden pane's widgets mount)."""
        self._building.add(tab_id)
        with self.app.batch_update():
            try:
                await self.view(tab_id).build()
            finally:
                self._building.discard(tab_id)
            self._view_built(tab_id)

    def _view_built(self, tab_id: str) -> None:
        """A view's widgets are mounted: switch to it if it is still the one asked for (or its
        tab is already shown), and run what waited for it."""
        thens = self._then.pop(tab_id, [])
        if not self.is_attached:
            return
        if self._wanted_view == tab_id or self.active_view_id() == tab_id:
            self.show_view(tab_id)
            view = self.view(tab_id)
            for then in thens:
                then(view)

    def _switch_to(self, tab_id: str) -> None:
        tabs = self.query_one(TabbedContent)
        if tabs.active == tab_id:
            self.call_after_refresh(self._focus_view, tab_id)
            return
        # One frame for the whole switch: the tab's watchers display the new pane at once
        # (TabActivated is only posted), so the view draws its stage and takes the focus
        # before the next layout. Deferred, each step cost a layout and a redraw of its own
        # (the focus dropped, the pane shown, the view filled, the focus moved, the footer).
        # The focus moves straight from the old view to the new one: dropped first, Textual
        # moved it to a sibling inside the pane being hidden, whose focus message switched
        # the tabs straight back (with the Diff view's rewrite strip focused, "1" never left).
        tabs.active = tab_id
        self.refresh_active_view()
        self._focus_view(tab_id, now=True)
        # The tab bar's underline slides to the new tab in ~18 frames (0.3 s), each a
        # compositor pass of its own: 30-40 ms of CPU per switch on a loaded machine, more
        # than the view's own drawing. Put it under the tab at once (the slide that Textual
        # starts 20 ms later then finds it there already and does not run).
        jump = getattr(tabs.query_one(Tabs), "_highlight_active", None)  # the tab bar
        if jump is not None:
            jump(animate=False)

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

    def _focus_view(self, tab_id: str, *, now: bool = False) -> None:
        """Keys go to the view just shown (its table or text), not to the filter box (`now`:
        in this frame, not after the next message like Widget.focus)."""
        target = self.view(tab_id).focus_target()
        if target is None:
            for w in self.view(tab_id).query("*"):
                if isinstance(w, Widget) and w.can_focus and w.display and w.visible:
                    target = w
                    break
        if target is None:
            return
        if now:
            self.set_focus(target)
        else:
            target.focus()

    def goto_stage(self, index: int) -> None:
        pane = self.query_one(PipelinePane)
        if not pane.shows(self.session.stages[index]):
            pane.filter_text = ""
            self.query_one("#pipeline-filter", Input).value = ""
            if pane.hide_unchanged:
                pane.toggle_hide_unchanged()
            pane.rebuild()
        pane.select(index)
        # The views follow now, not when the pane's message arrives: a jump's next step (a
        # buffer to select, a node) is on this stage, whatever the view drew before.
        self._select_stage(index)

    def goto_node(self, name: str) -> None:
        def select(view: StageView) -> None:
            if not cast(GraphView, view).select_node(name):
                self.notify(f"node {name} is not in this stage", severity="warning")

        self.show_view("graph", select)

    def goto_buffer(self, name: str) -> None:
        self.show_view("memory", lambda view: cast(MemoryView, view).select(name))

    def goto_instruction(self, k: int) -> None:
        self.show_view("debugger", lambda view: cast(DebuggerView, view).goto_instruction(k))

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

    @on(MemoryView.PassChosen)
    def _pass_chosen(self, event: MemoryView.PassChosen) -> None:
        """A point of the memory timeline: go to that pass (the Memory view follows)."""
        self.goto_stage(event.index)

    @on(GraphView.NodeOpened)
    def _node_opened(self, event: GraphView.NodeOpened) -> None:
        from glowviz.screens.node_detail import NodeDetailScreen

        if self.index is None:
            return
        d = self.session.node_detail(self.index, event.name)
        if d is not None:
            self.app.push_screen(NodeDetailScreen(d))

    @on(DebuggerView.Prompt)
    def _debugger_prompt(self, event: DebuggerView.Prompt) -> None:
        """The debugger asks for a line of text (a watch, a slice, the tolerance)."""
        from glowviz.screens.prompt import PromptScreen

        def answered(text: str | None) -> None:
            if text is not None:
                event.callback(text)

        self.app.push_screen(PromptScreen(event.title, event.value, event.hint), answered)
