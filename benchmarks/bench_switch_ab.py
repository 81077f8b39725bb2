"""In-process A/B of a module-level switch of the code generator: the model compiled with the
switch at A and at B (two executors), both alternated with onnxruntime (one thread), medians
of thread CPU time, and whether the outputs are bit-identical.

    python benchmarks/bench_switch_ab.py MODEL REPS MODULE.ATTR A B [MODULE.ATTR A B ...]
    python benchmarks/bench_switch_ab.py benchmarks/models/resnet50.onnx 31 \\
        compiler.backends.llvm.kernels.parallel.NOINLINE_PARALLEL_FOR False True

A and B are Python literals; with several switches, A sets them all to their A values and B
to their B values (a whole change against its before, in one process). Set
GLOWVIZ_NO_DISK_CACHE=1 for compile times of both.
"""

import ast
import importlib
import os
import statistics
import sys
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402

from compiler.backends.llvm.executor import LLVMExecutor, _lir_and_plan  # noqa: E402
from compiler.frontend import load_model  # noqa: E402
from compiler.pipeline import CompileOptions, compile_model  # noqa: E402
from glowviz.cli.bench_cmd import _ort_session  # noqa: E402
from glowviz.cli.run_cmd import random_input  # noqa: E402


def main() -> int:
    rest = sys.argv[3:]
    if len(sys.argv) < 6 or len(rest) % 3 or not sys.argv[2].isdigit():
        print(
            "usage: bench_switch_ab.py MODEL REPS MODULE.ATTR A B [MODULE.ATTR A B ...]",
            file=sys.stderr,
        )
        return 2
    model, reps = sys.argv[1], int(sys.argv[2])
    knobs = []  # (module, attr, (A, B)): every switch at A for the first executor, B the second
    for i in range(0, len(rest), 3):
        modname, attr = rest[i].rsplit(".", 1)
        vals = (ast.literal_eval(rest[i + 1]), ast.literal_eval(rest[i + 2]))
        knobs.append((importlib.import_module(modname), attr, vals))
    proto = load_model(model)
    lir, plan = _lir_and_plan(compile_model(proto, CompileOptions(low_level=True)))
    exs = []
    for side in (0, 1):
        for mod, attr, vals in knobs:
            setattr(mod, attr, vals[side])
        c = time.process_time()
        exs.append(LLVMExecutor(lir, plan))
        label = ", ".join(f"{attr}={vals[side]!r}" for _, attr, vals in knobs)
        print(f"{label}: backend {time.process_time() - c:.2f} s CPU", flush=True)
    rng = np.random.default_rng(0)  # token ids and masks come out as small valid values
    feed = {w.name: random_input(w.type_, rng) for w in lir.inputs()}
    outs = [e.run(feed) for e in exs]
    same = all(np.array_equal(outs[0][k], outs[1][k]) for k in outs[0])
    diff = max(
        float(np.max(np.abs(outs[0][k].astype(np.float64) - outs[1][k]), initial=0.0))
        for k in outs[0]
    )
    sess = _ort_session(proto, 1)
    ort_feed = {i.name: feed[i.name] for i in sess.get_inputs()}
    sess.run(None, ort_feed)
    ts: list[list[float]] = [[], [], []]
    for r in range(reps):
        for j in (0, 1) if r % 2 == 0 else (1, 0):
            c = time.thread_time()
            exs[j].run(feed)
            ts[j].append(time.thread_time() - c)
        c = time.thread_time()
        sess.run(None, ort_feed)
        ts[2].append(time.thread_time() - c)
    a, b, o = (statistics.median(t) for t in ts)
    print(
        f"{os.path.basename(model)}: A {a * 1e3:.2f} ms ({a / o:.3f} of ort), "
        f"B {b * 1e3:.2f} ms ({b / o:.3f}), B/A {b / a:.3f}, bit-identical {same} "
        f"(max |B - A| {diff:.1e}), "
        f"load {os.getloadavg()[0]:.1f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
