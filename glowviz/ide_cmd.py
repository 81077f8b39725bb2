"""Entry of the IDE for the CLI dispatcher: `glowviz [MODEL]` -> `open_ide(model, options)`."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from compiler.pipeline import CompileOptions


def open_ide(model_path: str | None, options: CompileOptions | None = None) -> int:
    """Open the IDE on `model_path` (None: the default sample model). Returns the exit code."""
    from glowviz.app import GlowvizApp

    GlowvizApp(model_path, options).run()
    return 0


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    return open_ide(args[0] if args else None)


if __name__ == "__main__":
    raise SystemExit(main())
