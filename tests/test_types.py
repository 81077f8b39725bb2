"""The typed seams hold: mypy, configured in pyproject.toml's [tool.mypy], finds no error in
compiler/ and glowviz/ (the Textual IDE is checked with unannotated handlers allowed)."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import tempfile
import tomllib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _cache_dir() -> Path:
    """mypy's incremental cache, kept between runs and clones like the LLVM tests' cache
    (tests/llvm_cache.py): ``$GLOWVIZ_MYPY_CACHE_DIR``, else ``~/.cache/glowviz/mypy`` when it
    can be written, else a temporary directory. A clean clone checks in ~1-2 s instead of
    ~10 s. Sharing it is safe: mypy reuses a module's entry only if its mypy version and options
    match and the source has the recorded path, size and mtime, or else the recorded hash of
    its bytes. mypy is given the sources by absolute path (``_sources``), so every other clone
    differs in path and is checked by hash: two clones' files of one size written in the same
    second cannot share an entry. A changed module, and what depends on its interface, is
    checked again. Runs that share it take turns (``_one_at_a_time``): mypy
    tells a data file from another run's only by its mtime in whole seconds."""
    env = os.environ.get("GLOWVIZ_MYPY_CACHE_DIR")
    if env:
        return Path(env)
    home = Path.home() / ".cache" / "glowviz" / "mypy"
    try:
        home.mkdir(parents=True, exist_ok=True)
    except OSError:
        pass
    if os.access(home, os.W_OK):
        return home
    return Path(tempfile.gettempdir()) / f"glowviz-mypy-cache-{os.getuid()}"


def _sources() -> list[str]:
    """pyproject.toml's [tool.mypy] files, as absolute paths (see ``_cache_dir``)."""
    with open(ROOT / "pyproject.toml", "rb") as f:
        files = tomllib.load(f)["tool"]["mypy"]["files"]
    return [str(ROOT / name) for name in files]


@contextmanager
def _one_at_a_time(cache: Path) -> Iterator[None]:
    """Hold an exclusive lock beside the cache while mypy runs (other clones' test runs wait)."""
    cache.mkdir(parents=True, exist_ok=True)
    with open(cache.parent / f"{cache.name}.lock", "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


@pytest.mark.slow  # 10-14 s with a cold cache (a new machine), and its file comes last but one
def test_mypy_is_clean():
    cache = _cache_dir()
    with _one_at_a_time(cache):
        proc = subprocess.run(
            [sys.executable, "-m", "mypy", "--cache-dir", str(cache), *_sources()],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=300,
        )
    assert proc.returncode == 0, proc.stdout + proc.stderr
