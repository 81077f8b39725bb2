"""Interrupting `run -o`, `mem --json` and `export -o` at any moment (SIGINT, SIGKILL) never
leaves a partial or temporary file and never clobbers the good file already there (issue 11).

Each command first writes its file once (the good file, and how long a whole run takes); then
runs again, the same output path, and gets a signal at several fractions of that duration. The
outputs are deterministic, so afterwards the file must hold exactly the good bytes (the old
file, or a complete new one) and be alone in its folder. A timed signal rarely lands inside
the write itself, so a second test stops each command there (half way through its data, and
between naming the finished file and renaming it) before sending the signal.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

SAMPLES = Path(__file__).resolve().parents[1] / "sample_models"
MODEL = SAMPLES / "lenet.onnx"

COMMANDS = {
    "run -o": ["run", str(MODEL), "--executor", "llvm", "-o", "{out}"],
    "mem --json": ["mem", str(MODEL), "--json", "{out}"],
    "export -o": ["export", str(MODEL), "--view", "graph", "--format", "dot", "-o", "{out}"],
}
_ENTRY = "import sys; from glowviz.entry import main; sys.exit(main())"
FILES = {"run -o": "out.npz", "mem --json": "report.json", "export -o": "graph.dot"}


def _default_sigint() -> None:
    """In the child before exec: SIGINT back to its default. A shell starts background jobs
    with SIGINT ignored, Python keeps an ignored SIGINT ignored, and the CLI then never sees
    the signal these tests send (a paused child slept its 300 s out, and the test failed)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _start(argv: list[str], out: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", _ENTRY, *(a.replace("{out}", str(out)) for a in argv)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=dict(os.environ, GLOWVIZ_NO_DISK_CACHE="1"),
        preexec_fn=_default_sigint,
    )


@pytest.fixture(scope="module")
def first_run(tmp_path_factory: pytest.TempPathFactory):
    """Each command's first, uninterrupted run, once a module (both tests used to start one
    per test: 9 whole CLI runs where 3 give the same bytes): `first_run(command)` is the good
    file's bytes and how long the whole run took. The outputs are deterministic and do not
    depend on the output's path or folder, so every test puts these bytes in its own folder
    as the good file already there."""
    runs: dict[str, tuple[bytes, float]] = {}

    def get(command: str) -> tuple[bytes, float]:
        if command not in runs:
            out = tmp_path_factory.mktemp("first-run") / FILES[command]
            t0 = time.perf_counter()
            first = _start(COMMANDS[command], out)
            assert first.wait(timeout=300) == 0, first.stderr.read() if first.stderr else ""
            runs[command] = (out.read_bytes(), time.perf_counter() - t0)
        return runs[command]

    return get


@pytest.mark.slow
@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_interrupted_writes_leave_the_good_file_alone(
    command: str, tmp_path: Path, first_run
) -> None:
    out = tmp_path / FILES[command]
    good, whole = first_run(command)
    out.write_bytes(good)
    for sig in (signal.SIGINT, signal.SIGKILL):
        for fraction in (0.6, 0.9, 1.0):
            proc = _start(COMMANDS[command], out)
            time.sleep(whole * fraction)
            proc.send_signal(sig)
            code = proc.wait(timeout=300)
            err = proc.stderr.read().decode() if proc.stderr else ""
            assert "Traceback" not in err, err
            # 130: main() caught it; -SIGINT: it came after main() returned, at exit
            assert code in (0, 130, -signal.SIGINT, -signal.SIGKILL), (sig, fraction, code, err)
            assert sorted(p.name for p in tmp_path.iterdir()) == [out.name], (sig, fraction)
            assert out.read_bytes() == good, (sig, fraction)


# The same commands, stopped exactly inside the write: a hook (run before the CLI) pauses
# `atomic_file` half way through the first write ("write") or just before the finished,
# named file is renamed over the target ("named"), and says so in a marker file; the signal
# comes then, so "at any moment" includes the moments a timed signal almost never hits.
_HOOK = r"""
import contextlib, os, sys, time
from pathlib import Path
from glowviz.exports import render

phase, marker = os.environ["GLOWVIZ_TEST_PAUSE"].split(":", 1)
real_file, real_replace = render.atomic_file, os.replace


def pause():
    Path(marker).write_text(str(os.getpid()))
    time.sleep(300)


class Halting:
    def __init__(self, fh):
        self._fh, self._paused = fh, False

    def write(self, data):
        if phase == "write" and not self._paused and len(data) > 1:
            self._paused = True
            n = self._fh.write(data[: len(data) // 2])
            self._fh.flush()
            pause()
            return n + self._fh.write(data[len(data) // 2 :])
        return self._fh.write(data)

    def __getattr__(self, name):
        return getattr(self._fh, name)


@contextlib.contextmanager
def atomic_file(path):
    with real_file(path) as fh:
        yield Halting(fh)


def replace(src, dst, **kw):
    if phase == "named" and str(src).endswith(".tmp"):
        pause()
    return real_replace(src, dst, **kw)


render.atomic_file, os.replace = atomic_file, replace
from glowviz.cli import main

sys.exit(main())
"""


def _start_paused(argv: list[str], out: Path, phase: str, marker: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", _HOOK, *(a.replace("{out}", str(out)) for a in argv)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=dict(os.environ, GLOWVIZ_NO_DISK_CACHE="1", GLOWVIZ_TEST_PAUSE=f"{phase}:{marker}"),
        preexec_fn=_default_sigint,
    )


def _wait_for(marker: Path, proc: subprocess.Popen) -> None:
    deadline = time.monotonic() + 300
    while not marker.exists():
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else proc.returncode
        assert time.monotonic() < deadline, "the write never started"
        time.sleep(0.05)


@pytest.mark.slow
@pytest.mark.parametrize("phase", ["write", "named"])
@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_signal_inside_the_write_leaves_the_good_file_alone(
    command: str, phase: str, tmp_path: Path, first_run
) -> None:
    folder = tmp_path / "out"
    folder.mkdir()
    out = folder / FILES[command]
    good, _ = first_run(command)
    out.write_bytes(good)
    for sig in (signal.SIGINT, signal.SIGKILL):
        marker = tmp_path / f"paused-{sig.name}"
        proc = _start_paused(COMMANDS[command], out, phase, marker)
        _wait_for(marker, proc)
        proc.send_signal(sig)
        code = proc.wait(timeout=300)
        err = proc.stderr.read().decode() if proc.stderr else ""
        assert "Traceback" not in err, err
        assert code == (130 if sig == signal.SIGINT else -signal.SIGKILL), (sig, code, err)
        assert out.read_bytes() == good, sig
        left = sorted(p.name for p in folder.iterdir())
        if sig == signal.SIGKILL and phase == "named":
            # The one window no process can close: the finished file has its name and SIGKILL
            # comes before the rename. It is complete, named as a temp file, and the next write
            # of this output removes it.
            assert left == sorted([out.name, f".{out.name}.{proc.pid}.tmp"]), left
            again = _start(COMMANDS[command], out)
            assert again.wait(timeout=300) == 0
            left = sorted(p.name for p in folder.iterdir())
        assert left == [out.name], (sig, left)
        assert out.read_bytes() == good, sig
