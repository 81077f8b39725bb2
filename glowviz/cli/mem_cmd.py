"""`glowviz mem MODEL` — memory report: regions, peak, lower bound, buffers.

Compile MODEL and report where every byte lives: the three regions, the activation peak
against its lower bound, and the buffers live at the peak with the reason each was placed
where it is (text, and the glowviz.memory/1 JSON with --json).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from compiler.errors import CompilerError
from compiler.memory.report import MemoryReport, format_report
from compiler.pipeline import CompileResult, compile_model
from glowviz.cli.common import (
    EXIT_CODES,
    add_common_model_args,
    add_plan_args,
    command_parser,
    compile_options,
    non_negative_int,
)


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = command_parser(sub, "mem", __doc__, epilog=EXIT_CODES)
    add_common_model_args(p)  # MODEL may also be a bundle header (NAME.h): its plan
    p.add_argument(
        "--json",
        metavar="FILE",
        help="also write the glowviz.memory/1 JSON report (with --per-pass: and its rows); "
        "the directory must exist",
    )
    add_plan_args(p)
    p.add_argument(
        "--top", type=non_negative_int, default=15, help="buffers to list at the peak (default 15)"
    )
    p.add_argument(
        "--per-pass",
        action="store_true",
        help="also print the peak and lower bound after every pass that can change "
        "memory, the scheduler included, to find the step behind a regression",
    )
    p.add_argument(
        "--changes-only",
        action="store_true",
        help="with --per-pass: print only the rows that changed the peak (the JSON keeps all)",
    )
    p.set_defaults(func=run)
    return p


def build_report(result: CompileResult, args: argparse.Namespace) -> MemoryReport:
    report = result.memory_report()
    if report is None:
        raise CompilerError("the pipeline stopped before memory planning; no memory report")
    return report


def write_json(path: str | Path, data: Any) -> None:
    """Write JSON atomically (glowviz.exports.render.atomic_write); the directory must exist,
    as for `glowviz export` (a typo in CI should fail, not create a stray directory)."""
    from glowviz.exports.render import atomic_write

    atomic_write(path, json.dumps(data, indent=1) + "\n")


def run(args: argparse.Namespace) -> int:
    if not Path(args.model).exists():
        raise CompilerError(f"model file not found: {args.model}")
    if args.json:
        from glowviz.exports.render import check_output_path

        check_output_path(args.json)  # refuse before compiling
    if args.changes_only and not args.per_pass:
        raise CompilerError("--changes-only selects rows of the --per-pass table; add --per-pass")
    if args.model.endswith(".h"):
        return run_header(args)
    options = compile_options(args)
    rows = None
    schedulers: list[dict[str, Any]] = []
    if args.per_pass:
        from glowviz.exports.per_pass import per_pass_memory, scheduler_comparison
        from glowviz.exports.views import compile_session

        session = compile_session(args.model, options)
        report = session.memory_report()
        if report is None:
            raise CompilerError("the pipeline stopped before memory planning; no memory report")
        rows = per_pass_memory(session)
        schedulers = scheduler_comparison(session)
    else:
        report = build_report(compile_model(args.model, options), args)
    print(format_report(report, top=args.top))
    if rows is not None:
        from glowviz.exports.per_pass import format_per_pass

        print()
        print(format_per_pass(rows, schedulers=schedulers, only_changes=args.changes_only))
    if args.json:
        data = report.to_json()
        if rows is not None:
            data["per_pass"] = rows
            data["per_pass_schedulers"] = schedulers
        write_json(args.json, data)
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
