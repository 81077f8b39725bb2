"""Error-compensating rounding of int8 weights from calibration data (GPTQ / Optimal Brain
Quantization, Frantar et al. 2022).

A layer computes y = W x with W [rows, K] (a Conv's output channels by its C/g * R * S taps,
a FullyConnected's output columns by its K inputs). Round-to-nearest rounds each weight on its
own; GPTQ rounds the K columns one at a time and spreads each column's rounding error over the
columns not rounded yet, weighted by the inverse of the layer's input Hessian H = sum x x^T
over the calibration inputs (im2col rows for a Conv, rows for a FullyConnected), so that the
error of the layer's *output* on those inputs, tr(E H E^T), is what is minimised rather than
each weight's own error. The int8 grid is unchanged: one symmetric scale per output channel
(the max-abs scale round-to-nearest uses) and values in [-127, 127], so the kernels and both
executors' integer arithmetic are the same; only which int8 value each weight gets differs.

Everything here is float64 numpy. The Hessians are gathered while profiling
(`add_layer_hessians`, called by compiler/quantize.py's `profile_model`) and stored beside the
profile (compiler/quantization/profile.py); the quantizer (quantizer.py) rounds with them.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

WMAX = 127
#: Per-sample cap on the im2col rows a Conv adds to its Hessian (evenly spaced output
#: pixels): the Hessian's cost is rows * K^2 per sample; a few hundred rows per sample over a
#: few dozen samples estimate it as well as all pixels do for the layers that matter.
MAX_ROWS_PER_SAMPLE = 512
#: Layers with more than this many columns (K = C/g * R * S) are not given a Hessian: its
#: cost grows with K^2 to gather and K^3 to invert. 1280 covers every layer of MobileNetV2
#: (its classifier) and BERT-tiny, and ResNet-50's up to stage 3's 1x1 convs: with 2304 (its
#: stage-3 3x3 convs too) profile + quantize took 64 s of CPU instead of 32, for 0.2 dB more.
MAX_COLUMNS = 1280
#: The input rounding noise added to the Hessian, in units of the input's own rounding
#: (step^2 / 12 per value): 0 is plain GPTQ on exact inputs.
NOISE_FACTOR = 1.0


def conv_columns(
    x: np.ndarray, wshape: tuple[int, ...], attrs: dict[str, Any], limit: int | None = None
) -> np.ndarray:
    """im2col of a Conv's input: [G, Cg * R * S, P] float64, columns ordered as the filter's
    [Cg, R, S] flattening, P the output pixels of the whole batch (at most `limit` of them,
    evenly spaced, when given: only those are gathered). Padding reads zeros."""
    n, c, h, w = x.shape
    _, cg, kh, kw = wshape
    g = int(attrs["group"])
    sh, sw = attrs["strides"]
    dh, dw = attrs["dilations"]
    pt, pl, pb, pr = attrs["pads"]
    oh = (h + pt + pb - dh * (kh - 1) - 1) // sh + 1
    ow = (w + pl + pr - dw * (kw - 1) - 1) // sw + 1
    total = n * oh * ow
    pix = np.arange(total)
    if limit is not None and total > limit:
        pix = np.linspace(0, total - 1, limit).round().astype(np.int64)
    b, rest = np.divmod(pix, oh * ow)
    oy, ox = np.divmod(rest, ow)
    xp = np.zeros((n, c, h + pt + pb, w + pl + pr), np.float32)
    xp[:, :, pt : pt + h, pl : pl + w] = x
    cols = np.empty((c, kh, kw, pix.size), np.float64)
    for r in range(kh):
        for s in range(kw):
            cols[:, r, s] = xp[b, :, oy * sh + r * dh, ox * sw + s * dw].T
    return cols.reshape(g, cg * kh * kw, pix.size)


@dataclass
class LayerHessian:
    """sum x x^T over the calibration rows of one layer's input, per group: [G, K, K]."""

    h: np.ndarray
    rows: int = 0
    #: GPTQ's int8 weights by `weights_key` (one compile per fallback-search measurement
    #: would otherwise round the same layer again).
    memo: dict[bytes, np.ndarray] = field(default_factory=dict, repr=False, compare=False)

    def add(self, cols: np.ndarray) -> None:
        """`cols` [G, K, P]: P more input rows (as columns)."""
        self.h += np.matmul(cols, cols.transpose(0, 2, 1))
        self.rows += cols.shape[2]


