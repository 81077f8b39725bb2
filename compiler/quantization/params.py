"""Choosing scale and offset: schemas (Glow's), calibrations (min-max, percentile, KL), and the
quantization of weights and biases.

Schemas, for an activation range [lo, hi] (always widened to contain 0, so real 0 is exact):
- `asymmetric`: the range maps onto all 256 integers; offset anywhere in [-128, 127];
- `symmetric`: offset 0, scale = max(-lo / 128, hi / 127);
- `symmetric-uint8` (Glow's SymmetricWithUnsigned): a range with lo >= 0 uses offset -128 (all
  256 steps for [0, hi], an unsigned byte stored as int8); others are symmetric;
- `power2`: symmetric with the scale rounded up to a power of two.

Calibrations turn a tensor's profile into [lo, hi]: `minmax` (the values seen), `percentile`
(each tail cut at (100 - p)% of the values, p = 99.99 by default) and `kl` (the range whose
255-step quantization loses least information: the Kullback-Leibler divergence between the
clipped histogram and its quantized form is minimal, as TensorRT and Glow calibrate).

Weights are symmetric per output channel over [-127, 127] (offset 0, what the int8 kernels
take); biases are int32 in units of s_in * s_w.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from compiler.errors import QuantizationError
from compiler.graph.ops_quant import QMAX, QMIN
from compiler.quantization.profile import TensorProfile

SCHEMAS = ("asymmetric", "symmetric", "symmetric-uint8", "power2")
CALIBRATIONS = ("minmax", "percentile", "kl")
#: The integer range of weights: symmetric, so -w quantizes to -q.
WMAX = 127


@dataclass(frozen=True)
class QParams:
    """Scale and offset of a quantized tensor (real = scale * (q - offset))."""

    scale: float
    offset: int

    def range(self) -> tuple[float, float]:
        """The real values the integers span."""
        return self.scale * (QMIN - self.offset), self.scale * (QMAX - self.offset)


def check_schema(schema: str) -> str:
    if schema not in SCHEMAS:
        raise QuantizationError(f"unknown schema {schema!r}; schemas: {', '.join(SCHEMAS)}")
    return schema


def check_calibration(method: str) -> str:
    if method not in CALIBRATIONS:
        raise QuantizationError(
            f"unknown calibration {method!r}; calibrations: {', '.join(CALIBRATIONS)}"
        )
    return method


def _f32_scale(scale: float) -> float:
    """The scale as float32 holds it (the kernels compute in float32), never 0 or denormal."""
    s = float(np.float32(scale))
    if not math.isfinite(s):
        raise QuantizationError(f"scale {scale} does not fit float32")
    return max(s, 1e-30)


def choose_params(lo: float, hi: float, schema: str = "asymmetric") -> QParams:
    """Scale and offset for real values in [lo, hi] under `schema` (module docstring)."""
    check_schema(schema)
    lo, hi = min(float(lo), 0.0), max(float(hi), 0.0)
    if not (math.isfinite(lo) and math.isfinite(hi)):
        raise QuantizationError(f"cannot quantize the infinite range [{lo}, {hi}]")
    if hi == lo:  # an all-zero tensor: any scale represents it
        return QParams(1.0, 0)
    if schema == "symmetric-uint8" and lo >= 0.0:
        return QParams(_f32_scale(hi / (QMAX - QMIN)), QMIN)
    if schema in ("symmetric", "symmetric-uint8", "power2"):
        scale = max(lo / QMIN, hi / QMAX)
        if schema == "power2":
            scale = 2.0 ** math.ceil(math.log2(scale))
        return QParams(_f32_scale(scale), 0)
    scale = _f32_scale((hi - lo) / (QMAX - QMIN))
    # The zero point from whichever end gives the smaller rounding error (as Glow does).
    z_lo, z_hi = QMIN - lo / scale, QMAX - hi / scale
    z = z_lo if abs(QMIN) + abs(lo / scale) < abs(QMAX) + abs(hi / scale) else z_hi
    return QParams(scale, int(min(max(round(z), QMIN), QMAX)))


# -- calibration --------------------------------------------------------------------------------


def calibrate(
    tp: TensorProfile, method: str = "minmax", schema: str = "asymmetric", percentile: float = 99.99
) -> tuple[float, float]:
    """The real range to quantize a profiled tensor over."""
    check_calibration(method)
    if tp.empty:
        return 0.0, 0.0
    if method == "minmax" or tp.hist.size < 2 or tp.hist.sum() <= 0:
        return tp.min, tp.max
    if method == "percentile":
        return _percentile_range(tp, percentile)
    return _kl_range(tp, symmetric=schema != "asymmetric")


def _percentile_range(tp: TensorProfile, p: float) -> tuple[float, float]:
    if not 50.0 < p <= 100.0:
        raise QuantizationError(f"percentile {p} must be in (50, 100]")
    cdf = np.concatenate([[0.0], np.cumsum(tp.hist)])
    total = cdf[-1]
    edges = tp.bin_edges()
    tail = total * (100.0 - p) / 100.0
    lo = float(np.interp(tail, cdf, edges))
    hi = float(np.interp(total - tail, cdf, edges))
    return max(lo, tp.min), min(hi, tp.max)


def _kl(hist: np.ndarray, i: int, j: int, nq: int) -> float:
    """KL(P || Q): P the histogram clipped to bins [i, j) (outliers piled on the ends), Q the
    window quantized to `nq` levels and expanded back over P's non-empty bins."""
    win = hist[i:j]
    p = win.copy()
    p[0] += hist[:i].sum()
    p[-1] += hist[j:].sum()
    w = j - i
    starts = (np.arange(nq) * w) // nq
    sums = np.add.reduceat(win, starts)
    nonzero = np.add.reduceat((win > 0).astype(np.float64), starts)
    chunk = np.repeat(np.arange(nq), np.diff(np.append(starts, w)))
    q = np.where(p > 0, sums[chunk] / np.maximum(nonzero[chunk], 1.0), 0.0)
    ps, qs = p.sum(), q.sum()
    if ps <= 0 or qs <= 0:
        return math.inf
    p, q = p / ps, q / qs
    mask = p > 0
    return float(np.sum(p[mask] * np.log(p[mask] / np.maximum(q[mask], 1e-12))))


