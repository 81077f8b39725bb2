"""Where a CNN's time goes, ours against onnxruntime, summed by op kind (issue 15).

Ours: the calls `run_all` makes (fused chains as they run, not stepped members), each timed
with the thread's CPU clock, medians over REPS rounds. onnxruntime: one thread, ORT_ENABLE_ALL,
`enable_profiling`, the per-node `*_kernel_time` events, medians over the same number of runs.
Both sides' totals (plain `run`, thread CPU time, alternated) are printed beside the sums.

    python benchmarks/bench_op_breakdown.py benchmarks/models/resnet50.onnx [REPS]
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from typing import Any

os.environ.setdefault("OMP_NUM_THREADS", "1")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402

from compiler.backends.llvm.executor import LLVMExecutor, _lir_and_plan  # noqa: E402
from compiler.frontend import load_model  # noqa: E402
from compiler.pipeline import CompileOptions, compile_model  # noqa: E402
from glowviz.cli.run_cmd import random_input  # noqa: E402


def _shape(v: Any) -> tuple[int, ...]:
    return tuple(v.type.shape) if hasattr(v, "type") else tuple(v.type_.shape)


def our_kind(lir: Any, group: tuple[int, ...]) -> str:
    """A label for one `run_all` call: the producer's kind (conv by kernel size), and '+' the
    chain fused after it."""
    ins = [lir.code[i] for i in group]
    head = ins[0]
    k = head.kind
    if "conv" in k.lower():
        ops = [o[0] for o in head.operands]
        w = [_shape(o) for o in ops if len(_shape(o)) == 4]
        # operands: dest, src, filter, ... ; the filter is the 4-d operand after the source
        f = w[2] if len(w) >= 3 else w[-1]
        src = w[1] if len(w) >= 2 else w[0]
        if src[1] == 3:
            k = "conv stem 7x7"
        else:
            k = f"conv {f[-2]}x{f[-1]}" + ("+add" if getattr(head, "accumulates", False) else "")
    tail = [i.kind for i in ins[1:]]
    return k + ("+" + "+".join(tail) if tail else "")


def ort_kind(ev: dict) -> str:
    a = ev["args"]
    op = a.get("op_name", "?")
    if op in ("Conv", "FusedConv"):
        shapes = a.get("input_type_shape", [])
        try:
            wsh = list(shapes[1].values())[0]
            xsh = list(shapes[0].values())[0]
        except (IndexError, AttributeError):
            return op
        fused = "+add" if len(shapes) >= 4 else ""
        if len(xsh) == 4 and xsh[1] == 3:
            return "conv stem 7x7"
        return f"conv {wsh[-2]}x{wsh[-1]}{fused}"
    return op


def main() -> int:
    model = sys.argv[1]
    reps = int(sys.argv[2]) if len(sys.argv) > 2 else 15
    proto = load_model(model)
    lir, plan = _lir_and_plan(compile_model(proto, CompileOptions(low_level=True)))
    ex = LLVMExecutor(lir, plan)
    rng = np.random.default_rng(0)  # token ids and masks come out as small valid values
    feed = {w.name: random_input(w.type_, rng) for w in lir.inputs()}
    ex.run(feed)
    prog = ex.info  # entries and groups, without generating the program again
    calls = []
    for g in prog.groups:
        name = f"fused_{g[0]}" if len(g) > 1 else prog.instrs[g[0]].entry
        calls.append((g, ex.compiled.cfunc(name), our_kind(lir, g)))
    args = ex._args
    per: list[list[int]] = [[] for _ in calls]
    tot_ours, tot_ort, tot_sum = [], [], []

    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.log_severity_level = 3
    plain = ort.InferenceSession(proto.SerializeToString(), so, providers=["CPUExecutionProvider"])
    tmp = tempfile.mkdtemp(prefix="glowviz-ortprof-")
    so.enable_profiling = True
    so.profile_file_prefix = os.path.join(tmp, "ort")
    prof = ort.InferenceSession(proto.SerializeToString(), so, providers=["CPUExecutionProvider"])
    ort_feed = {i.name: feed[i.name] for i in plain.get_inputs()}
    plain.run(None, ort_feed)
    prof.run(None, ort_feed)
    for _ in range(reps):
        c = time.thread_time()
        ex.run(feed)
        tot_ours.append(time.thread_time() - c)
        c = time.thread_time()
        plain.run(None, ort_feed)
        tot_ort.append(time.thread_time() - c)
        ex.set_inputs(feed)
        s = 0
        for j, (_, fn, _) in enumerate(calls):
            t = time.thread_time_ns()
            fn(*args)
            d = time.thread_time_ns() - t
            per[j].append(d)
            s += d
        tot_sum.append(s / 1e9)
        prof.run(None, ort_feed)
    path = prof.end_profiling()
    with open(path) as f:
        events = json.load(f)
    node: dict[str, list[float]] = defaultdict(list)
    node_kind: dict[str, str] = {}
    node_shape: dict[str, Any] = {}
    for ev in events:
        if ev.get("cat") == "Node" and ev["name"].endswith("_kernel_time"):
            node[ev["name"]].append(ev["dur"] / 1e6)
            node_kind[ev["name"]] = ort_kind(ev)
            node_shape[ev["name"]] = ev["args"].get("output_type_shape")
    ours_by: dict[str, list[float]] = defaultdict(lambda: [0.0, 0])
    for (g, _, k), ts in zip(calls, per):
        ours_by[k][0] += statistics.median(ts) / 1e9
        ours_by[k][1] += 1
    ort_by: dict[str, list[float]] = defaultdict(lambda: [0.0, 0])
    for n, ts in node.items():
        # the first run is the warm-up
        ort_by[node_kind[n]][0] += statistics.median(ts[1:] or ts)
        ort_by[node_kind[n]][1] += 1
    mo, ms, mt = (statistics.median(t) for t in (tot_ours, tot_sum, tot_ort))
    print(
        f"totals (median thread CPU, {reps} runs): ours run {mo * 1e3:.2f} ms, "
        f"ours sum of calls {ms * 1e3:.2f} ms, ort run {mt * 1e3:.2f} ms, ratio {mo / mt:.3f}"
    )
    print(f"ours by kind (sum {sum(v[0] for v in ours_by.values()) * 1e3:.2f} ms)")
    for k, (s, n) in sorted(ours_by.items(), key=lambda kv: -kv[1][0]):
        print(f"  {k:45s} {n:4d} {s * 1e3:8.3f} ms")
    print(f"ort by kind (sum {sum(v[0] for v in ort_by.values()) * 1e3:.2f} ms)")
    for k, (s, n) in sorted(ort_by.items(), key=lambda kv: -kv[1][0]):
        print(f"  {k:45s} {n:4d} {s * 1e3:8.3f} ms")
    # The convs side by side: ours and onnxruntime's of one kind and output shape, in order.
    mine: dict[tuple, list[float]] = defaultdict(list)
    for (g, _, k), ts in zip(calls, per):
        if k.startswith("conv"):
            shp = _shape(lir.code[g[0]].operands[0][0])
            mine[(k.split("+relu")[0], shp[1], shp[2], shp[3])].append(statistics.median(ts) / 1e9)
    theirs: dict[tuple, list[float]] = defaultdict(list)
    for n, ts in node.items():
        k, shp = node_kind[n], node_shape[n]
        if k.startswith("conv") and shp:
            o = list(shp[0].values())[0]
            if len(o) < 4:  # 1-D convolutions: not in the 2-D table
                continue
            c = o[1] * (o[4] if len(o) == 5 else 1)  # NCHWc: blocks x block size
            theirs[(k, c, o[2], o[3])].append(statistics.median(ts[1:] or ts))
    print("convs by kind and output (C, H, W): count, ours ms, onnxruntime ms, ratio")
    for key in sorted(mine, key=lambda t: (t[0], -t[2])):
        a, b = sum(mine[key]), sum(theirs.get(key, []))
        r = f"{a / b:6.3f}" if b else "     -"
        print(f"  {key[0]:16s} {key[1]:5d} x {key[2]:3d} x {key[3]:3d} {len(mine[key]):3d}"
              f" {a * 1e3:8.3f} {b * 1e3:8.3f} {r}")
    if os.environ.get("BREAKDOWN_DUMP"):
        rows = [
            {"group": list(g), "kind": k, "ms": statistics.median(ts) / 1e6,
             "shape": list(_shape(lir.code[g[0]].operands[0][0])),
             "strategy": ex.strategy(g[0])}
            for (g, _, k), ts in zip(calls, per)
        ]
        orows = [{"name": n, "kind": node_kind[n], "ms": statistics.median(ts[1:] or ts) * 1e3,
                  "shape": node_shape[n]}
                 for n, ts in node.items()]
        with open(os.environ["BREAKDOWN_DUMP"], "w") as f:
            json.dump({"ours": rows, "ort": orows}, f)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