@dataclass
class HessianSet:
    """The Hessians of a graph's weighted layers, by node name (the float node the quantizer
    rewrites), gathered from their input values during profiling."""

    layers: dict[str, LayerHessian] = field(default_factory=dict)

    def add(self, name: str, cols: np.ndarray) -> None:
        g, k, _ = cols.shape
        if name not in self.layers:
            self.layers[name] = LayerHessian(np.zeros((g, k, k), np.float64))
        self.layers[name].add(cols)

    def get(self, name: str) -> LayerHessian | None:
        return self.layers.get(name)

    def merge(self, other: HessianSet) -> None:
        for name, lh in other.layers.items():
            mine = self.layers.get(name)
            if mine is None:
                self.layers[name] = LayerHessian(lh.h.copy(), lh.rows)
            elif mine.h.shape == lh.h.shape:
                mine.h += lh.h
                mine.rows += lh.rows


def add_layer_hessians(
    hs: HessianSet, layers: Mapping[str, Mapping[str, Any]], values: Mapping[str, Any]
) -> None:
    """Adds one sample's input rows of every weighted layer to its Hessian: `layers` as
    `instrument-profile` records them (meta["profile_layers"]), `values` the profiled
    tensors by name. Layers wider than MAX_COLUMNS are left out; a sample whose rows hold
    inf / NaN is not added (it says nothing about the weights)."""
    for name, layer in layers.items():
        x = values.get(layer["input"])
        if x is None:
            continue
        x = np.asarray(x)
        wshape = tuple(int(d) for d in layer["weight_shape"])
        if layer["op"] == "Conv":
            if int(np.prod(wshape[1:])) > MAX_COLUMNS:
                continue
            cols = conv_columns(x, wshape, dict(layer), MAX_ROWS_PER_SAMPLE)
        else:
            k = wshape[0]
            if k > MAX_COLUMNS or x.size % k:
                continue
            cols = np.asarray(x, np.float64).reshape(-1, k).T[None]
        if np.all(np.isfinite(cols)):
            hs.add(name, cols)


def weights_key(w: np.ndarray, scales: np.ndarray, noise: float = 0.0) -> bytes:
    """A digest of a layer's float weights, scales and input noise (GPTQ's memo key)."""
    d = hashlib.sha256(np.float64(noise).tobytes())
    d.update(np.ascontiguousarray(w, np.float32).tobytes())
    d.update(np.ascontiguousarray(scales, np.float32).tobytes())
    d.update(repr(np.shape(w)).encode())
    return d.digest()


def gptq_rows(
    w: np.ndarray,
    h: np.ndarray,
    scales: np.ndarray,
    *,
    damp: float = 0.01,
    act_order: bool = True,
    block: int = 128,
    noise: float = 0.0,
) -> np.ndarray:
    """int8 [rows, K] for weights `w` [rows, K] on the grid of per-row `scales`, minimising
    the output error tr((W - Q) H (W - Q)^T) column by column (GPTQ with lazy block updates).

    `h` is the input Hessian [K, K] (sum of x x^T); `damp` times its mean diagonal is added
    to the diagonal (and inputs never seen get 1) so it can be inverted. `act_order`
    quantizes the columns of the largest input energy first. `noise` is added to the
    diagonal first: the summed power of the rounding noise the int8 model adds to each input
    (rows * step^2 / 12), which makes H the Hessian of the quantized input, so the rounding
    does not trade a smaller error on exact inputs for weights that amplify that noise."""
    w = np.asarray(w, np.float64)
    rows, k = w.shape
    s = np.asarray(scales, np.float64).reshape(rows, 1)
    hh = np.array(h, np.float64, copy=True)
    diag = np.diag(hh).copy()
    dead = diag <= 0
    hh[dead, dead] = 1.0
    hh[np.diag_indices(k)] += noise
    mean = float(np.mean(np.diag(hh)))
    hh[np.diag_indices(k)] += damp * mean
    perm = np.argsort(-np.diag(hh), kind="stable") if act_order else np.arange(k)
    hh = hh[perm][:, perm]
    ww = w[:, perm].copy()
    # Upper Cholesky factor of H^-1: row i holds the update weights of column i.
    try:
        hinv = np.linalg.cholesky(np.linalg.inv(hh)).T
    except np.linalg.LinAlgError:
        hh[np.diag_indices(k)] += mean  # far more damping: nearly round-to-nearest
        hinv = np.linalg.cholesky(np.linalg.inv(hh)).T
    q = np.zeros((rows, k), np.float64)
    for i0 in range(0, k, block):
        i1 = min(k, i0 + block)
        wb = ww[:, i0:i1].copy()
        eb = np.zeros_like(wb)
        hb = hinv[i0:i1, i0:i1]
        for j in range(i1 - i0):
            col = wb[:, j : j + 1]
            qc = np.clip(np.rint(col / s), -WMAX, WMAX)
            q[:, i0 + j : i0 + j + 1] = qc
            err = (col - qc * s) / hb[j, j]
            wb[:, j + 1 :] -= err * hb[j : j + 1, j + 1 :]
            eb[:, j : j + 1] = err
        ww[:, i1:] -= eb @ hinv[i0:i1, i1:]
    out = np.empty_like(q)
    out[:, perm] = q
    return out.astype(np.int8)


