"""Reference kernels for the neural-network ops: convolutions, pooling, normalisation, resize.

Part of `compiler.kernels.reference` (which registers `NN_KERNELS` and applies the fused
activation of Conv); also holds the shared helper `erf`. Convolution and the pools go tap by tap:
each filter tap adds (or maxes) the input region it reads into the outputs that read it, so
padding is never materialised and never multiplied (a padded tap contributes nothing: with an
infinite weight, 0 * inf would be NaN, which onnxruntime's convolutions do not give). Conv
goes in blocks of output rows, so its temporaries stay under `CONV_BLOCK_BYTES` beyond its
output (the im2col matrix of a 100,000-pixel-wide U-Net was 9x its input; one tap over the
whole input still took an input-sized copy and an output-sized product). Accumulation is
float32 for float32 inputs, as onnxruntime's.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from compiler.errors import ExecutionError

Kernel = Callable[[list[np.ndarray], dict[str, Any]], list[np.ndarray]]
NN_KERNELS: dict[str, Kernel] = {}


def _k(name: str) -> Callable[[Kernel], Kernel]:
    def deco(fn: Kernel) -> Kernel:
        NN_KERNELS[name] = fn
        return fn

    return deco


# -- erf --------------------------------------------------------------------------------------

_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)
_SQRT_PI = math.sqrt(math.pi)


def erf(x: np.ndarray) -> np.ndarray:
    """erf in float64 to ~1e-15: a positive-term series below 2.5, erfc's continued fraction above.

    Vectorised; no scipy. Returns float64.
    """
    x = np.asarray(x, dtype=np.float64)
    out = np.empty_like(x)
    ax = np.abs(x)
    small = ax < 2.5
    if small.all():
        return _erf_series(x)
    out[small] = _erf_series(x[small])
    big = ~small
    with np.errstate(invalid="ignore"):
        xl = np.minimum(ax[big], 10.0)  # erfc(10) underflows double precision anyway
        f = xl.copy()
        for k in range(60, 0, -1):
            f = xl + (0.5 * k) / f
        erfc = np.exp(-xl * xl) / (_SQRT_PI * f)
    out[big] = np.where(np.isnan(x[big]), np.nan, np.sign(x[big]) * (1.0 - erfc))
    return out


def _erf_series(x: np.ndarray) -> np.ndarray:
    # erf(x) = 2/sqrt(pi) exp(-x^2) sum_n (2x^2)^n x / (1*3*...*(2n+1)); all terms share a sign.
    t = x.copy()
    s = x.copy()
    x2 = 2.0 * x * x
    for n in range(70):
        t *= x2 / (2 * n + 3)
        s += t
    return _TWO_OVER_SQRT_PI * np.exp(-x * x) * s


# -- convolution ------------------------------------------------------------------------------


def _windows(
    xp: np.ndarray, kh: int, kw: int, sh: int, sw: int, dh: int, dw: int, oh: int, ow: int
) -> np.ndarray:
    """View (N, C, OH, OW, KH, KW) of the padded NCHW input's dilated, strided windows."""
    eh, ew = dh * (kh - 1) + 1, dw * (kw - 1) + 1
    v = sliding_window_view(xp, (eh, ew), axis=(2, 3))
    return v[:, :, : (oh - 1) * sh + 1 : sh, : (ow - 1) * sw + 1 : sw, ::dh, ::dw]


def _pad_nchw(
    x: np.ndarray, pads: tuple[int, ...], value: float = 0.0, extra: tuple[int, int] = (0, 0)
) -> np.ndarray:
    pt, pl, pb, pr = pads
    if not (pt or pl or pb or pr or extra[0] or extra[1]):
        return x
    return np.pad(
        x,
        ((0, 0), (0, 0), (pt, pb + extra[0]), (pl, pr + extra[1])),
        constant_values=x.dtype.type(value),
    )


