"""The kernels of the nodes the CPU backend keeps instead of lowering (its contract:
compiler/backends/contract.py), each against the arena interpreter (the reference kernels) on
odd shapes, and each asserting its own instruction ran rather than a lowered chain."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper
from test_emitters import F, _data, _infer, _model, check

from compiler.backends.contract import LLVM
from compiler.backends.llvm.emitters import EMITTERS
from compiler.graph.activations import ACTIVATIONS
from compiler.graph.ops import all_ops
from compiler.graph.types import ElemKind
from compiler.lir.instructions import Kind, kind_for_graph_op
from compiler.passes.lowering import CPU_POLICY, LOWERINGS

I64 = TensorProto.INT64


def _rng(seed: int = 7) -> np.random.Generator:
    return np.random.default_rng(seed)


def test_no_dead_emitter_and_nothing_unrunnable() -> None:
    """Every emitter serves a hand-written kind or a graph op; every graph op runs on the CPU
    as it is or through its lowering; the CPU's fused activations are real activations."""
    graph_kinds = {kind_for_graph_op(op): op for op in all_ops()}
    for kind in EMITTERS:
        assert kind in set(Kind) or kind in graph_kinds, f"emitter for unknown kind '{kind}'"
    for op in all_ops():
        assert LLVM.runs(op, [ElemKind.F32]) or op in LOWERINGS, op
    assert CPU_POLICY.fused_activations - {"none"} <= set(ACTIVATIONS)


@pytest.mark.parametrize(
    "shape,axis,pshape",
    [
        ((3, 5, 7), -1, (7,)),
        ((2, 3, 5, 7), 2, (5, 7)),
        ((1, 13), 0, (1, 13)),
        ((4, 1, 9), 1, (1, 9)),
    ],
)
def test_layernorm(shape, axis, pshape) -> None:
    rng = _rng()
    consts = [
        ("s", rng.standard_normal(pshape).astype(np.float32)),
        ("b", rng.standard_normal(pshape).astype(np.float32)),
    ]
    ins = [("x", F, shape)]
    model = _model("LayerNormalization", ins, consts=consts, axis=axis, epsilon=1e-3)
    check(model, _data(ins), rtol=1e-5, atol=1e-6, kinds=["layernorm"])


def test_layernorm_far_from_zero() -> None:
    """The kernel's one-pass variance (E[x^2] - mean^2, in double) against the reference's
    two-pass one, with a mean 3000 times the spread (measured: at 300000 times they differ by
    1.5e-4, onnxruntime's own result by 1.2e-2)."""
    rng = _rng()
    consts = [("s", np.ones(96, np.float32)), ("b", np.zeros(96, np.float32))]
    ins = [("x", F, (5, 96))]
    data = {"x": (300 + rng.standard_normal((5, 96)) * 0.1).astype(np.float32)}
    model = _model("LayerNormalization", ins, consts=consts, axis=-1, epsilon=1e-9)
    check(model, data, rtol=1e-5, atol=1e-5, kinds=["layernorm"])


@pytest.mark.parametrize("shape", [(2, 3, 5, 7), (5, 3), (1, 3, 11)])
@pytest.mark.parametrize("runtime_params", [False, True])
def test_batchnorm(shape, runtime_params) -> None:
    rng = _rng()
    c = shape[1]
    params = {
        "g": rng.standard_normal(c).astype(np.float32),
        "b": rng.standard_normal(c).astype(np.float32),
        "m": rng.standard_normal(c).astype(np.float32),
        "v": (np.abs(rng.standard_normal(c)) + 0.1).astype(np.float32),
    }
    ins = [("x", F, shape)]
    if runtime_params:  # parameters as graph inputs: nothing folds at compile time
        ins += [(n, F, (c,)) for n in params]
        model = _model("BatchNormalization", ins, epsilon=1e-4)
        data = _data(ins[:1]) | params
    else:
        model = _model("BatchNormalization", ins, consts=list(params.items()), epsilon=1e-4)
        data = _data(ins)
    check(model, data, rtol=1e-5, atol=1e-5, kinds=["batchnorm"])


@pytest.mark.parametrize("shape", [(1, 5, 7, 9), (1, 40, 60, 61)])  # one channel chunk; four
def test_batchnorm_runs_the_relu_after_it(shape) -> None:
    """DenseNet's pre-activation: the ReLU after a BatchNormalization runs in its kernel in
    ``run_all`` (one pass), bit for bit what stepping the two instructions gives, on any
    number of threads."""
    from compiler.backends.llvm.executor import LLVMExecutor

    rng = _rng()
    c = shape[1]
    params = [
        ("g", rng.standard_normal(c).astype(np.float32)),
        ("b", rng.standard_normal(c).astype(np.float32)),
        ("m", rng.standard_normal(c).astype(np.float32)),
        ("v", (np.abs(rng.standard_normal(c)) + 0.1).astype(np.float32)),
    ]
    inits = [numpy_helper.from_array(a, n) for n, a in params]
    nodes = [
        helper.make_node("BatchNormalization", ["x", "g", "b", "m", "v"], ["n"], epsilon=1e-4),
        helper.make_node("Relu", ["n"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", F, shape)],
        [helper.make_tensor_value_info("y", F, shape)],
        inits,
    )
    model = _infer(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]))
    data = {"x": rng.standard_normal(shape).astype(np.float32)}
    ex = check(model, data, rtol=1e-5, atol=1e-5, kinds=["batchnorm", "relu"])
    kinds = [i.kind for i in ex.lir.code]
    assert "epilogue" in ex.strategy(kinds.index("batchnorm"))
    two = LLVMExecutor(ex.lir, ex.plan, threads=2).run(data)
    np.testing.assert_array_equal(two["y"], ex.run(data)["y"])


