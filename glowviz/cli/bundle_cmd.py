"""`glowviz bundle MODEL -o DIR` — AOT bundle: object file, C header and weights for C programs.

Compile MODEL ahead of time (as Glow's -emit-bundle) into DIR/PREFIX.o (position-independent,
one entry), DIR/PREFIX.h (regions, inputs, outputs, the entry's prototype) and
DIR/PREFIX.weights.bin (the constant region). The application allocates the three regions,
loads the weights and calls the entry, without Python; see examples/bundle/.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from compiler.errors import CompilerError
from compiler.memory.report import human_bytes
from compiler.pipeline import compile_model
from glowviz.cli.common import add_common_model_args, add_plan_args, command_parser, compile_options


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = command_parser(
        sub,
        "bundle",
        __doc__,
        epilog="--quantize PROFILE (from `glowviz profile`) bundles the int8 model: inputs and "
        "outputs stay float, the int8 kernels are the target's (VNNI, AVX2 or plain code).",
    )
    add_common_model_args(p)
    p.add_argument("-o", "--output", required=True, metavar="DIR", help="directory to write to")
    p.add_argument(
        "--target",
        metavar="TRIPLE",
        help="LLVM target triple, e.g. x86_64-unknown-linux-gnu or aarch64-linux-gnu "
        "(default: this machine, with its CPU's features)",
    )
    p.add_argument(
        "--cpu",
        metavar="NAME",
        help="LLVM CPU name, e.g. x86-64-v2 (portable x86), x86-64-v3, cortex-a72 "
        "(default: the host CPU; 'generic' when --target is given)",
    )
    p.add_argument(
        "--name",
        metavar="PREFIX",
        help="C identifier naming the entry, <PREFIX>_config and the files "
        "(default: the model file's stem)",
    )
    p.add_argument(
        "--embed-weights",
        action="store_true",
        help="also write PREFIX.weights.c: the weights as a C array, for targets without files",
    )
    add_plan_args(p, disable=False)
    p.set_defaults(func=run)
    return p


def run(args: argparse.Namespace) -> int:
    from compiler.backends.llvm.bundle import BundleOptions, build_bundle
    from glowviz import __version__
    from glowviz.exports.render import atomic_write

    if not Path(args.model).exists():
        raise CompilerError(f"model file not found: {args.model}")
    options = compile_options(args)
    result = compile_model(args.model, options)
    bundle = build_bundle(
        result,
        BundleOptions(
            name=args.name,
            target=args.target,
            cpu=args.cpu,
            embed_weights=args.embed_weights,
            generator=f"glowviz {__version__}",
        ),
    )
    out = Path(args.output)
    try:
        out.mkdir(parents=True, exist_ok=True)
        # The header last: a header on disk means its object and weights are there too.
        for name in sorted(bundle.files, key=lambda n: n.endswith(".h")):
            atomic_write(out / name, bundle.files[name])
    except OSError as e:
        raise CompilerError(f"cannot write the bundle to {out}: {e.strerror or e}") from None
    info = bundle.info
    print(f"bundle {info.name} for {info.triple} (CPU {info.cpu}) in {out}")
    for name, data in bundle.files.items():
        print(f"  {name:<28} {human_bytes(len(data)):>12}")
    print(
        f"regions: constant {info.constant_size} B, mutable {info.mutable_size} B, "
        f"activations {info.activations_size} B (align {info.alignment}); "
        f"static scratch {info.static_scratch} B"
    )
    return 0
