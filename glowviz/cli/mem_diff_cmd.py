"""`glowviz mem-diff OLD NEW` — compare two memory reports (or models/configurations).

Compare the memory plans of OLD and NEW: peak and lower-bound deltas, buffers that grew,
shrank, appeared or vanished, lifetimes that got longer, and what is live at each peak; a
memory regression check for CI (--fail-above PCT).
"""

from __future__ import annotations

import argparse
import json
import sys

from glowviz.cli.common import command_parser, non_negative_int
from glowviz.core.shapes import parse_shape_args

_EPILOG = """\
OLD and NEW are each one of:
  report.json                         a `glowviz mem --json` report (glowviz.memory/1)
  model.onnx                          compiled with the default options
  model.onnx:KEY=VALUE[,KEY=VALUE]    compiled with a configuration; keys:
        scheduler=optimal|child-mem-size|topological   allocator=lower-bound|first-fit
        disable=PASS[+PASS...]   (skip passes, e.g. disable=buffer-sharing)
        input=NAME=1x3x32x32[+...]

exit status: 0 ok; 1 if --fail-above PCT is given and the activation peak grew by more than
PCT percent; 2 on bad input (missing file, not JSON, wrong schema, unknown pass name in
disable=); 3 if the result could not be written (stdout closed, e.g. `| head` quit early).
Both sides' configurations are printed; a warning says when two different models (or two
different files of one model) are compared.

examples:
  glowviz mem-diff base.json head.json --fail-above 2
  glowviz mem-diff m.onnx m.onnx:disable=buffer-sharing
  glowviz mem-diff m.onnx:allocator=lower-bound m.onnx:allocator=first-fit --json
"""


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = command_parser(
        sub,
        "mem-diff",
        __doc__,
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("old", metavar="OLD")
    p.add_argument("new", metavar="NEW")
    p.add_argument(
        "--fail-above",
        type=float,
        metavar="PCT",
        default=None,
        help="exit 1 when the peak grew by more than PCT percent (default: never)",
    )
    p.add_argument(
        "--json", action="store_true", help="print the glowviz.memdiff/1 JSON instead of text"
    )
    p.add_argument("--top", type=non_negative_int, default=10, help="rows per section (default 10)")
    p.add_argument(
        "--input-shape",
        action="append",
        metavar="NAME=1x3x224x224",
        help="concrete input shape for model sides (repeatable)",
    )
    p.set_defaults(func=run)
    return p


def run(args: argparse.Namespace) -> int:
    from glowviz.core.memdiff import diff_reports, format_diff, load_side

    if args.fail_above is not None and args.fail_above < 0:
        from compiler.errors import CompilerError

        raise CompilerError("--fail-above must be >= 0")
    shapes = parse_shape_args(args.input_shape)
    old = load_side(args.old, shapes)
    new = load_side(args.new, shapes)
    diff = diff_reports(old, new, args.fail_above)
    if args.json:
        sys.stdout.write(json.dumps(diff, indent=2) + "\n")
    else:
        print(format_diff(diff, top=args.top))
    return int(diff["exit_code"])
