"""The low-level pass tests' runner: a pass on the code of a function given as IR text, checked
by the verifier before and after, by the text round-trip of its result and by CHECK lines; and
the reader of the `.lir` case files that `conftest.py` turns into tests (MLIR-style: the input
IR and its CHECK lines side by side, one case per `// -----` block)."""

from __future__ import annotations

import dataclasses
import pathlib
from typing import Any

from compiler.lir.ir import LIRFunction
from compiler.lir.parser import parse_lir
from compiler.lir.printer import print_lir
from compiler.lir.verifier import verify_lir
from compiler.passes.registry import get_pass
from tests.filecheck import check
from tests.lir_text import function_head

#: The default test function's declarations: one input %x, one output %y.
HEAD = function_head("""
  %x = weight mutable input : f32<2x8>
  %y = weight mutable output : f32<2x8>
""")

CASES = pathlib.Path(__file__).with_name("test_rewrites.lir")


def lir_function(code: str, head: str = HEAD, meta: dict[str, Any] | None = None) -> LIRFunction:
    """The verified function `head` + `code`."""
    lir = parse_lir(head + code + "}\n")
    lir.meta.update(meta or {})
    verify_lir(lir)
    return lir


def run_pass(
    name: str,
    code: str,
    *,
    changed: bool | None = None,
    head: str = HEAD,
    meta: dict[str, Any] | None = None,
) -> str:
    """Run the pass `name` on the function; returns its text after the pass, which verifies and
    round-trips. `changed`: what the pass must report."""
    lir = lir_function(code, head, meta)
    did = get_pass(name)().run(lir)
    verify_lir(lir)
    text = print_lir(lir)
    if changed is not None:
        assert did is changed, f"{name} changed={did}\n{text}"
    assert print_lir(parse_lir(text)) == text  # what the pass made prints and parses back
    return text


@dataclasses.dataclass(frozen=True)
class Case:
    """One block of a `.lir` case file."""

    name: str
    pass_name: str
    changed: bool
    code: str
    checks: str
    line: int

    def run(self) -> None:
        check(run_pass(self.pass_name, self.code, changed=self.changed), self.checks)


def read_cases(path: pathlib.Path = CASES) -> list[Case]:
    """The cases of a file: blocks separated by `// -----`, each with `// CASE: name`,
    `// RUN: pass-name`, `// CHANGED: yes|no`, the code of @main (see HEAD) and `// CHECK` lines;
    other `//` lines are comments."""
    cases, block, start = [], [], 1
    lines = path.read_text().splitlines()
    for number, line in enumerate([*lines, "// -----"], 1):
        if line.strip() != "// -----":
            block.append(line)
            continue
        directives = {}
        for raw in block:
            key, sep, value = raw.strip().removeprefix("//").strip().partition(":")
            if raw.strip().startswith("//") and sep and key in ("CASE", "RUN", "CHANGED"):
                directives[key] = value.strip()
        code = [raw for raw in block if raw.strip() and not raw.strip().startswith("//")]
        checks = [raw for raw in block if raw.strip().startswith("// CHECK")]
        where = f"{path.name}:{start}"
        if directives.get("CHANGED") not in ("yes", "no") or not {"CASE", "RUN"} <= set(directives):
            raise ValueError(f"{where}: a case needs CASE, RUN and CHANGED: yes|no")
        if not code or not checks:
            raise ValueError(f"{where}: case {directives['CASE']} has no code or no CHECK lines")
        cases.append(
            Case(
                directives["CASE"],
                directives["RUN"],
                directives["CHANGED"] == "yes",
                "\n".join(code) + "\n",
                "\n".join(checks),
                start,
            )
        )
        block, start = [], number + 1
    return cases


def case(name: str) -> Case:
    """A case of the shipped file by name (other tests reuse its inputs)."""
    (found,) = [c for c in read_cases() if c.name == name]
    return found
