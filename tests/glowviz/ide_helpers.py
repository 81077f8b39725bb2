"""Fixtures of the IDE tests: a fake-pipeline session (stable), a private config dir; and the
waits the tests share (`drain`, `settle`, `ready`, `until`) and the Pilot that uses them."""

from __future__ import annotations

import asyncio
import contextlib
import sys
import unicodedata
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from textual import events
from textual.pilot import Pilot

sys.path.insert(0, str(Path(__file__).parent))

from fake_pipeline import (  # noqa: E402
    FakeExecutor,
    FakeReference,
    fake_compile,
    fake_failing_compile,
)

from glowviz.session import CompileSession  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = sorted((ROOT / "sample_models").glob("*.onnx"))


@pytest.fixture(autouse=True)
def _config_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("GLOWVIZ_CONFIG_DIR", str(tmp_path / "config"))
    return tmp_path / "config"


def make_fake_session(failing: bool = False) -> CompileSession:
    s = CompileSession(
        str(ROOT / "sample_models" / "resnet_small.onnx"),
        None,
        compile_fn=fake_failing_compile if failing else fake_compile,
    )
    s.executor_factory = FakeExecutor
    s.reference_factory = FakeReference
    return s


@pytest.fixture
def fake_session() -> CompileSession:
    return make_fake_session()


def run_async(fn):
    """Run an async test with asyncio.run (no pytest-asyncio needed)."""
    import asyncio
    import functools

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        return asyncio.run(fn(*args, **kwargs))

    return wrapper


def _pumps(app) -> Any:
    """The app and every node of every screen on its stack."""
    yield app
    for screen in app.screen_stack:
        yield from screen.walk_children(with_self=True)


def _update_pending(screen) -> bool:
    """The screen has a layout, a repaint or callbacks waiting for its next update."""
    return bool(
        screen._layout_required
        or screen._scroll_required
        or screen._repaint_required
        or screen._recompose_required
        or screen._dirty_widgets
        or screen._callbacks
    )


async def _until_set(app, event: asyncio.Event) -> None:
    """Until `event` is set or the app fails, a second at most (the caller looks again: a node
    removed meanwhile never handles what it had queued)."""
    waits = [asyncio.ensure_future(e.wait()) for e in (event, app._exception_event)]
    await asyncio.wait(waits, timeout=1.0, return_when=asyncio.FIRST_COMPLETED)
    for w in waits:
        w.cancel()


async def drain(app) -> None:
    """Let the app run until it has nothing left to do now: no message queued in any of its
    nodes, no task ready to run (a handler still running is one, or waits for one, or for a
    message), and the screen updated (laid out and drawn, its after-refresh callbacks run).

    Pilot's press() and pause() instead wait until the process used under 1 ms of CPU in a
    20 ms sleep (press: twice a key): 40+ ms of idle per key, 20+ per pause, whatever the key
    did. Not waited for: timers (Textual's own, such as the tab underline's 20 ms delayed
    slide or the app's resize, and the app's) and worker threads (`settle` waits for those):
    wait for what they bring about (`until`, `timers_fired`). Returns at once if the app
    failed (its exception ends run_test). No time limit of its own: pytest-timeout bounds
    every test."""
    loop = asyncio.get_running_loop()
    while not (app._exception_event.is_set() or app._exit):
        handled = asyncio.Event()
        left = 0

        def done(handled: asyncio.Event = handled) -> None:
            nonlocal left
            left -= 1
            if left == 0:
                handled.set()

        for pump in _pumps(app):
            busy = (
                not pump._message_queue.empty()
                or pump._next_callbacks  # callbacks waiting for the end of the message handled
                or pump._pending_message is not None  # taken to be merged with the next
            )
            # behind what it has queued (a closing pump refuses it)
            if busy and pump.call_later(done):
                left += 1
        if left:
            await _until_set(app, handled)
            continue
        if loop._ready:  # other tasks can run (a mount's, a removal's, a thread's callback)
            await asyncio.sleep(0)
            continue
        screen = app.screen
        if _update_pending(screen) and not app._batch_count:
            # until the screen's own update, from its timer (1/60 s apart while it has
            # something to do); not forced here as Pilot.pause() does: what the app does
            # meanwhile, and in which order, is then what it does for a user
            refreshed = asyncio.Event()
            screen.call_after_refresh(refreshed.set)
            await _until_set(app, refreshed)
            continue
        return


