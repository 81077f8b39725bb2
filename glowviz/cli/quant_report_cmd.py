"""`glowviz quant-report MODEL` — per-node SQNR of int8 against float; the float fallback search.

Quantize MODEL with a profile and compare every quantized node's result with the float
model's on evaluation inputs: local SQNR (the node fed the float model's values) and
propagated SQNR (the quantized model as it runs), in dB; the first node below a threshold;
and, with --target-sqnr, the nodes to keep in float to reach it.
"""

from __future__ import annotations

import argparse
import json
import math

from compiler.pipeline import CompileOptions
from compiler.quantize import QuantReport, fallback_search, quant_report
from glowviz.cli.common import add_quantize_args, add_shape_arg, command_parser, quantize_options
from glowviz.cli.profile_cmd import samples_for
from glowviz.core.shapes import parse_shape_args
from glowviz.exports.render import atomic_write


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = command_parser(sub, "quant-report", __doc__)
    p.add_argument("model", help="path to an ONNX model")
    add_shape_arg(p)
    add_quantize_args(p, required=True)
    p.add_argument(
        "--inputs", action="append", default=[], metavar="EVAL.npz", help="evaluation inputs"
    )
    p.add_argument("--random", type=int, default=0, metavar="N", help="N random samples")
    p.add_argument("--seed", type=int, default=1, help="seed of the random samples (default 1)")
    p.add_argument("--threshold", type=float, default=30.0, help="SQNR threshold, dB")
    p.add_argument(
        "--target-sqnr",
        type=float,
        metavar="DB",
        help="search the nodes to keep in float so the output SQNR reaches DB",
    )
    p.add_argument("--json", metavar="FILE", help="write the report as JSON")
    p.add_argument("--figure", metavar="FILE.svg|pdf|png", help="per-node SQNR bars, histograms")
    p.add_argument("--theme", default="paper", help="theme of --figure (default paper)")
    p.set_defaults(func=run)


def _db(x: float) -> str:
    return f"{x:7.2f}" if math.isfinite(x) else ("    inf" if x > 0 else "   -inf")


def format_report(r: QuantReport) -> str:
    lines = [f"{'node':36s} {'op':16s} {'local':>7s} {'propag.':>7s}  scale / offset"]
    for n in r.nodes:
        mark = " <" if n.propagated < r.threshold else ""
        lines.append(
            f"{n.node[:36]:36s} {n.op:16s} {_db(n.local)} {_db(n.propagated)}  "
            f"{n.scale:.4g} / {n.offset}{mark}"
        )
    first = r.first_below
    lines.append(f"first node below {r.threshold:g} dB: {first.node if first else 'none'}")
    for name, v in r.outputs.items():
        lines.append(f"output {name}: SQNR {_db(v).strip()} dB")
    if r.float_nodes:
        lines.append(f"kept in float: {', '.join(r.float_nodes)}")
    for name, why in r.decisions.items():
        if why.startswith("float: "):  # the quantizer's own reasons (a Concat of mixed ranges)
            lines.append(f"float {name}: {why.removeprefix('float: ')}")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    options = CompileOptions(input_shapes=parse_shape_args(args.input_shape))
    qopts = quantize_options(args)
    assert qopts is not None
    samples = samples_for(args.model, options, args.inputs, args.random or 4, args.seed)
    report = quant_report(args.model, qopts, samples, options=options, threshold=args.threshold)
    print(format_report(report))
    data = report.to_json()
    if args.target_sqnr is not None:
        fb = fallback_search(args.model, qopts, samples, args.target_sqnr, options=options)
        print(
            f"fallback to {fb.target:g} dB: {'reached' if fb.reached else 'not reached'}, "
            f"output SQNR {fb.start_sqnr:.2f} -> {fb.output_sqnr:.2f} dB keeping "
            f"{len(fb.keep_float)} of {fb.compute_nodes} compute nodes in float "
            f"({100 * fb.float_fraction:.1f}%): {', '.join(fb.keep_float) or 'none'}"
        )
        data["fallback"] = fb.to_json()
    if args.json:
        atomic_write(args.json, json.dumps(data, indent=1) + "\n")
    if args.figure:
        from glowviz.exports.quant_figure import quant_figure_bytes

        profile = qopts.load_profile()
        fmt = args.figure.rsplit(".", 1)[-1].lower()
        atomic_write(args.figure, quant_figure_bytes(report, profile, qopts, fmt, args.theme))
    return 0


__all__ = ["add_parser", "format_report", "run"]
