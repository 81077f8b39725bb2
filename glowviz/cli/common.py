"""Arguments every model-compiling subcommand of `glowviz` shares, and the exit codes of all."""

from __future__ import annotations

import argparse

#: Exit codes of every subcommand (CI relies on them; `glowviz --help` lists them).
EXIT_OK = 0  # done; no regression
EXIT_REGRESSION = 1  # mem-diff --fail-above: the peak grew past it; run --check: a mismatch
EXIT_BAD_INPUT = 2  # a user error: missing or bad model/report, unknown pass, bad option or path
EXIT_IO = 3  # the output could not be written: closed stdout (broken pipe), disk full, ...
EXIT_CODES = (
    f"exit codes: {EXIT_OK} ok, {EXIT_REGRESSION} regression (mem-diff --fail-above, run --check), "
    f"{EXIT_BAD_INPUT} bad input (missing or bad model or report, unknown pass, bad option or "
    f"output directory), {EXIT_IO} output failed (closed stdout, disk full), 130 interrupted."
)


def add_common_model_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", help="path to an ONNX model")
    p.add_argument(
        "--input-shape",
        action="append",
        metavar="NAME=1x3x224x224",
        help="concrete shape for an input with symbolic dims (repeatable)",
    )


__all__ = [
    "EXIT_BAD_INPUT",
    "EXIT_CODES",
    "EXIT_IO",
    "EXIT_OK",
    "EXIT_REGRESSION",
    "add_common_model_args",
]
