"""int8 quantization on the ImageNet- and BERT-shaped models: precision, agreement, latency.

For each model: a profile from `--calib` random samples (LLVM executor); output SQNR of the
all-quantized model against float on `--eval` other samples; the float fallback search to
`--target` dB (which nodes, what share of the compute nodes); LLVM vs the arena interpreter bit
for bit; latency of fp32 and int8 (LLVM) and of onnxruntime fp32 and its int8 QDQ models
(`quantize_static` on the same calibration samples, per-channel weights, uint8 and int8
activations), one thread, alternating; and the QDQ model imported by us against onnxruntime's
int8 outputs (every quantized tensor both compute: share of exact elements, largest difference
in quantization steps).

Run: ``python benchmarks/bench_quant.py [--only resnet50 mobilenet inception bert_tiny]
[--calib 32] [--eval 4] [--reps 10] [--weight-rounding nearest|gptq] [--precision-only]
[--json out.json]``. Models come from benchmarks/models.py
(BERT-tiny from benchmarks/models_transformer.py when it is there).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("OMP_NUM_THREADS", "1")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
import onnx  # noqa: E402

from benchmarks.models import ensure_model  # noqa: E402
from compiler.executors import make_executor  # noqa: E402
from compiler.pipeline import CompileOptions, compile_model, import_model  # noqa: E402
from compiler.quantization import QuantizeOptions  # noqa: E402
from compiler.quantization.options import WEIGHT_ROUNDINGS  # noqa: E402
from compiler.quantize import fallback_search, profile_model, sqnr_db  # noqa: E402

MODELS = ["resnet50", "mobilenet", "inception", "bert_tiny"]


def model_path(name: str) -> Path | None:
    if name != "bert_tiny":
        return ensure_model(name)
    path = ROOT / "benchmarks" / "models" / "bert_tiny.onnx"
    if not path.exists():
        try:
            from benchmarks.models_transformer import build_bert_tiny  # type: ignore
        except ImportError:
            return None
        path.parent.mkdir(parents=True, exist_ok=True)
        onnx.save(build_bert_tiny(), path)
    return path


def samples(path: Path, count: int, seed: int) -> list[dict[str, np.ndarray]]:
    """Random samples by ONNX input name: N(0, 1) floats; token ids; attention masks of ones."""
    module, _ = import_model(str(path))
    names = {p: o for o, p in module.meta.get("onnx_inputs", ())}
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(count):
        s = {}
        for p in module.inputs():
            name, t = names.get(p.name, p.name), p.type
            if t.elem.is_float:
                s[name] = rng.standard_normal(t.shape).astype(t.np_dtype)
            elif "mask" in name:
                s[name] = np.ones(t.shape, t.np_dtype)
            else:
                s[name] = rng.integers(0, 30522, t.shape).astype(t.np_dtype)
        out.append(s)
    return out


def output_sqnr(ref_ex: Any, ex: Any, evals: list[dict[str, np.ndarray]]) -> float:
    refs = [ref_ex.run(s) for s in evals]
    got = [ex.run(s) for s in evals]
    return min(
        sqnr_db(
            np.concatenate([r[k].ravel() for r in refs]),
            np.concatenate([g[k].ravel() for g in got]),
        )
        for k in refs[0]
    )


def timing(fns: dict[str, Any], reps: int) -> tuple[dict[str, float], dict[str, float]]:
    """Median seconds per call, wall clock and this thread's CPU time, the callables
    alternating (one warm-up each). Everything runs on this thread (onnxruntime with one
    intra-op thread does), so the CPU-time medians do not count the time other processes of a
    shared machine take from us; the wall-clock ones do."""
    for f in fns.values():
        f()
    wall: dict[str, list[float]] = {k: [] for k in fns}
    cpu: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(reps):
        for k, f in fns.items():
            t, c = time.perf_counter(), time.thread_time()
            f()
            cpu[k].append(time.thread_time() - c)
            wall[k].append(time.perf_counter() - t)
    med = statistics.median
    return {k: med(v) for k, v in wall.items()}, {k: med(v) for k, v in cpu.items()}


def ort_session(path: Path | str) -> Any:
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.log_severity_level = 3
    return ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])


def ort_qdq(path: Path, calib: list[dict[str, np.ndarray]], act: str, out_dir: Path) -> Path:
    """onnxruntime's int8 QDQ model of `path` (pre-processed, per-channel, MinMax)."""
    from onnxruntime.quantization import (
        CalibrationDataReader,
        QuantFormat,
        QuantType,
        quantize_static,
    )
    from onnxruntime.quantization.shape_inference import quant_pre_process

    class Reader(CalibrationDataReader):
        def __init__(self) -> None:
            self.it = iter(calib)

        def get_next(self) -> dict[str, np.ndarray] | None:
            return next(self.it, None)

    pre = out_dir / f"{path.stem}.pre.onnx"
    dst = out_dir / f"{path.stem}.qdq_{act}.onnx"
    quant_pre_process(str(path), str(pre), skip_symbolic_shape=True)
    quantize_static(
        str(pre),
        str(dst),
        Reader(),
        quant_format=QuantFormat.QDQ,
        per_channel=True,
        activation_type=QuantType.QUInt8 if act == "u8" else QuantType.QInt8,
        weight_type=QuantType.QInt8,
    )
    return dst


