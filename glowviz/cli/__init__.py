"""The `glowviz` command line: the IDE by default, and headless subcommands.

Each subcommand lives in `glowviz/cli/<name>_cmd.py` with `add_parser(subparsers)` and
`run(args) -> int`. User errors (CompilerError, missing files) print one line and exit 2.
The CLI is the top layer: it may use the IDE (`glowviz.ide_cmd`), the exports, the session
and glowviz.core; nothing imports it.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from pathlib import Path

from compiler.errors import CompilerError
from compiler.scheduling import DEFAULT_SCHEDULER, SCHEDULERS
from glowviz import resources
from glowviz.core.shapes import parse_shape_args

#: Subcommand modules, in the order `glowviz --help` lists them.
COMMANDS = ("compile", "run", "mem", "export", "mem_diff", "bench", "bundle")

DEFAULT_MODEL = resources.default_model()


def _load_commands(sub: argparse._SubParsersAction) -> None:
    for name in COMMANDS:
        importlib.import_module(f"glowviz.cli.{name}_cmd").add_parser(sub)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="glowviz",
        description="A Glow-style neural-network compiler and the IDE to watch it work. "
        "Without a subcommand, opens the IDE on MODEL (default: the sample ResNet).",
    )
    from glowviz import __version__

    p.add_argument("--version", action="version", version=f"glowviz {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    _load_commands(sub)
    return p


def _ide_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="glowviz", description="Open the glowviz IDE on MODEL.")
    p.add_argument("model", nargs="?", help=f"ONNX model (default: {DEFAULT_MODEL.name})")
    p.add_argument("--input-shape", action="append", metavar="NAME=1x3x224x224")
    p.add_argument("--scheduler", default=DEFAULT_SCHEDULER, choices=list(SCHEDULERS))
    p.add_argument("--allocator", default="lower-bound")
    return p


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        parser = build_parser()
        commands = (
            set(parser._subparsers._group_actions[0].choices or ()) if parser._subparsers else set()
        )
        if not argv or (argv[0] not in commands and argv[0] not in ("-h", "--help", "--version")):
            return _open_ide(argv)
        args = parser.parse_args(argv)
        return int(args.func(args) or 0)
    except CompilerError as e:
        print(f"glowviz: error: {e}", file=sys.stderr)
        return 2
    except (FileNotFoundError, IsADirectoryError, PermissionError) as e:
        print(f"glowviz: error: {e.strerror}: {e.filename}", file=sys.stderr)
        return 2
    except MemoryError as e:  # a plan under --max-memory that this machine cannot hold
        print(f"glowviz: error: out of memory: {e or 'MemoryError'}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("glowviz: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1


def _open_ide(argv: list[str]) -> int:
    args = _ide_parser().parse_args(argv)
    model = args.model or str(DEFAULT_MODEL)
    if not Path(model).exists():
        raise CompilerError(f"model file not found: {model}")
    if not sys.stdout.isatty() or not sys.stdin.isatty():
        raise CompilerError(
            "the IDE needs an interactive terminal",
            hint="use 'glowviz compile MODEL' for headless output",
        )
    from compiler.pipeline import CompileOptions
    from glowviz.ide_cmd import open_ide

    options = CompileOptions(
        input_shapes=parse_shape_args(args.input_shape),
        scheduler=args.scheduler,
        allocator=args.allocator,
    )
    return open_ide(model, options)
