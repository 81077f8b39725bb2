"""The workspace's footer: Textual's Footer, updated once per change of the keys it shows.

Textual's Footer recomposes (a new widget per key, each restyled) every time the screen says
its bindings may have changed, and a view switch says so a dozen times (the focus leaves, the
tab changes, the view's widget is focused, its table posts a highlight...): about a tenth of a
second of every view's first frame on a loaded machine went into footers nobody saw. This one
coalesces the signals that come together into one check and recomposes only when the keys it
would show differ from the ones it shows. Even then it does not recompose when it can help it:
the views show different keys, so every view switch changed them, and removing the footer's
keys and mounting and styling new ones was ~20-25 of the ~90 ms of CPU a switch back to a view
cost (resnet_small at 180x50). When the new keys are plain keys as before, the footer's key
widgets take the new keys' texts and actions in place (a few are added or removed if the
count changed)."""

from __future__ import annotations

from typing import Any, cast

from textual.compose import compose
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import Footer
from textual.widgets._footer import FooterKey

#: The classes Textual gives a key widget outside a group (a grouped key has "-grouped").
_KEY_CLASSES = {"-disabled", "-compact", "-command-palette"}


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
            if not await self._update_in_place():
                await self.recompose()

    async def _update_in_place(self) -> bool:
        """Give the key widgets shown the keys the footer would compose now. False, changing
        nothing, if the keys shown or the new ones are not all plain keys (a group of keys and
        its label): a recompose handles those."""
        new = compose(self)  # unmounted widgets: what a recompose would mount
        old = list(self.children)
        if not (_plain(old) and _plain(new)):
            return False
        palette_old = [w for w in old if w.has_class("-command-palette")]
        palette_new = [w for w in new if w.has_class("-command-palette")]
        if len(palette_old) != len(palette_new):
            return False
        keys_old = [w for w in old if not w.has_class("-command-palette")]
        keys_new = [w for w in new if not w.has_class("-command-palette")]
        with self.app.batch_update():
            for target, source in [*zip(keys_old, keys_new), *zip(palette_old, palette_new)]:
                _take_key(cast(FooterKey, target), cast(FooterKey, source))
            if len(keys_old) > len(keys_new):
                await self.remove_children(keys_old[len(keys_new) :])
            elif len(keys_new) > len(keys_old):
                extra = keys_new[len(keys_old) :]
                if palette_old:
                    await self.mount_all(extra, before=palette_old[0])
                else:
                    await self.mount_all(extra)
        return True


def _plain(widgets: list[Widget]) -> bool:
    """Only key widgets, none of them in a group."""
    return all(type(w) is FooterKey and set(w.classes) <= _KEY_CLASSES for w in widgets)


def _take_key(target: FooterKey, source: FooterKey) -> None:
    """`target` (mounted) shows the key `source` (composed, never mounted) would show."""
    width_before = (target.key_display, target.description)
    target.key = source.key
    target.key_display = source.key_display
    target.description = source.description
    target.action = source.action
    target._disabled = source._disabled
    target.set_class(source._disabled, "-disabled")
    target.tooltip = source.tooltip
    # the width is the texts' (`width: auto`): a new width needs a layout, the same a repaint
    target.refresh(layout=(target.key_display, target.description) != width_before)
