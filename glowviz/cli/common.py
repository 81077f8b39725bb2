"""Arguments every model-compiling subcommand of `glowviz` shares: the model, concrete shapes
for symbolic inputs and values for inputs that shape the graph (run-time specialization)."""

from __future__ import annotations

import argparse
from typing import Any

from glowviz.core.const_inputs import fit_const_inputs, parse_const_input_args
from glowviz.core.shapes import parse_shape_args


def add_input_args(p: argparse.ArgumentParser) -> None:
    """`--input-shape` and `--const-input` (the IDE's parser takes them too)."""
    p.add_argument(
        "--input-shape",
        action="append",
        metavar="NAME=1x3x224x224",
        help="concrete shape for an input with symbolic dims (repeatable)",
    )
    p.add_argument(
        "--const-input",
        action="append",
        metavar="NAME=1,3,-1|NAME=FILE.npy|FILE.npz",
        help="compile with this input's value fixed (an input that shapes the graph, e.g. "
        "Reshape's shape): the model is specialized on it (repeatable)",
    )


def add_common_model_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", help="path to an ONNX model")
    add_input_args(p)


def input_options(args: argparse.Namespace, model: Any = None) -> dict[str, Any]:
    """`CompileOptions` fields from `--input-shape` and `--const-input` (the values in the
    element type and shape `model`, default `args.model`, declares for each input)."""
    raw = parse_const_input_args(getattr(args, "const_input", None))
    consts: dict[str, Any] = {}
    if raw:
        from compiler.frontend import load_model

        consts = fit_const_inputs(load_model(model or args.model, check=False), raw)
    return {"input_shapes": parse_shape_args(args.input_shape), "const_inputs": consts}


__all__ = ["add_common_model_args", "add_input_args", "input_options"]
