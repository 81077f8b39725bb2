"""Reference kernels vs onnxruntime on one-node ONNX models; every op in the table has a kernel."""

from __future__ import annotations

import math

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from compiler.errors import ExecutionError
from compiler.graph import Module, TensorType, all_ops, get_op
from compiler.kernels.reference import KERNELS, evaluate, has_kernel
from compiler.kernels.reference_nn import erf

RNG = np.random.default_rng(0)


def rnd(*shape, dtype=np.float32, lo=None, hi=None):
    if lo is not None:
        return RNG.uniform(lo, hi, size=shape).astype(dtype)
    return RNG.standard_normal(shape).astype(dtype)


def run_ort(op, inputs, attrs=None, consts=None, opset=19, out_dtypes=(np.float32,), domain=""):
    """One-node model: `inputs` are graph inputs, `consts` (name -> array) initializers."""
    consts = consts or {}
    in_names = [f"x{i}" for i in range(len(inputs))]
    node_inputs = in_names + list(consts)
    outs = [f"y{i}" for i in range(len(out_dtypes))]
    node = helper.make_node(op, node_inputs, outs, domain=domain, **(attrs or {}))
    g = helper.make_graph(
        [node],
        "g",
        [
            helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)
            for n, a in zip(in_names, inputs)
        ],
        [
            helper.make_tensor_value_info(o, helper.np_dtype_to_tensor_dtype(np.dtype(d)), None)
            for o, d in zip(outs, out_dtypes)
        ],
        [numpy_helper.from_array(v, k) for k, v in consts.items()],
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 9
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])
    return sess.run(None, dict(zip(in_names, inputs)))


def ours(op, inputs, attrs=None):
    return KERNELS[op](list(inputs), get_op(op).normalize_attrs(attrs or {}))


def check(
    op,
    inputs,
    attrs=None,
    *,
    onnx_op=None,
    onnx_attrs=None,
    consts=None,
    opset=19,
    rtol=1e-5,
    atol=1e-6,
):
    got = ours(op, inputs, attrs)
    exp = run_ort(
        onnx_op or op,
        inputs,
        onnx_attrs if onnx_attrs is not None else attrs,
        consts,
        opset,
        [g.dtype for g in got],
    )
    assert len(got) == len(exp)
    for g, e in zip(got, exp):
        assert g.shape == e.shape, (g.shape, e.shape)
        if e.dtype.kind in "iub":
            np.testing.assert_array_equal(g.astype(e.dtype), e)
        else:
            np.testing.assert_allclose(g.astype(e.dtype), e, rtol=rtol, atol=atol)


def test_every_op_has_a_kernel():
    missing = {op for op in all_ops() if not has_kernel(op)}
    assert not missing, f"ops without a reference kernel: {sorted(missing)}"


# -- elementwise ------------------------------------------------------------------------------

UNARY = [
    "Relu",
    "Sigmoid",
    "Tanh",
    "Exp",
    "Abs",
    "Neg",
    "Erf",
    "Floor",
    "Ceil",
    "Softplus",
    "HardSwish",
    "Sign",
]


@pytest.mark.parametrize("op", UNARY)
def test_unary(op):
    x = rnd(3, 5, 7) * 3
    check(op, [x])


@pytest.mark.parametrize("op", ["Log", "Sqrt", "Reciprocal"])
def test_unary_positive(op):
    check(op, [rnd(4, 9, lo=0.1, hi=10)])


@pytest.mark.parametrize(
    "op,attrs",
    [
        ("LeakyRelu", {"alpha": 0.2}),
        ("Elu", {"alpha": 0.7}),
        ("Selu", {}),
        ("HardSigmoid", {"alpha": 0.3, "beta": 0.4}),
        ("Gelu", {"approximate": "none"}),
        ("Gelu", {"approximate": "tanh"}),
    ],
)
def test_unary_attrs(op, attrs):
    check(op, [rnd(2, 3, 17) * 4], attrs, opset=20)


def test_not():
    check("Not", [RNG.random((3, 4)) > 0.5])


def test_erf_precision():
    xs = np.concatenate([np.linspace(-9, 9, 20001), np.logspace(-20, 1, 300), [0.0, -0.0]])
    ref = np.array([math.erf(v) for v in xs])
    np.testing.assert_allclose(erf(xs), ref, rtol=1e-13, atol=1e-15)
    assert np.isnan(erf(np.array([np.nan, 0.3]))[0])


