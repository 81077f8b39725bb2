"""`glowviz profile MODEL -o PROFILE.json` — int8 quantization profile of every tensor.

Run MODEL on calibration inputs with a profile point on every activation (Glow's
-dump-profile) and write each tensor's range and histogram, keyed by a hash of the graph (a
profile of another graph is refused). Use it with --quantize PROFILE.json.
"""

from __future__ import annotations

import argparse
from typing import Any

from compiler.errors import CompilerError
from compiler.pipeline import CompileOptions
from compiler.quantization.profile import DEFAULT_BINS
from compiler.quantize import load_samples, model_input_types, profile_model, random_samples
from glowviz.cli.common import add_shape_arg, command_parser
from glowviz.core.shapes import parse_shape_args
from glowviz.exports.render import atomic_write


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = command_parser(sub, "profile", __doc__)
    p.add_argument("model", help="path to an ONNX model")
    add_shape_arg(p)
    p.add_argument(
        "--inputs",
        action="append",
        default=[],
        metavar="CAL.npz",
        help="calibration inputs by input name: one sample, or a batch along a new first "
        "axis (repeatable)",
    )
    p.add_argument(
        "--random", type=int, default=0, metavar="N", help="N random samples (N(0,1) floats)"
    )
    p.add_argument("--seed", type=int, default=0, help="seed of the random samples")
    p.add_argument("--executor", default="llvm", choices=("llvm", "interpreter", "graph"))
    p.add_argument("--bins", type=int, default=DEFAULT_BINS, help="histogram bins per tensor")
    p.add_argument(
        "--hessians",
        action="store_true",
        help="also gather each Conv / FullyConnected / MatMul layer's input Hessian, for "
        "--weight-rounding gptq (written beside the profile as STEM.hessians.npz)",
    )
    p.add_argument("-o", "--output", required=True, metavar="PROFILE.json")
    p.set_defaults(func=run)


def samples_for(
    model: str, options: CompileOptions, paths: list[str], count: int, seed: int
) -> list[dict[str, Any]]:
    """Samples from .npz files, or `count` random ones, keyed by the model's ONNX input names."""
    types = model_input_types(model, options)
    samples = load_samples(paths, types) if paths else []
    if count:
        samples += random_samples(types, count, seed)
    if not samples:
        raise CompilerError("no calibration inputs", hint="give --inputs CAL.npz or --random N")
    return samples


def run(args: argparse.Namespace) -> int:
    options = CompileOptions(input_shapes=parse_shape_args(args.input_shape))
    samples = samples_for(args.model, options, args.inputs, args.random, args.seed)
    profile = profile_model(
        args.model,
        samples,
        options=options,
        executor=args.executor,
        bins=args.bins,
        hessians=args.hessians,
    )
    for target, data in profile.encoded(args.output):
        atomic_write(target, data)
    widest = sorted(profile.tensors.items(), key=lambda kv: kv[1].min - kv[1].max)[:5]
    print(
        f"profiled {len(profile.tensors)} tensors on {profile.inputs} samples "
        f"({args.executor}) -> {args.output}"
    )
    print(f"graph {profile.graph_hash[:23]}...")
    if profile.hessians is not None:
        print(
            f"Hessians of {len(profile.hessians.layers)} layers -> {profile.hessian_file}"
        )
    for name, tp in widest:
        print(f"  {name:40s} [{tp.min:.4g}, {tp.max:.4g}]")
    return 0


__all__ = ["add_parser", "run", "samples_for"]
