"""Interrupting `run -o`, `mem --json` and `export -o` at any moment (SIGINT, SIGKILL) never
leaves a partial or temporary file and never clobbers the good file already there (issue 11).

Each command first writes its file once (the good file, and how long a whole run takes); then
runs again, the same output path, and gets a signal at several fractions of that duration. The
outputs are deterministic, so afterwards the file must hold exactly the good bytes (the old
file, or a complete new one) and be alone in its folder.
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
_ENTRY = "import sys; from glowviz.cli import main; sys.exit(main())"
FILES = {"run -o": "out.npz", "mem --json": "report.json", "export -o": "graph.dot"}


def _start(argv: list[str], out: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", _ENTRY, *(a.replace("{out}", str(out)) for a in argv)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=dict(os.environ, GLOWVIZ_NO_DISK_CACHE="1"),
    )


@pytest.mark.slow
@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_interrupted_writes_leave_the_good_file_alone(command: str, tmp_path: Path) -> None:
    out = tmp_path / FILES[command]
    t0 = time.perf_counter()
    first = _start(COMMANDS[command], out)
    assert first.wait(timeout=300) == 0, first.stderr.read() if first.stderr else ""
    whole = time.perf_counter() - t0
    good = out.read_bytes()
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
