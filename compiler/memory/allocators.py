"""Memory allocation (pipeline step 10): offsets for activation buffers from their live intervals.

Allocators work on plain `Interval`s (name, aligned size, [first, last] instruction indices) so
they are testable without any IR. Every allocator returns an `Allocation` with an offset and a
human-readable `reason` for every buffer — the IDE's "why is this buffer here" answer.

- `first-fit`: buffers in order of first use, each at the lowest offset free over its interval.
- `lower-bound`: Glow's strategy — buffers live at the peak instruction are packed first (their
  sum is the lower bound), then the rest are placed best-fit in several orders; the best result
  wins. Any result that misses the lower bound is reported by the caller (plan stats).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from itertools import accumulate
from typing import Protocol

from compiler.errors import CompilerError
from compiler.memory.regions import ALIGNMENT


@dataclass(frozen=True)
class Interval:
    """One buffer's lifetime: live from instruction `first` to `last` inclusive."""

    name: str
    size: int  # bytes, already aligned
    first: int
    last: int

    def overlaps(self, other: Interval) -> bool:
        return self.first <= other.last and other.first <= self.last


@dataclass
class Allocation:
    """Offsets and reasons by buffer name, the region size it needs and how it got there."""

    allocator: str
    offsets: dict[str, int] = field(default_factory=dict)
    reasons: dict[str, str] = field(default_factory=dict)
    size: int = 0
    lower_bound: int = 0
    peak_instruction: int = -1
    strategy: str = ""  # for multi-strategy allocators: which order won


# ---------------------------------------------------------------------------------------------
# Bounds
# ---------------------------------------------------------------------------------------------


class Live(Protocol):
    """Anything with a lifetime and a size: an `Interval`, a plan's or a report's buffer."""

    @property
    def size(self) -> int: ...
    @property
    def first(self) -> int: ...
    @property
    def last(self) -> int: ...


def live_profile(intervals: Sequence[Live], n: int | None = None) -> list[int]:
    """Sum of live sizes at every instruction index 0..n-1 (default n: max(last) + 1).

    The one definition of "bytes live at an instruction": the allocators' lower bound, the
    memory report, the IDE's views and the exported figures all use it."""
    if n is None:
        n = max((iv.last for iv in intervals), default=-1) + 1
    if n <= 0:
        return []
    diff = [0] * (n + 1)
    for iv in intervals:
        lo, hi = max(0, iv.first), min(n - 1, iv.last)
        if lo <= hi:
            diff[lo] += iv.size
            diff[hi + 1] -= iv.size
    diff.pop()
    return list(accumulate(diff))


def lower_bound(intervals: Sequence[Interval]) -> tuple[int, int]:
    """(the largest live total at any instruction, the first instruction reaching it)."""
    prof = live_profile(intervals)
    if not prof:
        return 0, -1
    peak = max(prof)
    return peak, prof.index(peak)


# ---------------------------------------------------------------------------------------------
# Placement on a partial layout
# ---------------------------------------------------------------------------------------------


class _Layout:
    """Buffers placed so far; finds the gaps free over a given interval."""

    def __init__(self) -> None:
        self.placed: list[tuple[Interval, int]] = []
        self.top = 0

    def conflicts(self, iv: Interval) -> list[tuple[int, int, Interval]]:
        # `overlaps` written out: this comprehension is most of an allocation's time (a
        # DenseNet-121 plan calls it about 250,000 times per strategy tried)
        first, last = iv.first, iv.last
        out = [
            (off, off + p.size, p) for p, off in self.placed if p.first <= last and first <= p.last
        ]
        out.sort(key=lambda t: (t[0], t[1]))
        return out

    def gaps(self, iv: Interval) -> list[tuple[int, int | None, Interval | None, Interval | None]]:
        """Free ranges (start, end or None for unbounded, buffer below, buffer above)."""
        out: list[tuple[int, int | None, Interval | None, Interval | None]] = []
        cursor = 0
        below: Interval | None = None
        for lo, hi, p in self.conflicts(iv):
            if lo > cursor:
                out.append((cursor, lo, below, p))
            if hi > cursor:
                cursor, below = hi, p
        out.append((cursor, None, below, None))
        return out

    def place(self, iv: Interval, off: int) -> None:
        self.placed.append((iv, off))
        self.top = max(self.top, off + iv.size)


