"""The structure of a network drawn as a figure: where it can be cut, and which blocks repeat.

Generic over what is drawn (graph nodes or low-level instructions, see `glowviz.exports.drawing`):
items in program order, each reading earlier items. A *cut* follows item p when at most one
value produced at or before p is still read after it -- the single tensor passed from one block
to the next (ResNet's residual output, DenseNet's concatenation, a transformer layer's
normalised activations). The *segments* between cuts are compared by a structural signature
(each item's op and attributes, and which item of the segment it reads: shapes left out, so
Inception modules of different widths or DenseNet layers of growing channel counts match), and
runs of repeated segments -- of any period, so a transformer layer of four segments repeats as
one -- become one group, as TensorBoard folds its name scopes. Deterministic: only positions
and signatures are used.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass

#: Longest repeating unit searched for, in segments (a transformer layer is 4).
MAX_PERIOD = 12


def crossings(reads: Sequence[Sequence[int]], ignore: Sequence[bool] = ()) -> list[int]:
    """How many values produced at or before p are read after p, for every position p (reads
    by the items marked in `ignore` not counted)."""
    n = len(reads)
    last = list(range(n))
    for j, rs in enumerate(reads):
        if j < len(ignore) and ignore[j]:
            continue
        for r in rs:
            if 0 <= r < j:
                last[r] = max(last[r], j)
    diff = [0] * (n + 1)
    for u in range(n):
        if last[u] > u:
            diff[u] += 1
            diff[last[u]] -= 1
    out, acc = [], 0
    for p in range(n):
        acc += diff[p]
        out.append(acc)
    return out


#: A segment longer than this is cut again where only joins (Concat, Add) read across.
LONG_SEGMENT = 12


def _cut(cross: Sequence[int], span: range, tails: Sequence[bool], out: list[range]) -> None:
    start = span.start
    for p in span:
        if cross[p] <= 1 or p == span.stop - 1:
            if p == start and out and out[-1].stop == p and p < len(tails) and tails[p]:
                out[-1] = range(out[-1].start, p + 1)
            else:
                out.append(range(start, p + 1))
            start = p + 1


def runs_continue(sigs: Sequence[Hashable], reads: Sequence[Sequence[int]]) -> list[bool]:
    """Items that continue a run: the same op as the item before, reading it (the inserts of a
    lowered Concat) -- as `tails`, they never start a segment of their own."""
    return [i > 0 and sigs[i] == sigs[i - 1] and (i - 1) in reads[i] for i in range(len(sigs))]


def segments(
    reads: Sequence[Sequence[int]], tails: Sequence[bool] = (), joins: Sequence[bool] = ()
) -> list[range]:
    """Item ranges between the cuts (a cut follows p when at most one value crosses it). An
    item marked in `tails` (an activation) that would be a segment of its own joins the one
    before, so a residual block's final Relu stays with its Add. A segment longer than
    `LONG_SEGMENT` is cut again with reads by `joins` not counted: DenseNet's layers, whose
    concatenations each read every layer before (so no single tensor ever crosses), or a
    U-Net's levels, whose skip connections end in a Concat."""
    strict: list[range] = []
    _cut(crossings(reads), range(len(reads)), tails, strict)
    if not any(len(s) > LONG_SEGMENT for s in strict) or not any(joins):
        return strict
    relaxed = crossings(reads, joins)
    out: list[range] = []
    for seg in strict:
        if len(seg) > LONG_SEGMENT:
            _cut(relaxed, seg, tails, out)
        else:
            out.append(seg)
    return out


def segment_signature(
    seg: range, sigs: Sequence[Hashable], reads: Sequence[Sequence[int]]
) -> tuple[Hashable, ...]:
    """Ops, attributes and the wiring inside the segment (reads from before it are one 'x',
    however many: a DenseNet layer's Concat reads one more earlier layer each time)."""

    # Runs of one op each reading the one before (a lowered Concat's inserttensor per piece)
    # count once, so a layer with one more piece still matches.
    comp: dict[int, int] = {}
    c = -1
    for i in seg:
        if i > seg.start and sigs[i] == sigs[i - 1] and (i - 1) in reads[i]:
            comp[i] = c
        else:
            c += 1
            comp[i] = c

    def wiring(rs: Sequence[int]) -> tuple[Hashable, ...]:
        inside = tuple(sorted({comp[r] for r in rs if r >= seg.start}))
        return (("x",) if any(r < seg.start for r in rs) else ()) + inside

    out: list[Hashable] = []
    for i in seg:
        if i > seg.start and comp[i] == comp[i - 1]:
            continue
        out.append((sigs[i], wiring(reads[i])))
    return tuple(out)


@dataclass(frozen=True)
class Run:
    """`count` consecutive repetitions of `period` segments, starting at segment `start`."""

    start: int
    period: int
    count: int

    @property
    def stop(self) -> int:
        return self.start + self.period * self.count


def _has_repeat(unit: Sequence[Hashable]) -> bool:
    """Whether a unit holds a tandem repeat itself (two equal blocks side by side)."""
    n = len(unit)
    for p in range(1, n // 2 + 1):
        for i in range(0, n - 2 * p + 1):
            if list(unit[i : i + p]) == list(unit[i + p : i + 2 * p]):
                return True
    return False


def fold_repeats(sigs: Sequence[Hashable], max_period: int = MAX_PERIOD) -> list[Run]:
    """Cover the sequence with runs, left to right; at each position the repetition covering
    the most segments wins (the shorter period on ties), of units that hold no repetition
    themselves (so ResNet's stages fold into "3 x block", not into a unit spanning two stages
    that happen to start alike); a segment that does not repeat is a run of count 1."""
    n = len(sigs)
    out: list[Run] = []
    i = 0
    while i < n:
        best = Run(i, 1, 1)
        for p in range(1, min(max_period, (n - i) // 2) + 1):
            unit = list(sigs[i : i + p])
            k = 1
            while i + (k + 1) * p <= n and list(sigs[i + k * p : i + (k + 1) * p]) == unit:
                k += 1
            if k >= 2 and k * p > best.period * best.count and not _has_repeat(unit):
                best = Run(i, p, k)
        out.append(best)
        i = best.stop
    return out


__all__ = [
    "LONG_SEGMENT",
    "MAX_PERIOD",
    "Run",
    "crossings",
    "fold_repeats",
    "segment_signature",
    "segments",
]