def _kl_range(tp: TensorProfile, symmetric: bool) -> tuple[float, float]:
    hist, edges = tp.hist, tp.bin_edges()
    n = hist.size
    step = max(1, n // 512)  # try windows a few bins apart: ~500 candidates per tensor
    if symmetric:
        # On |x|: fold the histogram around 0, then find the best threshold t (range [-t, t]).
        amax = max(abs(tp.hist_min), abs(tp.hist_max))
        centers = (edges[:-1] + edges[1:]) / 2
        folded, _ = np.histogram(np.abs(centers), bins=n, range=(0.0, amax), weights=hist)
        nq = (QMAX - QMIN + 1) // 2
        best, best_j = math.inf, n
        for j in range(n, nq - 1, -step):
            d = _kl(folded, 0, j, nq)
            if d < best:
                best, best_j = d, j
        t = amax * best_j / n
        return max(-t, tp.min), min(t, tp.max)
    nq = QMAX - QMIN + 1
    if n < nq:
        return tp.min, tp.max
    i, j = 0, n
    best, bi, bj = math.inf, 0, n
    while j - i >= nq:
        d = _kl(hist, i, j, nq)
        if d < best:
            best, bi, bj = d, i, j
        # Shrink from the side that loses least (Glow's rule), `step` bins at a time.
        left, right = hist[i : i + step].sum(), hist[j - step : j].sum()
        if left <= right:
            i += step
        else:
            j -= step
    return max(float(edges[bi]), tp.min), min(float(edges[bj]), tp.max)


# -- weights and biases ---------------------------------------------------------------------------


def quantize_weights(w: np.ndarray, axis: int | None = 0) -> tuple[np.ndarray, np.ndarray]:
    """Symmetric int8 weights over [-127, 127]: per slice along `axis` (None: one scale).

    Returns (int8 weights, float32 scales of shape [w.shape[axis]] or [1]).
    """
    w = np.asarray(w, dtype=np.float32)
    if axis is None:
        amax = np.array([np.max(np.abs(w), initial=0.0)], np.float32)
    else:
        moved = np.moveaxis(w, axis, 0).reshape(w.shape[axis], -1)
        amax = np.max(np.abs(moved), axis=1, initial=0.0).astype(np.float32)
    scales = np.where(amax > 0, amax / np.float32(WMAX), np.float32(1.0)).astype(np.float32)
    scales = np.array([_f32_scale(s) for s in scales], np.float32)
    shape = [1] * w.ndim
    if axis is not None:
        shape[axis] = -1
    q = _quantize_per(w, scales.reshape(shape))
    return q, scales


def _quantize_per(w: np.ndarray, scales: np.ndarray) -> np.ndarray:
    with np.errstate(all="ignore"):
        y = w / scales
    return np.clip(np.rint(y), -WMAX, WMAX).astype(np.int8)


def quantize_bias(b: np.ndarray, in_scale: float, w_scales: np.ndarray) -> np.ndarray:
    """int32 bias in units of s_in * s_w (per channel), rounded half to even and saturated."""
    bias_scale = (np.float32(in_scale) * np.asarray(w_scales, np.float32)).astype(np.float64)
    q = np.rint(np.asarray(b, np.float64) / bias_scale)
    info = np.iinfo(np.int32)
    return np.clip(q, info.min, info.max).astype(np.int32)


__all__ = [
    "CALIBRATIONS",
    "SCHEMAS",
    "QParams",
    "calibrate",
    "check_calibration",
    "check_schema",
    "choose_params",
    "quantize_bias",
    "quantize_weights",
]
