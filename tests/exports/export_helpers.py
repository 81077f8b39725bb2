"""Shared fixtures of the export tests: compiled sessions are cached per (model, options)."""

from __future__ import annotations

import functools
import os
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
MODELS = ROOT / "sample_models"
GOLDEN = pathlib.Path(__file__).resolve().parent / "golden"
SAMPLE_MODELS = sorted(p.name for p in MODELS.glob("*.onnx"))


@functools.cache
def session_for(
    model: str,
    scheduler: str = "child-mem-size",
    allocator: str = "lower-bound",
    disabled: tuple[str, ...] = (),
):
    from compiler.pipeline import CompileOptions
    from glowviz.exports.views import compile_session

    return compile_session(
        str(MODELS / model),
        CompileOptions(
            scheduler=scheduler, allocator=allocator, disabled_passes=frozenset(disabled)
        ),
    )


def check_golden(name: str, text: str) -> None:
    """Compare with tests/exports/golden/NAME; GLOWVIZ_UPDATE_GOLDEN=1 rewrites it."""
    path = GOLDEN / name
    if os.environ.get("GLOWVIZ_UPDATE_GOLDEN") == "1":
        path.write_text(text, encoding="utf-8")
        return
    if not path.exists():
        pytest.fail(f"golden file {path} missing; run with GLOWVIZ_UPDATE_GOLDEN=1")
    assert text == path.read_text(encoding="utf-8"), (
        f"{name} differs from its golden file; if the change is intended, rerun with "
        "GLOWVIZ_UPDATE_GOLDEN=1 and review the diff"
    )
