"""Arguments every model-compiling subcommand of `glowviz` shares (the model, concrete shapes
for symbolic inputs and values for inputs that shape the graph: run-time specialization), and
the exit codes of all."""

from __future__ import annotations

import argparse
import math
from typing import TYPE_CHECKING, Any

from compiler.quantization import CALIBRATIONS, SCHEMAS, QuantizeOptions
from compiler.quantization.options import WEIGHT_ROUNDINGS
from glowviz.core.const_inputs import fit_const_inputs, parse_const_input_args
from glowviz.core.shapes import parse_shape_args

if TYPE_CHECKING:
    from compiler.pipeline import CompileOptions

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


def command_parser(sub: Any, name: str, doc: str | None, **kw: Any) -> argparse.ArgumentParser:
    """The subparser of command `name`, documented by its module's docstring: the text after
    the dash of the first line is the one-line help, the paragraphs after it the description."""
    first, _, rest = (doc or "").strip().partition("\n")
    summary = first.split(" — ", 1)[-1].rstrip(".")
    return sub.add_parser(name, help=summary, description=rest.strip() or summary, **kw)


def add_shape_arg(p: argparse.ArgumentParser) -> None:
    """`--input-shape NAME=1x3x224x224`: a concrete shape for a symbolic input."""
    p.add_argument(
        "--input-shape",
        action="append",
        metavar="NAME=1x3x224x224",
        help="concrete shape for an input with symbolic dims (repeatable)",
    )


def add_input_args(p: argparse.ArgumentParser) -> None:
    """`--input-shape`, `--const-input` and `--max-memory`: every command that compiles
    takes them (the IDE's parser too)."""
    p.add_argument(
        "--max-memory",
        type=memory_size,
        metavar="SIZE",
        help="refuse models whose memory plan or any tensor needs more than SIZE "
        "(default 8GiB; e.g. 512MiB, 16GiB)",
    )
    add_shape_arg(p)
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
    add_quantize_args(p)


def add_plan_args(p: argparse.ArgumentParser, disable: bool = True) -> None:
    """`--scheduler`, `--allocator` and (`disable`) the repeatable `--disable-pass`: the
    choices every command that plans memory offers, spelled once."""
    from compiler.memory.allocators import allocator_names
    from compiler.scheduling import DEFAULT_SCHEDULER, SCHEDULERS

    p.add_argument("--scheduler", default=DEFAULT_SCHEDULER, choices=list(SCHEDULERS))
    p.add_argument("--allocator", default="lower-bound", choices=allocator_names())
    if disable:
        p.add_argument(
            "--disable-pass",
            action="append",
            default=[],
            metavar="PASS",
            help="skip a graph or low-level pass (repeatable), e.g. buffer-sharing",
        )


def input_options(args: argparse.Namespace, model: Any = None) -> dict[str, Any]:
    """`CompileOptions` fields from `--input-shape` and `--const-input` (the values in the
    element type and shape `model`, default `args.model`, declares for each input)."""
    raw = parse_const_input_args(getattr(args, "const_input", None))
    consts: dict[str, Any] = {}
    if raw:
        from compiler.frontend import load_model

        consts = fit_const_inputs(load_model(model or args.model, check=False), raw)
    out: dict[str, Any] = {
        "input_shapes": parse_shape_args(args.input_shape),
        "const_inputs": consts,
    }
    if getattr(args, "max_memory", None) is not None:
        out["max_memory"] = args.max_memory
    return out


def compile_options(args: argparse.Namespace, model: Any = None, **extra: Any) -> CompileOptions:
    """The CompileOptions of a command's arguments: shapes and constant inputs, and the
    `add_plan_args` choices it offers (`extra`: other fields)."""
    from compiler.pipeline import CompileOptions

    plan: dict[str, Any] = {"scheduler": args.scheduler, "allocator": args.allocator}
    if getattr(args, "disable_pass", None) is not None:
        plan["disabled_passes"] = frozenset(args.disable_pass)
    if "quantize" not in extra:  # --quantize PROFILE where the command offers it
        plan["quantize"] = quantize_options(args)
    return CompileOptions(**input_options(args, model), **plan, **extra)


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
        "--calibration", default="mse", choices=CALIBRATIONS, help="activation ranges from"
    )
    g.add_argument(
        "--weight-rounding",
        default="nearest",
        choices=WEIGHT_ROUNDINGS,
        help="int8 weights rounded to nearest, or by GPTQ from the profile's Hessians "
        "(`glowviz profile --hessians`); the same per-channel grid either way",
    )
    g.add_argument(
        "--min-slice-steps",
        type=non_negative_int,
        default=16,
        metavar="N",
        help="keep float a Concat whose smallest input would span fewer than N steps of its "
        "int8 grid (a ViT's class token beside the patch embeddings); 0: quantize it anyway",
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
        weight_rounding=getattr(args, "weight_rounding", "nearest"),
        min_slice_steps=getattr(args, "min_slice_steps", 16),
    )


def memory_size(text: str) -> int:
    """argparse type of `--max-memory`: `8GiB`, `512MiB`, `4096` (compiler.limits)."""
    from compiler.errors import CompilerError
    from compiler.limits import parse_size

    try:
        return parse_size(text)
    except CompilerError as e:
        raise argparse.ArgumentTypeError(e.message) from None


#: argparse types: an integer >= 1, an integer >= 0, a finite float >= 0.
positive_int = _bounded(int, 1, "a positive integer")
non_negative_int = _bounded(int, 0, "a non-negative integer")
non_negative_float = _bounded(float, 0.0, "a non-negative number")


__all__ = [
    "EXIT_BAD_INPUT",
    "EXIT_CODES",
    "EXIT_IO",
    "EXIT_OK",
    "EXIT_REGRESSION",
    "add_common_model_args",
    "add_input_args",
    "add_quantize_args",
    "input_options",
    "memory_size",
    "non_negative_float",
    "non_negative_int",
    "positive_int",
    "quantize_options",
]
