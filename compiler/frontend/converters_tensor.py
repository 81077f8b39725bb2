"""ONNX tensor-shaping and constant-producing ops -> graph IR.

Shape, Size, Constant, ConstantOfShape and Range only ever produce Constants. Squeeze,
Unsqueeze and Flatten become Reshape; Identity vanishes; Expand becomes Broadcast. Shape-like
operands (starts, pads, repeats...) must be compile-time constants.
"""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np

from compiler.errors import UnsupportedTypeError
from compiler.frontend.converters_math import ANY, NUMERIC, check_elem
from compiler.frontend.onnx_importer import (
    ONNX_TO_ELEM,
    SUPPORTED_DTYPES,
    NodeContext,
    dtype_name,
)
from compiler.frontend.registry import converter
from compiler.graph.ir import Constant, Value
from compiler.graph.types import FLOAT8_KINDS, NARROW_KINDS, ElemKind, broadcast_shapes
from compiler.limits import check_fold

INT_KINDS = (ElemKind.I64, ElemKind.I32)


def reshape(
    ctx: NodeContext, v: Value, shape: tuple[int, ...] | list[int], suffix: str | None = None
) -> Value:
    shape = tuple(int(d) for d in shape)
    if v.type.shape == shape:
        return v
    return ctx.create("Reshape", [v], {"shape": shape}, suffix=suffix)


def norm_axis(ctx: NodeContext, axis: int, rank: int, what: str = "axis") -> int:
    if not -rank <= axis < max(rank, 1) or rank == 0 and axis not in (0, -1):
        raise ctx.unsupported(f"{what} {axis} is out of range for rank {rank}")
    return axis % max(rank, 1)


def int_list(arr: np.ndarray) -> list[int]:
    if arr.dtype.kind not in "iu":
        raise TypeError(f"expected an integer tensor, got {arr.dtype}")
    return [int(a) for a in arr.reshape(-1)]


def const_ints(ctx: NodeContext, i: int, what: str) -> list[int]:
    arr = ctx.require_const(i, what)
    if arr.dtype.kind not in "iu":
        raise ctx.unsupported(f"input '{what}' must be an integer tensor, got {arr.dtype}")
    return [int(a) for a in arr.reshape(-1)]


# -- identity-like --------------------------------------------------------------------------------


@converter("Identity")
def convert_identity(ctx: NodeContext) -> list[Value | None]:
    ctx.check_attrs({})
    return [ctx.inp(0)]


@converter("Constant")
def convert_constant(ctx: NodeContext) -> list[Value | None]:
    keys = [a.name for a in ctx.node.attribute]
    if len(keys) != 1:
        raise ctx.unsupported(f"expects exactly one value attribute, got {keys}")
    key = keys[0]
    if key == "value":
        arr = ctx.attr("value")
    elif key == "value_float":
        arr = np.array(ctx.attr(key), np.float32)
    elif key == "value_floats":
        arr = np.array(ctx.attr(key), np.float32).reshape(-1)
    elif key == "value_int":
        arr = np.array(ctx.attr(key), np.int64)
    elif key == "value_ints":
        arr = np.array(ctx.attr(key), np.int64).reshape(-1)
    else:
        raise ctx.unsupported(f"attribute '{key}' (string or sparse constants)")
    return [ctx.constant(arr, suffix="value")]


@converter("ConstantOfShape")
def convert_constant_of_shape(ctx: NodeContext) -> list[Value | None]:
    ctx.check_attrs({"value": None})
    shape = const_ints(ctx, 0, "shape")
    if any(d < 0 for d in shape):
        raise ctx.unsupported(f"negative dim in shape {shape}")
    value = ctx.attr("value")
    if value is None:
        value = np.zeros((1,), np.float32)
    if value.size != 1:
        raise ctx.unsupported("'value' must hold one element")
    if math.prod(shape) * value.dtype.itemsize > ctx.imp.fold_limit:
        # too big to materialise at import: a broadcast the memory limits judge later
        one = ctx.constant(value.reshape((1,) * len(shape)), suffix="value")
        return [ctx.create("Broadcast", [one], {"shape": shape})]
    return [ctx.constant(np.full(shape, value.reshape(-1)[0], dtype=value.dtype), suffix="value")]


