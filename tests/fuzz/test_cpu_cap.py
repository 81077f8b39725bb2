"""The campaign's time cap is CPU time: a busy case hits it, a case slowed by a loaded machine
does not, and a case blocked without using CPU still ends at the wall-clock backstop."""

from __future__ import annotations

import subprocess
import sys
import time

from . import runner
from .runner import CpuClock, cpu_seconds


def _child(code: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", code])


def _wait_expired(clock: CpuClock, limit: float) -> float:
    t0 = time.monotonic()
    while not clock.expired():
        assert time.monotonic() - t0 < limit, f"not expired after {limit} s"
        time.sleep(clock.poll())
    return time.monotonic() - t0


def test_busy_process_expires_on_cpu_time() -> None:
    p = _child("while True: pass")
    try:
        clock = CpuClock(p.pid, 0.5)
        _wait_expired(clock, 30.0)
        assert clock.used() >= 0.5
        assert (cpu_seconds(p.pid) or 0.0) >= 0.5
    finally:
        p.kill()
        p.wait()


def test_idle_process_expires_at_the_wall_backstop(monkeypatch) -> None:
    monkeypatch.setattr(runner, "WALL_FACTOR", 4.0)
    p = _child("import time; time.sleep(60)")
    try:
        clock = CpuClock(p.pid, 0.25)
        waited = _wait_expired(clock, 10.0)
        assert waited >= 0.9  # 4 x 0.25 s of wall time, not 0.25 s
        assert clock.used() < 0.25  # it slept: the CPU cap was not what ended it
    finally:
        p.kill()
        p.wait()
