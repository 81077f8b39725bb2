"""A few fixed-size snapshots of the IDE on the fake pipeline (run with --snapshot-update to
accept a deliberate change)."""

from __future__ import annotations

from ide_helpers import DrainingPilot, make_fake_session, ready

from glowviz.app import GlowvizApp

SIZE = (160, 50)


async def _settle(pilot):
    """The compile done and the workspace settled (the snapshot's own waits follow)."""
    await ready(pilot.app, pilot)


def _app(failing: bool = False) -> GlowvizApp:
    return GlowvizApp(session=make_fake_session(failing), theme="dark")


def test_snapshot_graph(snap_compare):
    async def run_before(pilot):
        pilot = DrainingPilot(pilot.app)
        await _settle(pilot)
        await pilot.press("p", "p")
        await _settle(pilot)

    assert snap_compare(_app(), terminal_size=SIZE, run_before=run_before)


def test_snapshot_diff(snap_compare):
    async def run_before(pilot):
        pilot = DrainingPilot(pilot.app)
        await _settle(pilot)
        await pilot.press("p", "p", "2")
        await _settle(pilot)

    assert snap_compare(_app(), terminal_size=SIZE, run_before=run_before)


def test_snapshot_error_pane(snap_compare):
    async def run_before(pilot):
        await _settle(DrainingPilot(pilot.app))

    assert snap_compare(_app(failing=True), terminal_size=SIZE, run_before=run_before)
