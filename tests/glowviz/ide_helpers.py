"""Fixtures of the IDE tests: a fake-pipeline session (stable), a private config dir."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from fake_pipeline import FakeExecutor, FakeReference, fake_compile, fake_failing_compile  # noqa: E402

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


async def paste(app, pilot, text: str) -> None:
    """Paste ``text`` into the focused widget, as a terminal's bracketed paste delivers it (one
    event; typing a long path key by key re-renders the screen per key)."""
    from textual import events

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
