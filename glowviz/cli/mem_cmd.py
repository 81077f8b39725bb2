"""`glowviz mem MODEL`: the memory report (text, and `glowviz.memory/1` JSON with --json)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from compiler.errors import CompilerError
from compiler.memory.allocators import allocator_names
from compiler.memory.report import MemoryReport, format_report
from compiler.pipeline import CompileOptions, CompileResult, compile_model
from compiler.scheduling import DEFAULT_SCHEDULER, SCHEDULERS
from glowviz.cli.common import add_common_model_args
from glowviz.core.shapes import parse_shape_args


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = sub.add_parser(
        "mem",
        help="memory report: regions, peak, lower bound, buffers",
        description="Compile MODEL and report where every byte lives: the three "
        "regions, the activation peak against its lower bound, and the buffers "
        "live at the peak with the reason each was placed where it is.",
    )
    add_common_model_args(p)  # MODEL may also be a bundle header (NAME.h): its plan
    p.add_argument("--json", metavar="FILE", help="also write the glowviz.memory/1 JSON report")
    p.add_argument("--allocator", default="lower-bound", choices=allocator_names())
    p.add_argument("--scheduler", default=DEFAULT_SCHEDULER, choices=list(SCHEDULERS))
    p.add_argument("--top", type=int, default=15, help="buffers to list at the peak (default 15)")
    p.add_argument(
        "--disable-pass",
        action="append",
        default=[],
        metavar="PASS",
        help="skip a graph or low-level pass (repeatable), e.g. buffer-sharing",
    )
    p.add_argument(
        "--per-pass",
        action="store_true",
        help="also print the peak and lower bound after every pass that can change "
        "memory, to find the pass behind a regression",
    )
    p.set_defaults(func=run)
    return p


def build_report(result: CompileResult, args: argparse.Namespace) -> MemoryReport:
    if result.plan is None or result.lir is None:
        raise CompilerError("the pipeline stopped before memory planning; no memory report")
    return MemoryReport.from_plan(
        result.plan, result.lir, str(args.model), args.scheduler, args.allocator, result.schedule
    )


def write_json(path: str | Path, data: Any) -> None:
    """Write JSON atomically (glowviz.exports.render.atomic_write), creating the directory."""
    from glowviz.exports.render import atomic_write

    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, json.dumps(data, indent=1) + "\n")
    except OSError as e:
        raise CompilerError(f"cannot write {path}: {e.strerror or e}") from None


def run(args: argparse.Namespace) -> int:
    if not Path(args.model).exists():
        raise CompilerError(f"model file not found: {args.model}")
    if args.model.endswith(".h"):
        return run_header(args)
    options = CompileOptions(
        input_shapes=parse_shape_args(args.input_shape),
        scheduler=args.scheduler,
        allocator=args.allocator,
        disabled_passes=frozenset(args.disable_pass),
    )
    result = compile_model(args.model, options)
    report = build_report(result, args)
    print(format_report(report, top=args.top))
    if args.per_pass:
        from glowviz.exports.per_pass import format_per_pass, per_pass_memory
        from glowviz.exports.views import compile_session

        print()
        print(format_per_pass(per_pass_memory(compile_session(args.model, options))))
    if args.json:
        write_json(args.json, report.to_json())
        print(f"wrote {args.json}")
    return 0


def run_header(args: argparse.Namespace) -> int:
    """`glowviz mem NAME.h`: the plan a bundle was generated for, as its header carries it."""
    from compiler.backends.llvm.bundle_header import format_bundle, read_header_report

    report = read_header_report(Path(args.model).read_text(errors="replace"), args.model)
    print(format_report(MemoryReport.from_json(report, args.model), top=args.top))
    print(format_bundle(report))
    if args.json:
        write_json(args.json, report)
        print(f"wrote {args.json}")
    return 0
