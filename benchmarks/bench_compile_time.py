"""Compile time, import to runnable code: CPU and wall seconds of this process from
``compile_model(MODEL)`` to a ready ``LLVMExecutor``, with O3's share. Run it twice on one
``$GLOWVIZ_CACHE_DIR`` for cold (fresh directory) and cached figures:

    d=$(mktemp -d); GLOWVIZ_CACHE_DIR=$d python benchmarks/bench_compile_time.py MODEL
    GLOWVIZ_CACHE_DIR=$d python benchmarks/bench_compile_time.py MODEL

Prints one JSON line: total_cpu / total_wall (python imports included, imports_cpu apart),
front_cpu (import + passes + plan), backend_cpu / backend_wall (codegen + LLVM + executor),
opt_cpu (the O3 pipeline), from_disk (1.0: the object came from the disk cache).
"""

import json
import os
import sys
import time

T_WALL0, T_CPU0 = time.perf_counter(), time.process_time()
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import compiler.backends.llvm.target as target  # noqa: E402

STATS = {"opt_cpu": 0.0}
_optimize = target.optimize


def _timed_optimize(*args, **kwargs):
    c = time.process_time()
    _optimize(*args, **kwargs)
    STATS["opt_cpu"] += time.process_time() - c


target.optimize = _timed_optimize

from compiler.executors import make_executor  # noqa: E402
from compiler.pipeline import CompileOptions, compile_model  # noqa: E402


def main() -> int:
    c_imp = time.process_time()
    result = compile_model(sys.argv[1], CompileOptions(low_level=True))
    c1, w1 = time.process_time(), time.perf_counter()
    ex = make_executor(result, "llvm")
    c2, w2 = time.process_time(), time.perf_counter()
    out = {
        "total_cpu": c2 - T_CPU0,
        "total_wall": w2 - T_WALL0,
        "imports_cpu": c_imp - T_CPU0,
        "front_cpu": c1 - c_imp,
        "backend_cpu": c2 - c1,
        "backend_wall": w2 - w1,
        "from_disk": ex.executor.timings["from_disk"],
        **STATS,
    }
    print(json.dumps({k: round(v, 3) for k, v in out.items()}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
