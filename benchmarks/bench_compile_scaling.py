"""Compile-time growth with graph size: the whole pipeline (import to memory plan) on a chain
of N element-wise nodes and on one value with N users, at N, 2N and 4N.

Linear passes take ~4x the time for 4x the nodes, quadratic ones 16x. Times are this process's
CPU time (best of `--repeat`), so other jobs on a shared machine count less; the slowest passes
of the biggest size are listed to show where the time goes.
`python benchmarks/bench_compile_scaling.py [--chain 750] [--fanout 500] [--repeat 2]`.
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import onnx  # noqa: E402
from models import build_chain, build_fanout  # noqa: E402

from compiler.passes.manager import PassEvent  # noqa: E402
from compiler.pipeline import compile_model  # noqa: E402


def compile_seconds(model: onnx.ModelProto, repeat: int) -> tuple[float, dict[str, float]]:
    """Best CPU seconds of `compile_model(model)`, and the ms per pass of the best run."""
    best, passes = float("inf"), {}
    for _ in range(repeat):
        times: dict[str, float] = {}

        def observe(ev: PassEvent, times: dict[str, float] = times) -> None:
            key = f"{ev.stage}/{ev.pass_name}"
            times[key] = times.get(key, 0.0) + ev.time_ms

        gc.collect()
        gc.disable()
        try:
            t0 = time.process_time()
            compile_model(model, observer=observe)
            dt = time.process_time() - t0
        finally:
            gc.enable()
        if dt < best:
            best, passes = dt, times
    return best, passes


def sweep(kind: str, build: Callable[[int], onnx.ModelProto], base: int, repeat: int) -> None:
    print(f"\n{kind}: N nodes -> compile CPU s (ratio to N={base})")
    first = None
    passes: dict[str, float] = {}
    for n in (base, 2 * base, 4 * base):
        secs, passes = compile_seconds(build(n), repeat)
        first = first or secs
        print(f"  {n:6d}  {secs:7.2f} s  x{secs / first:5.2f}")
    top = sorted(passes.items(), key=lambda kv: -kv[1])[:5]
    print("  slowest passes at 4N: " + ", ".join(f"{k} {v:.0f} ms" for k, v in top))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--chain", type=int, default=750, help="N of the chain sweep")
    ap.add_argument("--fanout", type=int, default=500, help="N of the fan-out sweep")
    ap.add_argument("--repeat", type=int, default=2)
    args = ap.parse_args(argv)
    sweep("chain", build_chain, args.chain, args.repeat)
    sweep("fan-out", build_fanout, args.fanout, args.repeat)
    return 0


if __name__ == "__main__":
    sys.exit(main())
