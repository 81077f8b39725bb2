"""The disk cache of the LLVM tests' kernels and programs.

Those tests once compiled into a temporary directory: every run of the suite then ran LLVM's O3
on the same IR again (the conv strategy grid alone is a minute of CPU). They share this one
instead, kept between runs and apart from the user's (~/.cache/glowviz/llvm), so a run after
no code generator change loads what the last one compiled. What a hit returns is what compiling
gives: objects are keyed by their IR text, programs by the code generator's sources, its
module-level switches (a test's `monkeypatch.setattr(parallel, "CHUNK_FMAS", 64)` included) and
the low-level IR and plan (compiler/backends/llvm/cache.py; tests/backends/llvm/test_jit_cache.py
checks that a key misses nothing the code depends on). $GLOWVIZ_TEST_CACHE_DIR puts it elsewhere
(a temporary directory, to watch every kernel compile)."""

from __future__ import annotations

import os
from pathlib import Path

LLVM_TEST_CACHE = Path(
    os.environ.get("GLOWVIZ_TEST_CACHE_DIR") or Path.home() / ".cache" / "glowviz" / "llvm-tests"
)
