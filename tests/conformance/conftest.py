"""The conformance tests share onnx's generated node cases within one session (harness.node_cases):
in the session's temporary root, which every xdist worker of the run sees."""

from __future__ import annotations

import os

import pytest

from tests.conformance import harness


@pytest.fixture(scope="session", autouse=True)
def _shared_node_cases(tmp_path_factory: pytest.TempPathFactory) -> None:
    base = tmp_path_factory.getbasetemp()
    # Under xdist each worker's basetemp is <session root>/popen-gwN.
    harness.NODE_CASE_DIR = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
