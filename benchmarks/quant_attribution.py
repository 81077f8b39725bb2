"""Which tensors limit an int8 model's output SQNR: quantize one tensor at a time.

The float graph the quantize stage sees runs on the numpy reference kernels with one tensor
fake-quantized (rounded to the int8 grid and back): an activation with the scale, offset and
clamp the quantizer chose for it (read from the quantized graph's types), or a Conv /
FullyConnected / MatMul weight as the quantized graph holds it (int8 per output channel, rounded
to nearest or, with `--weight-rounding gptq`, by GPTQ). The output SQNR against float with that
tensor alone quantized is the tensor's share of the error. It also
reports every activation, every weight and both quantized together, and what-ifs: the same
activation ranges on a 16-bit grid (all of them, or the k most harmful), to tell whether wider
activations would reach a target with int8 weights.

Fake quantization leaves out what the integer kernels add (requantization of accumulators,
table lookups) and bias correction, so its all-quantized figure is within ~1 dB of the real
int8 model's (MobileNetV2: 24.1 vs 24.9 dB, BERT-tiny 21.6 vs 21.5).

Run: ``python benchmarks/quant_attribution.py [--only mobilenet bert_tiny] [--calib 16]
[--eval 2] [--top 20] [--weight-rounding nearest|gptq] [--json out.json]``.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from benchmarks.bench_quant import model_path, samples  # noqa: E402
from compiler.backends.interpreter.graph_interpreter import GraphInterpreter  # noqa: E402
from compiler.executors import io_specs  # noqa: E402
from compiler.graph.ir import Module  # noqa: E402
from compiler.graph.ops_quant import QMAX, QMIN, is_quantized  # noqa: E402
from compiler.passes.rewriter import const_data  # noqa: E402
from compiler.pipeline import CompileOptions, compile_model  # noqa: E402
from compiler.quantization import QuantizeOptions  # noqa: E402
from compiler.quantization.options import WEIGHT_ROUNDINGS  # noqa: E402
from compiler.quantization.params import quantize_weights  # noqa: E402
from compiler.quantization.quantizer import MOVERS  # noqa: E402
from compiler.quantize import profile_model, sqnr_db  # noqa: E402

#: (scale, offset, qmin, qmax) of an activation's integer grid.
Grid = tuple[float, int, int, int]


def fake_quantize(a: np.ndarray, g: Grid) -> np.ndarray:
    s, z, lo, hi = g
    q = np.clip(np.round(np.asarray(a, np.float64) / s) + z, lo, hi)
    return ((q - z) * s).astype(np.float32)


def widen(g: Grid, bits: int) -> Grid:
    """The same real range on a grid of 2**bits steps."""
    s, z, lo, hi = g
    a, b = s * (lo - z), s * (hi - z)
    n = (1 << bits) - 1
    s2 = (b - a) / n
    return (s2, -round(a / s2), 0, n)


def activation_grids(qmod: Module, fmod: Module) -> dict[str, Grid]:
    """Float value name -> the grid the quantized graph holds it on. Values that data movers
    (Reshape, Transpose, MaxPool...) compute in the float graph are left out: they hold their
    input's values on its grid, so quantizing them again changes nothing and would count that
    tensor twice."""
    moved = {
        r.name: n.operands[0].name for n in fmod.main.nodes if n.op in MOVERS for r in n.results
    }
    grids: dict[str, Grid] = {}
    for n in qmod.main.nodes:
        for idx, fname in n.meta.get("quantizes", {}).items():
            t = n.results[idx].type
            if is_quantized(t):
                grids[fname] = (
                    float(t.scale),
                    int(t.offset),
                    int(n.attrs.get("qmin", -128)),
                    int(n.attrs.get("qmax", 127)),
                )
        if n.op == "Quantize":
            t = n.result.type
            g = (float(t.scale or 1.0), int(t.offset or 0), QMIN, QMAX)
            grids.setdefault(n.operands[0].name, g)
    return {k: g for k, g in grids.items() if moved.get(k) not in grids}


def weight_axis(op: str) -> int:
    return 0 if op == "Conv" else 1  # FullyConnected / MatMul weights are [K, N], per column


def quantized_weights(qmod: Module) -> dict[str, np.ndarray]:
    """Float node name -> its weights as the quantized graph holds them (int8 times the
    per-channel scales), in the float node's layout: what the quantizer chose, GPTQ's
    rounding included (the QConv / QFullyConnected that replaces node N is named N_q)."""
    out: dict[str, np.ndarray] = {}
    for n in qmod.main.nodes:
        if n.op not in ("QConv", "QFullyConnected") or not n.name.endswith("_q"):
            continue
        wq, scales = const_data(n.operands[1]), const_data(n.operands[3])
        if wq is None or scales is None:
            continue
        shape = [1] * wq.ndim
        shape[0 if n.op == "QConv" else 1] = -1
        out[n.name[:-2]] = wq.astype(np.float32) * scales.reshape(shape)
    return out


class Attribution:
    """Runs the float graph with chosen tensors fake-quantized."""

    def __init__(
        self,
        fmod: Module,
        grids: dict[str, Grid],
        evals: list[dict[str, Any]],
        qweights: dict[str, np.ndarray] | None = None,
    ):
        self.fmod, self.grids, self.evals = fmod, grids, evals
        self.qweights = qweights or {}
        self.in_specs, self.out_specs, self.aliases = io_specs(fmod)
        self.onnx_to_graph = {o: p for o, p in fmod.meta.get("onnx_inputs", ())}
        self.weights = [
            n.name
            for n in fmod.main.nodes
            if n.op in ("Conv", "FullyConnected")
            or (n.op == "MatMul" and const_data(n.operands[1]) is not None)
        ]
        self.values: dict[str, list[np.ndarray]] = {}
        self.ref = self.run({}, (), capture=set(grids))

    def own_sqnr(self, name: str, g: Grid) -> float:
        """The tensor's own quantization SQNR: its float values on the evaluation inputs
        against their fake-quantized form (before anything downstream sees the error)."""
        ref = np.concatenate([v.ravel() for v in self.values.get(name, [])])
        return sqnr_db(ref, fake_quantize(ref, g)) if ref.size else math.inf

    def run(
        self, acts: dict[str, Grid], weights: Any, capture: set[str] | None = None
    ) -> list[dict[str, np.ndarray]]:
        weights = set(weights)
        chosen = self.qweights
        keep, values = capture or set(), self.values

        class Run(GraphInterpreter):
            def run_node(self, node: Any, args: list[np.ndarray]) -> list[np.ndarray]:
                if node.name in weights:
                    args = list(args)
                    w, ax = args[1], weight_axis(node.op)
                    if node.name in chosen and chosen[node.name].shape == w.shape:
                        args[1] = chosen[node.name]
                    else:
                        wq, ws = quantize_weights(w, ax)
                        shape = [1] * w.ndim
                        shape[ax] = -1
                        args[1] = wq.astype(np.float32) * ws.reshape(shape)
                outs = super().run_node(node, args)
                for r, o in zip(node.results, outs):
                    if r.name in keep:
                        values.setdefault(r.name, []).append(np.asarray(o, np.float32).copy())
                return [
                    fake_quantize(o, acts[r.name]) if r.name in acts else o
                    for r, o in zip(node.results, outs)
                ]

        outs = []
        for s in self.evals:
            it = Run(self.fmod)
            it.input_specs = self.in_specs
            it.output_names = [n for n, _ in self.out_specs]
            ins = {}
            for k, v in s.items():
                gname = self.onnx_to_graph.get(k, k)
                if gname in keep:
                    values.setdefault(gname, []).append(np.asarray(v, np.float32).copy())
                g = acts.get(gname)
                ins[k] = fake_quantize(v, g) if g is not None else v
            outs.append(it.run(ins, self.aliases))
        return outs

    def sqnr(self, acts: dict[str, Grid] | None = None, weights: Any = ()) -> float:
        got = self.run(acts or {}, weights)
        return min(
            sqnr_db(
                np.concatenate([r[k].ravel() for r in self.ref]),
                np.concatenate([o[k].ravel() for o in got]),
            )
            for k in self.ref[0]
        )


def attribute(name: str, args: argparse.Namespace) -> dict[str, Any] | None:
    path = model_path(name)
    if path is None:
        return None
    calib = samples(path, args.calib, seed=1)
    evals = samples(path, args.eval, seed=2)
    gptq = args.weight_rounding == "gptq"
    profile = profile_model(str(path), calib, executor="llvm", hessians=gptq)
    graph = replace(CompileOptions(), low_level=False, profile=False)
    fmod = compile_model(str(path), graph).module
    qopts = QuantizeOptions(profile, weight_rounding=args.weight_rounding)
    qmod = compile_model(str(path), replace(graph, quantize=qopts)).module
    grids = activation_grids(qmod, fmod)
    at = Attribution(fmod, grids, evals, quantized_weights(qmod))
    r: dict[str, Any] = {
        "model": name,
        "weight_rounding": args.weight_rounding,
        "activations": len(grids),
        "weights": len(at.weights),
    }
    r["all_activations_db"] = at.sqnr(grids)
    r["all_weights_db"] = at.sqnr(weights=at.weights)
    r["all_db"] = at.sqnr(grids, at.weights)
    if args.totals_only:
        r["tensors"], r["int16_activations_db"] = [], {}
        return r
    singles = [(at.sqnr({k: g}), "activation", k) for k, g in grids.items()]
    singles += [(at.sqnr(weights=[w]), "weight", w) for w in at.weights]
    singles.sort()
    def producer_of(n: Any) -> str:
        act = n.attrs.get("activation", "none")
        return n.op + (f"+{act}" if act != "none" else "")

    producer = {res.name: producer_of(n) for n in fmod.main.nodes for res in n.results}
    r["tensors"] = [
        {
            "sqnr_db": s,
            "kind": kind,
            "tensor": t,
            "producer": producer.get(t, "input") if kind == "activation" else "weights",
            "own_db": at.own_sqnr(t, grids[t]) if kind == "activation" else None,
        }
        for s, kind, t in singles
    ]
    acts_ranked = [t for _, kind, t in singles if kind == "activation"]
    # Leave-one-out: every activation int8 but this one. What keeping it wider would gain;
    # less than "alone" suggests when the tensors' output errors do not add up.
    r["all_activations_but_db"] = {
        t: at.sqnr({k: g for k, g in grids.items() if k != t})
        for t in acts_ranked[: args.leave_out]
    }
    wide: dict[str, float] = {}
    for k in (*args.wide_top, len(acts_ranked)):
        g = dict(grids)
        for t in acts_ranked[:k]:
            g[t] = widen(g[t], 16)
        wide[str(k)] = at.sqnr(g, at.weights)
    r["int16_activations_db"] = wide
    return r


def report(r: dict[str, Any], top: int) -> str:
    lines = [
        f"{r['model']} ({r.get('weight_rounding', 'nearest')} weights): "
        f"{r['activations']} activations, {r['weights']} weights",
        f"  all activations int8: {r['all_activations_db']:.2f} dB; all weights int8: "
        f"{r['all_weights_db']:.2f} dB; both: {r['all_db']:.2f} dB",
        "  int8 weights, the k most harmful activations on 16-bit grids: "
        + ", ".join(f"k={k}: {v:.2f}" for k, v in r["int16_activations_db"].items()),
        f"  the {top} most harmful tensors alone (output SQNR):",
    ]
    for t in r["tensors"][:top]:
        own = t.get("own_db")
        extra = f"  own {own:5.2f} dB, gain {own - t['sqnr_db']:+5.2f}" if own is not None else ""
        lines.append(
            f"    {t['sqnr_db']:6.2f} dB  {t['kind']:10s} {t['tensor']:24s} "
            f"{t.get('producer', ''):18s}{extra}"
        )
    if r.get("all_activations_but_db"):
        lines.append(
            f"  every activation int8 ({r['all_activations_db']:.2f} dB) but one of the most "
            "harmful: "
            + ", ".join(f"{t} {v:.2f}" for t, v in r["all_activations_but_db"].items())
        )
    groups: dict[str, list[dict[str, Any]]] = {}
    for t in r["tensors"]:
        if t["kind"] == "activation":
            groups.setdefault(t.get("producer", "?"), []).append(t)
    if groups:
        lines.append(
            "  activations by producer: count, median own SQNR, median output SQNR alone, "
            "their summed noise at the output"
        )
        def power(ts: list[dict[str, Any]]) -> float:
            return sum(10 ** (-t["sqnr_db"] / 10) for t in ts)

        for prod, ts in sorted(groups.items(), key=lambda kv: -power(kv[1])):
            pw = power(ts)
            lines.append(
                f"    {prod:18s} {len(ts):3d}  own {np.median([t['own_db'] for t in ts]):5.2f} dB"
                f"  alone {np.median([t['sqnr_db'] for t in ts]):5.2f} dB"
                f"  together {-10 * math.log10(pw) if pw > 0 else math.inf:5.2f} dB"
            )
    noise = sum(10 ** (-t["sqnr_db"] / 10) for t in r["tensors"])
    if noise > 0:
        lines.append(
            f"  their noise powers summed as if independent: {-10 * math.log10(noise):.2f} dB"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", nargs="*", default=["mobilenet", "bert_tiny"])
    ap.add_argument("--calib", type=int, default=16)
    ap.add_argument("--eval", type=int, default=2)
    ap.add_argument("--top", type=int, default=20)
    ap.add_argument("--wide-top", type=int, nargs="*", default=[4, 8, 16])
    ap.add_argument(
        "--leave-out",
        type=int,
        default=6,
        help="the N most harmful activations: all int8 but that one",
    )
    ap.add_argument(
        "--weight-rounding",
        choices=WEIGHT_ROUNDINGS,
        default="nearest",
        help="the quantizer's weight rounding (gptq: profiles with Hessians)",
    )
    ap.add_argument(
        "--totals-only",
        action="store_true",
        help="all activations, all weights and both; no tensor-by-tensor runs",
    )
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    results = []
    for name in args.only:
        r = attribute(name, args)
        if r is None:
            print(f"{name}: model not available")
            continue
        print(report(r, args.top), flush=True)
        results.append(r)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
