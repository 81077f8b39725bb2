"""The layers of docs/ARCHITECTURE.md hold: import-linter's contracts in pyproject.toml
(compiler never imports glowviz/textual/rich; compiler's and glowviz's layers; glowviz below the
IDE is Textual-free) are all kept. Function-level imports count as much as top-level ones."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_import_contracts_are_kept():
    lint = Path(sys.executable).parent / "lint-imports"
    proc = subprocess.run(
        [str(lint), "--no-cache", "--config", str(ROOT / "pyproject.toml")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "0 broken" in proc.stdout