class DrainingPilot(Pilot):
    """Pilot whose press() and pause() wait for `drain` instead of idle CPU (pause(delay)
    sleeps `delay`, then drains): every key handled, and what it posted, the screen updated."""

    async def press(self, *keys: str) -> None:
        """Each key as Pilot.press sends it (App._press_keys), then drained."""
        from textual.app import REPLACED_KEYS, _character_to_key, _get_unicode_name_from_key

        app = self.app
        for key in keys:
            if len(key) == 1 and not key.isalnum():
                key = _character_to_key(key)
            char: str | None
            try:
                char = unicodedata.lookup(_get_unicode_name_from_key(REPLACED_KEYS.get(key, key)))
            except KeyError:
                char = key if len(key) == 1 else None
            event = events.Key(key, char)
            event.set_sender(app)
            app._driver.send_message(event)
            await drain(app)
            await app._animator.wait_until_complete()  # as Pilot.press: animations it started
            await drain(app)

    async def pause(self, delay: float | None = None) -> None:
        if delay is not None:
            await asyncio.sleep(delay)
        await drain(self.app)

    async def wait_for_scheduled_animations(self) -> None:
        """Every animation started (or scheduled) has ended, and the app drained."""
        await drain(self.app)
        await self.app.animator.wait_until_complete()
        await drain(self.app)

    async def resize_terminal(self, width: int, height: int) -> None:
        """Pilot.resize_terminal, until the screens have the new size: the app passes a
        resize on from a timer (1/120 s after the last one)."""
        await super().resize_terminal(width, height)
        await until(self, lambda: self.app._resize_event is None)
        await drain(self.app)


@contextlib.asynccontextmanager
async def run_test(app, size: tuple[int, int]) -> AsyncIterator[DrainingPilot]:
    """App.run_test, driven by a DrainingPilot."""
    async with app.run_test(size=size):
        yield DrainingPilot(app)


async def timers_fired(node) -> None:
    """Until every one-shot timer `node` has set (set_timer) has fired and run its callback,
    then the app drained."""
    while tasks := [
        t._task for t in list(node._timers) if t._repeat == 0 and t._task and not t._task.done()
    ]:
        await asyncio.wait(tasks)
    await drain(node.app)


async def paste(app, pilot, text: str) -> None:
    """Paste ``text`` into the focused widget, as a terminal's bracketed paste delivers it (one
    event; typing a long path key by key re-renders the screen per key)."""
    app.post_message(events.Paste(text))
    await pilot.pause()


async def settle(app, pilot) -> None:
    """Wait until no worker is pending or running and the UI has handled what they posted.

    No time limit of its own: pytest-timeout bounds every test. A worker that failed fails the
    test (Textual exits the app and `wait` raises); a cancelled one (superseded by a newer
    exclusive worker) is simply done."""
    from textual.worker import WorkerCancelled, WorkerState

    busy_states = (WorkerState.PENDING, WorkerState.RUNNING)
    while True:
        busy = [w for w in app.workers if w.state in busy_states]
        if not busy:
            await pilot.pause()
            if not any(w.state in busy_states for w in app.workers):
                return
            continue
        pending = False
        for w in busy:
            if w.state == WorkerState.RUNNING:
                try:
                    await w.wait()
                except WorkerCancelled:
                    pass
            else:
                pending = True
        if pending:  # let it start; what finished workers posted is handled by the pause above
            await pilot.pause()


async def ready(app, pilot):
    """Wait for the compile to finish and the workspace to settle; returns the MainScreen."""
    from glowviz.screens.main import MainScreen

    # the compile runs in a worker: waiting for the workers is waiting for it (no polling)
    while not (app.session.done and isinstance(app.screen, MainScreen)):
        await settle(app, pilot)
    await settle(app, pilot)
    return next(s for s in app.screen_stack if isinstance(s, MainScreen))


async def until(pilot, condition) -> None:
    """Let the app run until `condition()` holds (things Textual does after a refresh, such as
    moving the focus). No time limit of its own: pytest-timeout bounds every test."""
    while not condition():
        await pilot.pause(0.02)
