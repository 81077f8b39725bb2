"""Growth-ratio checks for "is not quadratic" tests: time the same work on a small and a 4x larger
input in one run and compare, instead of asserting a wall-clock limit that depends on the machine.

Each size is timed several times in this process's CPU time (work of other processes on a shared
machine does not count; wall time under load gave ratios from 4x to 10x for the same code),
interleaved so a burst of load hits both sizes alike, with the garbage collector off (as `timeit`
does); the best time of each size counts.

A measurement can still come out high when the other test worker evicts the big input's working
set from a shared cache (a linear scheduler measured 6.8x in CI, 4.3x on a quiet machine), so a
ratio over the limit is measured again, up to `ROUNDS` times, and the best round counts. Noise only
ever adds time, and the best of five small runs is stable, so a retry cannot bring real quadratic
growth (16x) under the limit: it can only take back a slow round.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

#: Linear work grows ~4x (a little more as the working set leaves the caches), quadratic 16x.
NODES_RATIO = 4
MAX_TIME_RATIO = 6.0
#: Measurement rounds before a ratio over the limit fails the test.
ROUNDS = 3


def _time_once(setup: Callable[[], T], work: Callable[[T], object]) -> float:
    arg = setup()
    gc.disable()
    try:
        t0 = time.process_time()
        work(arg)
        return time.process_time() - t0
    finally:
        gc.enable()


def growth_ratio(
    setup_small: Callable[[], T],
    setup_big: Callable[[], T],
    work: Callable[[T], object],
    repeats: int = 3,
) -> tuple[float, float, float]:
    """(best small time, best big time, big/small); `setup_*` build a fresh input (not timed)."""
    small, big = float("inf"), float("inf")
    for _ in range(repeats):
        small = min(small, _time_once(setup_small, work))
        big = min(big, _time_once(setup_big, work))
    return small, big, big / small


def assert_not_quadratic(
    setup_small: Callable[[], T],
    setup_big: Callable[[], T],
    work: Callable[[T], object],
    what: str,
    repeats: int = 3,
    max_ratio: float = MAX_TIME_RATIO,
) -> float:
    """Assert that `work` on the big input (NODES_RATIO times the small one) takes less than
    `max_ratio` times as long; returns the measured ratio. An n log n algorithm passes a higher
    `max_ratio` (still well under the quadratic 16x)."""
    for _ in range(ROUNDS):
        small, big, ratio = growth_ratio(setup_small, setup_big, work, repeats)
        print(
            f"\n{what}: {small * 1000:.1f} ms -> {big * 1000:.1f} ms for {NODES_RATIO}x nodes "
            f"({ratio:.2f}x)"
        )
        if ratio < max_ratio:
            break
    assert ratio < max_ratio, (
        f"{what}: {NODES_RATIO}x the nodes took {ratio:.1f}x the time "
        f"({small * 1000:.1f} ms -> {big * 1000:.1f} ms); linear is ~{NODES_RATIO}x, "
        f"quadratic {NODES_RATIO**2}x"
    )
    return ratio