def ort_sqnr(ref: Any, test: Any, evals: list[dict[str, np.ndarray]]) -> float:
    """Output SQNR of onnxruntime's own int8 model against its float one (the lowest over
    the outputs): what a production quantizer reaches on the same random-weight model."""
    refs = [ref.run(None, s) for s in evals]
    got = [test.run(None, s) for s in evals]
    return min(
        sqnr_db(
            np.concatenate([r[i].ravel() for r in refs]),
            np.concatenate([g[i].ravel() for g in got]),
        )
        for i in range(len(refs[0]))
    )


def compare_qdq(qdq: Path, evals: list[dict[str, np.ndarray]]) -> dict[str, Any]:
    """Our import of the QDQ model vs onnxruntime on every QuantizeLinear output both compute:
    the share of equal elements and the largest difference in steps, overall and for the
    first tensor where they differ (end to end: a one-step difference early grows downstream);
    and per op (`op_*`): each of our nodes run on onnxruntime's own values of its operands, so
    that only its arithmetic is compared, with the largest difference per op kind."""
    import onnxruntime as ort

    from compiler.graph.ir import Constant, Placeholder
    from compiler.kernels.reference import evaluate
    from compiler.quantize import _onnx_name, _run_all_values

    m = onnx.load(qdq)
    qouts = {n.name: n.output[0] for n in m.graph.node if n.op_type == "QuantizeLinear"}
    have = {o.name for o in m.graph.output}
    for t in qouts.values():
        if t not in have:
            m.graph.output.append(onnx.helper.make_empty_tensor_value_info(t))
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.log_severity_level = 3
    sess = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])
    module = compile_model(str(qdq), CompileOptions(low_level=False)).module
    nodes = []
    for n in module.main.nodes:
        tag = n.meta.get("onnx_q") or (n.op == "Quantize" and n.meta.get("onnx_node"))
        if tag in qouts:
            nodes.append((n, qouts[tag]))
    ort_name = {id(n.result): t for n, t in nodes}

    def as_i8(a: np.ndarray) -> np.ndarray:
        return (a.astype(np.int16) - (128 if a.dtype == np.uint8 else 0)).astype(np.int8)

    total = equal = 0
    worst = 0
    first = None
    op_total = op_equal = 0
    op_worst: dict[str, int] = {}
    for s in evals:
        outs = dict(zip([o.name for o in sess.get_outputs()], sess.run(None, s)))
        ours = _run_all_values(module, s, [n.result for n, _ in nodes])
        for n, t in nodes:
            ref = as_i8(outs[t]).astype(np.int16)
            d = np.abs(ours[n.result.name].astype(np.int16) - ref)
            total += d.size
            equal += int((d == 0).sum())
            worst = max(worst, int(d.max()))
            if first is None and d.max() > 0:
                first = {"node": n.name, "op": n.op, "max_steps": int(d.max())}
            # The same node on onnxruntime's operands (only when every operand is known).
            args = []
            for v in n.operands:
                if isinstance(v, Constant) and v.data is not None:
                    args.append(v.data)
                elif id(v) in ort_name:
                    args.append(as_i8(outs[ort_name[id(v)]]))
                elif isinstance(v, Placeholder) and _onnx_name(module, v.name) in s:
                    args.append(np.asarray(s[_onnx_name(module, v.name)]))
                else:
                    break
            else:
                alone = evaluate(n, args)[0].astype(np.int16)
                d = np.abs(alone - ref)
                op_total += d.size
                op_equal += int((d == 0).sum())
                op_worst[n.op] = max(op_worst.get(n.op, 0), int(d.max()))
    return {
        "tensors": len(nodes),
        "exact_share": equal / max(1, total),
        "max_steps": worst,
        "first_difference": first,
        "op_exact_share": op_equal / max(1, op_total),
        "op_max_steps": op_worst,
    }


