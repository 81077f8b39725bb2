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

# numpy's OpenBLAS runs one thread per test process (and the CLI and worker processes tests
# start), unless the environment says otherwise. It reads this when numpy is first imported,
# which is after this file in every pytest process. `bash dev.sh test` runs two workers on two
# cores: a second BLAS thread per worker has no core of its own, and OpenBLAS threads spin
# while they wait, so the interpreter's small GEMMs (a convolution's taps) cost more CPU than
# they did on one thread: the light CNNs through the interpreter (conformance's Real
# category) took 11.5-12 s of CPU, 5.7-6 s on one thread, their convolutions 6 s -> 1 s.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from hypothesis import settings  # noqa: E402

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
