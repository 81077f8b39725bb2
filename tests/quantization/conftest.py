"""Quantization tests: make `tests.filecheck` and the pass helpers importable."""

from __future__ import annotations

import pathlib
import sys

_ROOT = str(pathlib.Path(__file__).resolve().parents[2])
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)
_PASSES = str(pathlib.Path(__file__).resolve().parents[1] / "passes")
if _PASSES not in sys.path:
    sys.path.insert(0, _PASSES)
