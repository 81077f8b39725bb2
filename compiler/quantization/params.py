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
clipped histogram and its quantized form is minimal, as TensorRT and Glow calibrate) and `mse`
(per tensor, the range of least expected squared error, clipping included).

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
CALIBRATIONS = ("minmax", "percentile", "kl", "mse")
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
    tp: TensorProfile,
    method: str = "minmax",
    schema: str = "asymmetric",
    percentile: float = 99.99,
    keep_max: bool = False,
) -> tuple[float, float]:
    """The real range to quantize a profiled tensor over. `keep_max`: the upper end is never
    clipped (a Softmax's input: its row maxima decide the result, and clipping them changes
    the probabilities by factors of e^(clipped amount)); the lower end is still calibrated."""
    check_calibration(method)
    if tp.empty:
        return 0.0, 0.0
    if method == "minmax" or tp.hist.size < 2 or tp.hist.sum() <= 0:
        return tp.min, tp.max
    if method == "mse":
        return _mse_range(tp, schema, keep_max)
    if method == "percentile":
        lo, hi = _percentile_range(tp, percentile)
    else:
        lo, hi = _kl_range(tp, symmetric=schema != "asymmetric")
    return (lo, tp.max) if keep_max else (lo, hi)


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


def _mse_range(tp: TensorProfile, schema: str, keep_max: bool = False) -> tuple[float, float]:
    """The clipping range of least expected squared error (TensorRT's and AIMET's MSE
    calibration), chosen per tensor from its histogram: every pair of candidate ends (bin
    edges, min and max included, so no clipping is a candidate) is scored as
    clip error + rounding error, refined around the best pair at single-bin steps.

    Values in bins are taken at the bin centres. Clipped values cost (x - end)^2; the others
    cost the uniform rounding noise step^2 / 12, except exact zeros (`tp.zeros`), which every
    grid represents exactly (a Relu's many zeros would otherwise pull the range in)."""
    edges = tp.bin_edges()
    h = tp.hist.astype(np.float64).copy()
    c = (edges[:-1] + edges[1:]) / 2
    if tp.zeros and edges[0] <= 0.0 <= edges[-1]:
        iz = min(int(np.searchsorted(edges, 0.0, side="right")) - 1, h.size - 1)
        h[iz] = max(0.0, h[iz] - tp.zeros)
    s0 = np.concatenate([[0.0], np.cumsum(h)])
    s1 = np.concatenate([[0.0], np.cumsum(h * c)])
    s2 = np.concatenate([[0.0], np.cumsum(h * c * c)])
    total = s0[-1]
    lo0, hi0 = min(tp.min, 0.0), max(tp.max, 0.0)
    levels = QMAX - QMIN

    def below(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Squared error of clipping everything under `a` up to it, and the count above."""
        k = np.searchsorted(c, a)
        return s2[k] - 2 * a * s1[k] + a * a * s0[k], total - s0[k]

    def above(b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        k = np.searchsorted(c, b, side="right")
        n = total - s0[k]
        return (s2[-1] - s2[k]) - 2 * b * (s1[-1] - s1[k]) + b * b * n, n

    def cost(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        """lo [L, 1], hi [1, H] -> [L, H] expected squared error."""
        if schema == "asymmetric" or (schema == "symmetric-uint8" and lo0 >= 0.0):
            step = (hi - lo) / levels
        else:  # offset 0: the wider side sets the step
            step = np.maximum(-lo / -QMIN, hi / QMAX)
            if schema == "power2":
                step = 2.0 ** np.ceil(np.log2(np.maximum(step, 1e-30)))
            lo, hi = QMIN * step, QMAX * step
        el, nl = below(lo)
        eh, nh = above(hi)
        inside = np.maximum(nl - nh, 0.0)
        return el + eh + inside * step * step / 12.0

    def ends(a: float, b: float, n: int) -> np.ndarray:
        return np.unique(np.concatenate([np.linspace(a, b, n), [a, b]]))

    width = (edges[-1] - edges[0]) / h.size
    if schema in ("symmetric", "power2") or (schema == "symmetric-uint8" and lo0 < 0.0):
        # One parameter: the step. Candidates from the largest magnitude down.
        amax = max(-lo0, hi0)
        ts = ends(amax / 64, amax, 512)
        if keep_max:
            ts = ts[ts >= hi0] if hi0 > 0.0 else ts
        err = cost(-ts[None, :] * (-QMIN / QMAX), ts[None, :])[0]
        t = float(ts[int(np.argmin(err))])
        return max(-t * (-QMIN / QMAX), tp.min), min(t, tp.max)
    los = ends(lo0, 0.0, 160) if lo0 < 0.0 else np.zeros(1)
    his = ends(0.0, hi0, 160) if hi0 > 0.0 and not keep_max else np.array([hi0])
    err = cost(los[:, None], his[None, :])
    i, j = np.unravel_index(int(np.argmin(err)), err.shape)
    # Refine at bin steps within one coarse step of the best pair.
    dl = (los[1] - los[0]) if los.size > 1 else 0.0
    dh = (his[1] - his[0]) if his.size > 1 else 0.0
    fl = ends(max(lo0, los[i] - dl), min(0.0, los[i] + dl), max(3, int(2 * dl / width) + 1))
    fh = ends(max(0.0, his[j] - dh), min(hi0, his[j] + dh), max(3, int(2 * dh / width) + 1))
    if lo0 >= 0.0:
        fl = np.zeros(1)
    if hi0 <= 0.0 or keep_max:
        fh = np.array([hi0])
    err = cost(fl[:, None], fh[None, :])
    i, j = np.unravel_index(int(np.argmin(err)), err.shape)
    return max(float(fl[i]), tp.min), min(float(fh[j]), tp.max)


def clip_bias(tp: TensorProfile, p: QParams) -> float:
    """The mean error E[clip(x) - x] that quantizing the profiled tensor with `p` makes by
    clipping (rounding is unbiased): what bias correction adds to the channel means."""
    if tp.empty or tp.hist.sum() <= 0:
        return 0.0
    lo, hi = p.range()
    edges = tp.bin_edges()
    c = (edges[:-1] + edges[1:]) / 2
    return float(np.sum(tp.hist * (np.clip(c, lo, hi) - c)) / tp.hist.sum())


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
    "clip_bias",
    "check_calibration",
    "check_schema",
    "choose_params",
    "quantize_bias",
    "quantize_weights",
]
