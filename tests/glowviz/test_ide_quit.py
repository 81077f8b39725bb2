"""Quitting the IDE while a compile hangs ends the process (issue 11: "a compile that hangs
keeps the process at 99% CPU after `q`"): the real `glowviz MODEL` entry in a pseudo-terminal,
with one pass replaced by a CPU burner that never returns, gets `q` and must exit at once with
the terminal restored, not wait for the worker thread."""

from __future__ import annotations

import os
import pty
import select
import sys
import time
from pathlib import Path

import pytest
from ide_helpers import ROOT

#: The child: the IDE's own entry, with dead-code elimination spinning forever (a pass stuck
#: on a hostile model; pure Python, so the UI thread still gets the interpreter).
CHILD = """
import sys
from pathlib import Path
from compiler.passes.dce import DeadCodeElimination

def spin(self, fn):
    Path(sys.argv[1]).touch()
    while True:
        pass

DeadCodeElimination.run = spin
from glowviz.cli import main
sys.exit(main([sys.argv[2]]))
"""

#: Generous under load (2 cores shared by several jobs); without the fix it never exits.
EXIT_WITHIN_S = 15.0


def _start_ide(spinning: Path) -> tuple[int, int]:
    """(pid, terminal fd) of the IDE on the MLP sample in a new pseudo-terminal; `spinning`
    appears when the compile worker is stuck in the pass."""
    pid, fd = pty.fork()
    if pid == 0:  # the child: exec at once (nothing of pytest's state may run here)
        os.chdir(ROOT)
        env = {**os.environ, "TERM": "xterm-256color", "PYTHONPATH": str(ROOT)}
        os.execve(
            sys.executable,
            [sys.executable, "-c", CHILD, str(spinning), "sample_models/mlp.onnx"],
            env,
        )
    return pid, fd


def _drain(fd: int, seconds: float, out: bytearray) -> bool:
    """Read the child's terminal output for `seconds`; False once the terminal is closed."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        ready, _, _ = select.select([fd], [], [], 0.05)
        if ready:
            try:
                data = os.read(fd, 65536)
            except OSError:
                return False
            if not data:
                return False
            out += data
    return True


def test_quit_while_a_pass_hangs_ends_the_process(tmp_path: Path) -> None:
    spinning = tmp_path / "spinning"
    pid, fd = _start_ide(spinning)
    out = bytearray()
    try:
        deadline = time.monotonic() + 120
        # the UI is up (its first frame drawn, the footer naming the key) and the compile
        # worker is stuck in the pass
        while not (spinning.exists() and b"Quit" in out):
            assert time.monotonic() < deadline, "the IDE never reached the hanging pass"
            _drain(fd, 0.05, out)
        out.clear()
        os.write(fd, b"q")
        t0 = time.monotonic()
        status = None
        while time.monotonic() - t0 < EXIT_WITHIN_S:
            _drain(fd, 0.1, out)
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
        else:
            raise AssertionError(f"still running {EXIT_WITHIN_S} s after q")
        assert os.waitstatus_to_exitcode(status) == 0
        assert b"\x1b[?1049l" in out, "the terminal was not taken out of the alternate screen"
    finally:
        _reap(pid)
        os.close(fd)


def _reap(pid: int) -> None:
    """Kill the IDE if it still runs, and collect it."""
    try:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
    except (ProcessLookupError, ChildProcessError):
        pass


def _wait_exit(pid: int, seconds: float) -> int | None:
    t0 = time.monotonic()
    while time.monotonic() - t0 < seconds:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        time.sleep(0.02)
    return None


@pytest.mark.parametrize("when", ["starting", "compiling"])
def test_the_ide_ends_when_its_terminal_hangs_up(tmp_path: Path, when: str) -> None:
    """A closed window or `tmux kill-session` (SIGHUP): the IDE must not outlive its terminal,
    neither while Textual starts (before the app's own signal handlers are up) nor with a
    compile worker stuck in a pass. It used to stay behind, blocked or spinning on the dead tty."""
    spinning = tmp_path / "spinning"
    pid, fd = _start_ide(spinning)
    out = bytearray()
    try:
        deadline = time.monotonic() + 120
        if when == "starting":  # the first bytes Textual writes: the app is not mounted yet
            while not out:
                assert time.monotonic() < deadline, "the IDE never wrote to its terminal"
                _drain(fd, 0.05, out)
        else:
            while not spinning.exists():
                assert time.monotonic() < deadline, "the IDE never reached the hanging pass"
                _drain(fd, 0.05, out)
        os.close(fd)  # the terminal goes away: the kernel hangs up the child's session
        fd = -1
        code = _wait_exit(pid, EXIT_WITHIN_S)
        assert code is not None, f"still running {EXIT_WITHIN_S} s after its terminal hung up"
        assert code != 0
    finally:
        _reap(pid)
        if fd >= 0:
            os.close(fd)
