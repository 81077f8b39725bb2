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
from glowviz import resources
from glowviz.cli.common import (
    EXIT_BAD_INPUT,
    EXIT_CODES,
    EXIT_IO,
    add_input_args,
    add_plan_args,
    add_quantize_args,
    compile_options,
)

#: Subcommand modules, in the order `glowviz --help` lists them.
COMMANDS = (
    "compile",
    "run",
    "mem",
    "export",
    "mem_diff",
    "bench",
    "bundle",
    "profile",
    "quant_report",
)

#: What the user types: the module's name with dashes (`glowviz mem-diff`).
COMMAND_NAMES = tuple(name.replace("_", "-") for name in COMMANDS)

DEFAULT_MODEL = resources.default_model()


def _load_commands(sub: argparse._SubParsersAction, modules: tuple[str, ...]) -> None:
    for name in modules:
        importlib.import_module(f"glowviz.cli.{name}_cmd").add_parser(sub)


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The `glowviz` parser with every subcommand, or with `command`'s only: what running one
    command needs (its module imported, its options added), where building them all took
    ~20 ms of every CLI run (nine modules, each with its own imports). The one subparser is the
    one the whole parser has: the same options, help and errors."""
    p = argparse.ArgumentParser(
        prog="glowviz",
        description="A Glow-style neural-network compiler and the IDE to watch it work. "
        "Without a subcommand, opens the IDE on MODEL (default: the sample ResNet).",
        epilog=EXIT_CODES,
    )
    from glowviz import __version__

    p.add_argument("--version", action="version", version=f"glowviz {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    _load_commands(sub, COMMANDS if command is None else (command.replace("-", "_"),))
    return p


def _ide_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="glowviz", description="Open the glowviz IDE on MODEL.")
    p.add_argument("model", nargs="?", help=f"ONNX model (default: {DEFAULT_MODEL.name})")
    add_input_args(p)
    add_plan_args(p, disable=False)
    add_quantize_args(p)
    return p


class Terminated(BaseException):
    """SIGTERM / SIGHUP: unwound like Ctrl-C, so child processes (Graphviz) are stopped too."""


def _on_terminate(signum: int, frame: object) -> None:
    raise Terminated(signum)


def _install_signal_handlers() -> None:
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        return
    for name in ("SIGTERM", "SIGHUP"):
        sig = getattr(signal, name, None)
        if sig is not None and signal.getsignal(sig) in (signal.SIG_DFL, None):
            signal.signal(sig, _on_terminate)


def _stdout_gone() -> None:
    """Point stdout at /dev/null so the interpreter's final flush cannot fail again."""
    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):
        pass


def main(argv: list[str] | None = None) -> int:
    _install_signal_handlers()
    try:
        return _main(list(sys.argv[1:] if argv is None else argv))
    except KeyboardInterrupt:
        print("glowviz: interrupted", file=sys.stderr)
        return 130
    except Terminated as t:
        print("glowviz: terminated", file=sys.stderr)
        return 128 + int(t.args[0]) if t.args else 143


def _main(argv: list[str]) -> int:
    # Imported here, under main's Ctrl-C handling: the exports pull in the session and the
    # compiler, a second or so in which an interrupt would otherwise print a traceback.
    from glowviz.exports.render import OutputError

    try:
        if not argv or (
            argv[0] not in COMMAND_NAMES and argv[0] not in ("-h", "--help", "--version")
        ):
            return _open_ide(argv)
        parser = build_parser(argv[0] if argv[0] in COMMAND_NAMES else None)
        if sys.stdout is None:  # started with stdout closed (`>&-`): nothing can be reported
            print("glowviz: error: standard output is closed", file=sys.stderr)
            return EXIT_IO
        args = parser.parse_args(argv)
        code = int(args.func(args) or 0)
        sys.stdout.flush()  # a closed pipe or a full disk shows here, not after main returns
        return code
    except OutputError as e:
        print(f"glowviz: error: {e}", file=sys.stderr)
        return EXIT_IO
    except CompilerError as e:
        print(f"glowviz: error: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except BrokenPipeError:
        _stdout_gone()
        print("glowviz: error: standard output was closed (broken pipe)", file=sys.stderr)
        return EXIT_IO
    except (FileNotFoundError, IsADirectoryError, PermissionError, NotADirectoryError) as e:
        print(f"glowviz: error: {e.strerror}: {e.filename}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except OSError as e:
        if e.filename is None:  # a failed write to stdout (e.g. ENOSPC on a redirect)
            _stdout_gone()
            print(f"glowviz: error: cannot write the output: {e.strerror or e}", file=sys.stderr)
            return EXIT_IO
        print(f"glowviz: error: {e.strerror}: {e.filename}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except MemoryError as e:  # a plan under --max-memory that this machine cannot hold
        print(f"glowviz: error: out of memory: {e or 'MemoryError'}", file=sys.stderr)
        return EXIT_BAD_INPUT


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
    from glowviz.ide_cmd import open_ide

    options = compile_options(args, model)
    return open_ide(model, options)