@pytest.mark.parametrize(
    "x,lo,hi",
    [
        (rnd(4, 6) * 5, np.float32(-1.0), np.float32(2.5)),
        (RNG.integers(-10, 10, (5,)).astype(np.int64), np.int64(-3), np.int64(4)),
    ],
    ids=["f32", "i64"],
)
def test_clip(x, lo, hi):
    # ours takes the bounds as attributes, ONNX as the (typed) inputs min and max.
    consts = {"lo": lo, "hi": hi}
    check("Clip", [x], {"min": float(lo), "max": float(hi)}, onnx_attrs={}, consts=consts)


BIN_SHAPES = [((3, 4), (3, 4)), ((2, 3, 4), (4,)), ((2, 1, 5), (3, 1)), ((1,), (2, 2)), ((), (3,))]


# PRelu's slope must broadcast to x (ONNX's unidirectional rule): no wider slopes.
@pytest.mark.parametrize(
    "op,shapes",
    [
        (op, sh)
        for op in ["Add", "Sub", "Mul", "Div", "Max", "Min", "PRelu"]
        for sh in BIN_SHAPES
        if not (op == "PRelu" and len(sh[1]) > len(sh[0]))
    ],
)
def test_binary_float(op, shapes):
    a, b = rnd(*shapes[0]), rnd(*shapes[1])
    if op == "Div":
        b = np.where(np.abs(b) < 0.1, 1.0, b).astype(np.float32)
    check(op, [a, b])


@pytest.mark.parametrize("op", ["Add", "Sub", "Mul", "Div", "Max", "Min"])
@pytest.mark.parametrize("dtype", [np.int64, np.int32])
def test_binary_int(op, dtype):
    a = RNG.integers(-20, 20, (4, 5)).astype(dtype)
    b = RNG.integers(-7, 7, (5,)).astype(dtype)
    b[b == 0] = 3
    check(op, [a, b])


def test_int_div_truncates_toward_zero():
    (q,) = ours("Div", [np.array([7, -7, 7, -7]), np.array([2, 2, -2, -2])])
    assert q.tolist() == [3, -3, -3, 3]
    with pytest.raises(ExecutionError):
        ours("Div", [np.array([1]), np.array([0])])


def test_pow():
    check("Pow", [rnd(3, 4, lo=0.1, hi=3), rnd(4, lo=-2, hi=2)])
    check("Pow", [RNG.integers(-5, 5, (6,)), np.array([0, 1, 2, 3, 2, 1])])


@pytest.mark.parametrize("op", ["Equal", "Less", "Greater"])
def test_compare(op):
    a = RNG.integers(0, 3, (3, 4)).astype(np.float32)
    b = RNG.integers(0, 3, (4,)).astype(np.float32)
    check(op, [a, b])


@pytest.mark.parametrize("op", ["And", "Or"])
def test_logical(op):
    check(op, [RNG.random((2, 3, 4)) > 0.5, RNG.random((3, 1)) > 0.5])


def test_where():
    check("Where", [RNG.random((3, 1, 4)) > 0.5, rnd(2, 4), rnd(1, 1, 1)])


@pytest.mark.parametrize(
    "src,to,onnx_to",
    [
        (np.float32, "i64", TensorProto.INT64),
        (np.float32, "i32", TensorProto.INT32),
        (np.float32, "bool", TensorProto.BOOL),
        (np.int64, "f32", TensorProto.FLOAT),
        (np.bool_, "f32", TensorProto.FLOAT),
        (np.int64, "bool", TensorProto.BOOL),
        (np.float32, "f16", TensorProto.FLOAT16),
    ],
)
def test_cast(src, to, onnx_to):
    x = (rnd(3, 7) * 5).astype(src) if src != np.bool_ else RNG.random((3, 7)) > 0.5
    if src == np.float32:
        x[0, :3] = [0.0, -0.0, -2.7]
    check("Cast", [x], {"to": to}, onnx_attrs={"to": onnx_to})


# -- tensor ops -------------------------------------------------------------------------------


