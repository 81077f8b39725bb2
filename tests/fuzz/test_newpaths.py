"""Session 9's LLVM fast paths against the interpreter, onnxruntime, 2 threads and stepping on
seeded random graphs (`tests/fuzz/newpaths.py`; a longer run: `python -m tests.fuzz.newpaths`).
`GLOWVIZ_NEWPATH_CASES` cases per family (default 4)."""

from __future__ import annotations

import os

import pytest

from tests.llvm_cache import llvm_test_cache  # noqa: F401 - autouse: the kept cache

from .newpaths import FAMILIES, check_case, make_case

COUNT = int(os.environ.get("GLOWVIZ_NEWPATH_CASES", "4"))


@pytest.mark.parametrize("index", range(COUNT))
@pytest.mark.parametrize("family", FAMILIES)
def test_new_paths_agree(family: str, index: int) -> None:
    assert check_case(f"{family}-9-{index}") == []


def test_cases_are_reproducible_and_salted() -> None:
    """A case name always makes the same graph and data; some cases carry special values."""
    a, fa, da = make_case("mm-9-3")
    b, fb, db = make_case("mm-9-3")
    assert a.SerializeToString() == b.SerializeToString() and da == db
    assert all((fa[k].tobytes() == fb[k].tobytes()) for k in fa)
    assert any("special" in make_case(f"act-9-{i}")[2] for i in range(20))


@pytest.mark.parametrize(
    "case",
    [
        "mm-9-30",  # one-row MatMul + bias + residual + Swish: @run_all vs stepping bits
        "act-9-16",  # Swish of -inf: NaN (sigmoid exactly 0 far below)
        "mm-9-19",  # Gemm + bias + Swish of special values
        "conv-11-23",  # forced direct + GELU of NaN/inf: NaN signs differ, positions agree
        "mm-11-44",  # sums past FLT_MAX: float32-range, not a finding
    ],
)
def test_found_cases(case: str) -> None:
    assert check_case(case) == []
