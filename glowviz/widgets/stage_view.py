"""The base of the workspace's views: `show(session, index)` draws stage `index`; data that takes
a while (a graph stage's memory plan runs the low-level pipeline) is computed by a thread worker
while the view says what it is waiting for, and drawn only if the view still shows that stage."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rich.text import Text
from textual.containers import Vertical
from textual.widget import Widget
from textual.visual import VisualType
from textual.widgets import Static

from glowviz.session import CompileSession
from glowviz.widgets.virtual_table import VirtualTable


class InfoLine(Static):
    """A view's header line (the stage it shows, what it is waiting for). Each update laid the
    whole screen out again (Static's default: its height may change), once per key that steps
    the stages; most updates keep the number of lines at the width the line has. Those only
    repaint it; a layout follows when the new text takes more or fewer lines, or before the
    line was laid out."""

    def update(self, content: VisualType = "", *, layout: bool = True) -> None:
        width, fit = self.content_size.width, self.styles.width  # None: the container's width
        if not layout or not width or (fit is not None and fit.is_auto):
            super().update(content, layout=layout)
            return
        size, screen = self.size, self.app.size
        before = self.get_content_height(size, screen, width)
        super().update(content, layout=False)
        if self.get_content_height(size, screen, width) != before:
            self.refresh(layout=True)


class StageView(Vertical):
    """A view of the selected stage.

    A `lazy` view (every tab but the first) composes its widgets with the workspace but mounts
    them only when it is first shown (`build`, which the screen awaits before it switches to
    the view): most sessions never open half of the views, and every mounted widget costs at
    start (styles, mount), in every stylesheet update (a theme change) and every message
    broadcast. Until then `built` is False and the view holds state only: `reset` and the
    setters a jump calls before showing it must not query its widgets; `on_built` sets up
    what does (in place of `on_mount`)."""

    #: Ids of the Statics a new compile blanks (`reset` also clears every table of the view).
    CLEARED: tuple[str, ...] = ()

    def __init__(self, *, lazy: bool = False, **kw: Any) -> None:
        super().__init__(**kw)
        self.session: CompileSession | None = None
        self.index: int | None = None
        self._want: tuple[int, int | None, str] | None = None
        #: The view's widgets are mounted (and `on_built` ran).
        self.built = False
        self._lazy = lazy
        self._parts: list[Widget] | None = None

    async def mount_composed_widgets(self, widgets: list[Widget]) -> None:
        if self._lazy:  # composed now, mounted by `build`
            self._parts = widgets
            return
        await super().mount_composed_widgets(widgets)
        self.built = True
        self.on_built()

    async def build(self) -> None:
        """Mount the view's widgets, if not yet (the first time the view is shown)."""
        if self.built or self._parts is None:
            return
        parts, self._parts = self._parts, None
        await self.mount_all(parts)
        self.built = True
        self.on_built()

    def on_built(self) -> None:
        """The view's widgets are mounted: set up what reads them (styles, theme signals)."""

    def show(self, session: CompileSession, index: int) -> None:  # pragma: no cover
        raise NotImplementedError

    def reset(self) -> None:
        """A new compile starts: forget the old one's data (nothing of it may stay drawn)."""
        self.session, self.index, self._want = None, None, None
        if not self.built:  # nothing drawn yet
            return
        for wid in self.CLEARED:
            self.query_one(f"#{wid}", Static).update("")
        for table in self.query(VirtualTable):
            table.clear()

    def focus_target(self) -> Widget | None:
        """The widget that takes the keys when the view is shown: by default the view's first
        table (None: the first focusable widget)."""
        tables = self.query(VirtualTable)
        return tables.first() if tables else None

    def layout_width(self) -> int:
        """The view's width; before its first layout, the width it is about to get: its tab
        pane fills the tab switcher, which another view's pane has laid out. A view that
        fits its drawing to its width draws its first frame at that width instead of
        guessing and drawing again once laid out (a second layout and redraw of the view)."""
        if self.size.width:
            return self.size.width
        for node in self.ancestors:
            if isinstance(node, Widget) and node.size.width:
                return node.content_region.width
        return 0

    def stage_label(self, session: CompileSession, index: int) -> Text:
        """`stage 12 graph-opt/cse` — every view's header names the stage it shows."""
        rec = session.stages[index]
        return Text.assemble(("stage ", "dim"), (f"{index} {rec.label}", "bold"))

    def load(
        self,
        session: CompileSession,
        index: int | None,
        what: str,
        compute: Callable[[], Any],
        draw: Callable[[Any], None],
        waiting: Callable[[], None],
        failed: Callable[[str], None],
        *,
        cached: bool | None = None,
    ) -> None:
        """Draw `compute()` now if the session has it cached (`what`, index; or `cached`
        says so), else call `waiting()` and draw it when a worker has it — unless the view
        moved on meanwhile. The worker is foreground work: the session's warm-up waits."""
        want = self._want = (id(session), index, what)
        if session.is_cached(what, index) if cached is None else cached:
            try:
                data = compute()
            except Exception as e:  # noqa: BLE001 - shown in the view
                failed(f"{type(e).__name__}: {e}")
                return
            draw(data)
            return
        waiting()

        def work() -> None:
            try:
                with session.foreground():
                    data, err = compute(), None
            except Exception as e:  # noqa: BLE001 - shown in the view
                data, err = None, f"{type(e).__name__}: {e}"
            self.app.call_from_thread(done, data, err)

        def done(data: Any, err: str | None) -> None:
            if self._want != want or not self.is_attached:
                return
            if err is not None:
                failed(err)
            else:
                draw(data)

        self.run_worker(work, thread=True, exclusive=True, group=f"{self.id}-data")
