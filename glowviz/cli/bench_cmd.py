"""`glowviz bench MODEL` — latency vs onnxruntime, GFLOP/s, compile times, profile.

Run MODEL with the LLVM executor and onnxruntime (one thread, ORT_ENABLE_ALL) on the same
inputs, alternating in one process, and report medians, the ratio, GFLOP/s and % of the
single-core FMA peak, and compile times cold (fresh cache) and cached; optionally a
per-instruction profile.
"""

from __future__ import annotations

import argparse
import gc
import math
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from compiler.errors import CompilerError
from glowviz.cli.common import (
    add_common_model_args,
    command_parser,
    input_options,
    positive_int,
    quantize_options,
)

if TYPE_CHECKING:
    from compiler.pipeline import CompileResult


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = command_parser(sub, "bench", __doc__)
    add_common_model_args(p)
    p.add_argument("--executor", default="llvm", help="executor to time (default: llvm)")
    p.add_argument(
        "--vs",
        default="onnxruntime",
        choices=("onnxruntime", "none"),
        help="reference runtime timed in the same process (default: onnxruntime)",
    )
    p.add_argument(
        "--ort-model",
        metavar="MODEL.onnx",
        help="time onnxruntime on this model instead (e.g. MODEL's int8 QDQ form)",
    )
    p.add_argument("--batch", type=positive_int, default=None, help="batch size (first input dim)")
    p.add_argument(
        "--threads",
        type=positive_int,
        default=1,
        help="threads of both the LLVM executor and onnxruntime (default 1)",
    )
    p.add_argument("--reps", type=positive_int, default=20, help="timed repetitions (default 20)")
    p.add_argument("--profile", action="store_true", help="per-instruction profile (top 10)")
    p.add_argument(
        "--no-compile-times", action="store_true", help="skip the cold/cached compile measurements"
    )
    p.set_defaults(func=run)


# -- helpers ------------------------------------------------------------------------------------


def _with_batch(proto: Any, batch: int) -> Any:
    """The model with every graph input's first dim set to `batch` (and value infos cleared)."""
    import onnx

    m = onnx.ModelProto()
    m.CopyFrom(proto)
    inits = {i.name for i in m.graph.initializer}
    for vi in m.graph.input:
        if vi.name in inits:
            continue
        dims = vi.type.tensor_type.shape.dim
        if dims:
            dims[0].ClearField("dim_param")
            dims[0].dim_value = batch
    for vi in m.graph.output:
        dims = vi.type.tensor_type.shape.dim
        if dims:
            dims[0].ClearField("dim_value")
            dims[0].dim_param = "batch"
    del m.graph.value_info[:]
    return m


def lir_flops(lir: Any) -> int:
    """Multiply-adds x2 of the conv / matmul / fully-connected instructions."""
    total = 0
    for ins in lir.code:
        ops = [v for v, _ in ins.operands]
        if ins.kind == "conv":
            out, _, w = ops[0], ops[1], ops[2]
            n, k, oh, ow = out.type.shape
            _, cg, r, s = w.type.shape
            total += 2 * n * k * oh * ow * cg * r * s
        elif ins.kind == "convtranspose":
            x, w = ops[1], ops[2]
            n, c, h, wd = x.type.shape
            _, kg, r, s = w.type.shape
            total += 2 * n * c * h * wd * kg * r * s
        elif ins.kind == "matmul":
            out, a = ops[0], ops[1]
            total += 2 * out.type.numel * a.type.shape[-1]
        elif ins.kind in ("qconv", "intconv"):
            out, w = ops[0], ops[2]
            n, k, oh, ow = out.type.shape
            total += 2 * n * k * oh * ow * math.prod(w.type.shape[1:])
        elif ins.kind in ("qmatmul", "intmatmul"):
            out, a = ops[0], ops[1]
            total += 2 * out.type.numel * a.type.shape[-1]
        elif ins.kind in ("fullyconnected", "qfullyconnected"):
            out, x = ops[0], ops[1]
            total += 2 * out.type.numel * x.type.shape[-1]
    return total


