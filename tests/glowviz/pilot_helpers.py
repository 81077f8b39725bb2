"""Driving the IDE under Textual's Pilot: run an async test, wait for workers and the compile
(no time limits of their own: pytest-timeout bounds every test), and `ide`, the app on the fake
pipeline opened and settled, with the steps many tests share (show a stage's view, open the
debugger)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

from ide_helpers import make_fake_session

from glowviz.app import GlowvizApp
from glowviz.screens.main import VIEWS, MainScreen


def run_async(fn):
    """Run an async test with asyncio.run (no pytest-asyncio needed)."""
    import asyncio
    import functools

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        return asyncio.run(fn(*args, **kwargs))

    return wrapper


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
        for w in busy:
            if w.state == WorkerState.RUNNING:
                try:
                    await w.wait()
                except WorkerCancelled:
                    pass
        await pilot.pause()


async def ready(app, pilot) -> MainScreen:
    """Wait for the compile to finish and the workspace to settle; returns the MainScreen."""
    while not (app.session.done and isinstance(app.screen, MainScreen)):
        await pilot.pause(0.05)
    await settle(app, pilot)
    return main_screen(app)


def main_screen(app) -> MainScreen:
    return next(s for s in app.screen_stack if isinstance(s, MainScreen))


async def show(app, pilot, stage: int, view: str) -> Any:
    """Select `stage` in the pipeline, then the view named `view` by its key (1-7, as a user
    does); returns the view once the views have settled."""
    main = main_screen(app)
    main.goto_stage(stage)
    await pilot.press(str(1 + [tab for tab, _title, _cls in VIEWS].index(view)))
    await settle(app, pilot)
    return main.view(view)


async def open_debugger(app, pilot) -> Any:
    """The debugger view (key 7) once its debugger is available, its instruction table focused."""
    main = main_screen(app)
    await pilot.press("7")
    await settle(app, pilot)
    view = main.view("debugger")
    await until(pilot, lambda: view.dbg is not None and view.dbg.available)
    view.query_one("#debug-table").focus()
    return view


@contextlib.asynccontextmanager
async def ide(
    app: GlowvizApp | None = None, size: tuple[int, int] = (160, 50), failing: bool = False
) -> AsyncIterator[tuple[GlowvizApp, Any, MainScreen]]:
    """Run `app` (by default the IDE on the fake pipeline, whose compile fails if `failing`)
    under Pilot, once its compile is done and the workspace settled: yields the app, the pilot
    and the main screen."""
    if app is None:
        app = GlowvizApp(session=make_fake_session(failing))
    async with app.run_test(size=size) as pilot:
        yield app, pilot, await ready(app, pilot)


async def until(pilot, condition) -> None:
    """Let the app run until `condition()` holds (things Textual does after a refresh, such as
    moving the focus). No time limit of its own: pytest-timeout bounds every test."""
    while not condition():
        await pilot.pause(0.02)
