"""Every LLVM emitter against the arena interpreter on small graphs with odd sizes.

Each case is a one- or two-node ONNX model compiled by the whole pipeline; the LLVM executor
and the arena interpreter run the same LIR over the same memory plan.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from compiler.backends.contract import LLVM
from compiler.backends.interpreter.arena import ArenaInterpreter
from compiler.backends.llvm import emitters
from compiler.backends.llvm.emitters import pool as pool_emitter
from compiler.backends.llvm.executor import LLVMExecutor, _lir_and_plan
from compiler.errors import CodegenError
from compiler.graph.types import ElemKind
from compiler.pipeline import compile_model

F = TensorProto.FLOAT
I64 = TensorProto.INT64
B = TensorProto.BOOL
NP = {F: np.float32, I64: np.int64, B: np.bool_, TensorProto.INT32: np.int32}


def _model(op, inputs, out_type=F, consts=(), opset=17, n_out=1, **attrs):
    """One `op` node: `inputs` = [(name, dtype, shape)], `consts` = [(name, array)]."""
    names = [n for n, _, _ in inputs] + [n for n, _ in consts]
    outs = [f"y{i}" for i in range(n_out)]
    node = helper.make_node(op, names, outs, **attrs)
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info(n, t, list(s)) for n, t, s in inputs],
        [helper.make_tensor_value_info(o, out_type, None) for o in outs],
        [numpy_helper.from_array(a, n) for n, a in consts],
    )
    return _infer(helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)]))


def _infer(model):
    """Output shapes filled in by ONNX shape inference (the checker wants them)."""
    return onnx.shape_inference.infer_shapes(model)


def _data(inputs, seed=0, positive=False):
    rng = np.random.default_rng(seed)
    out = {}
    for n, t, s in inputs:
        if t == F:
            a = rng.standard_normal(s).astype(np.float32)
            out[n] = np.abs(a) + np.float32(0.1) if positive else a
        elif t == B:
            out[n] = rng.random(s) < 0.5
        else:
            out[n] = rng.integers(-5, 6, size=s).astype(NP[t])
    return out


def check(model, data, *, rtol=1e-5, atol=1e-6, exact=False, kinds=()):
    """LLVM vs the arena interpreter; `kinds`: instruction kinds the LIR must contain (so a test
    meant for an emitter cannot pass on a lowered form)."""
    result = compile_model(model)
    lir, plan = _lir_and_plan(result)
    missing = set(kinds) - {i.kind for i in lir.code}
    assert not missing, f"no {sorted(missing)} instruction: {[i.kind for i in lir.code]}"
    ref = ArenaInterpreter(lir, plan)
    ex = LLVMExecutor(lir, plan)
    names = [w.name for w in lir.inputs()]
    feed = {n: data[k] for n, k in zip(names, data)}
    want = ref.run(feed)
    got = ex.run(feed)
    assert set(want) == set(got)
    for k in want:
        assert got[k].dtype == want[k].dtype and got[k].shape == want[k].shape, k
        if exact or want[k].dtype.kind != "f":
            np.testing.assert_array_equal(got[k], want[k])
        else:
            np.testing.assert_allclose(got[k], want[k], rtol=rtol, atol=atol)
    # Stepping the whole program gives exactly what one run_all call gives.
    ex.reset(feed)
    while not ex.done:
        ex.step()
    for k, v in ex.outputs().items():
        np.testing.assert_array_equal(v, got[k])
    return ex


UNARY = [
    ("Relu", {}),
    ("Sigmoid", {}),
    ("Tanh", {}),
    ("Exp", {}),
    ("Abs", {}),
    ("Neg", {}),
    ("Reciprocal", {}),
    ("Erf", {}),
    ("Floor", {}),
    ("Ceil", {}),
    ("Softplus", {}),
    ("HardSwish", {}),
    ("Sign", {}),
    ("LeakyRelu", {"alpha": 0.3}),
    ("Elu", {"alpha": 0.7}),
    ("Selu", {}),
    ("HardSigmoid", {"alpha": 0.3, "beta": 0.4}),
    ("Log", {}),
    ("Sqrt", {}),
]


@pytest.mark.parametrize("op,attrs", UNARY, ids=[u[0] for u in UNARY])
@pytest.mark.parametrize("shape", [(3, 37), (1, 5, 17)])
def test_unary(op, attrs, shape):
    ins = [("x", F, shape)]
    kinds = [op.lower()] if LLVM.runs(op, [ElemKind.F32]) else []
    check(
        _model(op, ins, **attrs),
        _data(ins, positive=op in ("Log", "Sqrt")),
        rtol=2e-6,
        kinds=kinds,
    )


def test_gelu_and_clip():
    ins = [("x", F, (7, 19))]
    check(_model("Gelu", ins, opset=20), _data(ins))
    check(
        _model("Clip", ins, consts=[("lo", np.float32(-0.5)), ("hi", np.float32(0.7))]),
        _data(ins),
        kinds=["clip"],
    )


BINARY = ["Add", "Sub", "Mul", "Div", "Max", "Min", "PRelu"]


@pytest.mark.parametrize("op", BINARY)
@pytest.mark.parametrize("sa,sb", [((3, 1, 37), (5, 37)), ((2, 3, 17), (2, 3, 17)), ((1,), (4, 9))])
def test_binary_broadcast(op, sa, sb):
    if op == "PRelu":  # the slope must broadcast into the input
        sa, sb = ((3, 5, 37), sb) if sa == (3, 1, 37) else (sa, sb)
        if len(sa) < len(sb):
            sa, sb = sb, sa
    ins = [("a", F, sa), ("b", F, sb)]
    check(_model(op, ins), _data(ins), kinds=[op.lower()])


@pytest.mark.parametrize("op", ["Equal", "Less", "Greater"])
def test_compare(op):
    ins = [("a", I64, (3, 17)), ("b", I64, (17,))]
    check(_model(op, ins, out_type=B), _data(ins))
    ins = [("a", F, (3, 17)), ("b", F, (3, 1))]
    check(_model(op, ins, out_type=B), _data(ins))


def test_logic_where_cast_pow():
    ins = [("a", B, (4, 9)), ("b", B, (9,))]
    check(_model("And", ins, out_type=B), _data(ins))
    check(_model("Or", ins, out_type=B), _data(ins))
    check(_model("Not", ins[:1], out_type=B), _data(ins[:1]))
    ins = [("c", B, (4, 1)), ("x", F, (4, 9)), ("y", F, (9,))]
    check(_model("Where", ins), _data(ins))
    ins = [("x", F, (5, 13))]
    check(_model("Cast", ins, out_type=I64, to=I64), _data(ins))
    ins = [("x", I64, (5, 13))]
    check(_model("Cast", ins, out_type=F, to=F), _data(ins))
    check(_model("Cast", ins, out_type=B, to=B), _data(ins))
    ins = [("a", I64, (3, 7)), ("b", I64, (3, 7))]
    check(_model("Add", ins, out_type=I64), _data(ins))
    check(_model("Mul", ins, out_type=I64), _data(ins))
    ins = [("a", F, (3, 7)), ("b", F, (3, 7))]
    check(_model("Pow", ins), _data(ins, positive=True), rtol=1e-5)


SPECIALS = np.array(
    [0.0, -0.0, 1e-45, -1e-45, 1e-40, 1.1754942e-38, 1e-8, 0.3, 0.6249, 0.625, 0.63, 1, 2.5, 9.1,
     20, 88, 89, 100, 1e30, 3.4e38, np.inf, -np.inf, np.nan, -1, -0.5, -20, -1e30],
    np.float32,
)  # fmt: skip


@pytest.mark.parametrize("op", ["Tanh", "Log", "Sigmoid", "Exp", "Erf"])
def test_vector_math_special_values(op):
    """The vectorisable polynomial forms of the transcendental functions keep numpy's answer
    on zeros (with their sign), denormals, the branch points, overflow, infinities and NaN,
    and stay within a few ulp elsewhere."""
    rng = np.random.default_rng(1)
    x = np.concatenate(
        [
            SPECIALS,
            rng.standard_normal(4000).astype(np.float32) * 4,
            np.exp(rng.uniform(-87, 88, 4000)).astype(np.float32),
        ]
    )
    ins = [("x", F, x.shape)]
    ex = check(_model(op, ins), {"x": x}, rtol=2e-6, atol=1e-6)
    got = ex.outputs()["y0"]
    with np.errstate(all="ignore"):
        want = ArenaInterpreter(ex.lir, ex.plan).run({"x": x})["y0"]
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    finite = np.isfinite(want)
    np.testing.assert_array_equal(got[~finite & ~np.isnan(want)], want[~finite & ~np.isnan(want)])
    np.testing.assert_array_equal(np.signbit(got[finite]), np.signbit(want[finite]))
    nz = finite & (np.abs(want) >= np.finfo(np.float32).tiny)  # denormal results: atol
    ulp = np.abs(got[nz].astype(np.float64) - want[nz]) / np.spacing(np.abs(want[nz]))
    bound = 8 if op == "Erf" else 2  # erf's rational form near 1 is a few ulp
    assert ulp.max() <= bound, (op, float(ulp.max()), x[nz][np.argmax(ulp)])


CONVS = [
    # name, C, H, W, K, k, stride, pad, group
    ("1x1", 13, 9, 11, 17, 1, 1, 0, 1),
    ("3x3-shift", 8, 12, 13, 19, 3, 1, 1, 1),
    ("3x3-stride2", 8, 15, 13, 24, 3, 2, 1, 1),
    ("5x5-nopad", 3, 14, 14, 6, 5, 1, 0, 1),
    ("stem-7x7s2", 3, 29, 31, 32, 7, 2, 3, 1),
    ("stem-7x7s2-odd", 3, 23, 37, 64, 7, 2, 3, 1),
    ("stem-7x7s2-chunks", 3, 61, 67, 64, 7, 2, 3, 1),  # row chunks + a tail chunk
    ("stem-5x5s1", 4, 13, 17, 40, 5, 1, 2, 1),
    ("stem-9x9s2", 2, 21, 19, 32, 9, 2, 4, 1),
    ("stem-3x3s2", 3, 17, 15, 48, 3, 2, 1, 1),
    ("small-spatial-pixrows", 64, 7, 7, 64, 3, 1, 1, 1),
    ("small-1x1-pixrows", 80, 5, 5, 96, 1, 1, 0, 1),
    ("depthwise", 12, 10, 9, 12, 3, 1, 1, 12),
    ("depthwise-s2", 12, 11, 10, 12, 3, 2, 1, 12),
    # Rows wider than a vector (full vectors + a masked tail), row tiles + a tail tile.
    ("depthwise-5x5-wide", 5, 23, 37, 5, 5, 1, 2, 5),
    ("depthwise-s2-wide", 6, 21, 41, 6, 3, 2, 1, 6),
    ("depthwise-5x5-s2-wide", 3, 19, 35, 3, 5, 2, 2, 3),
    ("depthwise-mult2-wide", 4, 9, 35, 8, 3, 1, 1, 4),
    ("grouped", 12, 8, 9, 18, 3, 1, 1, 3),
]


@pytest.mark.parametrize("case", CONVS, ids=[c[0] for c in CONVS])
@pytest.mark.parametrize("act", [None, "Relu"])
def test_conv(case, act):
    _, C, H, W, K, k, st, pd, g = case
    rng = np.random.default_rng(1)
    w = (rng.standard_normal((K, C // g, k, k)) * 0.2).astype(np.float32)
    bias = rng.standard_normal(K).astype(np.float32)
    x = [("x", F, (1, C, H, W))]
    nodes = [
        helper.make_node("Conv", ["x", "w", "b"], ["c"], strides=[st, st], pads=[pd] * 4, group=g)
    ]
    nodes.append(helper.make_node(act or "Identity", ["c"], ["y"]))
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", F, [1, C, H, W])],
        [helper.make_tensor_value_info("y", F, None)],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(bias, "b")],
    )
    model = _infer(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]))
    check(model, _data(x), rtol=1e-4, atol=1e-4)


def test_conv_runtime_weights_and_transpose():
    ins = [("x", F, (2, 4, 7, 6)), ("w", F, (6, 2, 3, 3)), ("b", F, (6,))]
    check(
        _model("Conv", ins, pads=[1, 0, 1, 2], strides=[1, 2], group=2),
        _data(ins),
        rtol=1e-4,
        atol=1e-5,
    )
    ins = [("x", F, (1, 3, 5, 4)), ("w", F, (3, 2, 3, 3)), ("b", F, (2,))]
    check(
        _model("ConvTranspose", ins, strides=[2, 2], pads=[1, 1, 0, 0]),
        _data(ins),
        rtol=1e-4,
        atol=1e-5,
    )


def test_matmul_variants():
    rng = np.random.default_rng(2)
    bconst = rng.standard_normal((33, 19)).astype(np.float32)
    ins = [("a", F, (17, 33))]
    check(_model("MatMul", ins, consts=[("b", bconst)]), _data(ins), rtol=1e-4, atol=1e-5)
    ins = [("a", F, (2, 5, 33))]
    check(_model("MatMul", ins, consts=[("b", bconst)]), _data(ins), rtol=1e-4, atol=1e-5)
    ins = [("a", F, (2, 3, 5, 7)), ("b", F, (3, 7, 4))]
    check(_model("MatMul", ins), _data(ins), rtol=1e-4, atol=1e-5)
    ins = [("a", F, (9, 40)), ("b", F, (40, 35))]
    check(_model("MatMul", ins), _data(ins), rtol=1e-4, atol=1e-5)
    w = rng.standard_normal((21, 40)).astype(np.float32)
    c = rng.standard_normal(21).astype(np.float32)
    ins = [("x", F, (3, 40))]
    check(
        _model("Gemm", ins, consts=[("w", w), ("c", c)], transB=1),
        _data(ins),
        rtol=1e-4,
        atol=1e-5,
        kinds=["fullyconnected"],
    )


POOLS = [
    ("MaxPool", dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])),
    ("MaxPool", dict(kernel_shape=[2, 3], strides=[2, 1], ceil_mode=1)),
    ("MaxPool", dict(kernel_shape=[2, 2], dilations=[2, 2])),
    ("AveragePool", dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])),
    ("AveragePool", dict(kernel_shape=[3, 3], pads=[1, 1, 1, 1], count_include_pad=1)),
    ("AveragePool", dict(kernel_shape=[2, 2], strides=[2, 2], ceil_mode=1)),
    ("GlobalAveragePool", {}),
    ("GlobalMaxPool", {}),
]


@pytest.mark.parametrize("op,attrs", POOLS, ids=[f"{p[0]}{i}" for i, p in enumerate(POOLS)])
def test_pool(op, attrs):
    ins = [("x", F, (2, 3, 11, 13))]
    check(_model(op, ins, **attrs), _data(ins), rtol=1e-5)


SEP_POOLS = [
    # (H, W), kernel, strides, pads: the separable max-pool (row pass, then column pass)
    ((11, 13), [3, 3], [1, 1], [1, 1, 1, 1]),
    ((11, 13), [3, 3], [2, 2], [1, 1, 1, 1]),
    ((29, 37), [3, 3], [1, 1], [1, 1, 1, 1]),  # vector body + overlapping tail
    ((29, 37), [3, 3], [2, 2], [1, 1, 1, 1]),
    ((40, 53), [3, 3], [2, 2], [0, 0, 0, 0]),
    ((17, 35), [2, 3], [1, 2], [0, 1, 1, 0]),
    ((9, 33), [3, 2], [3, 3], [1, 0, 0, 1]),
    # rows in registers (up to 8 host vectors): tiny planes, a tall one (the row loop, not
    # unrolled), rows just over one vector; past 8 vectors the row buffer
    ((7, 7), [3, 3], [1, 1], [1, 1, 1, 1]),
    ((14, 14), [3, 3], [2, 2], [0, 1, 1, 0]),
    ((70, 17), [3, 3], [1, 1], [1, 1, 1, 1]),
    ((5, 150), [3, 3], [2, 2], [1, 1, 1, 1]),
]


@pytest.mark.parametrize("lanes", [None, 8, 4], ids=["host", "8-lane", "4-lane"])
@pytest.mark.parametrize("hw,k,st,pads", SEP_POOLS, ids=[f"sep{i}" for i in range(len(SEP_POOLS))])
def test_separable_maxpool(hw, k, st, pads, lanes, monkeypatch):
    """Bit for bit against the reference, NaN and -inf included, with the host's vectors and
    with AVX2's and SSE's widths (the register max-pool's pieces and shuffles follow them)."""
    if lanes is not None:
        monkeypatch.setattr(pool_emitter, "vector_width_f32", lambda isa=None: lanes)
    ins = [("x", F, (1, 5, *hw))]
    data = _data(ins)
    data["x"][0, 1, 3, 4] = np.nan  # NaN propagates like the reference
    data["x"][0, 2, 0, :] = -np.inf
    check(_model("MaxPool", ins, kernel_shape=k, strides=st, pads=pads), data, exact=True)


@pytest.mark.parametrize("elem", [TensorProto.INT8, TensorProto.UINT8], ids=["i8", "u8"])
@pytest.mark.parametrize("hw,k,st,pads", SEP_POOLS[:4], ids=[f"sep{i}" for i in range(4)])
def test_separable_maxpool_of_bytes(hw, k, st, pads, elem):
    """int8 max-pools (quantized models) run the separable kernel on bytes: padding holds the
    type's least value, extremes included."""
    ins = [("x", elem, (1, 3, *hw))]
    dtype = np.int8 if elem == TensorProto.INT8 else np.uint8
    info = np.iinfo(dtype)
    x = np.random.default_rng(5).integers(info.min, info.max + 1, (1, 3, *hw)).astype(dtype)
    x[0, 1] = info.min  # a plane of the least value: the padding must not win
    x[0, 2, 0, :] = info.max
    model = _model("MaxPool", ins, out_type=elem, kernel_shape=k, strides=st, pads=pads)
    check(model, {"x": x}, exact=True)


def test_reductions_and_softmax():
    ins = [("x", F, (3, 5, 7))]
    for op in ("ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd"):
        if op in ("ReduceSum",):
            axes = [("axes", np.array([0, 2], np.int64))]
            check(_model(op, [*ins], consts=axes, keepdims=0), _data(ins), rtol=1e-5)
        else:
            check(_model(op, ins, axes=[1], keepdims=1), _data(ins), rtol=1e-5)
    for op in ("ArgMax", "ArgMin"):
        check(_model(op, ins, out_type=I64, axis=1, keepdims=0), _data(ins))
        check(_model(op, ins, out_type=I64, axis=2, select_last_index=1), _data(ins))
    for op in ("Softmax", "LogSoftmax"):
        check(_model(op, ins, axis=1), _data(ins), rtol=1e-5)
        check(_model(op, ins, axis=-1), _data(ins), rtol=1e-5)
    rng = np.random.default_rng(3)
    consts = [
        ("s", rng.standard_normal(7).astype(np.float32)),
        ("b", rng.standard_normal(7).astype(np.float32)),
    ]
    check(
        _model("LayerNormalization", ins, consts=consts, axis=-1),
        _data(ins),
        rtol=1e-5,
        kinds=["layernorm"],
    )
    ins4 = [("x", F, (2, 7, 3, 4))]
    check(_model("LRN", ins4, size=3), _data(ins4), rtol=1e-5)


@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax"])
@pytest.mark.parametrize(
    "shape,axis",
    [((5, 37), -1), ((2, 3, 16), -1), ((4, 1), -1), ((3, 37), 0), ((2, 9, 21), 1)],
)
def test_softmax_vector_rows(op, shape, axis):
    """Row vectors with a masked tail (axis -1), lanes along the inner axis (other axes), and
    rows holding -inf, +inf and NaN."""
    x = _data([("x", F, shape)])["x"]
    flat = x.reshape(-1)
    flat[3] = -np.inf
    flat[min(40, flat.size - 1)] = np.nan
    if flat.size > 60:
        flat[60] = np.inf
    check(_model(op, [("x", F, shape)], axis=axis), {"x": x}, rtol=1e-5, kinds=[op.lower()])


@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax"])
@pytest.mark.parametrize("shape", [(8, 7), (6, 16), (24, 3), (9, 16), (4, 4, 16, 16), (16, 1)])
def test_softmax_short_rows(op, shape, monkeypatch):
    """Rows of at most one vector, several at once (groups of 8, 4, 2 rows, or one at a time
    for an odd count): the interpreter's values with -inf / +inf / NaN rows, and bit for bit
    the row-by-row kernel."""
    from compiler.backends.llvm.emitters import reduce

    x = _data([("x", F, shape)])["x"] * 3
    flat = x.reshape(-1)
    flat[3] = -np.inf
    flat[min(40, flat.size - 1)] = np.nan
    flat[min(21, flat.size - 2)] = np.inf
    x.reshape(-1, shape[-1])[-1] = -np.inf  # a row of -inf only: NaN everywhere
    model = _model(op, [("x", F, shape)], axis=-1)
    check(model, {"x": x}, rtol=1e-5, kinds=[op.lower()])
    outs = []
    for group in (1, 8):
        monkeypatch.setattr(reduce, "SOFTMAX_SHORT_ROWS", group)
        lir, plan = _lir_and_plan(compile_model(model))
        outs.append(LLVMExecutor(lir, plan).run({"x": x}))
    for k in outs[0]:
        np.testing.assert_array_equal(outs[0][k], outs[1][k])


@pytest.mark.parametrize("shape", [(5, 197), (3, 1500), (2, 40)])
def test_softmax_long_rows_max_chains(shape, monkeypatch):
    """The max pass's running maxima (1 or 4 chains) give the same bits; the interpreter's
    values with a NaN and an inf in some row."""
    from compiler.backends.llvm.emitters import reduce

    x = _data([("x", F, shape)])["x"] * 4
    x[0, shape[1] - 1] = np.inf
    x[1, 33] = np.nan
    model = _model("Softmax", [("x", F, shape)], axis=-1)
    check(model, {"x": x}, rtol=1e-5, kinds=["softmax"])
    outs = []
    for chains in (1, 4):
        monkeypatch.setattr(reduce, "SOFTMAX_MAX_CHAINS", chains)
        lir, plan = _lir_and_plan(compile_model(model))
        outs.append(LLVMExecutor(lir, plan).run({"x": x}))
    for k in outs[0]:
        np.testing.assert_array_equal(outs[0][k], outs[1][k])


@pytest.mark.parametrize(
    "shape,axis,sshape",
    [((3, 37), -1, (37,)), ((4, 16), -1, (16,)), ((2, 5, 21), 1, (21,)), ((2, 5, 21), 1, (5, 21))],
)
def test_layernorm_vector_rows(shape, axis, sshape):
    """LayerNorm rows as vectors with a masked tail; scale/bias as long as the row (vector
    pass) or broadcast over it (scalar pass)."""
    rng = np.random.default_rng(4)
    consts = [
        ("s", rng.standard_normal(sshape).astype(np.float32)),
        ("b", rng.standard_normal(sshape).astype(np.float32)),
    ]
    ins = [("x", F, shape)]
    model = _model("LayerNormalization", ins, consts=consts, axis=axis)
    check(model, _data(ins), rtol=1e-5, atol=1e-5, kinds=["layernorm"])


@pytest.mark.parametrize("shape", [(16, 64), (3, 37), (2, 7, 192)])
def test_layernorm_far_from_zero_mean(shape):
    """Rows whose mean is ~100 standard deviations away from zero (the float32 normalising
    pass subtracts a rounded mean): the interpreter's values within float32 noise."""
    rng = np.random.default_rng(6)
    n = shape[-1]
    consts = [
        ("s", rng.standard_normal(n).astype(np.float32)),
        ("b", rng.standard_normal(n).astype(np.float32)),
    ]
    ins = [("x", F, shape)]
    x = (100.0 + rng.standard_normal(shape)).astype(np.float32)
    model = _model("LayerNormalization", ins, consts=consts, axis=-1)
    check(model, {"x": x}, rtol=1e-5, atol=1e-5, kinds=["layernorm"])


@pytest.mark.parametrize("op", ["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd"])
@pytest.mark.parametrize("shape,axes", [((2, 5, 7, 9), [2, 3]), ((3, 37), [1]), ((4, 16), [-1])])
def test_reduce_trailing_rows(op, shape, axes):
    """Reductions over trailing axes (global pools, row means): vector lanes with a tail."""
    ins = [("x", F, shape)]
    data = _data(ins)
    if op == "ReduceProd":
        data["x"] = (1.0 + 0.05 * data["x"]).astype(np.float32)
    if op == "ReduceSum":  # axes as an input since opset 13, an attribute for the others
        model = _model(op, ins, consts=[("axes", np.array(axes, np.int64))], keepdims=1)
    else:
        model = _model(op, ins, axes=axes, keepdims=1)
    check(model, data, rtol=1e-5, kinds=[op.lower()])


def test_tensor_ops():
    ins = [("x", F, (2, 3, 5, 7))]
    d = _data(ins)
    check(_model("Transpose", ins, perm=[0, 3, 1, 2]), d, exact=True)
    sl = [
        ("s", np.array([1, 6], np.int64)),
        ("e", np.array([-1, 0], np.int64)),
        ("a", np.array([2, 3], np.int64)),
        ("t", np.array([1, -2], np.int64)),
    ]
    check(_model("Slice", ins, consts=sl), d, exact=True)
    for mode in ("constant", "reflect", "edge"):
        pads = [("p", np.array([0, 1, 2, 1, 0, 0, 1, 2], np.int64))]
        check(_model("Pad", ins, consts=pads, mode=mode), d, exact=True)
    tile = _model("Tile", ins, consts=[("r", np.array([1, 2, 1, 3], np.int64))])
    check(tile, d, exact=True, kinds=["tile"])
    check(
        _model("Expand", [("x", F, (3, 1, 7))], consts=[("s", np.array([2, 3, 5, 7], np.int64))]),
        _data([("x", F, (3, 1, 7))]),
        exact=True,
    )
    ins2 = [("a", F, (2, 3, 5)), ("b", F, (2, 4, 5))]
    check(_model("Concat", ins2, axis=1), _data(ins2), exact=True)
    check(
        _model(
            "Split",
            [("x", F, (2, 7, 5))],
            n_out=2,
            axis=1,
            consts=[("s", np.array([3, 4], np.int64))],
        ),
        _data([("x", F, (2, 7, 5))]),
        exact=True,
    )
    idx = [("i", np.array([[0, -1], [2, 1]], np.int64))]
    check(_model("Gather", ins, consts=idx, axis=2), d, exact=True)
    gi = [("x", F, (6, 5)), ("i", I64, (4,))]
    gd = _data(gi)
    gd["i"] = np.array([0, 5, -1, 3], np.int64)
    check(_model("Gather", gi, axis=0), gd, exact=True)
    check(_model("Flatten", ins, axis=2), d, exact=True)
    for mode in ("nearest", "linear", "cubic"):
        sc = [("roi", np.array([], np.float32)), ("sc", np.array([1, 1, 2.0, 1.5], np.float32))]
        check(_model("Resize", ins, consts=sc, mode=mode), d, rtol=1e-5)


def test_fusion_stacks_elementwise_chain():
    ins = [("a", F, (3, 37)), ("b", F, (37,))]
    nodes = [
        helper.make_node("Add", ["a", "b"], ["s"]),
        helper.make_node("Relu", ["s"], ["r"]),
        helper.make_node("Sigmoid", ["r"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info(n, t, list(s)) for n, t, s in ins],
        [helper.make_tensor_value_info("y", F, None)],
    )
    model = _infer(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]))
    ex = check(model, _data(ins))
    # The program entry's copy of the run groups and entries (a hit generates no program).
    kinds = {tuple(ex.lir.code[i].kind for i in g) for g in ex.info.groups if len(g) > 1}
    assert any("add" in k and "relu" in k for k in kinds), ex.info.groups
    # Each fused instruction still has its own entry for stepping.
    adds = [i for i, ins_ in enumerate(ex.lir.code) if ins_.kind == "add"]
    assert ex.info.instrs[adds[0]].entry is not None
    assert "fused" in ex.strategy(adds[0])