@converter("Shape")
def convert_shape(ctx: NodeContext) -> list[Value | None]:
    ctx.check_attrs({"start": None, "end": None})
    shape = ctx.type(0).shape
    rank = len(shape)
    start = int(ctx.attr("start", 0))
    end = ctx.attr("end")
    start = min(max(start + rank if start < 0 else start, 0), rank)
    end = rank if end is None else int(end)
    end = min(max(end + rank if end < 0 else end, 0), rank)
    return [ctx.constant(np.array(shape[start:end], np.int64), suffix="shape")]


@converter("Size")
def convert_size(ctx: NodeContext) -> list[Value | None]:
    ctx.check_attrs({})
    return [ctx.constant(np.array(ctx.type(0).numel, np.int64), suffix="size")]


@converter("Range")
def convert_range(ctx: NodeContext) -> list[Value | None]:
    ctx.check_attrs({})
    start, limit, delta = (
        ctx.require_const(i, w) for i, w in enumerate(("start", "limit", "delta"))
    )
    dt = start.dtype
    s, l, d = start.reshape(()).item(), limit.reshape(()).item(), delta.reshape(()).item()
    if d == 0:
        raise ctx.unsupported("delta is 0")
    n = max(int(math.ceil((l - s) / d)), 0)
    check_fold(f"node '{ctx.name}' (Range): {n} elements", n * dt.itemsize, ctx.imp.fold_limit)
    vals = (
        np.array([s + i * d for i in range(n)], dtype=dt)
        if dt.kind != "f"
        else (np.arange(n, dtype=dt) * dt.type(d) + dt.type(s)).astype(dt)
    )
    return [ctx.constant(vals.reshape(n), suffix="range")]


@converter("Cast", "CastLike")
def convert_cast(ctx: NodeContext) -> list[Value | None]:
    x = ctx.inp(0)
    check_elem(ctx, x, ANY + NARROW_KINDS)
    if ctx.op_type == "CastLike":
        ctx.check_attrs({"saturate": None})
        to = ctx.type(1).elem
    else:
        ctx.check_attrs({"to": None, "saturate": None})
        code = int(ctx.attr("to"))
        if code not in ONNX_TO_ELEM:
            raise ctx.unsupported(
                f"cast to {dtype_name(code)} (supported: {SUPPORTED_DTYPES})",
                UnsupportedTypeError,
            )
        to = ONNX_TO_ELEM[code]
    if to == x.type.elem:
        return [x]
    return [cast(ctx, x, to, bool(ctx.attr("saturate", 1)))]


def cast(ctx: NodeContext, x: Value, to: ElemKind, saturate: bool = True, tag: str = "") -> Value:
    """Cast `x` to `to`. ONNX saturates float values cast to a float8 type by default (out of
    range and infinities become the largest finite value, NaN stays NaN): a Clip first, so
    the graph Cast itself is the plain conversion (round to nearest even, overflow to the
    type's inf or NaN)."""
    if saturate and to in FLOAT8_KINDS and x.type.elem.is_float:
        top = float(ml_dtypes.finfo(to.np_dtype).max)
        x = ctx.create("Clip", [x], {"min": -top, "max": top}, suffix=f"{tag}saturate")
    return ctx.create("Cast", [x], {"to": to.value}, suffix=tag.rstrip("_") or None)


# -- reshaping ------------------------------------------------------------------------------------


