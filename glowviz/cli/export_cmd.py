"""`glowviz export MODEL --view V -o FILE` — write a view (graph, lir, memory, ...) to a file.

Compile MODEL and write one of the IDE's views as DOT, SVG, PDF, PNG, JSON (or LIR text), for
papers and CI. Files are written atomically.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from compiler.errors import CompilerError
from glowviz.cli.common import add_common_model_args, add_plan_args, command_parser, compile_options

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

figures are sized for a column (--width 3.3in; 7in for two): big graphs fold repeated blocks
("6 x [BatchNorm, Relu, Conv x2, Concat]") and chains into labelled boxes; --subgraph NODE
--radius K and --pass PASS draw a part. Files are deterministic: the same bytes every run (PDFs
carry no creation date unless SOURCE_DATE_EPOCH sets one).

examples:
  glowviz export m.onnx --view graph --stage post-lower-opt --format svg -o graph.svg
  glowviz export m.onnx --view memory --format pdf --theme paper -o memory.pdf
  glowviz export m.onnx --view lifetimes --stage buffer-sharing --format json -o lt.json
  glowviz export m.onnx --view graph --subgraph conv_3 --radius 2 -o around-conv3.pdf
  glowviz export m.onnx --view lir --pass buffer-sharing --width 7in -o sharing.pdf

exit codes: 0 ok, 2 bad input (model, view/format, stage, pass name, output directory),
3 the file could not be written.
"""


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    from glowviz.exports.palette import theme_names
    from glowviz.exports.formats import FORMATS, VIEWS

    p = command_parser(
        sub, "export", __doc__, epilog=_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter
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
        "--width",
        default=None,
        metavar="LENGTH",
        help="figure width: 3.3in (one column, the default), 7in (two columns), or any length "
        "(mm, cm, pt); fonts are sized for it, never under 5 pt",
    )
    p.add_argument("--wide", action="store_true", help="two-column width: the same as --width 7in")
    p.add_argument(
        "--detail",
        default="auto",
        choices=["auto", "grouped", "full"],
        help="graph/lir: 'grouped' folds repeated blocks and chains into labelled boxes, "
        "'full' draws every node, 'auto' (default) groups what does not fit the width",
    )
    p.add_argument(
        "--subgraph",
        metavar="NODE",
        help="graph/lir: only the nodes (instructions) within --radius edges of NODE",
    )
    p.add_argument(
        "--radius",
        type=int,
        default=None,
        metavar="K",
        help="edges of context around --subgraph NODE (default 2) or around what --pass "
        "changed (default 1)",
    )
    p.add_argument(
        "--pass",
        dest="pass_name",
        metavar="PASS",
        help="graph/lir: only what PASS changed (thick border) plus context, at the stage after "
        "it (PASS#K for its K-th run)",
    )
    p.add_argument(
        "--compact",
        action="store_true",
        help="graph/lir: boxes without weights and attributes",
    )
    p.add_argument("--no-edge-labels", action="store_true", help="graph: no shapes on edges")
    p.add_argument("--title", default=None, help="figure / graph title (default: automatic)")
    add_plan_args(p)
    p.set_defaults(func=run)
    return p


def _format_of(args: argparse.Namespace) -> str:
    from glowviz.exports.formats import FORMATS

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
    from compiler.pipeline import check_pass_names
    from glowviz.exports.drawing import parse_width
    from glowviz.exports.render import atomic_write, check_output_path
    from glowviz.exports.views import check_combination, compile_session, render_view

    fmt = _format_of(args)
    check_combination(args.view, fmt)
    if args.output == "-" and fmt in ("png", "pdf"):
        raise CompilerError(f"{fmt} is binary; give a file with -o")
    if args.output != "-":
        check_output_path(args.output)  # refuse before compiling
    if not Path(args.model).exists():
        raise CompilerError(f"model file not found: {args.model}")
    parse_width(args.width)  # a bad width fails before compiling too
    if args.pass_name:
        check_pass_names([args.pass_name.split("#")[0]], "--pass")
    if fmt in ("svg", "pdf", "png") and args.view in ("graph", "lir"):
        from glowviz.exports.render import require_dot

        require_dot()  # fail before compiling
    options = compile_options(args)
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
        width=args.width,
        detail=args.detail,
        subgraph=args.subgraph,
        radius=args.radius,
        pass_name=args.pass_name,
    )
    if args.output == "-":
        sys.stdout.write(data.decode("utf-8"))
        return 0
    atomic_write(args.output, data)
    print(f"wrote {args.output} ({args.view}, {fmt}, {len(data)} bytes)", file=sys.stderr)
    return 0
