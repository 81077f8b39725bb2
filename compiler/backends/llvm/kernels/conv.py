"""2-D convolution (float32, NCHW): the strategy table, and the kernels it emits.

A strategy is a row of ``STRATEGIES``: its ``name``; ``applies(shape)``, whether it computes that
shape correctly; ``prefers(shape)``, the default-choice heuristic; ``pack``, how the ONNX filter
[K, C/group, R, S] is laid out for it at compile time (None: it reads the filter as given, so a
run-time filter works); and ``body``, the code, emitted into the kernel shell
``void f(ptr x, ptr w, ptr out [, ptr bias])`` (``new_kernel``), every result going through the
``Epilogue`` (the activation, after adding to ``out`` for the sum post-op). By default a conv
gets the
FIRST row that applies and prefers it, in this order:

1. ``direct-vector`` (group 1; by choice at most 4 input channels, kernels up to 7x7 and strides
   up to 2, e.g. stems): a direct loop over a padded copy of the image, tiles of output
   channels x column vectors (kernels/direct.py);
2. ``winograd-4x4`` and ``winograd`` (3x3, stride 1, dilation 1, group 1; by choice a tile
   grid of at least a vector, 8 input and 16 output channels, F(4x4) only with
   ``winograd.CHOOSE_F4``): Winograd's F(4x4, 3x3) and F(2x2, 3x3), 36 or 16 GEMMs over
   transformed input patches (kernels/winograd.py); a finite constant filter only;
3. ``direct-lanes`` (group 1; by choice small planes whose input fits in L1, more than one
   tap, output channels filling 8 or more lanes): output channels on the vector lanes, tiles
   of up to 24 output pixels fed from the image in place, a transpose in registers
   (kernels/lanes.py);
4. ``pixel-rows-gemm`` (group 1; small images with many channels): pixels as GEMM rows and
   output channels on the vector lanes over an im2col buffer, then a transpose;
5. ``padded-shift-gemm`` (group 1; images over 64 pixels, strides <= 2, not 1x1 stride 1): one
   GEMM over the zero-padded image split into its stride phases, whose im2col rows are
   contiguous runs read in place;
6. ``depthwise-direct`` (one input channel per group; multiplier <= 2 by choice): a padded
   channel copy, tiles of output rows x a column vector (kernels/direct.py);
7. ``gemm-1x1`` (1x1, stride 1, no padding): a GEMM reading its B panels in place from the
   image's channel rows;
8. ``implicit-gemm`` (any shape): im2col gathered KC rows at a time into the GEMM's B panels;
9. ``direct`` (any shape, run-time filters too): a scalar loop nest.

``select(shape, forced=name)`` returns a forced row instead, and raises ``CodegenError`` when it
does not apply. A padded conv whose filter holds an infinity or a NaN always gets ``direct``,
the one row that skips padded taps instead of multiplying zero padding (0 * inf is NaN, which
onnxruntime's convolutions and the interpreter do not give); every other row would put NaN all
along the border. Finite filters, the only ones that matter for speed, are not affected.

Every border test goes through ``kernels/window.py`` (the vector kernels of ``kernels/direct.py``
have none: they read a zero-padded copy).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial

import numpy as np
from llvmlite import ir

from compiler.backends.llvm.kernels.common import (
    Activation,
    Epilogue,
    hand_tiled,
    new_kernel,
)
from compiler.backends.llvm.kernels.conv_gemm import (
    gemm_body,
    pack_a,
    pack_b_rows,
    pack_conv_weights,
    padded_shift_body,
    pixel_rows_body,
)
from compiler.backends.llvm.kernels.direct import (
    depthwise_body,
    direct_body,
    direct_vector_body,
    pack_direct,
)
from compiler.backends.llvm.kernels.gemm import GemmConfig, conv_gemm_config
from compiler.backends.llvm.kernels.window import ConvPtrs, ConvShape
import compiler.backends.llvm.kernels.lanes as lanes
import compiler.backends.llvm.kernels.winograd as winograd
from compiler.errors import CodegenError

Body = Callable[[ir.IRBuilder, ConvShape, GemmConfig, ConvPtrs, Epilogue], None]
Pack = Callable[[np.ndarray, ConvShape, GemmConfig], np.ndarray]


def _always(s: ConvShape) -> bool:
    return True


@dataclass(frozen=True)
class ConvStrategy:
    """One row of the strategy table (see the module docstring)."""

    name: str
    body: Body = field(repr=False)
    pack: Pack | None  # None: the kernel reads the ONNX filter as given (run-time filters too)
    applies: Callable[[ConvShape], bool] = _always
    prefers: Callable[[ConvShape], bool] = _always
    #: Vectorised by hand (``hand_tiled``); False for the scalar nest the vectoriser widens.
    hand_tiled: bool = True
    #: Needs a finite constant filter: its filter transform adds taps together, so one infinite
    #: tap would reach outputs it does not touch as inf - inf = NaN (``winograd``).
    finite_filter: bool = False

    def usable(self, s: ConvShape, constant: bool = True) -> bool:
        return (constant or self.pack is None) and self.applies(s)


@dataclass
class ConvKernel:
    """An emitted conv: call ``fn(x, packed_weights, out[, bias])`` with base pointers.

    ``x``: float32[N, C, H, W]; ``out``: float32[N, K, OH, OW]; ``bias``: float32[K] as given.
    ``packed_weights`` (float32, contiguous) replaces the ONNX weight tensor in the constant
    region. Kernels that pack at run time use a module-level scratch buffer: not reentrant.
    """

    fn: ir.Function
    packed_weights: np.ndarray
    shape: ConvShape
    strategy: str


def _pair(v: int | tuple[int, ...]) -> tuple[int, int]:
    return (v, v) if isinstance(v, int) else (int(v[0]), int(v[1]))


# -- weight packings --------------------------------------------------------------------------


def _pack_raw(w: np.ndarray, s: ConvShape, cfg: GemmConfig) -> np.ndarray:
    return np.ascontiguousarray(w, dtype=np.float32).ravel()


def _prefers_pixel_rows(s: ConvShape) -> bool:
    """Stems (few input channels), and small images (the 7x7 stages): with few pixels the
    channel-rows GEMM wastes most of its NR-wide pixel panels; swapping the roles fills every
    lane and streams the packed filter once."""
    if s.Cg <= 4 and 32 <= s.K <= 128:
        return True
    return s.npix <= 64 and s.K >= 64 and s.Cg * s.R * s.S >= 64





# -- the table ----------------------------------------------------------------------------------


STRATEGIES: tuple[ConvStrategy, ...] = (
    ConvStrategy(
        "direct-vector",
        direct_vector_body,
        pack_direct,
        applies=lambda s: s.group == 1,
        # Its taps are unrolled (strided vectors lane by lane past stride 2): a ViT's 16x16/16
        # patch conv emitted 4.5 MB of IR and spent minutes in O3. Stems up to 7x7/2 only.
        prefers=lambda s: s.C <= 4 and s.OW >= 8 and s.R * s.S <= 49 and max(s.stride) <= 2,
    ),
    ConvStrategy(
        "winograd-4x4",
        partial(winograd.winograd_body, v=winograd.F4),
        partial(winograd.pack, v=winograd.F4),
        applies=winograd.applies,
        prefers=winograd.prefers_f4,
        finite_filter=True,
    ),
    ConvStrategy(
        "winograd",
        winograd.winograd_body,
        winograd.pack,
        applies=winograd.applies,
        prefers=winograd.prefers,
        finite_filter=True,
    ),
    ConvStrategy(
        "direct-lanes",
        lanes.lanes_body,
        lanes.pack_lanes,
        applies=lambda s: s.group == 1,
        prefers=lanes.prefers,
    ),
    ConvStrategy(
        "pixel-rows-gemm",
        pixel_rows_body,
        pack_b_rows,
        applies=lambda s: s.group == 1,
        prefers=_prefers_pixel_rows,
    ),
    ConvStrategy(
        "padded-shift-gemm",
        padded_shift_body,
        pack_a,
        applies=lambda s: s.group == 1,
        # One phase image per stride phase, each filled by its own code: strides up to 2.
        prefers=lambda s: (
            (s.R * s.S > 1 or s.stride != (1, 1))
            and max(s.stride) <= 2
            and s.H * s.W > 64
            and s.K >= 4
        ),
    ),
    ConvStrategy(
        "depthwise-direct",
        depthwise_body,
        _pack_raw,
        applies=lambda s: s.depthwise and s.Cg == 1,
        prefers=lambda s: s.Kg <= 2,
    ),
    ConvStrategy("gemm-1x1", partial(gemm_body, pointwise=True), pack_a, lambda s: s.pointwise),
    ConvStrategy("implicit-gemm", partial(gemm_body, pointwise=False), pack_a),
    ConvStrategy("direct", direct_body, None, hand_tiled=False),
)

STRATEGY_NAMES: tuple[str, ...] = tuple(r.name for r in STRATEGIES)


def applicable(s: ConvShape, constant: bool = True) -> list[str]:
    """Names of every strategy that computes ``s`` (``constant``: the filter is known)."""
    return [r.name for r in STRATEGIES if r.usable(s, constant)]


def skips_padding(s: ConvShape, weights: np.ndarray | None) -> bool:
    """Must ``s`` run the ``direct`` row: padded, with a constant filter holding an infinity or
    a NaN (see the module docstring)? The check is one pass over the filter at compile time."""
    return weights is not None and any(s.pad) and not bool(np.isfinite(weights).all())


#: The largest filter tap a ``finite_filter`` row takes: its transform adds taps together (by
#: at most 1.5x the largest per axis, 2.25x for both: ``winograd.F2``; F(4x4)'s G at most
#: 1x), and a tap above float32's largest / 2.25 could come out of it as an infinity.
FINITE_TRANSFORM_MAX = float(np.finfo(np.float32).max) / 2.25


def _transform_stays_finite(weights: np.ndarray) -> bool:
    a = np.abs(np.asarray(weights, dtype=np.float32))
    return bool(np.isfinite(a).all()) and float(a.max(initial=0.0)) <= FINITE_TRANSFORM_MAX


def select(
    s: ConvShape,
    *,
    constant: bool = True,
    forced: str | None = None,
    where: str | None = None,
    weights: np.ndarray | None = None,
) -> ConvStrategy:
    """The row for ``s``: ``forced`` if given (it must apply), else the first that applies and
    prefers ``s``; ``direct`` whatever is forced when the constant filter ``weights`` is not
    finite and ``s`` is padded, or when the forced row needs a filter whose transform stays
    finite (the default choice then skips such rows). ``where`` names the instruction in errors."""
    if skips_padding(s, weights):
        return next(r for r in STRATEGIES if r.name == "direct")
    finite = weights is None or _transform_stays_finite(weights)
    if not forced:
        return next(
            r
            for r in STRATEGIES
            if r.usable(s, constant) and r.prefers(s) and (finite or not r.finite_filter)
        )
    row = next((r for r in STRATEGIES if r.name == forced), None)
    if row is None:
        raise CodegenError(
            f"unknown conv strategy {forced!r}; known: {', '.join(STRATEGY_NAMES)}",
            instruction=where,
        )
    if not row.usable(s, constant):
        what = "" if constant else " with a run-time filter"
        raise CodegenError(
            f"conv strategy {forced!r} does not apply to {s}{what}; "
            f"these do: {', '.join(applicable(s, constant))}",
            instruction=where,
        )
    if row.finite_filter and not finite:
        return next(r for r in STRATEGIES if r.name == "direct")
    return row


def conv_shape(
    N: int,
    C: int,
    H: int,
    W: int,
    K: int,
    R: int,
    S: int,
    *,
    stride: int | tuple[int, int] = 1,
    pad: tuple[int, int, int, int] | int = 0,
    dilation: int | tuple[int, int] = 1,
    group: int = 1,
) -> ConvShape:
    """A checked ConvShape (ValueError on channels not divisible by group or an empty output)."""
    pt, pl, pb, pr = (pad,) * 4 if isinstance(pad, int) else (int(v) for v in pad)
    p4 = (pt, pl, pb, pr)
    s = ConvShape(N, C, H, W, K, R, S, _pair(stride), p4, _pair(dilation), group)
    if group <= 0 or C % group or K % group:
        raise ValueError(f"conv: C={C} and K={K} must be multiples of group={group}")
    if min(s.stride) <= 0 or min(s.dilation) <= 0 or min(p4) < 0:
        raise ValueError(f"conv: bad stride/dilation/pads in {s}")
    if s.OH <= 0 or s.OW <= 0:
        raise ValueError(f"conv: empty output {s.OH}x{s.OW} for {s}")
    return s


def emit_conv2d(
    module: ir.Module,
    name: str,
    *,
    N: int,
    C: int,
    H: int,
    W: int,
    K: int,
    R: int,
    S: int,
    weights: np.ndarray,
    stride: int | tuple[int, int] = 1,
    pad: tuple[int, int, int, int] | int = 0,
    dilation: int | tuple[int, int] = 1,
    group: int = 1,
    layout: str = "NCHW",
    bias: bool = True,
    activation: Activation = None,
    isa: str | None = None,
    strategy: str | None = None,
    accumulate: bool = False,
) -> ConvKernel:
    """Emit ``void name(ptr x, ptr w_packed, ptr out [, ptr bias])`` for a float32 NCHW conv.

    ``weights``: the ONNX filter [K, C/group, R, S]; the returned ``packed_weights`` is what the
    kernel reads. ``pad`` is (top, left, bottom, right). ``activation``: None, 'relu',
    ('clip', lo, hi). ``strategy``: force a row of ``STRATEGIES`` (default: the table's choice).
    ``accumulate``: out = activation(out + conv) (the sum post-op).
    """
    if layout != "NCHW":
        raise ValueError(f"conv {name}: only NCHW is supported, not {layout}")
    s = conv_shape(N, C, H, W, K, R, S, stride=stride, pad=pad, dilation=dilation, group=group)
    if weights.shape != (K, C // group, R, S):
        raise ValueError(f"conv {name}: weights {weights.shape} != {(K, C // group, R, S)}")
    row = select(s, forced=strategy, weights=weights)
    cfg = conv_gemm_config(isa)
    fn, b = new_kernel(module, name, 4 if bias else 3)
    if row.hand_tiled:
        hand_tiled(fn)
    x, w, out = fn.args[:3]
    ptrs = ConvPtrs(x, w, out, fn.args[3] if bias else None)
    row.body(b, s, cfg, ptrs, Epilogue(activation, accumulate))
    b.ret_void()
    packed = row.pack(weights, s, cfg) if row.pack is not None else _pack_raw(weights, s, cfg)
    return ConvKernel(fn, packed, s, row.name)


__all__ = [
    "STRATEGIES",
    "STRATEGY_NAMES",
    "ConvKernel",
    "ConvPtrs",
    "ConvShape",
    "ConvStrategy",
    "applicable",
    "conv_shape",
    "emit_conv2d",
    "pack_conv_weights",
    "select",
    "skips_padding",
]