@converter("Reshape")
def convert_reshape(ctx: NodeContext) -> list[Value | None]:
    ctx.check_attrs({"allowzero": (0, 1)})
    x = ctx.inp(0)
    spec = const_ints(ctx, 1, "shape")
    allowzero = int(ctx.attr("allowzero", 0))
    shape: list[int] = []
    for i, d in enumerate(spec):
        if d == 0 and not allowzero:
            if i >= x.type.rank:
                raise ctx.unsupported(f"shape {spec}: 0 at dim {i} copies a dim the input lacks")
            d = x.type.shape[i]
        shape.append(d)
    if shape.count(-1) > 1 or any(d < -1 for d in shape):
        raise ctx.unsupported(f"invalid shape {spec}")
    if -1 in shape:
        known = math.prod(d for d in shape if d != -1)
        if known == 0 or x.type.numel % known:
            raise ctx.unsupported(f"cannot reshape {x.type} to {spec}")
        shape[shape.index(-1)] = x.type.numel // known
    if math.prod(shape) != x.type.numel:
        raise ctx.unsupported(f"cannot reshape {x.type} to {spec}")
    return [reshape(ctx, x, shape)]


@converter("Flatten")
def convert_flatten(ctx: NodeContext) -> list[Value | None]:
    ctx.check_attrs({"axis": None})
    x = ctx.inp(0)
    rank = x.type.rank
    axis = int(ctx.attr("axis", 1))
    if not -rank <= axis <= rank:
        raise ctx.unsupported(f"axis {axis} is out of range for rank {rank}")
    axis = axis + rank if axis < 0 else axis
    shape = (math.prod(x.type.shape[:axis]), math.prod(x.type.shape[axis:]))
    return [reshape(ctx, x, shape)]


@converter("Squeeze")
def convert_squeeze(ctx: NodeContext) -> list[Value | None]:
    x = ctx.inp(0)
    rank = x.type.rank
    if ctx.opset >= 13:
        ctx.check_attrs({})
        axes = const_ints(ctx, 1, "axes") if ctx.has_input(1) else None
    else:
        ctx.check_attrs({"axes": None})
        axes = ctx.attr("axes")
    if axes is None:
        drop = {i for i, d in enumerate(x.type.shape) if d == 1}
    else:
        drop = {norm_axis(ctx, int(a), rank) for a in axes}
        for a in drop:
            if x.type.shape[a] != 1:
                raise ctx.unsupported(f"cannot squeeze axis {a} of {x.type}: it is not 1")
    return [reshape(ctx, x, [d for i, d in enumerate(x.type.shape) if i not in drop])]


@converter("Unsqueeze")
def convert_unsqueeze(ctx: NodeContext) -> list[Value | None]:
    x = ctx.inp(0)
    if ctx.opset >= 13:
        ctx.check_attrs({})
        axes = const_ints(ctx, 1, "axes")
    else:
        ctx.check_attrs({"axes": None})
        axes = [int(a) for a in ctx.attr("axes", [])]
    out_rank = x.type.rank + len(axes)
    norm = {norm_axis(ctx, a, out_rank) for a in axes}
    if len(norm) != len(axes):
        raise ctx.unsupported(f"axes {axes} repeat an axis")
    dims = iter(x.type.shape)
    shape = [1 if i in norm else next(dims) for i in range(out_rank)]
    return [reshape(ctx, x, shape)]


@converter("Transpose")
def convert_transpose(ctx: NodeContext) -> list[Value | None]:
    ctx.check_attrs({"perm": None})
    x = ctx.inp(0)
    perm = ctx.attr("perm")
    perm = list(range(x.type.rank))[::-1] if perm is None else [int(p) for p in perm]
    if sorted(perm) != list(range(x.type.rank)):
        raise ctx.unsupported(f"perm {perm} is not a permutation of rank {x.type.rank}")
    if perm == sorted(perm):
        return [x]
    return [ctx.create("Transpose", [x], {"perm": perm})]


@converter("Expand")
def convert_expand(ctx: NodeContext) -> list[Value | None]:
    ctx.check_attrs({})
    x = ctx.inp(0)
    shape = const_ints(ctx, 1, "shape")
    try:
        target = broadcast_shapes(x.type.shape, tuple(shape))
    except ValueError:
        raise ctx.unsupported(f"shape {shape} does not broadcast with {x.type}") from None
    if target == x.type.shape:
        return [x]
    return [ctx.create("Broadcast", [x], {"shape": target})]


