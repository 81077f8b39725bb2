"""Collects the `.lir` case files of this folder: each case (see `lir_cases.read_cases`) is one
test, named after its CASE line."""

from __future__ import annotations

import pathlib
from typing import Any

import pytest

from tests.lir.passes.lir_cases import Case, read_cases


class LIRCaseFile(pytest.File):
    def collect(self) -> Any:
        for case in read_cases(self.path):
            yield LIRCaseItem.from_parent(self, name=case.name, case=case)


class LIRCaseItem(pytest.Item):
    def __init__(self, *, case: Case, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.case = case

    def runtest(self) -> None:
        self.case.run()

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException]) -> str:  # type: ignore[override]
        return f"{self.path.name}:{self.case.line}: case {self.case.name}\n{excinfo.value}"

    def reportinfo(self) -> tuple[pathlib.Path, int, str]:
        return self.path, self.case.line - 1, f"{self.path.name}::{self.case.name}"


def pytest_collect_file(parent: pytest.Collector, file_path: pathlib.Path) -> pytest.File | None:
    if file_path.suffix == ".lir" and file_path.name.startswith("test_"):
        return LIRCaseFile.from_parent(parent, path=file_path)
    return None
