"""Suite-wide test setup: the repository root on sys.path (for the shared helpers in `tests/`),
and the hypothesis profile of the property tests.

The default profile `ci` is derandomized: every run draws the same examples, so a failure
reproduces and the suite's time is stable. `HYPOTHESIS_PROFILE=explore` draws fresh random
examples (and ten times as many) to look for new failures; hypothesis prints the failing
example as IR text (see `tests/graph_strategies.py`).
"""

from __future__ import annotations

import os
import pathlib
import sys

from hypothesis import settings

_ROOT = str(pathlib.Path(__file__).resolve().parents[1])
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)

# deadline=None: compile and JIT times vary with the machine's load; the count bounds the time.
settings.register_profile("ci", derandomize=True, deadline=None, database=None)
settings.register_profile("explore", deadline=None, max_examples=1000)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


def pytest_collection_modifyitems(config, items) -> None:
    """The tests marked slow first, the others after them in their usual order (a stable sort).

    Under xdist (`bash dev.sh test`: two workers, work stealing) a test of a minute that starts
    last keeps one worker busy for that minute after the other has run out of work; started
    first, the short tests fill in around it. Every test still runs."""
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)
