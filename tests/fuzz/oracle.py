"""The numeric oracle of the campaign: onnxruntime, a float64 `onnx.reference` run, and the
comparison rule (rtol 1e-4, NaN positions are data) that decides a wrong answer.

Where our executors disagree with onnxruntime, a float64 run of the same graph through
`onnx.reference` decides: agreeing with it is right even when onnxruntime is off. Where that
float64 run holds a value float32 cannot (beyond FLT_MAX), the same run rounded to float32
after every op decides instead (the class float32-range, docs/fuzzing.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, numpy_helper

RTOL = 1e-4
#: absolute slack, relative to the largest finite magnitude of the reference output: float32
#: sums of a few hundred terms legitimately differ by ~1e-6 of their scale between kernels
ATOL_SCALE = 1e-5


@dataclass
class Comparison:
    ok: bool
    max_abs: float = 0.0
    max_rel: float = 0.0
    note: str = ""


#: Elements compared at a time: float64 copies of a whole large output (a Tile or Expand to
#: hundreds of MiB) ran the oracle itself out of memory under the case's cap.
CHUNK = 1 << 20


def compare(ours: np.ndarray, ref: np.ndarray, rtol: float = RTOL) -> Comparison:
    """`ours` matches `ref`: same shape, NaN at the same places, finite values within
    rtol (plus a small absolute slack scaled by ref's magnitude), infinities equal."""
    ours, ref = np.asarray(ours), np.asarray(ref)
    if ours.shape != ref.shape:
        return Comparison(False, note=f"shape {list(ours.shape)} vs {list(ref.shape)}")
    if ours.size == 0:
        return Comparison(True)
    a, b = ours.reshape(-1), ref.reshape(-1)
    parts = range(0, a.size, CHUNK)
    scale = max(_finite_max(b[i : i + CHUNK]) for i in parts)
    out = Comparison(True)
    for i in parts:
        c = _compare(a[i : i + CHUNK], b[i : i + CHUNK], rtol, scale)
        if not c.ok and out.ok:
            out = Comparison(False, note=c.note)
        out.max_abs, out.max_rel = max(out.max_abs, c.max_abs), max(out.max_rel, c.max_rel)
    return out


def _finite_max(b: np.ndarray) -> float:
    if b.dtype == np.bool_ or b.dtype.kind in "iu":
        return 0.0
    f = np.abs(b[np.isfinite(b)].astype(np.float64))
    return float(f.max()) if f.size else 0.0


def _compare(ours: np.ndarray, ref: np.ndarray, rtol: float, scale: float) -> Comparison:
    if ours.dtype == np.bool_ or ref.dtype == np.bool_ or ref.dtype.kind in "iu":
        bad = int(np.sum(ours.astype(np.float64) != ref.astype(np.float64)))
        return Comparison(bad == 0, float(bad), 0.0, f"{bad} elements differ" if bad else "")
    a, b = ours.astype(np.float64), ref.astype(np.float64)
    nan_a, nan_b = np.isnan(a), np.isnan(b)
    if (nan_a != nan_b).any():
        return Comparison(
            False,
            note=f"NaN at {int((nan_a & ~nan_b).sum())} extra / {int((nan_b & ~nan_a).sum())} missing places",
        )
    inf_b = np.isinf(b)
    if (np.isinf(a) != inf_b).any() or (a[inf_b] != b[inf_b]).any():
        return Comparison(False, note="infinities differ")
    fin = ~(nan_b | inf_b)
    if not fin.any():
        return Comparison(True)
    a, b = a[fin], b[fin]
    diff = np.abs(a - b)
    tol = rtol * np.abs(b) + ATOL_SCALE * max(scale, 1e-6)
    rel = diff / np.maximum(np.abs(b), 1e-30)
    return Comparison(bool((diff <= tol).all()), float(diff.max()), float(rel.max()))


def run_onnxruntime(
    model: bytes | onnx.ModelProto, feeds: dict[str, np.ndarray]
) -> dict[str, np.ndarray]:
    import onnxruntime as ort

    ort.set_default_logger_severity(3)
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    data = model if isinstance(model, bytes) else model.SerializeToString()
    sess = ort.InferenceSession(data, so, providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    return dict(zip(names, sess.run(None, feeds)))


# (op, input index) pairs that stay float32 in the float64 model: their type is fixed
_FLOAT32_ONLY = {("Resize", 2), ("Upsample", 1)}


def to_float64(model: onnx.ModelProto) -> onnx.ModelProto:
    """A copy of `model` computing in float64: every float tensor, type and Cast target."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    g = m.graph
    keep = {
        n.input[i]
        for n in g.node
        for op, i in _FLOAT32_ONLY
        if n.op_type == op and len(n.input) > i
    }
    for vi in list(g.input) + list(g.output) + list(g.value_info):
        tt = vi.type.tensor_type
        if tt.elem_type == TensorProto.FLOAT:
            tt.elem_type = TensorProto.DOUBLE
    for t in g.initializer:
        if t.data_type == TensorProto.FLOAT and t.name not in keep:
            t.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(t).astype(np.float64), t.name))
    for n in g.node:
        for a in n.attribute:
            if a.type == onnx.AttributeProto.TENSOR and a.t.data_type == TensorProto.FLOAT:
                if n.op_type == "Constant" and n.output[0] in keep:
                    continue
                a.t.CopyFrom(
                    numpy_helper.from_array(numpy_helper.to_array(a.t).astype(np.float64), a.t.name)
                )
            if (
                n.op_type in ("Cast", "EyeLike", "RandomNormal")
                and a.name in ("to", "dtype")
                and a.i == TensorProto.FLOAT
            ):
                a.i = TensorProto.DOUBLE
    return m


def onnx_slice_bounds(d: int, start: int, end: int, step: int) -> tuple[int, int]:
    """(start, end) of ONNX Slice along a dim of size `d`, clamped as its spec says (unlike
    Python: a negative step clamps a start before the first element to 0, not to -1)."""
    start += d if start < 0 else 0
    end += d if end < 0 else 0
    if step > 0:
        return min(max(start, 0), d), min(max(end, 0), d)
    return min(max(start, 0), d - 1), min(max(end, -1), d - 1)


def _reference_fixes() -> list[type]:
    """Ops whose `onnx.reference` implementation is wrong for some inputs, redone here."""
    from onnx.reference.op_run import OpRun

    class GlobalMaxPool(OpRun):
        # onnx 1.23's drops the spatial dim of a 3-D input ([1, C, L] -> [1, C])
        def _run(self, x):  # type: ignore[override]
            return (x.max(axis=tuple(range(2, x.ndim)), keepdims=True),)

    class LRN(OpRun):
        # onnx 1.23's loops over the batch dim instead of the channels
        def _run(self, x, alpha=None, beta=None, bias=None, size=None):  # type: ignore[override]
            c = x.shape[1]
            lo, hi = (size - 1) // 2, -(-(size - 1) // 2)
            sq = np.zeros_like(x)
            for i in range(c):
                sq[:, i] = np.sum(x[:, max(0, i - lo) : min(c, i + hi + 1)] ** 2, axis=1)
            return ((x / (bias + alpha / size * sq) ** beta).astype(x.dtype),)

    from onnx.reference.ops.op_conv_transpose import ConvTranspose as _ConvTranspose

    class ConvTranspose(_ConvTranspose):
        # onnx 1.23's grouped case slices the filter and the bias wrongly: one group at a time
        def _run(self, X, W, B=None, **attrs):  # type: ignore[override]
            g = attrs.get("group") or 1
            if g == 1:
                return super()._run(X, W, B, **attrs)
            c, m = X.shape[1] // g, W.shape[1]
            parts = [
                super(ConvTranspose, self)._run(
                    X[:, k * c : (k + 1) * c],
                    W[k * c : (k + 1) * c],
                    None if B is None else B[k * m : (k + 1) * m],
                    **{**attrs, "group": 1},
                )[0]
                for k in range(g)
            ]
            return (np.concatenate(parts, axis=1),)

    class BatchNormalization(OpRun):
        # onnx 1.23's opset 9-13 version reads momentum's default as "training mode"
        def _run(self, x, scale, bias, mean, var, epsilon=None, **_):  # type: ignore[override]
            shape = (1, -1) + (1,) * (x.ndim - 2)
            r = [a.reshape(shape) for a in (scale, bias, mean, var)]
            return (((x - r[2]) / np.sqrt(r[3] + epsilon) * r[0] + r[1]).astype(x.dtype),)

    class Slice(OpRun):
        # onnx 1.23's clamps like Python: a negative step's start before the first element
        # gives nothing, where the ONNX spec (and onnxruntime) clamp it to 0
        def _run(self, data, starts, ends, axes=None, steps=None):  # type: ignore[override]
            axes = list(range(len(starts))) if axes is None else [int(a) % data.ndim for a in axes]
            steps = [1] * len(starts) if steps is None else list(steps)
            idx = [slice(None)] * data.ndim
            for a, s, e, st in zip(axes, starts, ends, steps):
                s, e = onnx_slice_bounds(data.shape[a], int(s), int(e), int(st))
                idx[a] = slice(s, None if e < 0 else e, int(st))
            return (data[tuple(idx)],)

    def pool(x, kind, kernel_shape, strides, pads, dilations, ceil_mode, count_include_pad):
        n = len(kernel_shape)
        strides = strides or [1] * n
        dilations = dilations or [1] * n
        pads = pads or [0] * (2 * n)
        outs = []
        for i in range(n):
            size = (
                x.shape[2 + i] + pads[i] + pads[i + n] - (dilations[i] * (kernel_shape[i] - 1) + 1)
            )
            o = (-(-size // strides[i]) if ceil_mode else size // strides[i]) + 1
            if ceil_mode and (o - 1) * strides[i] >= x.shape[2 + i] + pads[i]:
                o -= 1  # the last window starts inside the input or its left padding
            outs.append(o)
        y = np.empty(x.shape[:2] + tuple(outs), x.dtype)
        for pos in np.ndindex(*outs):
            inside, padded = 1, 1
            idxs = []
            for i, o in enumerate(pos):
                start = o * strides[i] - pads[i]
                taps = start + dilations[i] * np.arange(kernel_shape[i])
                hi_pad = x.shape[2 + i] + pads[i + n]
                padded *= int(np.sum(taps < hi_pad))
                taps = taps[(taps >= 0) & (taps < x.shape[2 + i])]
                idxs.append(taps)
                inside *= len(taps)
            win = x[(slice(None), slice(None), *np.ix_(*idxs))] if inside else None
            if kind == "max":
                v = win.reshape(*x.shape[:2], -1).max(-1) if inside else np.nan
            else:
                total = win.reshape(*x.shape[:2], -1).sum(-1) if inside else 0.0
                v = total / max(padded if count_include_pad else inside, 1)
            y[(slice(None), slice(None), *pos)] = v
        return y

    class MaxPool(OpRun):
        # onnx 1.23's gets some padded and ceil-mode windows wrong (shape and values)
        def _run(
            self, x, kernel_shape=None, strides=None, pads=None, dilations=None, ceil_mode=0, **_
        ):  # type: ignore[override]
            return (pool(x, "max", kernel_shape, strides, pads, dilations, ceil_mode, 0),)

    class AveragePool(OpRun):
        def _run(
            self,
            x,
            kernel_shape=None,
            strides=None,
            pads=None,
            dilations=None,
            ceil_mode=0,
            count_include_pad=0,
            **_,
        ):  # type: ignore[override]
            return (
                pool(
                    x, "avg", kernel_shape, strides, pads, dilations, ceil_mode, count_include_pad
                ),
            )

    from onnx.reference.ops.op_conv import Conv as _Conv

    class Conv(_Conv):
        # onnx 1.23's multiplies the zero padding (im2col): with an infinite weight a padded
        # tap gives 0 * inf = NaN, where onnxruntime's convolutions (and ours) add nothing.
        # The finite weights go through im2col; each non-finite one is added over the
        # outputs whose tap lies inside the input.
        def _run(self, X, W, B=None, **attrs):  # type: ignore[override]
            auto = attrs.get("auto_pad")
            if np.isfinite(W).all() or X.ndim != 4 or auto not in (None, "NOTSET", b"NOTSET"):
                return super()._run(X, W, B, **attrs)
            y = super()._run(X, np.where(np.isfinite(W), W, 0), B, **attrs)[0]
            st = attrs.get("strides") or [1, 1]
            dil = attrs.get("dilations") or [1, 1]
            pads = attrs.get("pads") or [0, 0, 0, 0]
            g = attrs.get("group") or 1
            cg, kg = W.shape[1], W.shape[0] // g

            def span(size: int, out: int, a: int, t: int) -> tuple[slice, slice]:
                first = [o for o in range(out) if 0 <= o * st[a] + t * dil[a] - pads[a] < size]
                if not first:
                    return slice(0, 0), slice(0, 0)
                lo, hi = first[0], first[-1] + 1
                i0 = lo * st[a] + t * dil[a] - pads[a]
                return slice(lo, hi), slice(i0, i0 + (hi - lo - 1) * st[a] + 1, st[a])

            for k, c, r, t in zip(*np.nonzero(~np.isfinite(W))):
                orow, irow = span(X.shape[2], y.shape[2], 0, r)
                ocol, icol = span(X.shape[3], y.shape[3], 1, t)
                xin = X[:, (k // kg) * cg + c, irow, icol]
                with np.errstate(invalid="ignore"):  # 0 * inf is NaN here, as it should be
                    y[:, k, orow, ocol] += xin * W[k, c, r, t]
            return (y,)

    from onnx.reference.ops.op_resize import Resize as _Resize

    class Resize(_Resize):
        # onnx 1.23's nearest mode is an interpolation with one-hot coefficients: a NaN input
        # leaks into its neighbours (0 * NaN). Resizing the element indices and gathering
        # picks the same source elements.
        def _run(self, X, *args, **attrs):  # type: ignore[override]
            ctm = attrs.get("coordinate_transformation_mode")
            if attrs.get("mode") != "nearest" or ctm in (
                "tf_crop_and_resize",
                b"tf_crop_and_resize",
            ):
                return super()._run(X, *args, **attrs)
            idx = np.arange(X.size, dtype=np.float64).reshape(X.shape)
            src = super()._run(idx, *args, **attrs)[0]
            return (X.reshape(-1)[src.astype(np.int64)],)

    return [
        GlobalMaxPool,
        LRN,
        ConvTranspose,
        BatchNormalization,
        Slice,
        MaxPool,
        AveragePool,
        Conv,
        Resize,
    ]


def _feeds64(feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    return {k: v.astype(np.float64) if v.dtype == np.float32 else v for k, v in feeds.items()}


def run_reference64(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The graph run by `onnx.reference` in float64."""
    sess = _evaluator(model)
    return dict(zip(sess.output_names, _quiet_run(sess, _feeds64(feeds))))


def _float64_names(model: onnx.ModelProto) -> set[str]:
    """The top-level tensors `model` itself types float64 (by shape inference): every other
    float result of its float64 run is a float32 tensor of the model."""
    g = onnx.shape_inference.infer_shapes(model).graph
    values = [*g.input, *g.output, *g.value_info]
    typed = [(vi.name, vi.type.tensor_type.elem_type) for vi in values]
    typed += [(t.name, t.data_type) for t in g.initializer]
    return {name for name, t in typed if t == TensorProto.DOUBLE}


def _beyond_float32(v: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore", invalid="ignore"):
        return np.isfinite(v) & np.isinf(v.astype(np.float32))


def _quiet_run(sess: Any, feeds: dict[str, np.ndarray], **kwargs: Any) -> Any:
    """``sess.run`` without numpy's warnings: inf - inf, 0 * inf and overflow make NaN and inf
    in the reference as they should, and the warnings about them say nothing."""
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        return sess.run(None, feeds, **kwargs)


def _evaluator(model: onnx.ModelProto, round_results: bool = False) -> Any:
    """`onnx.reference` over the float64 copy of `model`; with `round_results`, every node's
    float32 results are rounded to float32 as the node returns them (each op computed exactly
    from float32 operands and rounded once: the best answer a float32 implementation can give;
    subgraphs of If/Loop are not rounded inside)."""
    from onnx.reference import ReferenceEvaluator

    sess = ReferenceEvaluator(to_float64(model), new_ops=_reference_fixes())
    if round_results:
        doubles = _float64_names(model)
        for node in sess.rt_nodes_:
            names = list(node.onnx_node.output)

            def run(*args: Any, _run: Any = node.run, _names: list[str] = names, **kw: Any) -> Any:
                outs = _run(*args, **kw)
                with np.errstate(over="ignore"):
                    return tuple(
                        v.astype(np.float32).astype(np.float64)
                        if isinstance(v, np.ndarray) and v.dtype == np.float64 and n not in doubles
                        else v
                        for n, v in zip(_names, outs)
                    )

            node.run = run
    return sess


def float32_range_exceeded(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list[str]:
    """The float32 tensors of `model` (intermediates and outputs) whose float64 reference
    value holds a finite element beyond FLT_MAX (after rounding): no float32 evaluation can
    represent them, so none can be held to the float64 answer downstream of them."""
    doubles = _float64_names(model)
    every = _quiet_run(_evaluator(model), _feeds64(feeds), intermediate=True)
    return sorted(
        name
        for name, v in every.items()
        if isinstance(v, np.ndarray)
        and v.dtype == np.float64
        and name not in doubles
        and _beyond_float32(v).any()
    )


def run_reference32(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The graph run by `onnx.reference`, each op in float64 from float32 operands, every
    float32 result rounded to float32 (overflowing to +-inf where its exact value is beyond
    FLT_MAX)."""
    sess = _evaluator(model, round_results=True)
    outs = _quiet_run(sess, _feeds64(feeds))
    return dict(zip(sess.output_names, outs))


def summarize(a: Any) -> str:
    a = np.asarray(a)
    if a.size == 0:
        return f"{a.dtype}{list(a.shape)} empty"
    f = a.astype(np.float64)
    return (
        f"{a.dtype}{list(a.shape)} nan={int(np.isnan(f).sum())} range=[{np.nanmin(f):.4g}, {np.nanmax(f):.4g}]"
        if not np.isnan(f).all()
        else f"{a.dtype}{list(a.shape)} all NaN"
    )


__all__ = [
    "Comparison",
    "compare",
    "onnx_slice_bounds",
    "run_onnxruntime",
    "float32_range_exceeded",
    "run_reference32",
    "run_reference64",
    "summarize",
    "to_float64",
]
