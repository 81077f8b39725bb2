"""The `glowviz` command's entry point (and `python -m glowviz`'s).

Only the standard library here: Ctrl-C while Python is still importing the CLI (numpy, onnx,
the compiler: a few hundred milliseconds) ends with the CLI's one line and exit 130, as it does
once `glowviz.cli.main` runs, not with a KeyboardInterrupt traceback.
"""

from __future__ import annotations

import sys


def main() -> int:
    try:
        from glowviz.cli import main as cli_main
    except KeyboardInterrupt:
        print("glowviz: interrupted", file=sys.stderr)
        return 130
    return cli_main()