def _choose(layout: _Layout, iv: Interval, fit: str) -> tuple[int, str]:
    gaps = layout.gaps(iv)
    bounded = [g for g in gaps if g[1] is not None and g[1] - g[0] >= iv.size]
    if bounded:
        if fit == "best":
            g = min(bounded, key=lambda g: (g[1] - g[0], g[0]))  # type: ignore[operator]
            rule = f"best-fit gap of {g[1] - g[0]} B"  # type: ignore[operator]
        else:
            g = bounded[0]
            rule = "first free gap"
        start, _end, below, above = g
        where = (
            f"between %{below.name} and %{above.name}"
            if below and above
            else (f"below %{above.name}" if above else "at offset 0")
        )
        return start, f"{rule} {where}"
    start, _end, below, _above = gaps[-1]
    if below is None:
        return start, "nothing else live over its lifetime: offset 0"
    return (
        start,
        f"no gap fits: placed on top of %{below.name} (live at instruction {max(iv.first, below.first)})",
    )


def _reuse_note(iv: Interval, off: int, placed: Sequence[tuple[Interval, int]]) -> str:
    """Which earlier buffer's memory this one reuses (the latest one ending before it starts)."""
    best: tuple[Interval, int] | None = None
    for p, poff in placed:
        if p is iv or p.last >= iv.first:
            continue
        if poff < off + iv.size and off < poff + p.size and (best is None or p.last > best[0].last):
            best = (p, poff)
    if best is None:
        return ""
    return f"; reuses the memory freed by %{best[0].name} after instruction {best[0].last}"


def _finish(alloc: Allocation, layout: _Layout, rules: dict[str, str]) -> Allocation:
    alloc.offsets = {iv.name: off for iv, off in layout.placed}
    alloc.size = layout.top
    for iv, off in layout.placed:
        alloc.reasons[iv.name] = rules[iv.name] + _reuse_note(iv, off, layout.placed)
    return alloc


# ---------------------------------------------------------------------------------------------
# Allocators
# ---------------------------------------------------------------------------------------------

AllocatorFn = Callable[[Sequence[Interval]], Allocation]
_ALLOCATORS: dict[str, AllocatorFn] = {}


def register_allocator(name: str) -> Callable[[AllocatorFn], AllocatorFn]:
    def deco(fn: AllocatorFn) -> AllocatorFn:
        assert name not in _ALLOCATORS, name
        _ALLOCATORS[name] = fn
        return fn

    return deco


def get_allocator(name: str) -> AllocatorFn:
    try:
        return _ALLOCATORS[name]
    except KeyError:
        raise CompilerError(
            f"unknown allocator '{name}'",
            hint=f"known allocators: {', '.join(sorted(_ALLOCATORS))}",
        ) from None


def allocator_names() -> list[str]:
    return list(_ALLOCATORS)


def allocate(intervals: Sequence[Interval], allocator: str = "lower-bound") -> Allocation:
    names = [iv.name for iv in intervals]
    if len(set(names)) != len(names):
        raise CompilerError("two buffers share a name; cannot allocate")
    return get_allocator(allocator)(intervals)


@register_allocator("first-fit")
def first_fit(intervals: Sequence[Interval]) -> Allocation:
    lb, peak_at = lower_bound(intervals)
    alloc = Allocation("first-fit", lower_bound=lb, peak_instruction=peak_at, strategy="first use")
    layout, rules = _Layout(), {}
    for iv in sorted(intervals, key=lambda iv: (iv.first, iv.last)):
        off, rule = _choose(layout, iv, "first")
        layout.place(iv, off)
        rules[iv.name] = f"first fit in order of first use: {rule}"
    return _finish(alloc, layout, rules)


_ORDERS: dict[str, Callable[[Interval], tuple]] = {
    "size desc": lambda iv: (-iv.size, iv.first, iv.name),
    "size x length desc": lambda iv: (-iv.size * (iv.last - iv.first + 1), iv.first, iv.name),
    "length desc": lambda iv: (-(iv.last - iv.first), -iv.size, iv.name),
    "first use": lambda iv: (iv.first, -iv.size, iv.name),
    "last use desc": lambda iv: (-iv.last, -iv.size, iv.name),
}


#: How the buffers live at the peak are stacked from offset 0: largest first, or the one that
#: lives longest first (so the top of the stack frees up soonest for what comes after).
_STACKS: dict[str, Callable[[Interval], tuple]] = {
    "largest": lambda iv: (-iv.size, iv.first, iv.name),
    "longest-lived": lambda iv: (-iv.last, iv.first, -iv.size, iv.name),
}


def _peak_packed(
    intervals: Sequence[Interval], peak_at: int, stack: str = "largest"
) -> tuple[_Layout, dict[str, str]]:
    layout, rules = _Layout(), {}
    at_peak = [iv for iv in intervals if iv.first <= peak_at <= iv.last]
    at_peak.sort(key=_STACKS[stack])
    off, prev = 0, None
    for iv in at_peak:
        layout.place(iv, off)
        after = (
            f"packed after %{prev.name} (offset {off - prev.size}..{off})"
            if prev
            else "packed first at offset 0"
        )
        rules[iv.name] = f"live at peak instruction {peak_at}, {after}"
        prev, off = iv, off + iv.size
    return layout, rules


