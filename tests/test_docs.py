"""The worked examples of docs/ print what the commands print today: every `$ glowviz ...`
(and `$ python scripts/...`, `$ echo $?`) of a ```console block is run in a scratch directory
holding `sample_models/` and `scripts/`, and its output must be the lines under it.

`GLOWVIZ_UPDATE_DOCS=1` rewrites the outputs in place (review the diff, then commit). Byte
counts of written figures (`wrote X (memory, png, N bytes)`) are not compared: they depend on
the installed matplotlib and Graphviz."""

from __future__ import annotations

import contextlib
import io
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ["docs/memory-regression.md"]
UPDATE = os.environ.get("GLOWVIZ_UPDATE_DOCS") == "1"
_BLOCK = re.compile(r"^```console\n(.*?)^```$", re.M | re.S)


def commands(block: str) -> list[tuple[str, list[str]]]:
    """(command, output lines) of a console block; `\\` continues a command."""
    out: list[tuple[str, list[str]]] = []
    lines = block.splitlines()
    k = 0
    while k < len(lines):
        line = lines[k]
        assert line.startswith("$ "), f"output before any command: {line!r}"
        cmd = line[2:]
        while cmd.endswith("\\"):
            k += 1
            cmd = cmd[:-1] + " " + lines[k].strip()
        k += 1
        body = []
        while k < len(lines) and not lines[k].startswith("$ "):
            body.append(lines[k])
            k += 1
        out.append((cmd, body))
    return out


class Shell:
    """Runs a doc's commands in one scratch directory, remembering the last exit code."""

    def __init__(self, cwd: Path) -> None:
        self.cwd = cwd
        self.rc = 0

    def run(self, cmd: str) -> list[str]:
        argv = shlex.split(cmd)
        if argv == ["echo", "$?"]:
            return [str(self.rc)]
        if argv[0] == "glowviz":
            from glowviz.cli import main

            buf = io.StringIO()
            old = os.getcwd()
            os.chdir(self.cwd)
            try:
                with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(buf):
                    self.rc = main(argv[1:])
            finally:
                os.chdir(old)
            return buf.getvalue().splitlines()
        if argv[0] == "python":
            proc = subprocess.run(
                [sys.executable, *argv[1:]], cwd=self.cwd, capture_output=True, text=True
            )
            self.rc = proc.returncode
            return (proc.stdout + proc.stderr).splitlines()
        raise AssertionError(f"the doc test cannot run {cmd!r}")


def _normal(lines: list[str]) -> list[str]:
    return [re.sub(r", \d+ bytes\)$", ", N bytes)", ln.rstrip()) for ln in lines]


@pytest.mark.slow
@pytest.mark.parametrize("doc", DOCS)
def test_console_blocks_print_what_the_commands_print(doc, tmp_path):
    for sub in ("sample_models", "scripts"):
        (tmp_path / sub).symlink_to(ROOT / sub)
    path = ROOT / doc
    text = path.read_text(encoding="utf-8")
    shell = Shell(tmp_path)
    pieces, last = [], 0
    for m in _BLOCK.finditer(text):
        new_block = []
        for cmd, want in commands(m.group(1)):
            got = shell.run(cmd)
            if not UPDATE:
                assert _normal(got) == _normal(want), f"{doc}: `{cmd}` prints otherwise"
            new_block.append("$ " + cmd_as_written(m.group(1), cmd))
            new_block += [ln.rstrip() for ln in got]
        pieces.append(text[last : m.start(1)] + "\n".join(new_block) + "\n")
        last = m.end(1)
    if UPDATE:
        path.write_text("".join(pieces) + text[last:], encoding="utf-8")


def cmd_as_written(block: str, cmd: str) -> str:
    """The command as the doc wrote it (with its line continuations)."""
    lines = block.splitlines()
    for k, line in enumerate(lines):
        if not line.startswith("$ "):
            continue
        parts, j = [line[2:]], k
        while parts[-1].endswith("\\"):
            j += 1
            parts.append(lines[j])
        joined = " ".join(p[:-1] if p.endswith("\\") else p.strip() for p in parts)
        if " ".join(joined.split()) == " ".join(cmd.split()):
            return "\n".join(parts)
    return cmd
