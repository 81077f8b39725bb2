"""Arguments every model-compiling subcommand of `glowviz` shares."""

from __future__ import annotations

import argparse


def add_common_model_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", help="path to an ONNX model")
    p.add_argument(
        "--input-shape",
        action="append",
        metavar="NAME=1x3x224x224",
        help="concrete shape for an input with symbolic dims (repeatable)",
    )


__all__ = ["add_common_model_args"]