def _order_strategy(
    intervals: Sequence[Interval], peak_at: int, order: str, fit: str, stack: str = "largest"
) -> tuple[_Layout, dict[str, str]]:
    layout, rules = _peak_packed(intervals, peak_at, stack)
    done = set(rules)
    rest = sorted((iv for iv in intervals if iv.name not in done), key=_ORDERS[order])
    for iv in rest:
        off, rule = _choose(layout, iv, fit)
        layout.place(iv, off)
        rules[iv.name] = f"placed by {order} order: {rule}"
    return layout, rules


def _iterated_peaks(
    intervals: Sequence[Interval], peak_at: int, fit: str, stack: str = "largest"
) -> tuple[_Layout, dict[str, str]]:
    """Glow's loop: repeatedly take the instruction where unplaced buffers weigh the most and
    place those buffers (largest first) into the gaps left by the placed ones."""
    layout, rules = _peak_packed(intervals, peak_at, stack)
    left = [iv for iv in intervals if iv.name not in rules]
    while left:
        weight, at = lower_bound(left)
        if weight == 0:
            # Only zero-size buffers are left: the profile is flat at 0 and its "peak" (index
            # 0) may hold none of them, so the loop would never shrink `left`. Start from the
            # first one still unplaced instead.
            at = min(iv.first for iv in left)
        now = sorted(
            (iv for iv in left if iv.first <= at <= iv.last),
            key=lambda iv: (-iv.size, iv.first, iv.name),
        )
        for iv in now:
            off, rule = _choose(layout, iv, fit)
            layout.place(iv, off)
            rules[iv.name] = f"heaviest among unplaced at instruction {at}: {rule}"
        placed = {iv.name for iv in now}
        left = [iv for iv in left if iv.name not in placed]
    return layout, rules


@register_allocator("lower-bound")
def lower_bound_allocator(intervals: Sequence[Interval]) -> Allocation:
    lb, peak_at = lower_bound(intervals)
    best: tuple[int, str, _Layout, dict[str, str]] | None = None
    attempts: list[tuple[str, Callable[[], tuple[_Layout, dict[str, str]]]]] = []
    for stack in _STACKS:
        peak = "peak" if stack == "largest" else f"peak ({stack} at the bottom)"
        for fit in ("best", "first"):
            attempts.append(
                (
                    f"iterated peaks{'' if stack == 'largest' else f' ({stack} at the bottom)'}"
                    f", {fit} fit",
                    partial(_iterated_peaks, intervals, peak_at, fit, stack),
                )
            )
            for order in _ORDERS:
                attempts.append(
                    (
                        f"{peak} first, then {order}, {fit} fit",
                        partial(_order_strategy, intervals, peak_at, order, fit, stack),
                    )
                )
    for label, run in attempts:
        layout, rules = run()
        if best is None or layout.top < best[0]:
            best = (layout.top, label, layout, rules)
        if best[0] <= lb:
            break
    alloc = Allocation("lower-bound", lower_bound=lb, peak_instruction=peak_at)
    if best is None:
        return alloc
    alloc.strategy = best[1]
    return _finish(alloc, best[2], best[3])


def check_allocation(
    intervals: Sequence[Interval], offsets: dict[str, int], alignment: int = ALIGNMENT
) -> list[str]:
    """Problems with a placement: misaligned offsets, and buffers overlapping in time and space."""
    problems = []
    ivs = sorted(intervals, key=lambda iv: iv.first)
    for iv in ivs:
        if iv.name not in offsets:
            problems.append(f"%{iv.name} has no offset")
        elif offsets[iv.name] % alignment:
            problems.append(f"%{iv.name} offset {offsets[iv.name]} is not {alignment}-aligned")
    active: list[Interval] = []
    for iv in ivs:
        active = [a for a in active if a.last >= iv.first]
        o = offsets.get(iv.name)
        for a in active:
            ao = offsets.get(a.name)
            if o is None or ao is None or iv.size == 0 or a.size == 0:
                continue
            if o < ao + a.size and ao < o + iv.size:
                problems.append(
                    f"%{iv.name} [{iv.first},{iv.last}] at {o}..{o + iv.size} overlaps "
                    f"%{a.name} [{a.first},{a.last}] at {ao}..{ao + a.size}"
                )
        active.append(iv)
    return problems
