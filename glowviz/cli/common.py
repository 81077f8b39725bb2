"""Arguments every model-compiling subcommand of `glowviz` shares."""

from __future__ import annotations

import argparse
import math


def add_common_model_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", help="path to an ONNX model")
    p.add_argument(
        "--input-shape",
        action="append",
        metavar="NAME=1x3x224x224",
        help="concrete shape for an input with symbolic dims (repeatable)",
    )


def _bounded(kind: type, low: float, what: str):  # type: ignore[no-untyped-def]
    """An argparse `type` that parses `kind` and refuses values below `low` (argparse then
    prints one usage error and exits 2, instead of a traceback or an endless loop later)."""

    def parse(text: str) -> int | float:
        try:
            v = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"invalid {what}: {text!r}") from None
        if not (isinstance(v, int) or math.isfinite(v)) or v < low:
            raise argparse.ArgumentTypeError(f"must be {what}, got {text}")
        return v

    parse.__name__ = what  # argparse names the type in its messages
    return parse


#: argparse types: an integer >= 1, an integer >= 0, a finite float >= 0.
positive_int = _bounded(int, 1, "a positive integer")
non_negative_int = _bounded(int, 0, "a non-negative integer")
non_negative_float = _bounded(float, 0.0, "a non-negative number")


__all__ = ["add_common_model_args", "non_negative_float", "non_negative_int", "positive_int"]