@converter("Tile")
def convert_tile(ctx: NodeContext) -> list[Value | None]:
    ctx.check_attrs({})
    x = ctx.inp(0)
    reps = const_ints(ctx, 1, "repeats")
    if len(reps) != x.type.rank or any(r < 0 for r in reps):
        raise ctx.unsupported(f"repeats {reps} do not match rank {x.type.rank}")
    if all(r == 1 for r in reps):
        return [x]
    return [ctx.create("Tile", [x], {"repeats": reps})]


@converter("Concat")
def convert_concat(ctx: NodeContext) -> list[Value | None]:
    ctx.check_attrs({"axis": None})
    xs = ctx.inputs()
    if not ctx.has_attr("axis"):
        raise ctx.unsupported("attribute 'axis' is required")
    axis = norm_axis(ctx, int(ctx.attr("axis")), xs[0].type.rank)
    for x in xs:
        if x.type.elem != xs[0].type.elem:
            raise ctx.unsupported(f"inputs have different element types {xs[0].type}, {x.type}")
    nonempty = [x for x in xs if x.type.rank == 0 or x.type.shape[axis] != 0] or xs[:1]
    if len(nonempty) == 1:
        return [nonempty[0]]
    return [ctx.create("Concat", nonempty, {"axis": axis})]


