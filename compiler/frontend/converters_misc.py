"""Smaller ONNX ops expressed in existing graph ops at import: Hardmax, OneHot, LpNormalization,
MeanVarianceNormalization, Swish, SwiGLU, Shrink, SpaceToDepth, DepthToSpace, EyeLike, the
window functions, CenterCropPad, ReverseSequence, Compress, MatMulInteger, RotaryEmbedding.

Each is a few primitives (Reshape/Transpose for the rearrangements, Equal against an index
ramp for the one-hots, Where for the piecewise ones); shape-like operands must be compile-time
constants, like everywhere else.
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from compiler.frontend.converters_math import (
    ANY,
    FLOAT_ONLY,
    INT_ONLY,
    NUMERIC,
    check_elem,
    same_kind_operands,
)
from compiler.frontend.converters_tensor import INT_KINDS, const_ints, norm_axis, reshape
from compiler.frontend.onnx_importer import ONNX_TO_ELEM, NodeContext, dtype_name
from compiler.frontend.registry import converter
from compiler.graph.ir import Value
from compiler.graph.types import ElemKind


def _ramp(ctx: NodeContext, n: int, rank: int, axis: int, dtype: npt.DTypeLike, tag: str) -> Value:
    """0 .. n-1 along `axis` of a rank-`rank` constant (1 elsewhere)."""
    shape = [1] * rank
    shape[axis] = n
    return ctx.constant(np.arange(n, dtype=dtype).reshape(shape), suffix=tag)


@converter("Hardmax")
def convert_hardmax(ctx: NodeContext) -> list[Value | None]:
    ctx.check_attrs({"axis": None})
    x = ctx.inp(0)
    check_elem(ctx, x, FLOAT_ONLY)
    rank = x.type.rank
    axis = norm_axis(ctx, int(ctx.attr("axis", -1 if ctx.opset >= 13 else 1)), rank)
    if ctx.opset < 13:  # coerced to 2-D at axis, as Softmax was
        flat = reshape(
            ctx, x, (math.prod(x.type.shape[:axis]), math.prod(x.type.shape[axis:])), "coerced"
        )
        return [reshape(ctx, _hardmax(ctx, flat, 1), x.type.shape)]
    return [_hardmax(ctx, x, axis)]


def _hardmax(ctx: NodeContext, x: Value, axis: int) -> Value:
    best = ctx.create("ArgMax", [x], {"axis": axis, "keepdims": 1}, suffix="argmax")
    ramp = _ramp(ctx, x.type.shape[axis], x.type.rank, axis, np.int64, "positions")
    hit = ctx.create("Equal", [ramp, best], suffix="is_max")
    return ctx.create("Cast", [hit], {"to": x.type.elem.value})


@converter("OneHot")
def convert_one_hot(ctx: NodeContext) -> list[Value | None]:
    ctx.check_attrs({"axis": None})
    idx, values = ctx.inp(0), ctx.inp(2)
    check_elem(ctx, idx, NUMERIC, "indices")
    depth_arr = ctx.require_const(1, "depth").reshape(-1)
    if depth_arr.size != 1:
        raise ctx.unsupported("depth must hold one value")
    depth = int(depth_arr[0])
    if values.type.numel != 2:
        raise ctx.unsupported(f"values {values.type} must hold [off, on]")
    rank = idx.type.rank + 1
    axis = norm_axis(ctx, int(ctx.attr("axis", -1)), rank)
    if idx.type.elem != ElemKind.I64:
        # Float indices are truncated (as the reference's astype does).
        idx = ctx.create("Cast", [idx], {"to": "i64"}, suffix="indices_i64")
    d = ctx.constant(np.array(depth, np.int64), suffix="depth")
    zero = ctx.constant(np.array(0, np.int64), suffix="zero")
    neg = ctx.create("Less", [idx, zero], suffix="negative")
    idx = ctx.create(
        "Where", [neg, ctx.create("Add", [idx, d], suffix="wrapped"), idx], suffix="idx"
    )
    shape = list(idx.type.shape)
    shape.insert(axis, 1)
    hit = ctx.create(
        "Equal",
        [
            reshape(ctx, idx, tuple(shape), "idx_axis"),
            _ramp(ctx, depth, rank, axis, np.int64, "classes"),
        ],
        suffix="hit",
    )
    flat = reshape(ctx, values, (2,), "values_flat")
    off, on = (
        ctx.create("Slice", [flat], {"starts": [i], "ends": [i + 1], "steps": [1]}, suffix=s)
        for i, s in ((0, "off"), (1, "on"))
    )
    return [ctx.create("Where", [hit, on, off])]


@converter("LpNormalization")
def convert_lp_normalization(ctx: NodeContext) -> list[Value | None]:
    ctx.check_attrs({"axis": None, "p": (1, 2)})
    x = ctx.inp(0)
    check_elem(ctx, x, FLOAT_ONLY)
    axis = norm_axis(ctx, int(ctx.attr("axis", -1)), x.type.rank)
    red = {"axes": [axis], "keepdims": 1}
    if int(ctx.attr("p", 2)) == 1:
        norm = ctx.create("ReduceSum", [ctx.create("Abs", [x], suffix="abs")], red, suffix="l1")
    else:
        sq = ctx.create("ReduceSum", [ctx.create("Mul", [x, x], suffix="sq")], red, suffix="sumsq")
        norm = ctx.create("Sqrt", [sq], suffix="l2")
    # A zero norm gives 0, not 0/0.
    zero = ctx.scalar_like(x, 0, "zero")
    null = ctx.create("Equal", [norm, zero], suffix="null")
    return [ctx.create("Where", [null, zero, ctx.create("Div", [x, norm], suffix="scaled")])]


@converter("MeanVarianceNormalization")
def convert_mvn(ctx: NodeContext) -> list[Value | None]:
    ctx.check_attrs({"axes": None})
    x = ctx.inp(0)
    check_elem(ctx, x, FLOAT_ONLY)
    axes = [norm_axis(ctx, int(a), x.type.rank) for a in ctx.attr("axes", [0, 2, 3])]
    red = {"axes": axes, "keepdims": 1}
    mean = ctx.create("ReduceMean", [x], red, suffix="mean")
    sq_mean = ctx.create(
        "ReduceMean", [ctx.create("Mul", [x, x], suffix="sq")], red, suffix="sq_mean"
    )
    var = ctx.create(
        "Sub", [sq_mean, ctx.create("Mul", [mean, mean], suffix="mean_sq")], suffix="var"
    )
    eps = ctx.scalar_like(x, 1e-9, "epsilon")
    std = ctx.create("Sqrt", [ctx.create("Add", [var, eps], suffix="var_eps")], suffix="std")
    return [ctx.create("Div", [ctx.create("Sub", [x, mean], suffix="centered"), std])]


def _swish(ctx: NodeContext, x: Value, alpha: float, tag: str) -> Value:
    ax = (
        x
        if alpha == 1.0
        else ctx.create("Mul", [x, ctx.scalar_like(x, alpha, f"{tag}_alpha")], suffix=f"{tag}_ax")
    )
    return ctx.create("Mul", [x, ctx.create("Sigmoid", [ax], suffix=f"{tag}_gate")], suffix=tag)


@converter("Swish")
def convert_swish(ctx: NodeContext) -> list[Value | None]:
    ctx.check_attrs({"alpha": None})
    x = ctx.inp(0)
    check_elem(ctx, x, FLOAT_ONLY)
    return [_swish(ctx, x, float(ctx.attr("alpha", 1.0)), "swish")]


@converter("SwiGLU")
def convert_swiglu(ctx: NodeContext) -> list[Value | None]:
    ctx.check_attrs({"alpha": None})
    a, b = same_kind_operands(ctx, FLOAT_ONLY)
    if a.type.shape != b.type.shape:
        raise ctx.unsupported(f"A {a.type} and B {b.type} differ in shape")
    return [ctx.create("Mul", [_swish(ctx, a, float(ctx.attr("alpha", 1.0)), "swish_a"), b])]


@converter("Shrink")
def convert_shrink(ctx: NodeContext) -> list[Value | None]:
    ctx.check_attrs({"bias": None, "lambd": None})
    x = ctx.inp(0)
    check_elem(ctx, x, NUMERIC)
    bias = ctx.scalar_like(x, float(ctx.attr("bias", 0.0)), "bias")
    lambd = float(ctx.attr("lambd", 0.5))
    below = ctx.create("Less", [x, ctx.scalar_like(x, -lambd, "neg_lambd")], suffix="below")
    above = ctx.create("Greater", [x, ctx.scalar_like(x, lambd, "lambd")], suffix="above")
    up = ctx.create("Add", [x, bias], suffix="up")
    down = ctx.create("Sub", [x, bias], suffix="down")
    inner = ctx.create("Where", [above, down, ctx.scalar_like(x, 0, "zero")], suffix="inner")
    return [ctx.create("Where", [below, up, inner])]


@converter("SpaceToDepth", "DepthToSpace")
def convert_space_depth(ctx: NodeContext) -> list[Value | None]:
    to_depth = ctx.op_type == "SpaceToDepth"
    ctx.check_attrs({"blocksize": None, "mode": ("DCR", "CRD")})
    x = ctx.inp(0)
    check_elem(ctx, x, ANY)
    if x.type.rank != 4 or not ctx.has_attr("blocksize"):
        raise ctx.unsupported(f"input {x.type} must be NCHW, with a blocksize")
    n, c, h, w = x.type.shape
    bs = int(ctx.attr("blocksize"))
    if to_depth:
        if h % bs or w % bs:
            raise ctx.unsupported(f"blocksize {bs} does not divide {h}x{w}")
        v = reshape(ctx, x, (n, c, h // bs, bs, w // bs, bs), "blocks")
        crd = ctx.attr("mode", "DCR") == "CRD"
        perm = [0, 1, 3, 5, 2, 4] if crd else [0, 3, 5, 1, 2, 4]
        v = ctx.create("Transpose", [v], {"perm": perm}, suffix="gathered")
        return [reshape(ctx, v, (n, c * bs * bs, h // bs, w // bs))]
    if c % (bs * bs):
        raise ctx.unsupported(f"blocksize {bs} does not divide {c} channels")
    cc = c // (bs * bs)
    if ctx.attr("mode", "DCR") == "DCR":
        v = reshape(ctx, x, (n, bs, bs, cc, h, w), "blocks")
        perm = [0, 3, 4, 1, 5, 2]
    else:
        v = reshape(ctx, x, (n, cc, bs, bs, h, w), "blocks")
        perm = [0, 1, 4, 2, 5, 3]
    v = ctx.create("Transpose", [v], {"perm": perm}, suffix="scattered")
    return [reshape(ctx, v, (n, cc, h * bs, w * bs))]


@converter("EyeLike")
def convert_eye_like(ctx: NodeContext) -> list[Value | None]:
    ctx.check_attrs({"dtype": None, "k": None})
    x = ctx.inp(0)
    if x.type.rank != 2:
        raise ctx.unsupported(f"input {x.type} is not 2-D")
    code = ctx.attr("dtype")
    elem = x.type.elem if code is None else ONNX_TO_ELEM.get(int(code))
    if elem is None:
        raise ctx.unsupported(f"dtype {dtype_name(int(code))}")
    rows, cols = x.type.shape
    eye = np.eye(rows, cols, k=int(ctx.attr("k", 0)), dtype=elem.np_dtype)
    return [ctx.constant(eye, suffix="eye")]


@converter("HannWindow", "HammingWindow", "BlackmanWindow")
def convert_window(ctx: NodeContext) -> list[Value | None]:
    ctx.check_attrs({"periodic": (0, 1), "output_datatype": None})
    size = int(ctx.require_const(0, "size").reshape(-1)[0])
    code = int(ctx.attr("output_datatype", 1))
    elem = ONNX_TO_ELEM.get(code)
    if elem is None:
        raise ctx.unsupported(f"output_datatype {dtype_name(code)}")
    n = size if int(ctx.attr("periodic", 1)) else size - 1
    k = np.arange(size, dtype=np.float64) * (2 * np.pi / n)
    if ctx.op_type == "HannWindow":
        w = 0.5 - 0.5 * np.cos(k)
    elif ctx.op_type == "HammingWindow":
        w = 25 / 46 - (1 - 25 / 46) * np.cos(k)
    else:
        w = 0.42 - 0.5 * np.cos(k) + 0.08 * np.cos(2 * k)
    return [ctx.constant(w.astype(elem.np_dtype), suffix="window")]


@converter("CenterCropPad")
def convert_center_crop_pad(ctx: NodeContext) -> list[Value | None]:
    ctx.check_attrs({"axes": None})
    x = ctx.inp(0)
    check_elem(ctx, x, ANY)
    rank = x.type.rank
    target = const_ints(ctx, 1, "shape")
    axes = [norm_axis(ctx, int(a), rank) for a in ctx.attr("axes", list(range(rank)))]
    if len(axes) != len(target):
        raise ctx.unsupported(f"shape {target} does not match axes {axes}")
    starts, ends = [0] * rank, list(x.type.shape)
    pads = [0] * (2 * rank)
    for a, t in zip(axes, target):
        d = x.type.shape[a]
        if t < d:  # crop, the odd element off the end
            starts[a] = (d - t) // 2
            ends[a] = starts[a] + t
        elif t > d:  # pad, the odd element at the end
            pads[a] = (t - d) // 2
            pads[a + rank] = t - d - pads[a]
    y = x
    if starts != [0] * rank or ends != list(x.type.shape):
        y = ctx.create(
            "Slice", [y], {"starts": starts, "ends": ends, "steps": [1] * rank}, suffix="crop"
        )
    if any(pads):
        y = ctx.create("Pad", [y], {"pads": pads, "mode": "constant", "value": 0.0}, suffix="pad")
    return [y]


@converter("ReverseSequence")
def convert_reverse_sequence(ctx: NodeContext) -> list[Value | None]:
    ctx.check_attrs({"batch_axis": (0, 1), "time_axis": (0, 1)})
    x, lens = ctx.inp(0), ctx.inp(1)
    check_elem(ctx, x, ANY)
    check_elem(ctx, lens, INT_KINDS, "sequence_lens")
    b_ax, t_ax = int(ctx.attr("batch_axis", 1)), int(ctx.attr("time_axis", 0))
    if b_ax == t_ax or x.type.rank < 2:
        raise ctx.unsupported("batch_axis and time_axis must differ on an input of rank >= 2")
    rank = x.type.rank
    steps = x.type.shape[t_ax]
    t = _ramp(ctx, steps, rank, t_ax, lens.type.np_dtype, "steps")
    shape = [1] * rank
    shape[b_ax] = x.type.shape[b_ax]
    n = reshape(ctx, lens, tuple(shape), "lens_b")
    one = ctx.constant(np.array(1, lens.type.np_dtype), suffix="one")
    back = ctx.create("Sub", [ctx.create("Sub", [n, one], suffix="last"), t], suffix="mirrored")
    src = ctx.create(
        "Where", [ctx.create("Less", [t, n], suffix="inside"), back, t], suffix="source"
    )
    full = ctx.create("Broadcast", [src], {"shape": x.type.shape}, suffix="source_full")
    return [ctx.create("GatherElements", [x, full], {"axis": t_ax})]


@converter("Compress")
def convert_compress(ctx: NodeContext) -> list[Value | None]:
    ctx.check_attrs({"axis": None})
    x = ctx.inp(0)
    cond = ctx.require_const(1, "condition").reshape(-1).astype(bool)
    if ctx.has_attr("axis"):
        axis = norm_axis(ctx, int(ctx.attr("axis")), x.type.rank)
    else:
        axis = 0
        x = reshape(ctx, x, (x.type.numel,), "flat")
    n = x.type.shape[axis]
    keep = np.nonzero(cond[:n])[0].astype(np.int64)
    return [ctx.create("Gather", [x, ctx.constant(keep, suffix="kept")], {"axis": axis})]


@converter("MatMulInteger")
def convert_matmul_integer(ctx: NodeContext) -> list[Value | None]:
    ctx.check_attrs({})
    a, b = ctx.inp(0), ctx.inp(1)
    for v in (a, b):
        check_elem(ctx, v, INT_ONLY)
    ops = []
    for i, v, zp_i in ((0, a, 2), (1, b, 3)):
        w = ctx.create("Cast", [v], {"to": "i32"}, suffix=f"in{i}_i32")
        if ctx.has_input(zp_i):
            zp = ctx.create("Cast", [ctx.inp(zp_i)], {"to": "i32"}, suffix=f"zp{i}_i32")
            if zp.type.numel != 1:  # per row of A / per column of B
                zp = reshape(
                    ctx, zp, (zp.type.numel, 1) if i == 0 else (1, zp.type.numel), f"zp{i}"
                )
            w = ctx.create("Sub", [w, zp], suffix=f"in{i}_centered")
        ops.append(w)
    return [ctx.create("MatMul", ops)]


@converter("RotaryEmbedding")
def convert_rotary_embedding(ctx: NodeContext) -> list[Value | None]:
    ctx.check_attrs({"interleaved": (0, 1), "num_heads": None, "rotary_embedding_dim": None})
    x, cos, sin = ctx.inp(0), ctx.inp(1), ctx.inp(2)
    check_elem(ctx, x, FLOAT_ONLY)
    shape = x.type.shape
    if x.type.rank == 4:
        v = ctx.create("Transpose", [x], {"perm": [0, 2, 1, 3]}, suffix="bshd")
    elif x.type.rank == 3:
        heads = int(ctx.attr("num_heads", 0))
        if not heads or shape[2] % heads:
            raise ctx.unsupported(f"3-D input {x.type} needs num_heads dividing its hidden size")
        v = reshape(ctx, x, (shape[0], shape[1], heads, shape[2] // heads), "bshd")
    else:
        raise ctx.unsupported(f"input {x.type} is neither 3-D nor 4-D")
    b, s, h, d = v.type.shape
    rot = int(ctx.attr("rotary_embedding_dim", 0)) or d
    half = rot // 2
    if ctx.has_input(3):
        pos = ctx.inp(3)
        cos = ctx.create("Gather", [cos, pos], {"axis": 0}, suffix="cos_at")
        sin = ctx.create("Gather", [sin, pos], {"axis": 0}, suffix="sin_at")
    cs = [
        reshape(ctx, c, c.type.shape[:2] + (1, half), f"{t}_b")
        for c, t in ((cos, "cos"), (sin, "sin"))
    ]

    def part(lo: int, hi: int, step: int, tag: str) -> Value:
        return ctx.create(
            "Slice",
            [v],
            {"starts": [0, 0, 0, lo], "ends": [b, s, h, hi], "steps": [1, 1, 1, step]},
            suffix=tag,
        )

    if int(ctx.attr("interleaved", 0)):
        x1, x2 = part(0, rot, 2, "x1"), part(1, rot, 2, "x2")
    else:
        x1, x2 = part(0, half, 1, "x1"), part(half, rot, 1, "x2")
    real = ctx.create(
        "Sub",
        [ctx.create("Mul", [cs[0], x1], suffix="c1"), ctx.create("Mul", [cs[1], x2], suffix="s2")],
        suffix="real",
    )
    imag = ctx.create(
        "Add",
        [ctx.create("Mul", [cs[1], x1], suffix="s1"), ctx.create("Mul", [cs[0], x2], suffix="c2")],
        suffix="imag",
    )
    if int(ctx.attr("interleaved", 0)):
        pairs = [reshape(ctx, t, (b, s, h, half, 1), f"{t.name}_pair") for t in (real, imag)]
        rotated = reshape(
            ctx, ctx.create("Concat", pairs, {"axis": 4}, suffix="pairs"), (b, s, h, rot), "rotated"
        )
    else:
        rotated = ctx.create("Concat", [real, imag], {"axis": 3}, suffix="rotated")
    if rot < d:
        rotated = ctx.create(
            "Concat", [rotated, part(rot, d, 1, "kept")], {"axis": 3}, suffix="joined"
        )
    if x.type.rank == 4:
        return [ctx.create("Transpose", [rotated], {"perm": [0, 2, 1, 3]})]
    return [reshape(ctx, rotated, shape)]
