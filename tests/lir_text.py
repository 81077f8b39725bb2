"""Low-level IR text for tests: `function @main` written from what a test is about. Its weight
declarations (`%x = weight mutable input : f32<2x3>`) and its code, the frame around them
(`function @main`, `declare { }`, `code { }`) added here, as `module_ir` does for the graph IR
(tests/passes/pass_helpers.py)."""

from __future__ import annotations

import textwrap


def function_head(declarations: str) -> str:
    """The text of `function @main` up to its code, declaring the weights of `declarations`."""
    weights = "".join(f"  {line.strip()}\n" for line in declarations.splitlines() if line.strip())
    return f"function @main\ndeclare {{\n{weights}}}\ncode {{\n"


def lir_text(src: str) -> str:
    """The text of `function @main` whose weights are the `%name = weight ...` lines of `src`
    and whose code is its other lines, in order."""
    lines = [line.strip() for line in textwrap.dedent(src).splitlines() if line.strip()]
    weights = [line for line in lines if line.split(" = ", 1)[-1].startswith("weight ")]
    code = "".join(f"  {line}\n" for line in lines if line not in weights)
    return function_head("\n".join(weights)) + code + "}\n"
