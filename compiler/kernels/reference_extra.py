"""Reference kernels of the ops in `compiler/graph/ops_extra.py`: Mod, Round, Trilu, CumSum,
the gathers and scatters, ArgTopK, Einsum, GroupNorm and RMSNorm.

Part of `compiler.kernels.reference` (which registers `EXTRA_KERNELS`). Indices may be negative
(counted from the end of their dim); an index out of range raises ExecutionError naming it.
Normalisations accumulate in double, as LayerNorm's does.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from compiler.errors import ExecutionError
from compiler.graph.types import ElemKind

Kernel = Callable[[list[np.ndarray], dict[str, Any]], list[np.ndarray]]
EXTRA_KERNELS: dict[str, Kernel] = {}


def _k(name: str) -> Callable[[Kernel], Kernel]:
    def deco(fn: Kernel) -> Kernel:
        EXTRA_KERNELS[name] = fn
        return fn

    return deco


def normalize_indices(idx: np.ndarray, n: int | np.ndarray, what: str) -> np.ndarray:
    """int64 indices with negative ones counted from the end; raises when out of [-n, n)."""
    idx = np.asarray(idx).astype(np.int64)
    if idx.size and (np.any(idx < -n) or np.any(idx >= n)):
        raise ExecutionError(f"{what}: index out of range")
    return np.where(idx < 0, idx + n, idx)


@_k("Mod")
def mod(ins: list[np.ndarray], attrs: dict[str, Any]) -> list[np.ndarray]:
    a, b = ins
    if a.dtype.kind in "iub" and np.any(b == 0):
        # ONNX Runtime: "Integer modulo by zero" (numpy would give 0).
        raise ExecutionError("integer modulo by zero")
    with np.errstate(all="ignore"):
        # INT_MIN % -1 is 0 (numpy warns of an overflow there); float x % 0 is NaN.
        return [np.fmod(a, b) if attrs["fmod"] else np.mod(a, b)]


def _trig(fn: Callable[[np.ndarray], np.ndarray]) -> Kernel:
    def k(ins: list[np.ndarray], attrs: dict[str, Any]) -> list[np.ndarray]:
        (x,) = ins
        with np.errstate(all="ignore"):  # arcsin(2) is NaN, arctanh(1) inf: as numpy says
            return [fn(x if x.dtype.kind == "f" else x.astype(np.float64))]

    return k


for _name, _fn in {
    "Sin": np.sin,
    "Cos": np.cos,
    "Tan": np.tan,
    "Asin": np.arcsin,
    "Acos": np.arccos,
    "Atan": np.arctan,
    "Sinh": np.sinh,
    "Cosh": np.cosh,
    "Asinh": np.arcsinh,
    "Acosh": np.arccosh,
    "Atanh": np.arctanh,
}.items():
    EXTRA_KERNELS[_name] = _trig(_fn)


@_k("BitCast")
def bit_cast(ins: list[np.ndarray], attrs: dict[str, Any]) -> list[np.ndarray]:
    return [np.asarray(ins[0], order="C").view(ElemKind.parse(attrs["to"]).np_dtype)]


@_k("IsNaN")
def is_nan(ins: list[np.ndarray], attrs: dict[str, Any]) -> list[np.ndarray]:
    return [np.isnan(ins[0])]


@_k("IsInf")
def is_inf(ins: list[np.ndarray], attrs: dict[str, Any]) -> list[np.ndarray]:
    (x,) = ins
    pos = (x == np.inf) if attrs["detect_positive"] else np.zeros(x.shape, bool)
    neg = (x == -np.inf) if attrs["detect_negative"] else np.zeros(x.shape, bool)
    return [pos | neg]


def _bitwise(fn: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> Kernel:
    return lambda ins, attrs: [fn(ins[0], ins[1])]


EXTRA_KERNELS["BitwiseAnd"] = _bitwise(np.bitwise_and)
EXTRA_KERNELS["BitwiseOr"] = _bitwise(np.bitwise_or)
EXTRA_KERNELS["BitwiseXor"] = _bitwise(np.bitwise_xor)


@_k("BitwiseNot")
def bitwise_not(ins: list[np.ndarray], attrs: dict[str, Any]) -> list[np.ndarray]:
    return [np.invert(ins[0])]


@_k("BitShift")
def bit_shift(ins: list[np.ndarray], attrs: dict[str, Any]) -> list[np.ndarray]:
    """Shifts by a negative amount or by the width or more give 0 (-1 for a right shift of a
    negative signed value: the sign fills); left shifts of signed values wrap."""
    a, b = np.broadcast_arrays(*ins)
    bits = a.dtype.itemsize * 8
    past = (b < 0) | (b >= bits)
    safe = np.where(past, 0, b)
    if attrs["direction"] == "LEFT":
        u = np.dtype(f"u{a.dtype.itemsize}")
        out = np.left_shift(a.view(u), safe.astype(u)).view(a.dtype)
        return [np.where(past, a.dtype.type(0), out)]
    out = np.right_shift(a, safe.astype(a.dtype))
    fill = np.where(a < 0, a.dtype.type(-1), a.dtype.type(0)) if a.dtype.kind == "i" else 0
    return [np.where(past, fill, out)]


@_k("Round")
def round_(ins: list[np.ndarray], attrs: dict[str, Any]) -> list[np.ndarray]:
    (x,) = ins
    return [np.round(x) if x.dtype.kind == "f" else x]


@_k("Trilu")
def trilu(ins: list[np.ndarray], attrs: dict[str, Any]) -> list[np.ndarray]:
    (x,) = ins
    fn = np.triu if attrs["upper"] else np.tril
    return [fn(x, attrs["k"])]


def _scan(fn: Callable[..., np.ndarray], identity: int) -> Kernel:
    def k(ins: list[np.ndarray], attrs: dict[str, Any]) -> list[np.ndarray]:
        (x,) = ins
        ax = attrs["axis"] % x.ndim
        y = np.flip(x, ax) if attrs["reverse"] else x
        s = fn(y, axis=ax, dtype=x.dtype)
        if attrs["exclusive"]:
            first = np.full_like(np.take(s, [0], axis=ax), identity)
            s = np.concatenate([first, np.delete(s, -1, axis=ax)], axis=ax)
        return [np.flip(s, ax) if attrs["reverse"] else s]

    return k


EXTRA_KERNELS["CumSum"] = _scan(np.cumsum, 0)
EXTRA_KERNELS["CumProd"] = _scan(np.cumprod, 1)


def _full_index(idx: np.ndarray, ax: int) -> tuple[np.ndarray, ...]:
    """Index arrays addressing, for every position of `idx`, the element it names on `ax`."""
    grid: list[np.ndarray] = list(np.indices(idx.shape, sparse=True))
    grid[ax] = idx
    return tuple(grid)


@_k("GatherElements")
def gather_elements(ins: list[np.ndarray], attrs: dict[str, Any]) -> list[np.ndarray]:
    data, idx = ins
    ax = attrs["axis"] % data.ndim
    idx = normalize_indices(idx, data.shape[ax], "GatherElements")
    return [data[_full_index(idx, ax)]]


@_k("ScatterElements")
def scatter_elements(ins: list[np.ndarray], attrs: dict[str, Any]) -> list[np.ndarray]:
    data, idx, upd = ins
    ax = attrs["axis"] % data.ndim
    idx = normalize_indices(idx, data.shape[ax], "ScatterElements")
    out = data.copy()
    where = _full_index(idx, ax)
    _combine(out, where, upd, attrs["reduction"])
    return [out]


def _combine(out: np.ndarray, where: Any, upd: np.ndarray, reduction: str) -> None:
    """out[where] = upd, or combined with the reduction (duplicates: each applied in turn)."""
    if reduction == "none":
        out[where] = upd
        return
    ufunc = {"add": np.add, "mul": np.multiply, "max": np.maximum, "min": np.minimum}.get(reduction)
    if ufunc is None:
        raise ExecutionError(f"unknown scatter reduction '{reduction}'")
    with np.errstate(all="ignore"):
        ufunc.at(out, where, upd)


def _nd_tuples(dims: tuple[int, ...], idx: np.ndarray, what: str) -> np.ndarray:
    """Index tuples (last dim of idx) with negative entries normalised per dim of `dims`."""
    return normalize_indices(idx, np.asarray(dims[: idx.shape[-1]], dtype=np.int64), what)


@_k("GatherND")
def gather_nd(ins: list[np.ndarray], attrs: dict[str, Any]) -> list[np.ndarray]:
    data, idx = ins
    b = attrs["batch_dims"]
    q = idx.shape[-1]
    nb = int(np.prod(data.shape[:b], dtype=np.int64))
    d2 = data.reshape((nb,) + data.shape[b:])
    tuples = _nd_tuples(data.shape[b:], idx, "GatherND").reshape(nb, -1, q)
    tail = data.shape[b + q :]
    out = np.empty((nb, tuples.shape[1]) + tail, dtype=data.dtype)
    for j in range(nb):
        out[j] = d2[j][tuple(tuples[j].T)]
    return [out.reshape(idx.shape[:-1] + tail)]


@_k("ScatterND")
def scatter_nd(ins: list[np.ndarray], attrs: dict[str, Any]) -> list[np.ndarray]:
    data, idx, upd = ins
    out = data.copy()
    tuples = _nd_tuples(data.shape, idx, "ScatterND")
    q = idx.shape[-1]
    flat_t = tuples.reshape(-1, q)
    flat_u = upd.reshape((flat_t.shape[0],) + data.shape[q:])
    red = attrs["reduction"]
    for t, u in zip(flat_t, flat_u):  # in order: later updates of one slot win / combine
        _combine(out, tuple(t), u, red)
    return [out]


@_k("ArgTopK")
def arg_top_k(ins: list[np.ndarray], attrs: dict[str, Any]) -> list[np.ndarray]:
    (x,) = ins
    ax = attrs["axis"] % x.ndim
    if attrs["largest"]:
        # Descending values, ties by lower index: a stable ascending sort of an order-reversing
        # key (~x never overflows for integers, unlike -x).
        key = -x if x.dtype.kind == "f" else ~x
    else:
        key = x
    order = np.argsort(key, axis=ax, kind="stable")
    return [np.take(order, np.arange(attrs["k"]), axis=ax).astype(np.int64)]


@_k("MaxPoolArgmax")
def max_pool_argmax(ins: list[np.ndarray], attrs: dict[str, Any]) -> list[np.ndarray]:
    from compiler.kernels.reference_nn import _pad_nchw, _pool_geometry, _windows

    (x,) = ins
    n, c, h, w = x.shape
    dh, dw = attrs["dilations"]
    oh, ow, extra = _pool_geometry(x, attrs, (dh, dw))
    low = -np.inf if x.dtype.kind == "f" else np.iinfo(x.dtype).min
    kh, kw = attrs["kernel"]
    sh, sw = attrs["strides"]
    win = _windows(_pad_nchw(x, attrs["pads"], low, extra), kh, kw, sh, sw, dh, dw, oh, ow)
    rows = np.arange(h)[:, None] * (1 if attrs["storage_order"] else w)
    cols = np.arange(w)[None, :] * (h if attrs["storage_order"] else 1)
    where = _pad_nchw((rows + cols)[None, None].astype(np.int64), attrs["pads"], -1, extra)
    pos = _windows(where, kh, kw, sh, sw, dh, dw, oh, ow)[0, 0]  # (oh, ow, kh, kw)
    flat = win.reshape(n, c, oh, ow, kh * kw)
    best = np.argmax(flat, axis=-1)  # the first maximum in row-major window order
    idx = np.take_along_axis(pos.reshape(1, 1, oh, ow, kh * kw), best[..., None], axis=-1)[..., 0]
    base = (np.arange(n)[:, None] * c + np.arange(c)[None, :]) * (h * w)
    return [(idx + base[:, :, None, None]).astype(np.int64)]


@_k("Einsum")
def einsum(ins: list[np.ndarray], attrs: dict[str, Any]) -> list[np.ndarray]:
    return [np.asarray(np.einsum(attrs["equation"], *ins))]


@_k("GroupNorm")
def group_norm(ins: list[np.ndarray], attrs: dict[str, Any]) -> list[np.ndarray]:
    x, scale, bias = ins
    n, c = x.shape[:2]
    g = attrs["num_groups"]
    x64 = x.astype(np.float64).reshape(n, g, -1)
    mean = x64.mean(axis=2, keepdims=True)
    var = np.square(x64 - mean).mean(axis=2, keepdims=True)
    y = ((x64 - mean) / np.sqrt(var + attrs["epsilon"])).reshape(x.shape)
    pshape = (1, c) + (1,) * (x.ndim - 2)
    return [(y * scale.reshape(pshape) + bias.reshape(pshape)).astype(x.dtype)]


@_k("RMSNorm")
def rms_norm(ins: list[np.ndarray], attrs: dict[str, Any]) -> list[np.ndarray]:
    x, scale = ins
    ax = attrs["axis"] % x.ndim
    x64 = x.astype(np.float64)
    ms = np.square(x64).mean(axis=tuple(range(ax, x.ndim)), keepdims=True)
    return [(x64 / np.sqrt(ms + attrs["epsilon"]) * scale).astype(x.dtype)]


__all__ = ["EXTRA_KERNELS", "normalize_indices"]