def test_ir_and_assembly_of_an_instruction():
    nodes = [
        helper.make_node("Exp", ["a"], ["e"]),
        helper.make_node("Transpose", ["e"], ["t"]),
        helper.make_node("Softmax", ["t"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("a", F, [3, 37])],
        [helper.make_tensor_value_info("y", F, None)],
    )
    model = _infer(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]))
    lir, plan = _lir_and_plan(compile_model(model))
    ex = LLVMExecutor(lir, plan)
    idx = next(i for i, x in enumerate(lir.code) if x.kind == "exp")
    assert f"@instr_{idx}" in ex.llvm_ir(idx)
    asm = ex.assembly(idx)
    assert "ret" in asm
    # The entry and its kernels, each generated on its own: no other function's code.
    for name in [f"instr_{idx}", *ex.kernels_of(idx)]:
        assert asm.count(f"\n{name}:") + asm.startswith(f"{name}:") == 1, name
    assert "run_all:" not in asm
    marker = next(i for i, x in enumerate(lir.code) if x.kind in emitters.NO_CODE)
    assert "no code" in ex.llvm_ir(marker)


def test_unsupported_instruction_names_it(monkeypatch):
    ins = [("x", F, (3, 5))]
    result = compile_model(_model("Relu", ins))
    lir, plan = _lir_and_plan(result)
    monkeypatch.delitem(emitters.EMITTERS, "relu")
    with pytest.raises(CodegenError) as err:
        LLVMExecutor(lir, plan)
    name = next(x.name for x in lir.code if x.kind == "relu")
    assert err.value.instruction == name and name in str(err.value)