def _tap_span(
    size: int, out: int, stride: int, pad: int, dilation: int, t: int
) -> tuple[slice, slice]:
    """Along one axis, (outputs, inputs) of tap `t`: the outputs o whose coordinate
    o * stride + t * dilation - pad lies inside [0, size), and those coordinates."""
    off = t * dilation - pad
    lo = min(out, max(0, -(off // stride)))  # ceil(-off / stride)
    hi = max(lo, min(out, (size - 1 - off) // stride + 1))
    start = lo * stride + off
    return slice(lo, hi), slice(
        start, start + (hi - lo - 1) * stride + 1 if hi > lo else start, stride
    )


def _taps(
    x: np.ndarray, kernel: tuple[int, int], strides: Any, pads: Any, dil: Any, oh: int, ow: int
) -> Iterator[tuple[int, int, tuple[slice, ...], np.ndarray]]:
    """For every tap (r, s) that reads inside the input: (r, s, the index of the outputs that
    read it in an (N, C, OH, OW) array, the (N, C, h, w) view of what they read)."""
    h, w = x.shape[2:]
    for r in range(kernel[0]):
        orow, irow = _tap_span(h, oh, strides[0], pads[0], dil[0], r)
        if orow.start == orow.stop:
            continue
        for s in range(kernel[1]):
            ocol, icol = _tap_span(w, ow, strides[1], pads[1], dil[1], s)
            if ocol.start == ocol.stop:
                continue
            yield r, s, (slice(None), slice(None), orow, ocol), x[:, :, irow, icol]


#: Bytes of temporaries a convolution takes at a time beyond its output: it runs in blocks of
#: output rows whose input rows (copied when a tap's view is strided) and per-tap product fit
#: here, so the interpreter needs its arena plus about one output (mutant 1824 of the fuzzing
#: campaign, a U-Net 100,000 pixels wide, took 0.8 GB of temporaries for one conv). Blocks change
#: no sum: each output element adds the same taps in the same order.
CONV_BLOCK_BYTES = 32 << 20


@_k("Conv")
def conv(ins: list[np.ndarray], attrs: dict[str, Any]) -> list[np.ndarray]:
    x, w, b = ins
    n, c, h, wd = x.shape
    k, cg, kh, kw = w.shape
    sh, sw = attrs["strides"]
    dh, dw = attrs["dilations"]
    pt, pl, pb, pr = attrs["pads"]
    oh = (h + pt + pb - dh * (kh - 1) - 1) // sh + 1
    ow = (wd + pl + pr - dw * (kw - 1) - 1) // sw + 1
    out = np.zeros((n, k, oh, ow), dtype=np.result_type(x, w))
    row_bytes = out.itemsize * n * (c * sh * wd + k * ow)
    rows = max(1, CONV_BLOCK_BYTES // max(row_bytes, 1))
    for o0 in range(0, oh, rows):
        o1 = min(oh, o0 + rows)
        lo = o0 * sh - pt  # the input rows the block's taps read: [lo, hi)
        hi = (o1 - 1) * sh - pt + dh * (kh - 1) + 1
        top = max(lo, 0)
        _conv_rows(x[:, :, top : max(top, min(hi, h))], w, out[:, :, o0:o1], attrs, top - lo)
    out += b.reshape(1, k, 1, 1)
    return [out]


def _conv_rows(
    x: np.ndarray, w: np.ndarray, out: np.ndarray, attrs: dict[str, Any], pad_top: int
) -> None:
    """Adds into `out` (a block of output rows) the convolution of `x` (the input rows the
    block reads; `pad_top` padded rows above them)."""
    n = x.shape[0]
    k, cg, kh, kw = w.shape
    g = attrs["group"]
    oh, ow = out.shape[2:]
    kg = k // g
    depthwise = cg == 1 and kg == 1
    # (G, Kg, Cg) per tap: out[n, g, kg, p] += sum_c w[g, kg, c] * x[n, g, c, p]
    wg = w.reshape(g, kg, cg, kh, kw)
    outg = out.reshape(n, g, kg, oh, ow)  # splits one axis: a view of the block, never a copy
    assert out.size == 0 or np.may_share_memory(outg, out)
    pads = (pad_top, attrs["pads"][1])
    taps = _taps(x, (kh, kw), attrs["strides"], pads, attrs["dilations"], oh, ow)
    # Every tap's (G, Kg, Cg) weights made contiguous once: numpy's matmul copies a strided
    # matrix operand into a contiguous one for every call (and every batch), then runs the same
    # GEMM, which made the light CNNs' 3x3 convs about 4x slower than the GEMM itself. Only
    # where matmul takes its matrix-by-matrix path (no core dimension of 1): its vector paths
    # depend on the operand's strides, so they keep the strided weights they always had.
    w_taps = np.ascontiguousarray(wg.transpose(3, 4, 0, 1, 2)) if kg > 1 and cg > 1 else None
    for r, s, at, xv in taps:
        if depthwise:
            out[at] += xv * w[None, :, 0, r, s, None, None]
            continue
        th, tw = xv.shape[2:]
        cols = xv.reshape(n, g, cg, th * tw)  # a copy only when the view is strided
        wrs = w_taps[r, s] if w_taps is not None and th * tw > 1 else wg[:, :, :, r, s]
        part = np.matmul(wrs, cols).reshape(n, g, kg, th, tw)
        outg[(slice(None), *at)] += part


@_k("ConvTranspose")
def conv_transpose(ins: list[np.ndarray], attrs: dict[str, Any]) -> list[np.ndarray]:
    x, w, b = ins
    n, c, h, wd = x.shape
    _, kg, kh, kw = w.shape
    g = attrs["group"]
    cg = c // g
    k = kg * g
    sh, sw = attrs["strides"]
    dh, dw = attrs["dilations"]
    pt, pl, pb, pr = attrs["pads"]
    oph, opw = attrs["output_padding"]
    # cols[n, g, h*w, kg*kh*kw] = sum_c x[n, g, c, h*w] * w[g, c, kg*kh*kw]
    xm = x.reshape(n, g, cg, h * wd).transpose(0, 1, 3, 2)
    wm = w.reshape(g, cg, kg * kh * kw)
    cols = np.matmul(xm, wm).reshape(n, g, h, wd, kg, kh, kw)
    full_h = sh * (h - 1) + dh * (kh - 1) + 1 + oph
    full_w = sw * (wd - 1) + dw * (kw - 1) + 1 + opw
    full = np.zeros((n, g, kg, full_h, full_w), dtype=cols.dtype)
    for r in range(kh):
        for s in range(kw):
            tap = cols[:, :, :, :, :, r, s].transpose(0, 1, 4, 2, 3)
            full[
                :,
                :,
                :,
                r * dh : r * dh + sh * (h - 1) + 1 : sh,
                s * dw : s * dw + sw * (wd - 1) + 1 : sw,
            ] += tap
    oh, ow = full_h - pt - pb, full_w - pl - pr
    # Negative pads (allowed by the formula) would extend the output with zeros.
    if pt < 0 or pl < 0 or pb < 0 or pr < 0:
        full = np.pad(
            full, ((0, 0),) * 3 + ((max(-pt, 0), max(-pb, 0)), (max(-pl, 0), max(-pr, 0)))
        )
        pt, pl = max(pt, 0), max(pl, 0)
    out = np.ascontiguousarray(full[:, :, :, pt : pt + oh, pl : pl + ow]).reshape(n, k, oh, ow)
    out += b.reshape(1, k, 1, 1)
    return [out]


# -- pooling ----------------------------------------------------------------------------------


def _pool_geometry(
    x: np.ndarray, attrs: dict[str, Any], dil: tuple[int, int]
) -> tuple[int, int, tuple[int, int]]:
    n, c, h, w = x.shape
    kh, kw = attrs["kernel"]
    sh, sw = attrs["strides"]
    pt, pl, pb, pr = attrs["pads"]
    outs, extra = [], []
    for size, k, s, p0, p1, d in ((h, kh, sh, pt, pb, dil[0]), (w, kw, sw, pl, pr, dil[1])):
        eff = d * (k - 1) + 1
        if attrs["ceil_mode"]:
            o = -(-(size + p0 + p1 - eff) // s) + 1
            if (o - 1) * s >= size + p0:
                o -= 1
        else:
            o = (size + p0 + p1 - eff) // s + 1
        outs.append(o)
        extra.append(max(0, (o - 1) * s + eff - (size + p0 + p1)))
    return outs[0], outs[1], (extra[0], extra[1])


@_k("MaxPool")
def max_pool(ins: list[np.ndarray], attrs: dict[str, Any]) -> list[np.ndarray]:
    (x,) = ins
    dil = attrs["dilations"]
    oh, ow, _ = _pool_geometry(x, attrs, dil)
    low = -np.inf if x.dtype.kind == "f" else np.iinfo(x.dtype).min
    out = np.full(x.shape[:2] + (oh, ow), low, dtype=x.dtype)
    for _r, _s, at, xv in _taps(x, attrs["kernel"], attrs["strides"], attrs["pads"], dil, oh, ow):
        np.maximum(out[at], xv, out=out[at])  # NaN propagates, as a window's max does
    return [out]


@_k("AvgPool")
def avg_pool(ins: list[np.ndarray], attrs: dict[str, Any]) -> list[np.ndarray]:
    (x,) = ins
    oh, ow, _ = _pool_geometry(x, attrs, (1, 1))
    sums = np.zeros(x.shape[:2] + (oh, ow), dtype=x.dtype)
    for _r, _s, at, xv in _taps(
        x, attrs["kernel"], attrs["strides"], attrs["pads"], (1, 1), oh, ow
    ):
        sums[at] += xv
    return [sums / avg_pool_counts(x.shape, attrs, x.dtype)]


def avg_pool_counts(shape: tuple[int, ...], attrs: dict[str, Any], dtype: Any) -> np.ndarray:
    """The divisor of each output position of AvgPool (and QAvgPool): positions inside the
    input, or (count_include_pad) inside input + explicit pads; the ceil_mode overhang never
    counts (onnxruntime's rule)."""
    oh, ow, extra = _pool_geometry(np.empty(shape, dtype=np.float32), attrs, (1, 1))
    kh, kw = attrs["kernel"]
    sh, sw = attrs["strides"]
    h, w = shape[2:]
    pads = attrs["pads"]
    pt, pl, pb, pr = pads
    if attrs["count_include_pad"]:
        mask = np.zeros((h + pt + pb + extra[0], w + pl + pr + extra[1]), dtype=dtype)
        mask[: h + pt + pb, : w + pl + pr] = 1
    else:
        mask = _pad_nchw(np.ones((1, 1, h, w), dtype=dtype), pads, 0.0, extra)[0, 0]
    counts = _windows(mask[None, None], kh, kw, sh, sw, 1, 1, oh, ow).sum(axis=(4, 5))[0, 0]
    return np.maximum(counts, 1)


@_k("GlobalAvgPool")
def global_avg_pool(ins: list[np.ndarray], attrs: dict[str, Any]) -> list[np.ndarray]:
    (x,) = ins
    return [np.mean(x, axis=tuple(range(2, x.ndim)), keepdims=True)]


@_k("GlobalMaxPool")
def global_max_pool(ins: list[np.ndarray], attrs: dict[str, Any]) -> list[np.ndarray]:
    (x,) = ins
    return [np.max(x, axis=tuple(range(2, x.ndim)), keepdims=True)]


# -- normalisation ----------------------------------------------------------------------------


@_k("BatchNorm")
def batch_norm(ins: list[np.ndarray], attrs: dict[str, Any]) -> list[np.ndarray]:
    x, scale, bias, mean, var = ins
    shape = (1, -1) + (1,) * (x.ndim - 2)
    t = x.dtype.type
    inv = scale / np.sqrt(var + t(attrs["epsilon"]))
    return [(x - mean.reshape(shape)) * inv.reshape(shape) + bias.reshape(shape)]


@_k("LayerNorm")
def layer_norm(ins: list[np.ndarray], attrs: dict[str, Any]) -> list[np.ndarray]:
    # onnxruntime accumulates mean and variance in double; so do we, then cast back.
    x, scale, bias = ins
    ax = attrs["axis"] % x.ndim
    axes = tuple(range(ax, x.ndim))
    x64 = x.astype(np.float64)
    mean = x64.mean(axis=axes, keepdims=True)
    var = np.square(x64 - mean).mean(axis=axes, keepdims=True)
    y = (x64 - mean) / np.sqrt(var + attrs["epsilon"])
    return [(y * scale + bias).astype(x.dtype)]


@_k("LRN")
def lrn(ins: list[np.ndarray], attrs: dict[str, Any]) -> list[np.ndarray]:
    (x,) = ins
    size = attrs["size"]
    c = x.shape[1]
    lo, hi = (size - 1) // 2, size - 1 - (size - 1) // 2
    sq = np.square(x.astype(np.float64))
    csum = np.cumsum(np.pad(sq, ((0, 0), (1, 0)) + ((0, 0),) * (x.ndim - 2)), axis=1)
    idx = np.arange(c)
    top = np.minimum(idx + hi, c - 1) + 1
    bot = np.maximum(idx - lo, 0)
    s = np.take(csum, top, axis=1) - np.take(csum, bot, axis=1)
    y = x / (attrs["bias"] + attrs["alpha"] / size * s) ** attrs["beta"]
    return [y.astype(x.dtype)]


# -- resize -----------------------------------------------------------------------------------


def _source_coords(
    o: int, i: int, ctm: str, scale: float | None = None, roi: tuple[float, float] = (0.0, 1.0)
) -> np.ndarray:
    """Input coordinate of every output index along one axis (scale = out / in unless given;
    `roi`: tf_crop_and_resize's start and end, as fractions of the input)."""
    xo = np.arange(o, dtype=np.float64)
    if scale is None:
        scale = o / i
    if ctm == "tf_crop_and_resize":
        out_w = scale * i
        span = (roi[1] - roi[0]) * (i - 1)
        xs = np.full(o, span / 2) if out_w == 1 else xo * span / (out_w - 1)
        return xs + roi[0] * (i - 1)
    if ctm == "half_pixel_symmetric":
        # Differs from half_pixel only when the scale is not exactly out/in.
        offset = i / 2 * (1 - o / (scale * i))
        return offset + (xo + 0.5) / scale - 0.5
    if ctm == "half_pixel":
        return (xo + 0.5) / scale - 0.5
    if ctm == "pytorch_half_pixel":
        return (xo + 0.5) / scale - 0.5 if o > 1 else np.zeros(o)
    if ctm == "align_corners":
        out_w = scale * i  # fractional when the scale is not exactly out/in, as in ONNX
        return xo * (i - 1) / (out_w - 1) if out_w != 1 else np.zeros(o)
    if ctm == "asymmetric":
        return xo / scale
    if ctm == "tf_half_pixel_for_nn":
        return (xo + 0.5) / scale
    raise ExecutionError(
        f"Resize: coordinate_transformation_mode '{ctm}' is not supported "
        "(half_pixel, pytorch_half_pixel, align_corners, asymmetric, "
        "tf_half_pixel_for_nn)"
    )


def _nearest(xs: np.ndarray, mode: str) -> np.ndarray:
    if mode == "round_prefer_floor":
        return np.where(xs - np.floor(xs) == 0.5, np.floor(xs), np.round(xs))
    if mode == "round_prefer_ceil":
        return np.where(xs - np.floor(xs) == 0.5, np.ceil(xs), np.round(xs))
    if mode == "floor":
        return np.floor(xs)
    if mode == "ceil":
        return np.ceil(xs)
    raise ExecutionError(f"Resize: unknown nearest_mode '{mode}'")


def _cubic_weights(t: np.ndarray, a: float) -> np.ndarray:
    """Weights of taps floor(x)-1 .. floor(x)+2 for fractional offsets t (Keys kernel)."""

    def near(d: np.ndarray) -> np.ndarray:  # |d| <= 1
        return ((a + 2) * d - (a + 3)) * d * d + 1

    def far(d: np.ndarray) -> np.ndarray:  # 1 < |d| < 2
        return ((a * d - 5 * a) * d + 8 * a) * d - 4 * a

    return np.stack([far(t + 1), near(t), near(1 - t), far(2 - t)], axis=1)


def _axis_taps(o: int, i: int, attrs: dict[str, Any], ax: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """(indices, weights) of shape (o, taps) for one axis. Output positions whose source lies
    outside the input under tf_crop_and_resize get indices -1 (extrapolation_value there)."""
    ctm = attrs["coordinate_transformation_mode"]
    roi = attrs.get("roi") or ()
    rank = len(roi) // 2
    span = (roi[ax], roi[ax + rank]) if roi else (0.0, 1.0)
    scale = attrs["scales"][ax] if attrs.get("scales") else None
    xs = _source_coords(o, i, ctm, scale, span)
    idx, wts = _taps_at(xs, o, i, attrs, o / i if scale is None else scale)
    if ctm == "tf_crop_and_resize":
        idx = np.where(((xs < 0) | (xs > i - 1))[:, None], -1, idx)
    return idx, wts


def _taps_at(
    xs: np.ndarray, o: int, i: int, attrs: dict[str, Any], scale: float
) -> tuple[np.ndarray, np.ndarray]:
    mode = attrs["mode"]
    if mode != "nearest" and attrs.get("antialias") and scale < 1:
        return _antialias_taps(xs, i, attrs, scale)
    if mode == "nearest":
        idx = np.clip(_nearest(xs, attrs["nearest_mode"]), 0, i - 1).astype(np.int64)
        return idx[:, None], np.ones((o, 1))
    if mode == "linear":
        xs = np.clip(xs, 0, i - 1)
        i0 = np.floor(xs).astype(np.int64)
        i1 = np.minimum(i0 + 1, i - 1)
        t = xs - i0
        return np.stack([i0, i1], 1), np.stack([1 - t, t], 1)
    if mode == "cubic":
        f = np.floor(xs)
        t = xs - f
        raw = f.astype(np.int64)[:, None] + np.arange(-1, 3)[None, :]
        wts = _cubic_weights(t, attrs["cubic_coeff_a"])
        if attrs["exclude_outside"]:
            wts = np.where((raw < 0) | (raw >= i), 0.0, wts)
            wts = wts / wts.sum(axis=1, keepdims=True)
        return np.clip(raw, 0, i - 1), wts
    raise ExecutionError(f"Resize: unknown mode '{mode}' (nearest, linear, cubic)")


def _antialias_taps(
    xs: np.ndarray, i: int, attrs: dict[str, Any], scale: float
) -> tuple[np.ndarray, np.ndarray]:
    """Downsampling linear/cubic taps with the filter stretched by 1/scale (ONNX antialias):
    the kernel is evaluated at scale * (tap - ratio) over a window widened to match, and the
    weights of each output position are normalised. The window starts left of the source
    coordinate: an integer coordinate counts as ratio 1 from the sample before it."""
    base = np.where(xs == np.floor(xs), xs - 1, np.floor(xs)).astype(np.int64)
    ratio = xs - base
    if attrs["mode"] == "linear":
        first = int(np.floor(-1 / scale) + 1)
    else:
        first = int(np.floor(-2 / scale) + 1)
    offsets = np.arange(first, 2 - first)
    u = np.abs(scale * (offsets[None, :] - ratio[:, None]))
    if attrs["mode"] == "linear":
        w = np.clip(1 - u, 0, 1)
    else:
        a = attrs["cubic_coeff_a"]
        w = np.where(
            u <= 1,
            ((a + 2) * u - (a + 3)) * u * u + 1,
            np.where(u < 2, ((a * u - 5 * a) * u + 8 * a) * u - 4 * a, 0.0),
        )
    raw = base[:, None] + offsets[None, :]
    w = w / w.sum(axis=1, keepdims=True)
    if attrs["exclude_outside"]:
        w = np.where((raw < 0) | (raw >= i), 0.0, w)
        w = w / w.sum(axis=1, keepdims=True)
    return np.clip(raw, 0, i - 1), w


def axis_unchanged(i: int, o: int, attrs: dict[str, Any], ax: int) -> bool:
    """Resize leaves axis `ax` as it is (the kernels skip it)."""
    scaled = bool(attrs.get("scales")) and attrs["scales"][ax] != 1.0
    ctm = attrs["coordinate_transformation_mode"]
    return i == o and not scaled and ctm not in ("tf_half_pixel_for_nn", "tf_crop_and_resize")


@_k("Resize")
def resize(ins: list[np.ndarray], attrs: dict[str, Any]) -> list[np.ndarray]:
    (x,) = ins
    out_shape = tuple(attrs["out_shape"])
    y = x if attrs["mode"] == "nearest" else x.astype(np.float64)
    for ax, (i, o) in enumerate(zip(x.shape, out_shape)):
        if axis_unchanged(i, o, attrs, ax):
            continue
        idx, wts = _axis_taps(o, i, attrs, ax)
        outside = idx[:, 0] < 0
        idx = np.maximum(idx, 0)
        bshape = [1] * y.ndim
        bshape[ax] = o
        if idx.shape[1] == 1:
            y = np.take(y, idx[:, 0], axis=ax)
        else:
            acc: np.ndarray | None = None
            for t in range(idx.shape[1]):
                term = np.take(y, idx[:, t], axis=ax) * wts[:, t].reshape(bshape)
                acc = term if acc is None else acc + term
            assert acc is not None  # at least one tap
            y = acc
        if outside.any():
            y = np.where(outside.reshape(bshape), attrs["extrapolation_value"], y)
    return [np.asarray(y).astype(x.dtype, copy=False)]