def instr_flops(ins: Any) -> int:
    class _One:
        code = [ins]

    return lir_flops(_One)


def _inputs_for(executor: Any, seed: int = 0) -> dict[str, np.ndarray]:
    from glowviz.cli.run_cmd import random_input

    rng = np.random.default_rng(seed)
    return {n: random_input(executor.input_types[n], rng) for n in executor.input_names}


def _ort_session(proto: Any, threads: int) -> Any:
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    if threads > 1:
        # The runs alternate with ours: spinning after each run, its workers held the cores
        # ours then needed (ResNet-50: our two threads measured no faster than one).
        so.add_session_config_entry("session.intra_op.allow_spinning", "0")
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.log_severity_level = 3
    return ort.InferenceSession(proto.SerializeToString(), so, providers=["CPUExecutionProvider"])


def _compile(
    proto: Any,
    input_shapes: dict,
    const_inputs: dict,
    kind: str,
    threads: int = 1,
    quantize: Any = None,
    max_memory: int | None = None,
) -> tuple[Any, Any, float]:
    from compiler.executors import LOW_LEVEL_EXECUTORS, make_executor
    from compiler.limits import DEFAULT_MAX_MEMORY
    from compiler.pipeline import CompileOptions, compile_model

    t0 = time.perf_counter()
    options = CompileOptions(
        input_shapes=input_shapes,
        const_inputs=const_inputs,
        low_level=kind in LOW_LEVEL_EXECUTORS,
        threads=threads,
        quantize=quantize,
        max_memory=DEFAULT_MAX_MEMORY if max_memory is None else max_memory,
    )
    result = compile_model(proto, options)
    t1 = time.perf_counter()
    ex = make_executor(result, kind)
    return result, ex, t1 - t0


def compile_times(result: CompileResult) -> dict[str, float]:
    """Backend compile time (codegen + JIT) with a fresh cache dir, then from that disk cache."""
    from compiler.backends.interpreter.arena import NaivePlan
    from compiler.backends.llvm.executor import LLVMExecutor, _lir_and_plan, executor_key
    from compiler.backends.llvm.jit import JITEngine

    lir, plan = _lir_and_plan(result)
    layout = plan if plan is not None else NaivePlan(lir)  # what LLVMExecutor runs over
    out: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="glowviz-bench-cache-") as tmp:
        engine = JITEngine(directory=Path(tmp))
        key = executor_key(lir, layout)  # the module it runs
        for label in ("cold_s", "cached_s"):
            JITEngine._memory.pop(key, None)  # force the disk (or a full compile) path
            t = time.perf_counter()
            ex = LLVMExecutor(lir, plan, engine=engine)
            out[label] = time.perf_counter() - t
            out[label.replace("_s", "_jit_s")] = ex.timings["jit_s"]
            out[label.replace("_s", "_codegen_s")] = ex.timings["codegen_s"]
            del ex
            gc.collect()  # big models: do not measure the next compile under memory pressure
    return out


def profile(executor: Any, inputs: dict[str, np.ndarray], runs: int = 5) -> list[dict[str, Any]]:
    """Median time of every instruction entry over `runs` stepped runs, slowest first."""
    ex = executor.executor
    lir = ex.lir
    ex.prepare_stepping()
    times: list[list[float]] = [[] for _ in lir.code]
    for _ in range(runs):
        ex.set_inputs(inputs)
        for i in range(len(lir.code)):
            if ex._entries[i] is None:
                continue
            t = time.perf_counter_ns()
            ex.call_entry(i)
            times[i].append(time.perf_counter_ns() - t)
    rows = []
    for i, ts in enumerate(times):
        if not ts:
            continue
        ins = lir.code[i]
        med = statistics.median(ts) / 1e9
        fl = instr_flops(ins)
        rows.append(
            {
                "index": i,
                "name": ins.name,
                "kind": ins.kind,
                "strategy": ex.strategy(i),
                "seconds": med,
                "shape": "x".join(map(str, ins.operands[0][0].type.shape)),
                "gflops": fl / med / 1e9 if fl and med else 0.0,
            }
        )
    rows.sort(key=lambda r: -r["seconds"])
    return rows


