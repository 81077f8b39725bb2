"""The sliding window of convolutions and pools, written once for every LLVM kernel that has one.

Along one spatial axis, tap ``t`` of output position ``o`` reads input coordinate
``o * stride + t * dilation - pad``. ``Axis`` answers the three questions kernels ask about it:
is that coordinate inside the input (and a safe one to load when it is not), which outputs read
an inside coordinate for a given tap, and which outputs have every tap inside (the interior,
where loads need no checks). ``split_columns`` emits the usual border / interior / border loops.
``ConvShape`` is a 2-D convolution's geometry, with its two axes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import NamedTuple

from llvmlite import ir

from compiler.backends.llvm.kernels.common import Int, i64, in_range, loop, smax, smin


@dataclass(frozen=True)
class Axis:
    """One spatial axis of a window op: ``size`` inputs, ``out`` outputs, ``taps`` kernel taps."""

    size: int
    out: int
    taps: int
    stride: int = 1
    pad: int = 0  # padding before the first input element (the end padding follows from out)
    dilation: int = 1

    def offset(self, t: int) -> int:
        """The input coordinate tap ``t`` of output 0 reads: ``t * dilation - pad``."""
        return t * self.dilation - self.pad

    def offset_of(self, b: ir.IRBuilder, t: ir.Value) -> ir.Value:
        """``offset`` of a run-time tap."""
        return b.sub(b.mul(t, i64(self.dilation)), i64(self.pad))

    def coord(self, b: ir.IRBuilder, o: ir.Value, t: Int) -> ir.Value:
        """``o * stride + t * dilation - pad`` as an i64."""
        off = i64(self.offset(t)) if isinstance(t, int) else self.offset_of(b, t)
        return b.add(b.mul(o, i64(self.stride)), off)

    def tap(self, b: ir.IRBuilder, o: ir.Value, t: Int) -> tuple[ir.Value, ir.Value]:
        """(inside, safe): whether tap ``t`` of output ``o`` is inside the input, and its
        coordinate when it is, else 0, so a load through it never leaves the buffer."""
        c = self.coord(b, o, t)
        ok = in_range(b, c, self.size)
        return ok, b.select(ok, c, i64(0))

    def span(self, off: int) -> tuple[int, int]:
        """[lo, hi): the outputs ``o`` whose ``o * stride + off`` is inside ``[0, size)``:
        lo = ceil(-off / stride), hi = floor((size - 1 - off) / stride) + 1, clamped to
        [0, out] with lo <= hi."""
        st = self.stride
        lo = min(self.out, max(0, -(off // st)))
        return lo, max(lo, min(self.out, (self.size - 1 - off) // st + 1))

    def span_of(self, b: ir.IRBuilder, off: ir.Value) -> tuple[ir.Value, ir.Value]:
        """``span`` of a run-time offset. LLVM's ``sdiv`` truncates toward zero, which is the
        floor only for non-negative numerators: the numerators below are non-negative whenever
        the true bound is above 0 (a negative one can only mean a bound <= 0, which the clamp
        makes 0 either way). Not so ``(size - 1 - off) / stride + 1``: for ``off`` just past
        the input it truncates -1/2 to 0 and lets an output read outside the input."""
        st = self.stride
        lo = b.sdiv(b.sub(i64(st - 1), off), i64(st))
        hi = b.sdiv(b.sub(i64(self.size - 1 + st), off), i64(st))
        lo_c = smin(b, smax(b, lo, 0), self.out)
        return lo_c, smin(b, smax(b, hi, lo_c), self.out)

    def interior(self) -> tuple[int, int]:
        """[lo, hi): the outputs whose every tap is inside the input (lo <= hi)."""
        lo, _ = self.span(self.offset(0))
        _, hi = self.span(self.offset(self.taps - 1))
        return lo, max(lo, hi)


def window_taps(
    b: ir.IRBuilder, rows: Axis, cols: Axis, o_row: ir.Value, o_col: ir.Value
) -> Iterator[tuple[int, ir.Value, ir.Value, ir.Value, ir.Value]]:
    """Every tap (r, t) of a 2-D window at output (o_row, o_col), row-major: the tap's index
    ``r * cols.taps + t``, whether its row and its column are inside (``Axis.tap``), and the
    safe row and column coordinates. A row's check is emitted once, before its columns'."""
    for r in range(rows.taps):
        ok_row, row = rows.tap(b, o_row, r)
        for t in range(cols.taps):
            ok_col, col = cols.tap(b, o_col, t)
            yield r * cols.taps + t, ok_row, ok_col, row, col


def split_columns(
    b: ir.IRBuilder,
    lo: Int,
    hi: Int,
    n: int,
    border: Callable[[ir.Value], None],
    inner: Callable[[ir.Value], None],
    name: str = "ow",
    *,
    step: int = 1,
) -> None:
    """``for o in [0, n)``: ``border(o)`` on [0, lo) and [hi, n), ``inner(o)`` on [lo, hi).

    ``inner`` is where loads need no bounds checks; with ``step`` it handles ``step`` outputs
    per call (``hi - lo`` must be a multiple). Constant bounds skip empty loops.
    """

    def run(start: Int, stop: Int, body: Callable[[ir.Value], None], tag: str, st: int) -> None:
        if isinstance(start, int) and isinstance(stop, int) and start >= stop:
            return
        with loop(b, start, stop, st, f"{name}{tag}") as o:
            body(o)

    run(0, lo, border, "l", 1)
    run(lo, hi, inner, "m", step)
    run(hi, n, border, "r", 1)


@dataclass(frozen=True)
class ConvDims:
    """A 2-D convolution's dims and window: input [N, C, H, W], filter [K, C/group, R, S]."""

    N: int
    C: int
    H: int
    W: int
    K: int
    R: int
    S: int
    stride: tuple[int, int]
    pad: tuple[int, int, int, int]  # top, left, bottom, right
    dilation: tuple[int, int]
    group: int

    @property
    def Cg(self) -> int:
        return self.C // self.group

    @property
    def Kg(self) -> int:
        return self.K // self.group


