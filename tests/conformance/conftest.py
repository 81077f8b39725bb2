"""The conformance tests keep onnx's generated node cases (harness.node_cases) in a cache kept
between test sessions, keyed by what generates them: $GLOWVIZ_NODE_CASE_DIR (a temporary
directory, to watch them generated), else ~/.cache/glowviz/onnx-node-cases."""

from __future__ import annotations

import os
from pathlib import Path

from tests.conformance import harness

_HOME_CACHE = Path.home() / ".cache" / "glowviz" / "onnx-node-cases"
harness.NODE_CASE_DIR = Path(os.environ.get("GLOWVIZ_NODE_CASE_DIR") or _HOME_CACHE)
