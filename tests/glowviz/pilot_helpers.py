"""Steps the IDE tests share, on top of ide_helpers.py's waits: `ide` runs the app (by default
on the fake pipeline) under Pilot until its compile is done, `show` selects a stage's view,
`open_debugger` opens the debugger once it is available."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

from ide_helpers import make_fake_session, ready, run_test, settle, until

from glowviz.app import GlowvizApp
from glowviz.screens.main import VIEWS, MainScreen


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
    async with run_test(app, size) as pilot:
        yield app, pilot, await ready(app, pilot)
