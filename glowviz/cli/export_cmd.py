"""`glowviz export MODEL --view V --stage S --format F -o FILE`: the IDE's views as files."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from compiler.errors import CompilerError
from compiler.pipeline import CompileOptions
from compiler.scheduling import DEFAULT_SCHEDULER, SCHEDULERS
from glowviz.cli.common import add_common_model_args
from glowviz.core.shapes import parse_shape_args

_EPILOG = """\
views and formats:
  graph      dot svg pdf png json        (a graph stage: import, graph-opt passes, lower, ...)
  lir        dot svg pdf png json txt    (a low-level stage: irgen, lir-opt passes, memory)
  schedule   svg pdf png json            live bytes per schedule step, every scheduler
  lifetimes  svg pdf png json            one bar per activation buffer
  memory     svg pdf png json            offset x instruction map, peak and lower bound

stages: any pass or stage name the pipeline prints (`glowviz compile MODEL`); a repeated pass
means its last run, NAME#K its K-th run (dce#1), @N the N-th event, `final` the end.
schedule/lifetimes/memory on a graph stage plan that graph with the low-level pipeline.

examples:
  glowviz export m.onnx --view graph --stage post-lower-opt --format svg -o graph.svg
  glowviz export m.onnx --view memory --format pdf --theme paper -o memory.pdf
  glowviz export m.onnx --view lifetimes --stage buffer-sharing --format json -o lt.json
"""


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    from glowviz.exports.palette import theme_names
    from glowviz.exports.views import FORMATS, VIEWS

    p = sub.add_parser(
        "export",
        help="export a view (graph, lir, schedule, lifetimes, memory) to a file",
        description="Compile MODEL and write one of the IDE's views as DOT, SVG, PDF, PNG, JSON "
        "(or LIR text), for papers and CI. Files are written atomically.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_common_model_args(p)
    p.add_argument("--view", required=True, choices=VIEWS)
    p.add_argument(
        "--stage",
        default="final",
        help="pass or stage name, NAME#K, @N or 'final' (default: final)",
    )
    p.add_argument(
        "--format",
        dest="fmt",
        choices=FORMATS,
        help="output format (default: from the -o extension)",
    )
    p.add_argument(
        "-o",
        "--output",
        required=True,
        metavar="FILE",
        help="output file ('-' writes text formats to stdout)",
    )
    p.add_argument(
        "--theme", default=None, help=f"colour theme: {', '.join(theme_names())} (default: paper)"
    )
    p.add_argument(
        "--compact",
        action="store_true",
        help="graph/lir: one-line nodes, constants folded (for large graphs)",
    )
    p.add_argument(
        "--wide",
        action="store_true",
        help="figures: two-column width (7.16 in) instead of one column (3.5 in)",
    )
    p.add_argument("--no-edge-labels", action="store_true", help="graph: no shapes on edges")
    p.add_argument("--title", default=None, help="figure / graph title (default: automatic)")
    p.add_argument("--scheduler", default=DEFAULT_SCHEDULER, choices=list(SCHEDULERS))
    p.add_argument("--allocator", default="lower-bound")
    p.add_argument(
        "--disable-pass",
        action="append",
        default=[],
        metavar="PASS",
        help="skip a pass (repeatable)",
    )
    p.set_defaults(func=run)
    return p


def _format_of(args: argparse.Namespace) -> str:
    from glowviz.exports.views import FORMATS

    if args.fmt:
        return args.fmt
    ext = Path(args.output).suffix.lstrip(".").lower()
    if ext in FORMATS:
        return ext
    if ext in ("gv",):
        return "dot"
    raise CompilerError(
        f"cannot tell the format from '{args.output}'", hint=f"pass --format ({', '.join(FORMATS)})"
    )


def run(args: argparse.Namespace) -> int:
    from glowviz.exports.render import atomic_write
    from glowviz.exports.views import check_combination, compile_session, render_view

    fmt = _format_of(args)
    check_combination(args.view, fmt)
    if args.output == "-" and fmt in ("png", "pdf"):
        raise CompilerError(f"{fmt} is binary; give a file with -o")
    if not Path(args.model).exists():
        raise CompilerError(f"model file not found: {args.model}")
    if fmt in ("svg", "pdf", "png") and args.view in ("graph", "lir"):
        from glowviz.exports.render import require_dot

        require_dot()  # fail before compiling
    options = CompileOptions(
        input_shapes=parse_shape_args(args.input_shape),
        scheduler=args.scheduler,
        allocator=args.allocator,
        disabled_passes=frozenset(args.disable_pass),
    )
    session = compile_session(args.model, options)
    data = render_view(
        session,
        args.view,
        fmt,
        stage=args.stage,
        theme=args.theme,
        compact=args.compact,
        wide=args.wide,
        edge_labels=not args.no_edge_labels,
        title=args.title,
    )
    if args.output == "-":
        sys.stdout.write(data.decode("utf-8"))
        return 0
    atomic_write(args.output, data)
    print(f"wrote {args.output} ({args.view}, {fmt}, {len(data)} bytes)", file=sys.stderr)
    return 0