def test_unsupported_case_raises_codegen_error():
    # The conv kernels take float32 only; compiled for the interpreter (no float16 fallback to
    # float32 between Casts), a float16 Conv reaches codegen as it is and is refused there.
    from compiler.pipeline import CompileOptions

    ins = [("x", TensorProto.FLOAT16, (1, 2, 5, 5))]
    w = np.ones((3, 2, 3, 3), np.float16)
    model = _model("Conv", ins, out_type=TensorProto.FLOAT16, consts=[("w", w)])
    result = compile_model(model, CompileOptions(lowering="interpreter"))
    lir, plan = _lir_and_plan(result)
    with pytest.raises(CodegenError, match="conv.*f16"):
        LLVMExecutor(lir, plan)


@pytest.mark.parametrize(
    "shape,perm",
    [
        ((37, 45), (1, 0)),
        ((16, 16), (1, 0)),
        ((1, 16, 4, 16), (0, 2, 3, 1)),  # the transformer block's K^T
        ((1, 197, 3, 64), (0, 2, 3, 1)),  # ViT's: a partial tile at the end of a row
        ((2, 19, 33, 9), (0, 3, 2, 1)),
        ((3, 8, 40), (0, 2, 1)),
        ((7, 130), (1, 0)),
    ],
)
@pytest.mark.parametrize("dtype", [np.float32, np.int32])
def test_tiled_transpose(shape, perm, dtype, monkeypatch):
    """Transposes whose destination rows are read with a stride: register tiles with partial
    tiles at both ends, bit for bit numpy's transpose (NaN payloads and ints included) and the
    scalar loop's."""
    from compiler.backends.llvm.emitters import tensor

    elem = F if dtype == np.float32 else TensorProto.INT32
    x = np.random.default_rng(7).integers(-(2**31), 2**31 - 1, size=shape, dtype=np.int64)
    x = x.astype(np.int32).view(dtype)
    model = _model("Transpose", [("x", elem, shape)], out_type=elem, perm=list(perm))
    want = np.transpose(x, perm)
    outs = []
    for tiled in (False, True):
        monkeypatch.setattr(tensor, "TILED_TRANSPOSE", tiled)
        lir, plan = _lir_and_plan(compile_model(model))
        ex = LLVMExecutor(lir, plan)
        (got,) = ex.run({"x": x}).values()
        assert got.view(np.int32).tobytes() == want.view(np.int32).tobytes()
        idx = next(i for i, ins in enumerate(lir.code) if ins.kind == "transpose")
        assert not tiled or "shufflevector" in ex.llvm_ir(idx)
        outs.append(got)
    assert outs[0].tobytes() == outs[1].tobytes()