def bench(name: str, args: argparse.Namespace, work: Path) -> dict[str, Any] | None:
    path = model_path(name)
    if path is None:
        print(f"{name}: no generator (benchmarks/models_transformer.py), skipped", flush=True)
        return None
    r: dict[str, Any] = {"model": name, "weight_rounding": args.weight_rounding}
    calib = samples(path, args.calib, seed=1)
    evals = samples(path, args.eval, seed=2)
    gptq = args.weight_rounding == "gptq"
    t, c = time.perf_counter(), time.process_time()
    profile = profile_model(str(path), calib, executor="llvm", hessians=gptq)
    r["profile_s"] = time.perf_counter() - t
    r["profile_cpu_s"] = time.process_time() - c
    qopts = QuantizeOptions(
        profile, weight_rounding=args.weight_rounding, min_slice_steps=args.min_slice_steps
    )
    f32 = make_executor(compile_model(str(path)), "llvm")
    t, c = time.perf_counter(), time.process_time()
    qres = compile_model(str(path), CompileOptions(quantize=qopts))
    r["quantize_compile_s"] = time.perf_counter() - t
    r["quantize_compile_cpu_s"] = time.process_time() - c
    q8 = make_executor(qres, "llvm")
    r["sqnr_all_int8_db"] = output_sqnr(f32, q8, evals)
    quantized = sum(1 for n in qres.module.main.nodes if n.op.startswith("Q"))
    r["quantized_nodes"] = quantized
    ref = make_executor(qres, "interpreter").run(evals[0])
    got = q8.run(evals[0])
    r["llvm_equals_interpreter"] = all(np.array_equal(ref[k], got[k]) for k in ref)
    if not args.no_search:
        fb = fallback_search(
            str(path),
            qopts,
            evals[: args.search_samples],
            args.target,
            max_float=args.max_float,
            max_share=args.max_share,
            max_tries=args.max_tries,
        )
        r["fallback"] = fb.to_json()
        keep = qopts.with_keep_float(fb.keep_float)
        qk = make_executor(compile_model(str(path), CompileOptions(quantize=keep)), "llvm")
        r["sqnr_after_fallback_db"] = output_sqnr(f32, qk, evals)
        r["float_share"] = fb.float_fraction
    if args.precision_only:
        r["ms"] = {}
        return r
    sess = ort_session(path)
    fns: dict[str, Any] = {
        "fp32": lambda: f32.run(evals[0]),
        "int8": lambda: q8.run(evals[0]),
        "ort_fp32": lambda: sess.run(None, evals[0]),
    }
    if not args.no_ort_qdq:
        for act in ("u8", "s8"):
            qdq = ort_qdq(path, calib, act, work)
            qs = ort_session(qdq)
            fns[f"ort_int8_{act}"] = lambda qs=qs: qs.run(None, evals[0])
            r[f"ort_{act}_sqnr_db"] = ort_sqnr(sess, qs, evals)
            r[f"qdq_{act}_vs_ort"] = compare_qdq(qdq, evals[:2])
            imported = make_executor(compile_model(str(qdq)), "llvm")
            fns[f"qdq_{act}"] = lambda ex=imported: ex.run(evals[0])
    wall, cpu = timing(fns, args.reps)
    r["ms"] = {k: v * 1e3 for k, v in cpu.items()}
    r["wall_ms"] = {k: v * 1e3 for k, v in wall.items()}
    ms = r["ms"]
    r["int8_vs_fp32"] = ms["fp32"] / ms["int8"]
    if "ort_int8_u8" in ms:
        r["int8_vs_ort_int8"] = ms["int8"] / min(ms["ort_int8_u8"], ms["ort_int8_s8"])
    return r


def report_line(r: dict[str, Any]) -> str:
    ms = r["ms"]
    parts = [
        f"{r['model']} ({r.get('weight_rounding', 'nearest')} weights): "
        f"SQNR all-int8 {r['sqnr_all_int8_db']:.1f} dB",
        f"llvm==interp {r['llvm_equals_interpreter']}",
    ]
    if "fallback" in r:
        fb = r["fallback"]
        parts.append(
            f"fallback {r['sqnr_after_fallback_db']:.1f} dB with {len(fb['keep_float'])}/"
            f"{fb['compute_nodes']} float ({100 * r['float_share']:.1f}%)"
        )
    parts.append(" ".join(f"{k} {v:.2f}ms" for k, v in ms.items()))
    if "int8_vs_ort_int8" in r:
        parts.append(f"int8/ort-int8 {r['int8_vs_ort_int8']:.2f}")
        parts.append(
            f"ort int8 SQNR u8 {r['ort_u8_sqnr_db']:.1f} dB, s8 {r['ort_s8_sqnr_db']:.1f} dB"
        )
    if "int8_vs_fp32" in r:
        parts.append(f"fp32/int8 {r['int8_vs_fp32']:.2f}x")
    for act in ("u8", "s8"):
        c = r.get(f"qdq_{act}_vs_ort")
        if c:
            parts.append(
                f"qdq-{act} exact {100 * c['exact_share']:.2f}% max {c['max_steps']} steps"
            )
    return "; ".join(parts)


