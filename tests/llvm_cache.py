"""The disk cache of the LLVM tests' kernels and programs.

Those tests once compiled into a temporary directory: every run of the suite then ran LLVM's O3
on the same IR again (the conv strategy grid alone is a minute of CPU). They share this one
instead, kept between runs and apart from the user's (~/.cache/glowviz/llvm), so a run after
no code generator change loads what the last one compiled. What a hit returns is what compiling
gives: objects are keyed by their IR text, programs by the code generator's sources, its
module-level switches (a test's `monkeypatch.setattr(parallel, "CHUNK_FMAS", 64)` included) and
the low-level IR and plan (compiler/backends/llvm/cache.py; tests/backends/llvm/test_jit_cache.py
checks that a key misses nothing the code depends on). $GLOWVIZ_TEST_CACHE_DIR puts it elsewhere
(a temporary directory, to watch every kernel compile).

``llvm_test_cache`` points ``$GLOWVIZ_CACHE_DIR`` there for a whole test module: it is active
in every module under tests/backends (tests/backends/conftest.py) and in the fuzz modules that
import it. A test that must watch a fresh compile uses ``JITEngine(disk_cache=False)`` or a
directory of its own."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

LLVM_TEST_CACHE = Path(
    os.environ.get("GLOWVIZ_TEST_CACHE_DIR") or Path.home() / ".cache" / "glowviz" / "llvm-tests"
)


@pytest.fixture(autouse=True, scope="module")
def llvm_test_cache() -> Iterator[None]:
    # Module scope (not monkeypatch's function scope): hypothesis's health check refuses
    # function-scoped fixtures around its tests (tests/backends/test_llvm_vs_interpreter.py).
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("GLOWVIZ_CACHE_DIR", str(LLVM_TEST_CACHE))
        yield
