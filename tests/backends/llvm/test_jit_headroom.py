"""The LLVM executor under a memory ulimit (issue 11, found by the fuzzing campaign): LLVM
aborts the whole process (SIGABRT, "Unable to allocate section memory") when its own
allocations fail, so the JIT first makes sure it has headroom and refuses with one
ResourceLimitError otherwise; the executor JIT-compiles before it allocates its arena. LLVM's
library itself (~180 MB to map) is loaded only when code is generated or run, so the executor
refuses the same way when there is no room to load it."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]

#: In a child: compile the MLP (and load LLVM's library if PRELOAD), cap the address space a
#: little above what is in use, fill all but ~40 MiB of it (as a large arena allocated earlier
#: would), then build the LLVM executor with the in-memory and disk caches out of the way.
CHILD = textwrap.dedent(
    """
    import os, resource, sys
    os.environ["GLOWVIZ_NO_DISK_CACHE"] = "1"
    import numpy as np
    from compiler.errors import ResourceLimitError
    from compiler.executors import make_executor
    from compiler.pipeline import compile_model

    result = compile_model("sample_models/mlp.onnx")
    if PRELOAD:
        from compiler.backends.llvm.target import load_llvm

        load_llvm()

    def vm_bytes():
        with open("/proc/self/statm") as f:
            return int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")

    room = 512 << 20
    resource.setrlimit(resource.RLIMIT_AS, (vm_bytes() + room, resource.RLIM_INFINITY))
    hog = np.empty(room - (40 << 20), np.uint8)
    try:
        make_executor(result, "llvm")
    except ResourceLimitError as e:
        print("REFUSED", e.message)
        sys.exit(2)
    print("COMPILED")
    """
)


@pytest.mark.parametrize(
    ("preload", "refusal"),
    [
        (True, "REFUSED JIT-compiling the generated code needs about"),
        (False, "REFUSED loading LLVM's library needs about"),
    ],
    ids=["library-loaded", "library-not-loaded"],
)
def test_jit_without_headroom_is_a_refusal_not_an_abort(preload: bool, refusal: str) -> None:
    proc = subprocess.run(
        [sys.executable, "-c", f"PRELOAD = {preload}\n" + CHILD],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr[-2000:])
    assert refusal in proc.stdout
