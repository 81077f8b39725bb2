"""The typed seams hold: mypy, configured in pyproject.toml's [tool.mypy], finds no error in
compiler/ and glowviz/ (the Textual IDE is checked with unannotated handlers allowed)."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _cache_dir() -> Path:
    """mypy's incremental cache: beside the interpreter's venv when it is writable (a warm cache
    makes the check a few seconds instead of ~20 s), else a temporary directory."""
    venv = Path(sys.prefix)
    if os.access(venv, os.W_OK):
        return venv / ".mypy_cache"
    return Path(tempfile.gettempdir()) / f"glowviz-mypy-cache-{os.getuid()}"


@pytest.mark.slow  # 12-14 s with a clean clone's cold cache, and its file comes last but one
def test_mypy_is_clean():
    proc = subprocess.run(
        [sys.executable, "-m", "mypy", "--cache-dir", str(_cache_dir())],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