@dataclass(frozen=True)
class ConvShape(ConvDims):
    """A 2-D convolution (``ConvDims``) and the axes of its window."""

    @property
    def OH(self) -> int:
        return (
            self.H + self.pad[0] + self.pad[2] - self.dilation[0] * (self.R - 1) - 1
        ) // self.stride[0] + 1

    @property
    def OW(self) -> int:
        return (
            self.W + self.pad[1] + self.pad[3] - self.dilation[1] * (self.S - 1) - 1
        ) // self.stride[1] + 1

    @property
    def npix(self) -> int:
        return self.OH * self.OW

    @property
    def rows(self) -> Axis:
        return Axis(self.H, self.OH, self.R, self.stride[0], self.pad[0], self.dilation[0])

    @property
    def cols(self) -> Axis:
        return Axis(self.W, self.OW, self.S, self.stride[1], self.pad[1], self.dilation[1])

    @property
    def pointwise(self) -> bool:
        """A 1x1, stride-1, unpadded conv: a plain GEMM over the image."""
        return self.R == self.S == 1 and self.stride == (1, 1) and self.pad == (0, 0, 0, 0)

    @property
    def depthwise(self) -> bool:
        return self.C == self.group and self.K % self.group == 0

    def __str__(self) -> str:
        return (
            f"{self.N}x{self.C}x{self.H}x{self.W} * {self.K}x{self.Cg}x{self.R}x{self.S} "
            f"stride {self.stride} pads {self.pad} dilation {self.dilation} group {self.group}"
        )


class ConvPtrs(NamedTuple):
    """The kernel's arguments: input, (packed) filter, output, optional bias; ``cin``, the input
    channels as a run-time i64 when the kernel is shared by convs that differ only in them."""

    x: ir.Value
    w: ir.Value
    out: ir.Value
    bias: ir.Value | None
    cin: ir.Value | None = None


__all__ = ["Axis", "ConvPtrs", "ConvShape", "split_columns"]
