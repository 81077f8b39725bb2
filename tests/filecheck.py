"""A small FileCheck for IR text in tests: `check(text, checks)`.

Directives, one per line of `checks` (other lines are ignored):
  CHECK: pat       — pat occurs on a line at or after the current position
  CHECK-NEXT: pat  — pat occurs on the line right after the previous match
  CHECK-NOT: pat   — pat does not occur between the previous match and the next positive match
                     (or the end of the text)
  CHECK-DAG: pat   — consecutive DAG lines match in any order after the current position;
                     the position then moves past the last of them
  CHECK-COUNT-N: pat — pat occurs on exactly N lines of the whole text (a convenience)
Patterns are literal substrings; `{{regex}}` embeds a regular expression.

Kept instead of PyPI's `filecheck` (evaluated for issue 10): there CHECK-COUNT-N means N matches
from the current position, at least N in all (LLVM's meaning), so the tests' CHECK-COUNT-1 "exactly
one" checks would silently weaken; and it reads the checks from a file, the input from a file or
stdin, and reports on stderr, so calling it from a test needs temp files and a wrapper not much
shorter than this module. `lit` runs RUN-line files, not pytest tests.
"""

from __future__ import annotations

import re

_DIRECTIVE = re.compile(r"^\s*(?://\s*)?CHECK(-NEXT|-NOT|-DAG|-COUNT-(\d+))?:\s?(.*)$")


def _compile(pat: str) -> re.Pattern[str]:
    parts = re.split(r"\{\{(.*?)\}\}", pat.strip())
    rx = "".join(p if i % 2 else re.escape(p) for i, p in enumerate(parts))
    return re.compile(rx)


class CheckError(AssertionError):
    pass


def _fail(msg: str, lines: list[str], pos: int) -> None:
    ctx = "\n".join(
        f"{'>' if i == pos else ' '} {i + 1:4}: {l}"
        for i, l in enumerate(lines)
        if abs(i - pos) <= 6
    )
    raise CheckError(
        f"{msg}\n--- input near line {pos + 1} ---\n{ctx}\n--- full input ---\n" + "\n".join(lines)
    )


def check(text: str, checks: str) -> None:
    """Assert that `text` satisfies the CHECK directives in `checks`."""
    lines = text.splitlines()
    directives = []
    for raw in checks.splitlines():
        m = _DIRECTIVE.match(raw)
        if m:
            kind = (m.group(1) or "").lstrip("-")
            if m.group(2):
                kind = "COUNT"
            directives.append(
                (kind, _compile(m.group(3)), m.group(3).strip(), int(m.group(2) or 0))
            )
    if not directives:
        raise ValueError("no CHECK directives given")
    pos = 0  # first line still available
    last = -1  # line of the previous positive match
    nots: list[tuple[re.Pattern[str], str]] = []
    i = 0

    def flush_nots(upto: int) -> None:
        for rx, src in nots:
            for j in range(max(last + 1, 0) if last >= 0 else 0, upto):
                if rx.search(lines[j]):
                    _fail(f"CHECK-NOT: '{src}' found on line {j + 1}", lines, j)
        nots.clear()

    while i < len(directives):
        kind, rx, src, count = directives[i]
        if kind == "NOT":
            nots.append((rx, src))
            i += 1
            continue
        if kind == "COUNT":
            got = sum(1 for line in lines if rx.search(line))
            if got != count:
                _fail(f"CHECK-COUNT-{count}: '{src}' found {got} times", lines, 0)
            i += 1
            continue
        if kind == "DAG":
            group = []
            while i < len(directives) and directives[i][0] == "DAG":
                group.append(directives[i])
                i += 1
            used: set[int] = set()
            end = pos - 1
            for _, grx, gsrc, _ in group:
                hit = next(
                    (j for j in range(pos, len(lines)) if j not in used and grx.search(lines[j])),
                    None,
                )
                if hit is None:
                    _fail(f"CHECK-DAG: '{gsrc}' not found", lines, pos)
                used.add(hit)  # type: ignore[arg-type]
                end = max(end, hit)  # type: ignore[type-var]
            flush_nots(min(used))
            last, pos = end, end + 1
            continue
        if kind == "NEXT":
            if last < 0 or last + 1 >= len(lines) or not rx.search(lines[last + 1]):
                _fail(
                    f"CHECK-NEXT: '{src}' is not on the line after the previous match",
                    lines,
                    last + 1,
                )
            hit = last + 1
        else:
            hit = next((j for j in range(pos, len(lines)) if rx.search(lines[j])), None)
            if hit is None:
                _fail(f"CHECK: '{src}' not found", lines, pos)
        flush_nots(hit)  # type: ignore[arg-type]
        last, pos = hit, hit + 1  # type: ignore[operator]
        i += 1
    flush_nots(len(lines))