@pytest.mark.parametrize("n", [48, 96, 47, 200, 193, 64])
@pytest.mark.parametrize("m", [1, 13, 197])
@pytest.mark.parametrize("wide", [False, True])
def test_matmul_wide_tile(m, n, wide, monkeypatch):
    """MatMul GEMMs on the wider register tile where the host has the registers (N a multiple
    of its panel, or at least four panels with a narrower tail) and on the narrow one: the
    interpreter's values, every tail of rows and columns."""
    from compiler.backends.llvm.kernels import gemm

    monkeypatch.setattr(gemm, "MATMUL_WIDE_TILE", wide)
    rng = np.random.default_rng(8)
    w = rng.standard_normal((70, n)).astype(np.float32)
    model = _model("MatMul", [("x", F, (m, 70))], consts=[("w", w)])
    x = rng.standard_normal((m, 70)).astype(np.float32)
    check(model, {"x": x}, rtol=1e-5, atol=1e-5, kinds=["matmul"])
    cfg = gemm.matmul_config(n)
    if not wide:
        assert cfg == gemm.gemm_config()


@pytest.mark.parametrize("block", [1, 4, 3])
@pytest.mark.parametrize("shape", [(3, 70), (2, 100), (4, 17), (2, 1500)])
@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax"])
def test_softmax_exp_sum_blocks(op, shape, block, monkeypatch):
    """The exp pass summing several vectors in float32 before the double accumulator: every
    tail position of a block (full vectors, a masked one, none), the interpreter's values."""
    from compiler.backends.llvm.emitters import reduce

    monkeypatch.setattr(reduce, "SOFTMAX_SUM_BLOCK", block)
    x = _data([("x", F, shape)])["x"] * 5
    check(_model(op, [("x", F, shape)], axis=-1), {"x": x}, rtol=1e-5, kinds=[op.lower()])