@converter("Split")
def convert_split(ctx: NodeContext) -> list[Value | None]:
    x = ctx.inp(0)
    n = ctx.num_outputs
    if ctx.opset >= 13:
        ctx.check_attrs({"axis": None, "num_outputs": None})
        split = const_ints(ctx, 1, "split") if ctx.has_input(1) else None
    else:
        ctx.check_attrs({"axis": None, "split": None})
        split = ctx.attr("split")
    axis = norm_axis(ctx, int(ctx.attr("axis", 0)), x.type.rank)
    dim = x.type.shape[axis]
    if split is None:
        if ctx.has_attr("num_outputs"):
            n = int(ctx.attr("num_outputs"))
            chunk = -(-dim // n)
            split = [chunk] * (n - 1) + [dim - chunk * (n - 1)]
            if split[-1] < 0:
                raise ctx.unsupported(f"cannot split {dim} into {n} outputs")
        else:
            if dim % n:
                raise ctx.unsupported(f"dim {dim} does not split evenly into {n} outputs")
            split = [dim // n] * n
    split = [int(s) for s in split]
    if len(split) != n or sum(split) != dim or any(s < 0 for s in split):
        raise ctx.unsupported(f"split {split} does not fit dim {dim} into {n} outputs")
    if n == 1:
        return [x]
    return [*ctx.create_multi("Split", [x], {"axis": axis, "splits": split})]


def normalize_slice(
    shape: tuple[int, ...], starts: list[int], ends: list[int], axes: list[int], steps: list[int]
) -> tuple[list[int], list[int], list[int]]:
    """Per-dim (start, stop, step) as clamped range bounds; `axes` already normalised.

    ONNX clamps like Python's slice.indices except for a negative step whose start lies before
    the first element: ONNX clamps it to 0 (one element), Python to -1 (empty)."""
    s_all, e_all, st_all = [0] * len(shape), list(shape), [1] * len(shape)
    for s, e, a, st in zip(starts, ends, axes, steps):
        # Clamp huge values (INT_MAX/INT_MIN markers) before handing them to slice.indices.
        s = max(min(s, 1 << 62), -(1 << 62))
        e = max(min(e, 1 << 62), -(1 << 62))
        if st < 0 and s < -shape[a]:
            s = -shape[a]
        s_all[a], e_all[a], st_all[a] = slice(s, e, st).indices(shape[a])
    return s_all, e_all, st_all


@converter("Slice")
def convert_slice(ctx: NodeContext) -> list[Value | None]:
    x = ctx.inp(0)
    rank = x.type.rank
    if ctx.opset < 10:
        ctx.check_attrs({"starts": None, "ends": None, "axes": None})
        starts = [int(v) for v in ctx.attr("starts", [])]
        ends = [int(v) for v in ctx.attr("ends", [])]
        axes = ctx.attr("axes")
        steps = None
    else:
        ctx.check_attrs({})
        starts = const_ints(ctx, 1, "starts")
        ends = const_ints(ctx, 2, "ends")
        axes = const_ints(ctx, 3, "axes") if ctx.has_input(3) else None
        steps = const_ints(ctx, 4, "steps") if ctx.has_input(4) else None
    axes = (
        list(range(len(starts))) if axes is None else [norm_axis(ctx, int(a), rank) for a in axes]
    )
    steps = [1] * len(starts) if steps is None else steps
    if not len(starts) == len(ends) == len(axes) == len(steps):
        raise ctx.unsupported("starts, ends, axes and steps differ in length")
    if len(set(axes)) != len(axes):
        raise ctx.unsupported(f"axes {axes} repeat an axis")
    if any(st == 0 for st in steps):
        raise ctx.unsupported("a step is 0")
    s, e, st = normalize_slice(x.type.shape, starts, ends, axes, steps)
    if s == [0] * rank and e == list(x.type.shape) and st == [1] * rank:
        return [x]
    return [ctx.create("Slice", [x], {"starts": s, "ends": e, "steps": st})]


@converter("Gather")
def convert_gather(ctx: NodeContext) -> list[Value | None]:
    ctx.check_attrs({"axis": None})
    data, idx = ctx.inp(0), ctx.inp(1)
    check_elem(ctx, idx, INT_KINDS, "indices")
    axis = norm_axis(ctx, int(ctx.attr("axis", 0)), data.type.rank)
    if isinstance(idx, Constant):
        n = data.type.shape[axis]
        arr = ctx.require_const(1, "indices")
        if np.any(arr < -n) or np.any(arr >= n):
            raise ctx.unsupported(f"indices out of range for dim {n}")
        if np.any(arr < 0):
            idx = ctx.constant(np.where(arr < 0, arr + n, arr).astype(arr.dtype), suffix="indices")
    return [ctx.create("Gather", [data, idx], {"axis": axis})]


# -- padding and resizing -------------------------------------------------------------------------


@converter("Pad")
def convert_pad(ctx: NodeContext) -> list[Value | None]:
    x = ctx.inp(0)
    rank = x.type.rank
    if ctx.opset < 11:
        ctx.check_attrs({"pads": None, "mode": ("constant", "reflect", "edge"), "value": None})
        pads = [int(p) for p in ctx.attr("pads", [])]
        value = float(ctx.attr("value", 0.0))
    else:
        ctx.check_attrs({"mode": ("constant", "reflect", "edge", "wrap")})
        pads = const_ints(ctx, 1, "pads")
        value = 0.0
        if ctx.has_input(2):
            cv = ctx.require_const(2, "constant_value")
            if cv.size > 1:
                raise ctx.unsupported("constant_value must be a scalar")
            value = cv.reshape(-1)[0].item() if cv.size else 0.0
        if ctx.has_input(3):
            axes = [norm_axis(ctx, a, rank) for a in const_ints(ctx, 3, "axes")]
            if len(pads) != 2 * len(axes):
                raise ctx.unsupported(f"pads {pads} do not match axes {axes}")
            full = [0] * (2 * rank)
            for j, a in enumerate(axes):
                full[a], full[a + rank] = pads[j], pads[j + len(axes)]
            pads = full
    mode = ctx.attr("mode", "constant")
    if len(pads) != 2 * rank:
        raise ctx.unsupported(f"pads {pads} do not match rank {rank}")
    if not x.type.elem.is_float and (
        not math.isfinite(value) or float(value) != int(value) or abs(value) > 2**53
    ):
        raise ctx.unsupported(f"constant value {value} for an integer tensor")
    if x.type.elem.is_float:
        value = float(x.type.np_dtype.type(value))
    if mode == "reflect":
        for i, d in enumerate(x.type.shape):
            if max(pads[i], pads[i + rank]) >= d and (pads[i] or pads[i + rank]):
                raise ctx.unsupported(
                    f"reflect padding {pads[i]},{pads[i + rank]} on a dim of size {d}"
                )
    if mode == "edge" and any(d == 0 for d in x.type.shape):
        raise ctx.unsupported("edge padding of an empty tensor")
    pos = [max(p, 0) for p in pads]
    out = x
    if mode == "wrap" and any(pos):
        out = _wrap_pad(ctx, x, pos)
    elif any(pos):
        neg_any = any(p < 0 for p in pads)
        out = ctx.create(
            "Pad",
            [x],
            {"pads": pos, "mode": mode, "value": value},
            suffix="pad" if neg_any else None,
        )
    if any(p < 0 for p in pads):
        shape = out.type.shape
        starts = [-min(pads[i], 0) for i in range(rank)]
        ends = [shape[i] + min(pads[i + rank], 0) for i in range(rank)]
        if any(e < s for s, e in zip(starts, ends)):
            raise ctx.unsupported(f"negative pads {pads} remove more than the whole dim")
        out = ctx.create("Slice", [out], {"starts": starts, "ends": ends, "steps": [1] * rank})
    return [out]


def _wrap_pad(ctx: NodeContext, x: Value, pads: list[int]) -> Value:
    """Wrap-around padding, one dim at a time: concat(tail, x, head)."""
    rank = x.type.rank
    out = x
    for i in range(rank):
        b, e = pads[i], pads[i + rank]
        if not b and not e:
            continue
        d = out.type.shape[i]
        if b > d or e > d:
            raise ctx.unsupported(f"wrap padding {b},{e} on a dim of size {d}")
        parts = []
        full = list(out.type.shape)
        zeros, ones = [0] * rank, [1] * rank
        if b:
            parts.append(
                ctx.create(
                    "Slice",
                    [out],
                    {"starts": [*zeros[:i], d - b, *zeros[i + 1 :]], "ends": full, "steps": ones},
                    suffix=f"wrap{i}_tail",
                )
            )
        parts.append(out)
        if e:
            ends = list(full)
            ends[i] = e
            parts.append(
                ctx.create(
                    "Slice",
                    [out],
                    {"starts": zeros, "ends": ends, "steps": ones},
                    suffix=f"wrap{i}_head",
                )
            )
        out = ctx.create("Concat", parts, {"axis": i}, suffix=f"wrap{i}")
    return out


# tf_half_pixel_for_nn is left out: onnxruntime ignores nearest_mode with it and treats
# linear/cubic differently from the spec, so no answer would be safe.
_CTM = (
    "half_pixel",
    "half_pixel_symmetric",
    "pytorch_half_pixel",
    "align_corners",
    "asymmetric",
    "tf_crop_and_resize",
)


def _nearest_index(xs: np.ndarray, mode: str) -> np.ndarray:
    frac = xs - np.floor(xs)
    if mode == "round_prefer_floor":
        return np.where(frac == 0.5, np.floor(xs), np.round(xs))
    if mode == "round_prefer_ceil":
        return np.where(frac == 0.5, np.ceil(xs), np.round(xs))
    return np.floor(xs) if mode == "floor" else np.ceil(xs)


def _nearest_is_ambiguous(n_in: int, n_out: int, scale: float, ctm: str, mode: str) -> bool:
    """True if nearest indices depend on computing coordinates in float32 (as onnxruntime
    does) or float64 (as ONNX's reference and our kernels do): a coordinate sits on a rounding
    boundary, which happens with scales that are not exactly out/in."""
    picks = []
    for dt in (np.float32, np.float64):
        x: np.ndarray = np.arange(n_out, dtype=dt)
        sc = dt(scale)
        xs: np.ndarray
        if ctm == "asymmetric":
            xs = x / sc
        elif ctm == "half_pixel_symmetric":
            off = dt(n_in / 2) * (dt(1) - dt(n_out) / (sc * dt(n_in)))
            xs = off + (x + dt(0.5)) / sc - dt(0.5)
        elif ctm == "pytorch_half_pixel" and n_out <= 1:
            xs = np.zeros(n_out, dt)
        else:
            xs = (x + dt(0.5)) / sc - dt(0.5)
        picks.append(np.clip(_nearest_index(xs, mode), 0, n_in - 1))
    return not np.array_equal(picks[0], picks[1])


@converter("Resize")
def convert_resize(ctx: NodeContext) -> list[Value | None]:
    x = ctx.inp(0)
    check_elem(ctx, x, NUMERIC)
    rank = x.type.rank
    in_shape = x.type.shape
    if ctx.opset < 11:
        ctx.check_attrs({"mode": ("nearest", "linear")})
        return [_resize_old(ctx, x, ctx.require_const(1, "scales").astype(np.float64).reshape(-1))]
    ctx.check_attrs(
        {
            "mode": ("nearest", "linear", "cubic"),
            "coordinate_transformation_mode": _CTM,
            "cubic_coeff_a": None,
            "exclude_outside": (0, 1),
            "extrapolation_value": None,
            "nearest_mode": ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil"),
            "antialias": (0, 1),
            "axes": None,
            "keep_aspect_ratio_policy": ("stretch", "not_larger", "not_smaller"),
        }
    )
    scales = ctx.require_const(2, "scales") if ctx.has_input(2) else None
    sizes = ctx.require_const(3, "sizes") if ctx.has_input(3) else None
    if scales is not None and scales.size == 0:
        scales = None
    if sizes is not None and sizes.size == 0:
        sizes = None
    if (scales is None) == (sizes is None):
        raise ctx.unsupported("exactly one of scales and sizes must be given")
    axes = ctx.attr("axes")
    axes = list(range(rank)) if axes is None else [norm_axis(ctx, int(a), rank) for a in axes]
    if len(set(axes)) != len(axes):
        raise ctx.unsupported(f"axes {axes} repeat an axis")
    ctm = ctx.attr("coordinate_transformation_mode", "half_pixel")
    out = list(in_shape)
    factors = [1.0] * rank  # the scale ONNX maps coordinates with, per dim
    if sizes is not None:
        vals = int_list(sizes)
        if len(vals) != len(axes):
            raise ctx.unsupported(f"sizes {vals} do not match axes {axes}")
        for a, v in zip(axes, vals):
            out[a] = v
            factors[a] = v / in_shape[a]
        policy = ctx.attr("keep_aspect_ratio_policy", "stretch")
        if policy != "stretch":
            pick = min if policy == "not_larger" else max
            common = pick(factors[a] for a in axes)
            for a in axes:
                factors[a] = common
                out[a] = int(common * in_shape[a] + 0.5)
    else:
        assert scales is not None  # exactly one of the two, checked above
        fvals = [float(s) for s in scales.reshape(-1)]
        if len(fvals) != len(axes):
            raise ctx.unsupported(f"scales {fvals} do not match axes {axes}")
        for a, s in zip(axes, fvals):
            if s <= 0:
                raise ctx.unsupported(f"scale {s} is not positive")
            out[a] = int(math.floor(in_shape[a] * s))
            factors[a] = s
    if any(d <= 0 for d in out):
        raise ctx.unsupported(f"output shape {out} is empty")
    mode = ctx.attr("mode", "nearest")
    if mode != "nearest" and not x.type.elem.is_float:
        raise ctx.unsupported(f"{mode} resize of {x.type.elem.value} (nearest only)")
    attrs = {
        "out_shape": out,
        "mode": mode,
        "coordinate_transformation_mode": ctm,
        "nearest_mode": ctx.attr("nearest_mode", "round_prefer_floor"),
        "cubic_coeff_a": float(ctx.attr("cubic_coeff_a", -0.75)),
        "exclude_outside": int(ctx.attr("exclude_outside", 0)),
        "extrapolation_value": float(ctx.attr("extrapolation_value", 0.0)),
    }
    inexact = [a for a in range(rank) if out[a] != in_shape[a] * factors[a]]
    if inexact:
        if ctm == "tf_crop_and_resize":
            raise ctx.unsupported(
                f"tf_crop_and_resize with scales {factors} that are not exactly out/in"
            )
        if ctm == "align_corners":
            # ONNX's reference maps with the fractional output size, onnxruntime with the
            # integer one: they disagree, so refuse.
            raise ctx.unsupported(
                f"align_corners with scales {factors} that are not exactly out/in (ambiguous)"
            )
        if mode == "nearest" and any(
            _nearest_is_ambiguous(in_shape[a], out[a], factors[a], ctm, attrs["nearest_mode"])
            for a in inexact
        ):
            raise ctx.unsupported(
                f"nearest resize with scales {factors}: source pixels sit on "
                "rounding boundaries (ambiguous between implementations)"
            )
        attrs["scales"] = factors
    if int(ctx.attr("antialias", 0)) and mode != "nearest":
        attrs["antialias"] = 1
    if ctm == "tf_crop_and_resize":
        attrs["roi"] = _resize_roi(ctx, rank, axes)
    return [ctx.create("Resize", [x], attrs)]


def _resize_roi(ctx: NodeContext, rank: int, axes: list[int]) -> list[float]:
    """tf_crop_and_resize's box as [starts of every dim, ends of every dim] (0 and 1 for the
    dims `axes` leaves out)."""
    if not ctx.has_input(1):
        raise ctx.unsupported("tf_crop_and_resize needs the roi input")
    roi = [float(v) for v in ctx.require_const(1, "roi").reshape(-1)]
    if len(roi) != 2 * len(axes):
        raise ctx.unsupported(f"roi {roi} does not give a start and an end for axes {axes}")
    full = [0.0] * rank + [1.0] * rank
    for j, a in enumerate(axes):
        full[a], full[a + rank] = roi[j], roi[j + len(axes)]
    return full


def _resize_old(ctx: NodeContext, x: Value, scales: np.ndarray) -> Value:
    """Upsample (opset 7-9) and Resize-10: asymmetric coordinates, nearest rounds down."""
    mode = ctx.attr("mode", "nearest")
    if mode == "bilinear":
        mode = "linear"
    if mode != "nearest" and not x.type.elem.is_float:
        raise ctx.unsupported(f"{mode} resize of {x.type.elem.value} (nearest only)")
    if len(scales) != x.type.rank:
        raise ctx.unsupported(f"scales {list(scales)} do not match rank {x.type.rank}")
    out = []
    for d, s in zip(x.type.shape, scales):
        o = int(math.floor(d * s))
        if s < 1 or o != d * s:
            raise ctx.unsupported(f"scale {s} on a dim of {d} (only exact upsampling)")
        out.append(o)
    if mode == "linear" and any(s != 1 for s in scales[:-2]):
        raise ctx.unsupported("linear mode scales only the last two dims")
    if tuple(out) == x.type.shape:
        return x
    return ctx.create(
        "Resize",
        [x],
        {
            "out_shape": out,
            "mode": mode,
            "coordinate_transformation_mode": "asymmetric",
            "nearest_mode": "floor",
        },
    )


@converter("Upsample")
def convert_upsample(ctx: NodeContext) -> list[Value | None]:
    x = ctx.inp(0)
    check_elem(ctx, x, NUMERIC)
    if ctx.opset < 9:
        ctx.check_attrs({"mode": ("nearest", "linear", "bilinear"), "scales": None})
        scales = np.array(ctx.attr("scales", []), np.float64)
    else:
        ctx.check_attrs({"mode": ("nearest", "linear", "bilinear")})
        scales = ctx.require_const(1, "scales").astype(np.float64).reshape(-1)
    return [_resize_old(ctx, x, scales)]