@pytest.mark.parametrize("m,k,n", [(1, 33, 19), (7, 5, 3), (13, 64, 31)])
@pytest.mark.parametrize("act", [None, "Relu", "Clip"])
@pytest.mark.parametrize("runtime_weights", [False, True])
def test_fully_connected(m, k, n, act, runtime_weights) -> None:
    rng = _rng()
    w = rng.standard_normal((n, k)).astype(np.float32)
    bias = rng.standard_normal(n).astype(np.float32)
    inputs = [helper.make_tensor_value_info("x", F, [m, k])]
    inits = [numpy_helper.from_array(bias, "c")]
    if runtime_weights:
        inputs.append(helper.make_tensor_value_info("w", F, [n, k]))
    else:
        inits.append(numpy_helper.from_array(w, "w"))
    nodes = [helper.make_node("Gemm", ["x", "w", "c"], ["g"], transB=1)]
    if act == "Clip":
        inits += [numpy_helper.from_array(np.float32(v), n) for v, n in ((-0.3, "lo"), (0.4, "hi"))]
        nodes.append(helper.make_node("Clip", ["g", "lo", "hi"], ["y"]))
    else:
        nodes.append(helper.make_node(act or "Identity", ["g"], ["y"]))
    graph = helper.make_graph(
        nodes, "g", inputs, [helper.make_tensor_value_info("y", F, None)], inits
    )
    model = _infer(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]))
    data = {"x": rng.standard_normal((m, k)).astype(np.float32)}
    data["x"][0, 0] = np.nan  # a NaN row stays NaN through the relu/clip epilogue, as in numpy
    if runtime_weights:
        data["w"] = w
    ex = check(model, data, rtol=1e-4, atol=1e-5, kinds=["fullyconnected"])
    fc = next(i for i in ex.lir.code if i.kind == "fullyconnected")
    assert fc.attrs["activation"] == {None: "none", "Relu": "relu", "Clip": "clip"}[act]


@pytest.mark.parametrize("lo,hi", [(-0.5, 0.75), (0.0, None), (None, 0.25)])
def test_clip_float(lo, hi) -> None:
    ins = [("x", F, (3, 5, 17))]
    consts = [("lo", np.float32(-np.inf if lo is None else lo))]
    if hi is not None:
        consts.append(("hi", np.float32(hi)))
    data = _data(ins)
    data["x"][1, 2, 3] = np.nan
    check(_model("Clip", ins, consts=consts), data, exact=True, kinds=["clip"])


@pytest.mark.parametrize(
    "shape,reps,elem",
    [((2, 3, 5), (3, 1, 2), F), ((1, 7), (5, 3), I64), ((3, 1, 1, 2), (1, 4, 3, 1), F)],
)
def test_tile(shape, reps, elem) -> None:
    ins = [("x", elem, shape)]
    model = _model("Tile", ins, out_type=elem, consts=[("r", np.array(reps, np.int64))])
    check(model, _data(ins), exact=True, kinds=["tile"])


UNARY = [
    ("HardSwish", {}),
    ("HardSigmoid", {"alpha": 0.3, "beta": 0.45}),
    ("LeakyRelu", {"alpha": 0.07}),
]


@pytest.mark.parametrize("op,attrs", UNARY, ids=[u[0] for u in UNARY])
@pytest.mark.parametrize("shape", [(1,), (3, 37), (2, 3, 5, 7)])
def test_piecewise_activations(op, attrs, shape) -> None:
    ins = [("x", F, shape)]
    data = _data(ins)
    data["x"].reshape(-1)[0] = np.nan
    data["x"] *= np.float32(4)  # reach both saturated ends of the hard functions
    check(_model(op, ins, **attrs), data, rtol=1e-6, atol=1e-7, kinds=[op.lower()])


@pytest.mark.parametrize("xs,ss", [((2, 3, 5, 7), (3, 1, 1)), ((3, 17), (1,)), ((4, 9), (9,))])
def test_prelu(xs, ss) -> None:
    ins = [("x", F, xs), ("s", F, ss)]
    check(_model("PRelu", ins), _data(ins), exact=True, kinds=["prelu"])
