"""Every failing case the campaign found, as a regression file: each command must give the
expected outcome (known.REGRESSIONS). Expected failures of bugs not fixed yet are xfail
strict=True, so fixing one fails this test until its entry is removed from known.py."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from .known import BUGS, REGRESSIONS, Regression
from .runner import Case, Settings, Worker, run_case, run_check

HERE = Path(__file__).resolve().parent / "regressions"


@pytest.fixture(scope="module")
def worker() -> Iterator[Worker]:
    w = Worker(3 << 30)
    yield w
    w.close()


def _params() -> list:
    out = []
    for r in REGRESSIONS:
        for cmd in r.commands:
            marks = []
            if cmd in r.failing:
                bug = r.failing[cmd]
                marks.append(pytest.mark.xfail(strict=True, reason=f"{bug}: {BUGS[bug]}"))
            out.append(pytest.param(r, cmd, id=f"{r.name}-{cmd}", marks=marks))
    return out


def test_every_regression_file_is_listed() -> None:
    files = {p.stem for p in HERE.glob("*.onnx")}
    listed = {r.name for r in REGRESSIONS}
    assert files == listed, (sorted(files - listed), sorted(listed - files))
    for r in REGRESSIONS:
        assert set(r.failing) <= set(r.commands), r.name
        assert all(b in BUGS for b in r.failing.values()), r.name


@pytest.mark.parametrize(("reg", "command"), _params())
def test_regression(worker: Worker, reg: Regression, command: str) -> None:
    path = HERE / f"{reg.name}.onnx"
    feeds_path = path.with_suffix(".inputs.npz")
    feeds = dict(np.load(feeds_path)) if feeds_path.exists() else None
    case = Case(reg.name, "regression", "regression", reg.name, path.read_bytes(), feeds)
    st = Settings(timeout=reg.timeout, check=False, commands=(command,))
    outcome = run_check(worker, case, st) if command == "check" else run_case(worker, case, st)[0]
    allowed = {"ok": {"ok"}, "refusal": {"refusal"}, "no-crash": {"ok", "refusal"}}[reg.expect]
    assert outcome.cls in allowed, f"{outcome.signature}: {outcome.detail[:500]}"
    if outcome.cls == "refusal" and reg.match:
        assert re.search(reg.match, outcome.detail), outcome.detail
