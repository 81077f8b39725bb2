"""Suite-wide test setup: the repository root on sys.path (for the shared helpers in `tests/`)."""

from __future__ import annotations

import pathlib
import sys

_ROOT = str(pathlib.Path(__file__).resolve().parents[1])
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)