def gptq_grouped(w: np.ndarray, h: np.ndarray, scales: np.ndarray, **kw: Any) -> np.ndarray:
    """`gptq_rows` per group: `w` [rows, K] with rows split evenly over the G groups of `h`
    [G, K, K] (a grouped Conv's output channels read only their group's inputs). Depthwise
    layers (G = rows) are solved in one batched pass."""
    g = h.shape[0]
    rows, k = w.shape
    per = rows // g
    if g == 1:
        return gptq_rows(w, h[0], scales, **kw)
    if per == 1:
        damp, noise = kw.get("damp", 0.01), kw.get("noise", 0.0)
        return _gptq_depthwise(w, h, scales, damp=damp, noise=noise)
    out = np.empty((rows, k), np.int8)
    for i in range(g):
        sl = slice(i * per, (i + 1) * per)
        out[sl] = gptq_rows(w[sl], h[i], scales[sl], **kw)
    return out


def _gptq_depthwise(
    w: np.ndarray, h: np.ndarray, scales: np.ndarray, damp: float, noise: float = 0.0
) -> np.ndarray:
    """GPTQ for one row per group (depthwise): batched over the groups, natural column order."""
    g, k, _ = h.shape
    w = np.asarray(w, np.float64).copy()
    s = np.asarray(scales, np.float64).reshape(g)
    hh = np.array(h, np.float64, copy=True)
    idx = np.arange(k)
    diag = hh[:, idx, idx]
    dead = diag <= 0
    diag = np.where(dead, 1.0, diag) + noise
    hh[:, idx, idx] = diag
    hh[:, idx, idx] += damp * diag.mean(axis=1, keepdims=True)
    hinv = np.linalg.cholesky(np.linalg.inv(hh)).transpose(0, 2, 1)
    q = np.zeros((g, k))
    for j in range(k):
        qc = np.clip(np.rint(w[:, j] / s), -WMAX, WMAX)
        q[:, j] = qc
        err = (w[:, j] - qc * s) / hinv[:, j, j]
        w[:, j + 1 :] -= err[:, None] * hinv[:, j, j + 1 :]
    return q.astype(np.int8)


def output_error(w: np.ndarray, wd: np.ndarray, h: np.ndarray) -> float:
    """tr((W - Wd) H (W - Wd)^T): the summed squared output error on the Hessian's inputs."""
    e = np.asarray(w, np.float64) - np.asarray(wd, np.float64)
    return float(np.einsum("ik,kl,il->", e, h, e))


__all__ = [
    "NOISE_FACTOR",
    "add_layer_hessians",
    "weights_key",
    "MAX_COLUMNS",
    "MAX_ROWS_PER_SAMPLE",
    "HessianSet",
    "LayerHessian",
    "conv_columns",
    "gptq_grouped",
    "gptq_rows",
    "output_error",
]