def test_concat_split():
    check("Concat", [rnd(2, 3), rnd(2, 1), rnd(2, 4)], {"axis": 1})
    check("Concat", [rnd(2, 3), rnd(1, 3)], {"axis": -2})
    check(
        "Split",
        [rnd(2, 9)],
        {"axis": 1, "splits": (2, 3, 4)},
        onnx_attrs={"axis": 1},
        consts={"s": np.array([2, 3, 4])},
    )


@pytest.mark.parametrize(
    "starts,ends,steps,onnx_args",
    [
        ((0, 1, 0), (2, 4, 5), (1, 1, 2), ([0, 1, 0], [2, 4, 5], [1, 1, 2])),
        ((1, 3, 4), (-1, 0, -1), (-1, -1, -2), ([1, 3, 4], [-100, 0, -100], [-1, -1, -2])),
        ((0, 0, 4), (2, 4, 1), (1, 2, -1), ([0, 0, -1], [2, 4, 1], [1, 2, -1])),
    ],
)
def test_slice(starts, ends, steps, onnx_args):
    x = rnd(2, 4, 5)
    check(
        "Slice",
        [x],
        {"starts": starts, "ends": ends, "steps": steps},
        onnx_attrs={},
        consts={
            "s": np.array(onnx_args[0]),
            "e": np.array(onnx_args[1]),
            "a": np.array([0, 1, 2]),
            "st": np.array(onnx_args[2]),
        },
    )


def test_reshape_transpose_broadcast_tile():
    x = rnd(2, 3, 4)
    check("Reshape", [x], {"shape": (4, 6)}, onnx_attrs={}, consts={"s": np.array([4, 6])})
    check("Transpose", [x], {"perm": (2, 0, 1)})
    check(
        "Broadcast",
        [rnd(3, 1)],
        {"shape": (2, 3, 4)},
        onnx_op="Expand",
        onnx_attrs={},
        consts={"s": np.array([2, 3, 4])},
    )
    check("Tile", [x], {"repeats": (1, 2, 3)}, onnx_attrs={}, consts={"r": np.array([1, 2, 3])})


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_gather(axis):
    x = rnd(4, 5, 6)
    idx = np.array([[0, -1], [2, 1]], dtype=np.int64)
    check("Gather", [x, idx], {"axis": axis})


@pytest.mark.parametrize("mode", ["constant", "edge", "reflect"])
def test_pad(mode):
    x = rnd(2, 5, 6)
    pads = (0, 1, 2, 1, 3, 0)
    check(
        "Pad",
        [x],
        {"pads": pads, "mode": mode, "value": 1.5},
        onnx_attrs={"mode": mode},
        consts={"p": np.array(pads), "v": np.float32(1.5)},
    )


def test_pad_negative():
    x = rnd(4, 6)
    check(
        "Pad", [x], {"pads": (-1, 2, 0, -2)}, onnx_attrs={}, consts={"p": np.array([-1, 2, 0, -2])}
    )


# -- linear algebra and reductions ------------------------------------------------------------


