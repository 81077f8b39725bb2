"""The workspace's footer: Textual's Footer, recomposed once per change of the keys it shows.

Textual's Footer recomposes (a new widget per key, each restyled) every time the screen says
its bindings may have changed, and a view switch says so a dozen times (the focus leaves, the
tab changes, the view's widget is focused, its table posts a highlight...): about a tenth of a
second of every view's first frame on a loaded machine went into footers nobody saw. This one
coalesces the signals that come together into one check and recomposes only when the keys it
would show differ from the ones it shows."""

from __future__ import annotations

from typing import Any

from textual.screen import Screen
from textual.widgets import Footer


class WorkspaceFooter(Footer):
    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self._check_pending = False
        self._shown: tuple | None = None  # what the last compose showed

    def bindings_changed(self, screen: Screen) -> None:
        # Textual's own handler marks the footer ready and schedules a recompose per signal.
        self._bindings_ready = True
        if not screen.app.app_focus or not self.is_attached or screen is not self.screen:
            return
        if not self._check_pending:
            self._check_pending = True
            # Next in the footer's queue, not after the next refresh: a view switch moves the
            # focus in one go (all its signals come before this runs), and the recompose,
            # which holds the screen's updates until its keys are mounted, then lands in the
            # switch's first layout instead of a layout and redraw of its own after it.
            self.call_later(self._recompose_if_changed)

    def _signature(self) -> tuple:
        return (
            self.compact,
            tuple(
                (binding.key, binding.action, binding.description, enabled, tooltip)
                for _node, binding, enabled, tooltip in self.screen.active_bindings.values()
                if binding.show or binding.action == "command_palette"
            ),
        )

    async def _recompose_if_changed(self) -> None:
        self._check_pending = False
        if not self.is_attached:
            return
        signature = self._signature()
        if signature != self._shown:
            self._shown = signature
            await self.recompose()
