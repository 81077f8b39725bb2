"""The JIT's memory check counts the kernels' static buffers (issue 11): mutant 1909 of seed 2026
(mobilenet_small, a conv stride of 2^31) generated a 275 GB padded-input buffer, and MCJIT
aborted the process (SIGABRT) when it could not map the section under the campaign's 3 GiB cap.
It is one line and exit 2 now."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from .runner import mutant_cases

_ENTRY = (
    "import resource, sys; resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30)); "
    "from glowviz.cli import main; sys.exit(main())"
)


def test_huge_static_buffers_are_refused_not_aborted(tmp_path: Path) -> None:
    case = next(mutant_cases(2026, 1, start=1909))
    assert "strides = 2147483648" in case.desc
    model = tmp_path / "m.onnx"
    model.write_bytes(case.model)
    proc = subprocess.run(
        [sys.executable, "-c", _ENTRY, "run", str(model), "--executor", "llvm"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "JIT-compiling the generated code needs about" in lines[0], lines