def bench_model(
    model: str | Path | Any,
    *,
    input_shapes: dict | None = None,
    const_inputs: dict | None = None,
    max_memory: int | None = None,
    batch: int | None = None,
    kind: str = "llvm",
    vs: str = "onnxruntime",
    threads: int = 1,
    reps: int = 20,
    with_compile_times: bool = True,
    with_profile: bool = False,
    quantize: Any = None,
    ort_model: str | Path | None = None,
) -> dict[str, Any]:
    """Everything `glowviz bench` prints, as a dict. `quantize`: a QuantizeOptions (int8);
    `ort_model`: time onnxruntime on this model instead (e.g. the QDQ model of MODEL)."""
    from compiler.frontend import load_model

    proto = load_model(model)
    if batch is not None:
        proto = _with_batch(proto, batch)
    res: dict[str, Any] = {"model": str(model) if isinstance(model, str | Path) else "<proto>"}
    consts = const_inputs or {}
    res["threads"] = threads
    result, executor, t_front = _compile(
        proto, input_shapes or {}, consts, kind, threads, quantize, max_memory
    )
    res["frontend_s"] = t_front
    lir = result.lir
    if lir is not None:
        res["instructions"] = len(lir.code)
        res["flops"] = lir_flops(lir)
    inputs = _inputs_for(executor)
    sess = None
    if vs == "onnxruntime":
        sess = _ort_session(load_model(ort_model) if ort_model else proto, threads)
        # onnxruntime takes the inputs the model was specialized on like any other.
        ort_inputs = {
            i.name: consts[i.name]
            if i.name in consts
            else inputs[executor.aliases.get(i.name, i.name)]
            for i in sess.get_inputs()
        }
    # Warm up, then alternate.
    ours = executor.run(inputs)
    if sess is not None:
        theirs = sess.run(None, ort_inputs)
        diffs = []
        for a, b in zip((ours[n] for n in executor.output_names), theirs):
            scale = float(np.max(np.abs(b))) or 1.0
            diffs.append(float(np.max(np.abs(a.astype(np.float64) - b))) / scale)
        res["max_rel_diff"] = max(diffs) if diffs else 0.0
    # Wall time, and the calling thread's CPU time: on a loaded machine the wall clock counts
    # the time other jobs held the core; one-thread runs (both sides compute on the calling
    # thread) are compared on CPU time there.
    t_ours, t_ort, c_ours, c_ort = [], [], [], []
    for _ in range(reps):
        t, c = time.perf_counter(), time.thread_time()
        executor.run(inputs)
        t_ours.append(time.perf_counter() - t)
        c_ours.append(time.thread_time() - c)
        if sess is not None:
            t, c = time.perf_counter(), time.thread_time()
            sess.run(None, ort_inputs)
            t_ort.append(time.perf_counter() - t)
            c_ort.append(time.thread_time() - c)
    res["ours_s"] = statistics.median(t_ours)
    res["ours_cpu_s"] = statistics.median(c_ours)
    if t_ort:
        res["ort_s"] = statistics.median(t_ort)
        res["ratio"] = res["ours_s"] / res["ort_s"]
        res["ort_cpu_s"] = statistics.median(c_ort)
        res["cpu_ratio"] = res["ours_cpu_s"] / max(res["ort_cpu_s"], 1e-9)
    if res.get("flops"):
        from compiler.backends.llvm.peak import fma_peak_gflops

        res["gflops"] = res["flops"] / res["ours_s"] / 1e9
        res["peak_gflops"] = fma_peak_gflops()
        res["pct_peak"] = 100 * res["gflops"] / res["peak_gflops"]
        if t_ort:
            res["ort_gflops"] = res["flops"] / res["ort_s"] / 1e9
    if with_compile_times and kind == "llvm":
        res.update(compile_times(result))
    if with_profile and kind == "llvm":
        res["profile"] = profile(executor, inputs)
    return res


