"""`glowviz compile MODEL` — run the pipeline headless; print a table of stages.

Run every stage and pass of the pipeline on MODEL and print one row per pass: stage, pass,
changed, nodes/instructions before -> after, time.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from compiler.errors import CompilerError
from compiler.passes.manager import PassEvent
from compiler.pipeline import check_step_names, compile_model, ir_text
from glowviz.cli.common import add_common_model_args, add_plan_args, command_parser, compile_options
from glowviz.exports.render import atomic_write


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = command_parser(sub, "compile", __doc__)
    add_common_model_args(p)
    p.add_argument(
        "--print-after",
        metavar="PASS|all",
        help="print the IR after this pass (or stage, or 'all' passes)",
    )
    p.add_argument(
        "--stop-after", metavar="PASS", help="stop the pipeline after this pass or stage"
    )
    p.add_argument(
        "--dump-dir", metavar="DIR", help="write the IR after every pass to DIR/NNN-stage-pass.ir"
    )
    add_plan_args(p)
    p.add_argument("--hide-unchanged", action="store_true", help="omit passes that changed nothing")
    p.add_argument("--verify", action="store_true", help="run the verifier after every pass")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    options = compile_options(args, verify=args.verify, stop_after=args.stop_after)
    # One check for the three options that name passes (each used to treat a typo its own way).
    if args.print_after and args.print_after != "all":
        check_step_names([args.print_after], "(--print-after)")
    if args.stop_after:
        check_step_names([args.stop_after], "(--stop-after)")
    check_step_names(args.disable_pass, "(--disable-pass)", passes_only=True)
    dump = Path(args.dump_dir) if args.dump_dir else None
    if dump is not None:
        if dump.exists() and not dump.is_dir():
            raise CompilerError(f"--dump-dir '{dump}' exists and is not a directory")
        dump.mkdir(parents=True, exist_ok=True)
    rows: list[PassEvent] = []
    seen_names: set[str] = set()

    def observer(ev: PassEvent) -> None:
        rows.append(ev)
        seen_names.update((ev.pass_name, ev.stage))
        want = args.print_after
        if want and (want == "all" or want in (ev.pass_name, ev.stage)):
            print(f"// ----- IR after {ev.stage}/{ev.pass_name} -----")
            print(ir_text(ev.ir), end="")
        if dump is not None:
            atomic_write(dump / f"{ev.index:03d}-{ev.stage}-{ev.pass_name}.ir", ir_text(ev.ir))

    result = compile_model(args.model, options, observer)
    if args.stop_after and result.stopped_after is None:
        raise CompilerError(
            f"--stop-after '{args.stop_after}' matched no pass or stage",
            hint="names: " + ", ".join(sorted(seen_names)),
        )
    print(format_table(rows, hide_unchanged=args.hide_unchanged))
    for note in result.module.meta.get("notes", ()):
        print(f"note: {note}")
    total = sum(r.time_ms for r in rows)
    tail = f"stopped after {result.stopped_after}" if result.stopped_after else "done"
    print(f"{len(rows)} passes, {total:.1f} ms, {tail}", file=sys.stderr)
    return 0


def format_table(rows: list[PassEvent], *, hide_unchanged: bool = False) -> str:
    header = ("#", "stage", "pass", "changed", "before -> after", "ms")
    lines = []
    for r in rows:
        if hide_unchanged and not r.changed:
            continue
        unit = "instrs" if r.ir_kind == "lir" else "nodes"
        lines.append(
            (
                str(r.index),
                r.stage,
                r.pass_name,
                "yes" if r.changed else "-",
                f"{r.count_before} -> {r.count_after} {unit}",
                f"{r.time_ms:.1f}",
            )
        )
    widths = [
        max(len(h), *(len(x[i]) for x in lines)) if lines else len(h) for i, h in enumerate(header)
    ]

    def fmt(cols: tuple[str, ...]) -> str:
        return "  ".join(
            c.rjust(w) if i in (0, 5) else c.ljust(w) for i, (c, w) in enumerate(zip(cols, widths))
        ).rstrip()

    out = [fmt(header), fmt(tuple("-" * w for w in widths))]
    out.extend(fmt(x) for x in lines)
    return "\n".join(out)
