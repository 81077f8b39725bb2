"""Arguments every model-compiling subcommand of `glowviz` shares."""

from __future__ import annotations

import argparse

from compiler.quantization import CALIBRATIONS, SCHEMAS, QuantizeOptions


def add_common_model_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", help="path to an ONNX model")
    p.add_argument(
        "--input-shape",
        action="append",
        metavar="NAME=1x3x224x224",
        help="concrete shape for an input with symbolic dims (repeatable)",
    )
    add_quantize_args(p)


def add_quantize_args(p: argparse.ArgumentParser, *, required: bool = False) -> None:
    """--quantize PROFILE and how to use it (compiler/quantization/options.py)."""
    g = p.add_argument_group("int8 quantization")
    g.add_argument(
        "--quantize" if not required else "--profile",
        dest="quantize",
        metavar="PROFILE.json",
        required=required,
        help="quantize to int8 with this profile (from `glowviz profile`)",
    )
    g.add_argument("--schema", default="asymmetric", choices=SCHEMAS, help="activation schema")
    g.add_argument(
        "--calibration", default="minmax", choices=CALIBRATIONS, help="activation ranges from"
    )
    g.add_argument(
        "--keep-float",
        action="append",
        default=[],
        metavar="NODE",
        help="keep this node in float (repeatable; names as `glowviz quant-report` lists them)",
    )


def quantize_options(args: argparse.Namespace) -> QuantizeOptions | None:
    """The QuantizeOptions the arguments ask for, or None without --quantize."""
    if not getattr(args, "quantize", None):
        return None
    return QuantizeOptions(
        profile=args.quantize,
        schema=args.schema,
        calibration=args.calibration,
        keep_float=frozenset(args.keep_float),
    )


__all__ = ["add_common_model_args", "add_quantize_args", "quantize_options"]
