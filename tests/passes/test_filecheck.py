"""The FileCheck helper other test suites reuse."""

from __future__ import annotations

import pytest

from tests.filecheck import CheckError, check

TEXT = """a = Conv(x)
b = Relu(a)
c = Add(b, a)
Save(c)
"""


def test_check_next_not_dag_count() -> None:
    check(TEXT, "CHECK: Conv\nCHECK-NEXT: Relu\nCHECK-NOT: Mul\nCHECK: Save")
    check(TEXT, "CHECK-DAG: c = Add\nCHECK-DAG: b = Relu\nCHECK: Save")
    check(TEXT, "CHECK-COUNT-2: a)\nCHECK: {{^b = [A-Z]}}")


@pytest.mark.parametrize(
    "checks",
    [
        "CHECK: Relu\nCHECK: Conv",  # order
        "CHECK: Conv\nCHECK-NEXT: Add",  # not next
        "CHECK: Conv\nCHECK-NOT: Relu\nCHECK: Save",  # forbidden in between
        "CHECK-NOT: Save",  # forbidden until the end
        "CHECK-DAG: Mul",
        "CHECK-COUNT-3: a)",
    ],
)
def test_failures(checks: str) -> None:
    with pytest.raises(CheckError):
        check(TEXT, checks)


def test_no_directives_is_an_error() -> None:
    with pytest.raises(ValueError):
        check(TEXT, "nothing here")
