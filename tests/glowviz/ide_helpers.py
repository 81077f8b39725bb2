"""Fixtures of the IDE tests: a fake-pipeline session (stable), a private config dir. Driving
the app under Pilot: pilot_helpers.py."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from fake_pipeline import FakeExecutor, FakeReference, fake_compile, fake_failing_compile  # noqa: E402

from glowviz.session import CompileSession  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = sorted((ROOT / "sample_models").glob("*.onnx"))


@pytest.fixture(autouse=True)
def _config_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("GLOWVIZ_CONFIG_DIR", str(tmp_path / "config"))
    return tmp_path / "config"


def make_fake_session(failing: bool = False) -> CompileSession:
    s = CompileSession(
        str(ROOT / "sample_models" / "resnet_small.onnx"),
        None,
        compile_fn=fake_failing_compile if failing else fake_compile,
    )
    s.executor_factory = FakeExecutor
    s.reference_factory = FakeReference
    return s


@pytest.fixture
def fake_session() -> CompileSession:
    return make_fake_session()