def cpu_model() -> str:
    """The host CPU as lscpu names it (the figures' context)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown CPU"


def table(rows: list[dict[str, Any]]) -> str:
    """The per-model summary as a Markdown table (latencies: CPU-time medians, one thread)."""
    head = (
        "| model | SQNR int8 | after fallback (float nodes) | LLVM == interp | int8 ms | "
        "fp32 ms | ort int8 ms | int8 / ort int8 | fp32 / int8 | QDQ vs ort (u8; s8) | "
        "ort int8 SQNR (u8; s8) |"
    )
    out = [head, "|" + "---|" * head.count(" | ") + "---|"]
    for r in rows:
        ms = r["ms"]
        fb = r.get("fallback")
        after = (
            f"{r['sqnr_after_fallback_db']:.1f} dB ({len(fb['keep_float'])}/"
            f"{fb['compute_nodes']} = {100 * r['float_share']:.1f}%)"
            if fb
            else "-"
        )
        ort = min((ms[k] for k in ("ort_int8_u8", "ort_int8_s8") if k in ms), default=math.nan)
        qdq = "; ".join(
            f"{100 * c['exact_share']:.2f}% exact, max {c['max_steps']}"
            for c in (r.get("qdq_u8_vs_ort"), r.get("qdq_s8_vs_ort"))
            if c
        )
        label = r["model"] + (" (gptq)" if r.get("weight_rounding") == "gptq" else "")
        out.append(
            f"| {label} | {r['sqnr_all_int8_db']:.1f} dB | {after} | "
            f"{r['llvm_equals_interpreter']} | {ms.get('int8', math.nan):.2f} | "
            f"{ms.get('fp32', math.nan):.2f} | {ort:.2f} | "
            f"{r.get('int8_vs_ort_int8', math.nan):.2f} | "
            f"{r.get('int8_vs_fp32', math.nan):.2f}x | {qdq or '-'} | "
            f"{r.get('ort_u8_sqnr_db', math.nan):.1f}; {r.get('ort_s8_sqnr_db', math.nan):.1f} dB |"
        )
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", nargs="*", default=None, help=f"models (default: {MODELS})")
    ap.add_argument("--calib", type=int, default=32, help="calibration samples (default 32)")
    ap.add_argument("--eval", type=int, default=4, help="evaluation samples (default 4)")
    ap.add_argument("--search-samples", type=int, default=2, help="samples the search uses")
    ap.add_argument("--target", type=float, default=40.0, help="fallback target, dB")
    ap.add_argument("--max-tries", type=int, default=None, help="fallback: candidates tried")
    ap.add_argument("--max-float", type=int, default=None, help="fallback: nodes kept float")
    ap.add_argument(
        "--max-share", type=float, default=0.05, help="fallback: share of compute nodes float"
    )
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--no-search", action="store_true")
    ap.add_argument("--no-ort-qdq", action="store_true")
    ap.add_argument(
        "--weight-rounding",
        choices=WEIGHT_ROUNDINGS,
        default="nearest",
        help="int8 weight rounding (gptq: the profile gathers the layers' Hessians)",
    )
    ap.add_argument(
        "--min-slice-steps",
        type=int,
        default=16,
        help="QuantizeOptions.min_slice_steps (0: a Concat of very different ranges is int8)",
    )
    ap.add_argument(
        "--precision-only", action="store_true", help="SQNR and the search only: no timing"
    )
    ap.add_argument("--json", type=Path, help="write every figure as JSON")
    args = ap.parse_args(argv)
    rows = []
    print(f"host: {cpu_model()}; latencies: thread CPU-time medians of {args.reps} runs")
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.only or MODELS:
            r = bench(name, args, Path(tmp))
            if r is not None:
                rows.append(r)
                print(report_line(r), flush=True)
    print(table(rows))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1, default=float) + "\n")
    return 0 if all(math.isfinite(r["sqnr_all_int8_db"]) for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