@pytest.mark.parametrize(
    "sa,sb", [((3, 4), (4, 5)), ((2, 3, 4), (4, 6)), ((2, 1, 3, 4), (5, 4, 2))]
)
def test_matmul(sa, sb):
    check("MatMul", [rnd(*sa), rnd(*sb)], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    "act,args",
    [
        ("none", ()),
        ("relu", ()),
        ("clip", (0.0, 6.0)),
        ("leaky_relu", (0.1,)),
        ("sigmoid", ()),
        ("tanh", ()),
    ],
)
def test_fully_connected(act, args):
    x, w, b = rnd(3, 8), rnd(8, 5), rnd(5)
    (y,) = ours("FullyConnected", [x, w, b], {"activation": act, "act_args": args})
    ref = x.astype(np.float64) @ w + b
    ref = {
        "none": ref,
        "relu": np.maximum(ref, 0),
        "clip": np.clip(ref, 0, 6),
        "leaky_relu": np.where(ref >= 0, ref, 0.1 * ref),
        "sigmoid": 1 / (1 + np.exp(-ref)),
        "tanh": np.tanh(ref),
    }[act]
    np.testing.assert_allclose(y, ref, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("op", ["ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd"])
@pytest.mark.parametrize("axes,keep", [((1,), 1), ((0, 2), 0), ((-1,), 0)])
def test_reduce(op, axes, keep):
    x = rnd(3, 4, 5, lo=0.5, hi=1.5)
    check(
        op,
        [x],
        {"axes": axes, "keepdims": keep},
        onnx_attrs={"keepdims": keep},
        consts={"axes": np.array(axes)},
        opset=18,
    )


@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
@pytest.mark.parametrize("axis,keep,last", [(0, 1, 0), (1, 0, 1), (-1, 1, 1)])
def test_arg(op, axis, keep, last):
    x = RNG.integers(0, 3, (3, 4, 5)).astype(np.float32)  # many ties
    check(op, [x], {"axis": axis, "keepdims": keep, "select_last_index": last})


@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax"])
@pytest.mark.parametrize("axis", [-1, 1, 0])
def test_softmax(op, axis):
    check(op, [rnd(3, 4, 5) * 10], {"axis": axis}, opset=13)


# -- nn ---------------------------------------------------------------------------------------

CONV_CASES = [
    # x shape, w shape, strides, pads (t,l,b,r), dilations, group
    ((1, 3, 8, 8), (4, 3, 3, 3), (1, 1), (0, 0, 0, 0), (1, 1), 1),
    ((2, 4, 9, 7), (6, 2, 3, 2), (2, 1), (1, 0, 2, 1), (1, 1), 2),
    ((1, 6, 10, 10), (6, 1, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 6),
    ((1, 4, 11, 12), (8, 1, 3, 3), (2, 2), (1, 1, 1, 1), (1, 1), 4),
    ((1, 3, 13, 11), (5, 3, 3, 3), (2, 3), (2, 1, 0, 3), (2, 3), 1),
    ((1, 2, 5, 5), (3, 2, 1, 1), (1, 1), (0, 0, 0, 0), (1, 1), 1),
]


@pytest.mark.parametrize("xs,ws,strides,pads,dil,group", CONV_CASES)
def test_conv(xs, ws, strides, pads, dil, group):
    x, w, b = rnd(*xs), rnd(*ws), rnd(ws[0])
    onnx_pads = [pads[0], pads[1], pads[2], pads[3]]
    check(
        "Conv",
        [x, w, b],
        {"strides": strides, "pads": pads, "dilations": dil, "group": group},
        onnx_attrs={"strides": strides, "pads": onnx_pads, "dilations": dil, "group": group},
        rtol=1e-4,
        atol=1e-5,
    )


def test_conv_fused_activation():
    x, w, b = rnd(1, 3, 6, 6), rnd(4, 3, 3, 3), rnd(4)
    (plain,) = ours("Conv", [x, w, b])
    (y,) = ours("Conv", [x, w, b], {"activation": "clip", "act_args": (0.0, 1.0)})
    np.testing.assert_allclose(y, np.clip(plain, 0, 1))
    (y,) = ours("Conv", [x, w, b], {"activation": "leaky_relu", "act_args": (0.3,)})
    np.testing.assert_allclose(y, np.where(plain >= 0, plain, 0.3 * plain), rtol=1e-6)


CONVT_CASES = [
    # x shape, w shape, strides, pads, dilations, group, output_padding
    ((1, 3, 4, 4), (3, 2, 3, 3), (1, 1), (0, 0, 0, 0), (1, 1), 1, (0, 0)),
    ((2, 4, 5, 3), (4, 3, 3, 2), (2, 2), (1, 0, 1, 1), (1, 1), 2, (1, 0)),
    ((1, 2, 4, 5), (2, 3, 2, 2), (2, 2), (0, 0, 0, 0), (1, 1), 1, (0, 0)),
    ((1, 4, 3, 4), (4, 1, 3, 3), (3, 2), (1, 2, 0, 1), (2, 1), 4, (2, 1)),
]


@pytest.mark.parametrize("xs,ws,strides,pads,dil,group,outpad", CONVT_CASES)
def test_conv_transpose(xs, ws, strides, pads, dil, group, outpad):
    x, w, b = rnd(*xs), rnd(*ws), rnd(ws[1] * group)
    attrs = {
        "strides": strides,
        "pads": pads,
        "dilations": dil,
        "group": group,
        "output_padding": outpad,
    }
    onnx_attrs = dict(attrs, pads=[pads[0], pads[1], pads[2], pads[3]])
    check("ConvTranspose", [x, w, b], attrs, onnx_attrs=onnx_attrs, rtol=1e-4, atol=1e-5)


POOL_CASES = [
    # kernel, strides, pads, ceil, dilations (max only)
    ((2, 2), (2, 2), (0, 0, 0, 0), 0, (1, 1)),
    ((3, 3), (2, 2), (1, 1, 1, 1), 0, (1, 1)),
    ((3, 3), (2, 2), (0, 0, 0, 0), 1, (1, 1)),
    ((3, 2), (2, 3), (1, 0, 1, 1), 1, (1, 1)),
    ((2, 3), (1, 2), (0, 1, 1, 0), 0, (2, 2)),
]


@pytest.mark.parametrize("kernel,strides,pads,ceil,dil", POOL_CASES)
def test_max_pool(kernel, strides, pads, ceil, dil):
    x = rnd(2, 3, 9, 10)
    onnx_pads = [pads[0], pads[1], pads[2], pads[3]]
    check(
        "MaxPool",
        [x],
        {"kernel": kernel, "strides": strides, "pads": pads, "ceil_mode": ceil, "dilations": dil},
        onnx_attrs={
            "kernel_shape": kernel,
            "strides": strides,
            "pads": onnx_pads,
            "ceil_mode": ceil,
            "dilations": dil,
        },
    )


@pytest.mark.parametrize("kernel,strides,pads,ceil,dil", POOL_CASES[:4])
@pytest.mark.parametrize("cip", [0, 1])
def test_avg_pool(kernel, strides, pads, ceil, dil, cip):
    x = rnd(2, 3, 9, 10)
    onnx_pads = [pads[0], pads[1], pads[2], pads[3]]
    check(
        "AvgPool",
        [x],
        {
            "kernel": kernel,
            "strides": strides,
            "pads": pads,
            "ceil_mode": ceil,
            "count_include_pad": cip,
        },
        onnx_op="AveragePool",
        onnx_attrs={
            "kernel_shape": kernel,
            "strides": strides,
            "pads": onnx_pads,
            "ceil_mode": ceil,
            "count_include_pad": cip,
        },
    )


def test_global_pools():
    x = rnd(2, 3, 5, 7)
    check("GlobalAvgPool", [x], onnx_op="GlobalAveragePool")
    check("GlobalMaxPool", [x])


def test_batch_norm():
    x = rnd(2, 4, 3, 5)
    scale, bias, mean = rnd(4), rnd(4), rnd(4)
    var = rnd(4, lo=0.5, hi=2)
    check(
        "BatchNorm",
        [x, scale, bias, mean, var],
        {"epsilon": 1e-3},
        onnx_op="BatchNormalization",
        rtol=1e-5,
        atol=1e-5,
    )


@pytest.mark.parametrize("axis,pshape", [(-1, (16,)), (1, (3, 16)), (-2, (1, 16))])
def test_layer_norm(axis, pshape):
    x = rnd(2, 3, 16) * 3 + 1
    check(
        "LayerNorm",
        [x, rnd(*pshape), rnd(*pshape)],
        {"axis": axis, "epsilon": 1e-5},
        onnx_op="LayerNormalization",
        rtol=1e-5,
        atol=1e-5,
        opset=17,
    )


@pytest.mark.parametrize("size", [1, 3, 5])
def test_lrn(size):
    x = rnd(2, 7, 3, 4)
    attrs = {"size": size, "alpha": 1e-3, "beta": 0.6, "bias": 1.5}
    check("LRN", [x], attrs, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("size", [2, 4])
def test_lrn_even_size_vs_spec(size):
    # onnxruntime refuses even sizes (and onnx.reference's LRN loops over the batch axis by
    # mistake), so check the spec's formula directly.
    x = rnd(1, 6, 2, 3)
    attrs = {"size": size, "alpha": 1e-2, "beta": 0.6, "bias": 1.5}
    c1, c2 = (size - 1) // 2, -(-(size - 1) // 2)
    exp = np.empty_like(x)
    for c in range(6):
        sq = np.sum(x[:, max(0, c - c1) : min(5, c + c2) + 1] ** 2, axis=1)
        exp[:, c] = x[:, c] / (1.5 + 1e-2 / size * sq) ** 0.6
    np.testing.assert_allclose(ours("LRN", [x], attrs)[0], exp, rtol=1e-5, atol=1e-6)


RESIZE_CASES = [
    ("nearest", "asymmetric", "floor", (1, 2, 4, 5), (1, 2, 8, 10)),
    ("nearest", "half_pixel", "round_prefer_floor", (1, 2, 4, 5), (1, 2, 7, 13)),
    ("nearest", "half_pixel", "round_prefer_ceil", (1, 2, 6, 5), (1, 2, 9, 10)),
    ("nearest", "align_corners", "ceil", (1, 2, 4, 5), (1, 2, 7, 3)),
    ("nearest", "asymmetric", "round_prefer_floor", (1, 2, 8, 6), (1, 2, 4, 3)),
    ("nearest", "tf_half_pixel_for_nn", "floor", (1, 2, 4, 5), (1, 2, 8, 11)),
    ("linear", "half_pixel", "floor", (1, 2, 4, 5), (1, 2, 8, 10)),
    ("linear", "pytorch_half_pixel", "floor", (1, 2, 4, 5), (1, 2, 7, 1)),
    ("linear", "align_corners", "floor", (2, 3, 4, 5), (2, 3, 9, 11)),
    ("linear", "asymmetric", "floor", (1, 2, 8, 6), (1, 2, 5, 4)),
    ("cubic", "half_pixel", "floor", (1, 2, 4, 5), (1, 2, 8, 10)),
    ("cubic", "align_corners", "floor", (1, 1, 5, 6), (1, 1, 9, 7)),
    ("cubic", "asymmetric", "floor", (1, 1, 6, 5), (1, 1, 3, 9)),
    ("cubic", "pytorch_half_pixel", "floor", (1, 1, 4, 4), (1, 1, 8, 8)),
]


# exclude_outside only matters for cubic, so it is swept only there.
@pytest.mark.parametrize(
    "mode,ctm,nearest,ins,outs,exclude",
    [(*c, 0) for c in RESIZE_CASES] + [(*c, 1) for c in RESIZE_CASES if c[0] == "cubic"],
)
def test_resize(mode, ctm, nearest, ins, outs, exclude):
    x = rnd(*ins)
    attrs = {
        "mode": mode,
        "coordinate_transformation_mode": ctm,
        "nearest_mode": nearest,
        "cubic_coeff_a": -0.5 if exclude else -0.75,
        "exclude_outside": exclude,
    }
    check(
        "Resize",
        [x],
        dict(attrs, out_shape=outs),
        onnx_attrs=attrs,
        consts={
            "roi": np.array([], np.float32),
            "scales": np.array([], np.float32),
            "sizes": np.array(outs, np.int64),
        },
        opset=13,
        rtol=1e-5,
        atol=1e-5,
    )


def test_resize_int_nearest():
    x = RNG.integers(0, 100, (1, 1, 3, 4)).astype(np.int64)
    (y,) = ours(
        "Resize",
        [x],
        {
            "out_shape": (1, 1, 6, 8),
            "mode": "nearest",
            "coordinate_transformation_mode": "asymmetric",
            "nearest_mode": "floor",
        },
    )
    np.testing.assert_array_equal(y, x.repeat(2, 2).repeat(2, 3))


# -- evaluate ---------------------------------------------------------------------------------


def _one_node(op, types, attrs=None):
    m = Module("t")
    fn = m.create_function()
    ins = [m.add_placeholder(f"in{i}", t) for i, t in enumerate(types)]
    return fn.create(op, ins, attrs)


def test_evaluate_casts_and_checks_shape():
    node = _one_node("Add", [TensorType.parse("f32<2x3>"), TensorType.parse("f32<3>")])
    (y,) = evaluate(node, [np.ones((2, 3), np.float64), np.ones(3, np.float64)])
    assert y.dtype == np.float32 and y.shape == (2, 3)
    with pytest.raises(ExecutionError, match=r"node 'add'.*shape \[4, 3\].*f32<2x3>"):
        evaluate(node, [np.ones((4, 3), np.float32), np.ones(3, np.float32)])


def test_evaluate_wraps_kernel_failures():
    node = _one_node("Gather", [TensorType.parse("f32<3>"), TensorType.parse("i64<1>")])
    with pytest.raises(ExecutionError, match="gather.*out of range"):
        evaluate(node, [np.ones(3, np.float32), np.array([5])])