def format_report(r: dict[str, Any]) -> str:
    lines = [
        f"model            {r['model']}  ({r.get('instructions', '?')} instructions, "
        f"{r.get('flops', 0) / 1e9:.2f} GFLOP)"
    ]
    lines.append(f"llvm             {r['ours_s'] * 1e3:9.3f} ms (median)")
    if "ort_s" in r:
        lines.append(
            f"onnxruntime      {r['ort_s'] * 1e3:9.3f} ms (median, {r.get('threads', 1)} "
            "thread(s), ORT_ENABLE_ALL)"
        )
        lines.append(f"ratio llvm/ort   {r['ratio']:9.3f}")
        if r.get("threads", 1) == 1:  # with more threads the workers' CPU time is elsewhere
            lines.append(
                f"thread CPU time  llvm {r['ours_cpu_s'] * 1e3:.3f} ms, onnxruntime "
                f"{r['ort_cpu_s'] * 1e3:.3f} ms, ratio {r['cpu_ratio']:.3f}"
            )
        lines.append(f"max rel. diff    {r['max_rel_diff']:.2e}")
    if "gflops" in r:
        lines.append(
            f"GFLOP/s          {r['gflops']:9.1f}  ({r['pct_peak']:.1f}% of the "
            f"{r['peak_gflops']:.0f} GFLOP/s single-core FMA peak)"
            + (f"; onnxruntime {r['ort_gflops']:.1f}" if "ort_gflops" in r else "")
        )
    lines.append(f"frontend+passes  {r['frontend_s']:9.3f} s")
    if "cold_s" in r:
        lines.append(
            f"backend cold     {r['cold_s']:9.3f} s (codegen {r['cold_codegen_s']:.3f} s, "
            f"LLVM {r['cold_jit_s']:.3f} s)"
        )
        lines.append(
            f"backend cached   {r['cached_s']:9.3f} s (codegen {r['cached_codegen_s']:.3f} s, "
            f"LLVM {r['cached_jit_s']:.3f} s)"
        )
    if r.get("profile"):
        tot = sum(p["seconds"] for p in r["profile"])
        lines.append(f"profile (stepped, {tot * 1e3:.3f} ms total; top 10):")
        lines.append(
            f"  {'idx':>4} {'kind':<14} {'ms':>8} {'%':>5} {'GFLOP/s':>8}  strategy / name / dest"
        )
        for p in r["profile"][:10]:
            lines.append(
                f"  {p['index']:>4} {p['kind']:<14} {p['seconds'] * 1e3:8.3f} "
                f"{100 * p['seconds'] / tot:5.1f} {p['gflops']:8.1f}  {p['strategy']} "
                f"%{p['name']} <{p['shape']}>"
            )
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    if not Path(args.model).exists():
        raise CompilerError(f"model file '{args.model}' does not exist")
    if args.vs == "onnxruntime":
        try:
            import onnxruntime  # noqa: F401
        except ImportError:
            raise CompilerError("onnxruntime is not installed", hint="use --vs none") from None
    os.environ.setdefault("OMP_NUM_THREADS", str(args.threads))
    r = bench_model(
        args.model,
        **input_options(args),
        batch=args.batch,
        kind=args.executor,
        vs=args.vs,
        threads=args.threads,
        reps=args.reps,
        with_compile_times=not args.no_compile_times,
        with_profile=args.profile,
        quantize=quantize_options(args),
        ort_model=args.ort_model,
    )
    print(format_report(r))
    return 0


__all__ = [
    "add_parser",
    "bench_model",
    "compile_times",
    "format_report",
    "lir_flops",
    "profile",
    "run",
]
