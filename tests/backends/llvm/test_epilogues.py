"""Element-wise chains run in the epilogue of the conv / fully-connected / matmul before them
(``codegen.find_epilogues``): which chains fuse, and that ``run_all`` with the fused kernels
matches the arena interpreter and, bit for bit, stepping the unfused instructions."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from compiler.backends.interpreter.arena import ArenaInterpreter
from compiler.backends.llvm import target
from compiler.backends.llvm.executor import LLVMExecutor, _lir_and_plan
from compiler.backends.llvm.kernels import direct
from compiler.backends.llvm.kernels.window import ConvShape
from compiler.pipeline import compile_model

F = TensorProto.FLOAT


def _scalar(name: str, v: float):
    return numpy_helper.from_array(np.array(v, np.float32), name)


def _conv_model(tail, extra_outputs=(), inits=()):
    """x[1, 5, 13, 19] -> Conv 3x3 (7 channels) -> the nodes of ``tail`` (reading "c")."""
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array((rng.standard_normal((7, 5, 3, 3)) * 0.3).astype(np.float32), "w")
    bias = numpy_helper.from_array(rng.standard_normal(7).astype(np.float32), "b")
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]), *tail]
    outs = [helper.make_tensor_value_info(o, F, None) for o in ("y", *extra_outputs)]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", F, [1, 5, 13, 19])],
        outs,
        [w, bias, *inits],
    )
    return _infer(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]))


def _infer(model):
    """Output shapes filled in by ONNX shape inference (the checker wants them)."""
    return onnx.shape_inference.infer_shapes(model)


def _run(model, shape, strategy=None):
    lir, plan = _lir_and_plan(compile_model(model))
    x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    feed = {lir.inputs()[0].name: x}
    ex = LLVMExecutor(lir, plan, conv_strategy=strategy)
    got = ex.run(feed)
    want = ArenaInterpreter(lir, plan).run(feed)
    for k in want:
        np.testing.assert_allclose(got[k], want[k], rtol=1e-5, atol=1e-5)
    ex.reset(feed)
    while not ex.done:
        ex.step()
    for k, v in ex.outputs().items():
        np.testing.assert_array_equal(v, got[k])
    return [ex.strategy(i) for i in range(len(lir.code))], lir


def _fused(strategies):
    return sum("epilogue" in s for s in strategies)


def test_silu_runs_in_the_conv_epilogue():
    tail = [
        helper.make_node("Sigmoid", ["c"], ["s"]),
        helper.make_node("Mul", ["c", "s"], ["y"]),
    ]
    strategies, _ = _run(_conv_model(tail), (1, 5, 13, 19))
    assert _fused(strategies) == 3  # conv, sigmoid, mul


SILU_CONVS = [
    # C, H, W, K, kernel, stride, group, strategies: big register tiles (GEMM 8x32, direct
    # 8x2 / 16x1), whose heavy epilogue runs on the stored tile after the last K block (C*R*S
    # over the 256 of one K block), and the depthwise tile's few registers
    (40, 9, 13, 20, 3, 1, 1, ("pixel-rows-gemm", "padded-shift-gemm", "implicit-gemm")),
    (300, 5, 7, 37, 1, 1, 1, ("gemm-1x1", "pixel-rows-gemm")),
    # one K block, tail rows and a tail panel: the tile through the scratch tile into C
    (16, 23, 29, 19, 1, 1, 1, ("gemm-1x1",)),
    (3, 17, 21, 19, 3, 2, 1, ("direct-vector",)),
    (6, 11, 21, 6, 5, 1, 6, ("depthwise-direct",)),
    (8, 7, 7, 16, 5, 1, 8, ("depthwise-direct",)),  # flat run over the padded rows
    # flat runs of up to two flat tiles: the activation on all accumulators after the taps
    (5, 7, 7, 5, 3, 1, 5, ("depthwise-direct",)),
    (3, 5, 6, 3, 3, 1, 3, ("depthwise-direct",)),
    (8, 30, 30, 8, 3, 2, 8, ("depthwise-direct",)),  # stride 2: column phases, registers
    (5, 17, 23, 5, 3, 2, 5, ("depthwise-direct",)),  # odd planes: phases of unequal width
    (8, 30, 30, 8, 5, 2, 8, ("depthwise-direct",)),  # column phases, then the plane pass
]


_SILU = [
    helper.make_node("Sigmoid", ["c"], ["s"]),
    helper.make_node("Mul", ["c", "s"], ["y"]),
]


def _one_conv(C, H, W, w, bias=None, *, silu=False, **attrs):
    """x[1, C, H, W] -> Conv(w[, bias]) (-> SiLU) -> y, shapes inferred."""
    ins = ["x", "w", "b"] if bias is not None else ["x", "w"]
    out = "c" if silu else "y"
    nodes = [helper.make_node("Conv", ins, [out], **attrs), *(_SILU if silu else [])]
    inits = [numpy_helper.from_array(w, "w")]
    if bias is not None:
        inits.append(numpy_helper.from_array(bias, "b"))
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", F, [1, C, H, W])],
        [helper.make_tensor_value_info("y", F, None)],
        inits,
    )
    return _infer(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]))


@pytest.mark.parametrize("case", SILU_CONVS, ids=lambda c: f"{c[0]}x{c[1]}x{c[2]}-k{c[4]}")
def test_silu_epilogue_of_every_tile_form(case):
    C, H, W, K, k, stride, group, strategies = case
    rng = np.random.default_rng(4)
    w = (rng.standard_normal((K, C // group, k, k)) / np.sqrt(C * k * k // group) * 3).astype(
        np.float32
    )
    bias = rng.standard_normal(K).astype(np.float32)
    model = _one_conv(
        C, H, W, w, bias, silu=True, pads=[k // 2] * 4, strides=[stride] * 2, group=group
    )
    for strategy in strategies:
        strategies_run, _ = _run(model, (1, C, H, W), strategy)
        assert strategies_run[1].startswith(strategy), strategies_run
        assert _fused(strategies_run) == 3


FLAT_PLANES = [
    # C, H, W, kernel, pads (top, left, bottom, right), dilation, stride: small depthwise
    # planes run as one flat run on AVX-512: stride 1 over padded rows that share their
    # padding columns (direct.flat_pitch; uneven left and right padding, a dilated filter),
    # stride 2 over the four parity planes (direct.flat_quarter_vectors; odd sizes, uneven
    # padding)
    (6, 7, 7, 5, (2, 2, 2, 2), 1, 1),
    (4, 7, 7, 5, (2, 1, 2, 3), 1, 1),
    (4, 7, 7, 3, (1, 0, 1, 2), 1, 1),
    (3, 6, 7, 3, (2, 2, 2, 2), 2, 1),
    (5, 5, 9, 3, (0, 2, 1, 0), 1, 1),
    (6, 14, 14, 5, (2, 2, 2, 2), 1, 2),
    (4, 13, 14, 3, (1, 1, 1, 1), 1, 2),
    (4, 14, 13, 5, (2, 1, 2, 3), 1, 2),
    (3, 9, 11, 3, (0, 1, 1, 0), 1, 2),
    # wide padding: whole vectors' taps read only padding (direct.flat_pad_taps leaves them out)
    (4, 7, 7, 5, (3, 3, 3, 3), 1, 1),
    (3, 6, 6, 3, (2, 0, 2, 2), 2, 1),
    (4, 5, 6, 3, (2, 1, 0, 2), 1, 1),
    (4, 9, 9, 5, (3, 3, 3, 3), 1, 2),
]


@pytest.mark.parametrize(
    "case", FLAT_PLANES, ids=lambda c: f"{c[1]}x{c[2]}-k{c[3]}-{c[4]}-d{c[5]}-s{c[6]}"
)
@pytest.mark.parametrize("act", [None, "silu"])
def test_flat_depthwise_planes(case, act):
    C, H, W, k, pads, dil, stride = case
    rng = np.random.default_rng(5)
    w = (rng.standard_normal((C, 1, k, k)) * 0.4).astype(np.float32)
    bias = rng.standard_normal(C).astype(np.float32)
    model = _one_conv(
        C, H, W, w, bias, silu=act == "silu", pads=list(pads), group=C,
        dilations=[dil, dil], strides=[stride, stride],
    )
    strategies, _ = _run(model, (1, C, H, W), "depthwise-direct")
    assert any(s.startswith("depthwise-direct") for s in strategies), strategies
    if target.vector_width_f32() == 16:  # AVX-512: the plane is one flat run, as meant
        assert _flat_run(case)[1] is not None


def _flat_run(case):
    """The number of vectors of a plane's flat run (None: it runs row by row) and its pitch."""
    C, H, W, k, pads, dil, stride = case
    shape = ConvShape(1, C, H, W, C, k, k, (stride, stride), pads, (dil, dil), C)
    vw = target.vector_width_f32()
    if stride == 1:
        return shape, direct.flat_vectors(shape, vw), direct.flat_pitch(shape)
    return shape, direct.flat_quarter_vectors(shape, vw), (W + pads[1] + pads[3] + 1) // 2


@pytest.mark.parametrize("case", FLAT_PLANES[-4:] + FLAT_PLANES[:1])
def test_flat_pad_taps_left_out_change_no_bits(case, monkeypatch):
    """Leaving out the taps that read only padding (``direct.FLAT_SKIP_PAD_TAPS``) gives the
    same bits as running them, and some are left out."""
    C, H, W, k, pads, dil, stride = case
    rng = np.random.default_rng(7)
    w = (rng.standard_normal((C, 1, k, k)) * 0.4).astype(np.float32)
    model = _one_conv(
        C, H, W, w, pads=list(pads), group=C, dilations=[dil] * 2, strides=[stride] * 2
    )
    lir, plan = _lir_and_plan(compile_model(model))
    feed = {lir.inputs()[0].name: rng.standard_normal((1, C, H, W)).astype(np.float32)}
    outs = []
    for on in (True, False):
        monkeypatch.setattr(direct, "FLAT_SKIP_PAD_TAPS", on)
        ex = LLVMExecutor(lir, plan, conv_strategy="depthwise-direct")
        outs.append(next(iter(ex.run(feed).values())))
    np.testing.assert_array_equal(outs[0], outs[1])
    shape, n, fp = _flat_run(case)
    vw = target.vector_width_f32()
    if vw == 16:  # AVX-512: these planes run flat, and wide padding leaves taps out
        assert n is not None
        monkeypatch.setattr(direct, "FLAT_SKIP_PAD_TAPS", True)
        assert sum(sum(direct.flat_pad_taps(shape, j * vw, vw, fp, stride)) for j in range(n))


def test_hardswish_and_scalar_constants_run_in_the_epilogue():
    tail = [
        helper.make_node("HardSwish", ["c"], ["h"]),
        helper.make_node("Mul", ["h", "k"], ["m"]),
        helper.make_node("Add", ["m", "k"], ["y"]),
    ]
    strategies, _ = _run(_conv_model(tail, inits=[_scalar("k", 0.75)]), (1, 5, 13, 19))
    assert _fused(strategies) == 4


def test_a_chain_stops_at_a_non_uniform_operand():
    rng = np.random.default_rng(2)
    per_channel = numpy_helper.from_array(rng.standard_normal((1, 7, 1, 1)).astype(np.float32), "p")
    tail = [
        helper.make_node("Tanh", ["c"], ["t"]),
        helper.make_node("Mul", ["t", "p"], ["y"]),
    ]
    strategies, _ = _run(_conv_model(tail, inits=[per_channel]), (1, 5, 13, 19))
    assert _fused(strategies) == 2  # conv + tanh; the per-channel Mul stays a loop


def test_no_fusion_when_an_intermediate_result_is_read_elsewhere():
    tail = [
        helper.make_node("Sigmoid", ["c"], ["s"]),
        helper.make_node("Mul", ["s", "c"], ["y"]),
    ]
    strategies, _ = _run(_conv_model(tail, extra_outputs=("c",)), (1, 5, 13, 19))
    assert _fused(strategies) == 0  # the conv's result is a graph output


def test_gelu_chain_runs_in_the_matmul_epilogue():
    rng = np.random.default_rng(3)
    w = numpy_helper.from_array((rng.standard_normal((24, 37)) * 0.2).astype(np.float32), "w")
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["m"]),
        helper.make_node("Div", ["m", "sq2"], ["d"]),
        helper.make_node("Erf", ["d"], ["e"]),
        helper.make_node("Add", ["e", "one"], ["a"]),
        helper.make_node("Mul", ["m", "a"], ["g"]),
        helper.make_node("Mul", ["g", "half"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", F, [2, 9, 24])],
        [helper.make_tensor_value_info("y", F, None)],
        [w, _scalar("sq2", 2**0.5), _scalar("one", 1.0), _scalar("half", 0.5)],
    )
    model = _infer(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]))
    strategies, _ = _run(model, (2, 9, 24))
    assert _fused(strategies) == 6


def test_fused_members_entries_are_a_module_compiled_on_first_step():
    """``run_all`` never calls the fused members' own entries: they are a second module,
    compiled when first stepped (or shown), on the same threads, with the same results."""
    tail = [
        helper.make_node("Sigmoid", ["c"], ["s"]),
        helper.make_node("Mul", ["c", "s"], ["y"]),
    ]
    lir, plan = _lir_and_plan(compile_model(_conv_model(tail)))
    feed = {lir.inputs()[0].name: np.random.default_rng(1).standard_normal((1, 5, 13, 19))}
    feed = {k: v.astype(np.float32) for k, v in feed.items()}
    ex = LLVMExecutor(lir, plan, threads=2)
    step_only = ex.info.step_entries  # as the program entry stores them: none generated
    assert len(step_only) == 3  # conv, sigmoid, mul: run_all calls their fused kernel
    got = ex.run(feed)
    assert ex._step_compiled is None
    for name in step_only:
        with pytest.raises(Exception, match="no function"):
            ex.compiled.address(name)
    ex.reset(feed)
    while not ex.done:
        ex.step()
    assert ex._step_compiled is not None and ex._step_compiled.threads == 2
    for k, v in ex.outputs().items():
        np.testing.assert_array_equal(v, got[k])
    conv = next(i for i, ins in enumerate(lir.code) if ins.kind == "conv")
    assert "define" in ex.llvm_ir(conv) and ex.assembly(conv)


def _linear_model(tail, x_shape, n, *, bias_shape=None, extra_outputs=(), seed=5, inits=()):
    """x @ w (+ the nodes of ``tail``, reading "m"); w is [K, n], "bias" a constant row of n."""
    rng = np.random.default_rng(seed)
    k = x_shape[-1]
    w = numpy_helper.from_array((rng.standard_normal((k, n)) * 0.2).astype(np.float32), "w")
    bias = (rng.standard_normal(bias_shape or (n,))).astype(np.float32)
    nodes = [helper.make_node("MatMul", ["x", "w"], ["m"]), *tail]
    outs = [helper.make_tensor_value_info(o, F, None) for o in ("y", *extra_outputs)]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", F, list(x_shape))],
        outs,
        [w, numpy_helper.from_array(bias, "bias"), _scalar("sq2", 2**0.5), _scalar("one", 1.0),
         _scalar("half", 0.5), *inits],
    )
    return _infer(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]))


_GELU = [
    helper.make_node("Div", ["mb", "sq2"], ["d"]),
    helper.make_node("Erf", ["d"], ["e"]),
    helper.make_node("Add", ["e", "one"], ["a"]),
    helper.make_node("Mul", ["mb", "a"], ["g"]),
    helper.make_node("Mul", ["g", "half"], ["y"]),
]


@pytest.mark.parametrize(
    "x_shape,n,bias_shape,bias_first",
    [
        ((1, 16, 64), 64, None, False),  # the transformer block's linear
        ((2, 9, 24), 37, (1, 1, 37), True),  # odd N: a tail panel; bias as a [1, 1, N] row
        ((5, 3), 1, (1,), False),  # N = 1
        ((1, 197, 40), 19, (1, 19), True),  # M with a tail tile
        ((1, 1, 64), 45, None, False),  # M = 1: the GEMV body adds the bias after the sum too
    ],
)
def test_matmul_row_bias_runs_in_the_gemm(x_shape, n, bias_shape, bias_first):
    """MatMul + Add(row constant) is one GEMM that adds the bias to the finished sums: the
    same bits as the two stepped apart (``_run``), and the interpreter's values."""
    add = helper.make_node("Add", ["bias", "m"] if bias_first else ["m", "bias"], ["y"])
    strategies, _ = _run(_linear_model([add], x_shape, n, bias_shape=bias_shape), x_shape)
    assert _fused(strategies) == 2
    assert [s for s in strategies if "epilogue" in s][0].startswith("gemm")


@pytest.mark.parametrize("x_shape", [(1, 13, 32), (1, 1, 32)])  # blocked GEMM and GEMV
def test_matmul_bias_then_gelu_in_one_kernel(x_shape):
    # GELU is a heavy activation: the bias must reach the sums before its epilogue.
    tail = [helper.make_node("Add", ["m", "bias"], ["mb"]), *_GELU]
    strategies, _ = _run(_linear_model(tail, x_shape, 45), x_shape)
    assert _fused(strategies) == 7


def test_matmul_bias_not_fused_where_it_must_not():
    # The raw product is an output: the GEMM must store it, so nothing fuses.
    tail = [helper.make_node("Add", ["m", "bias"], ["y"])]
    model = _linear_model(tail, (1, 8, 16), 24, extra_outputs=("m",))
    strategies, _ = _run(model, (1, 8, 16))
    assert _fused(strategies) == 0
    # A bias that is not a row (varies along M): an ordinary Add after the GEMM.
    tail = [helper.make_node("Add", ["m", "bias"], ["y"])]
    strategies, _ = _run(_linear_model(tail, (1, 8, 16), 24, bias_shape=(8, 24)), (1, 8, 16))
    assert _fused(strategies) == 0
    # A chain step after the bias reads the product without the bias: the chain stops there.
    tail = [
        helper.make_node("Add", ["m", "bias"], ["mb"]),
        helper.make_node("Mul", ["mb", "m"], ["y"]),
    ]
    strategies, _ = _run(_linear_model(tail, (1, 8, 16), 24), (1, 8, 16))
    assert _fused(strategies) == 0


def test_matmul_bias_switch_gives_the_same_bits(monkeypatch):
    from compiler.backends.llvm import codegen

    tail = [helper.make_node("Add", ["m", "bias"], ["mb"]), *_GELU]
    model = _linear_model(tail, (1, 20, 48), 70)
    lir, plan = _lir_and_plan(compile_model(model))
    feed = {"x": np.random.default_rng(2).standard_normal((1, 20, 48)).astype(np.float32)}
    outs = []
    for on in (False, True):
        monkeypatch.setattr(codegen, "FUSE_MATMUL_BIAS", on)
        outs.append(LLVMExecutor(lir, plan).run(feed))
    np.testing.assert_array_equal(outs[0]["y"], outs[1]["y"])


def test_tanh_gelu_reading_x_again_runs_in_the_epilogue(monkeypatch):
    """GPT-2's gelu_new: steps that read x (the biased product) again after other steps, in
    an order where a step does not read the one before it. One kernel; stepping the members
    apart gives the same bits, and so does the switch off (separate loops)."""
    from compiler.backends.llvm import codegen

    tail = [
        helper.make_node("Add", ["bias", "m"], ["xb"]),
        helper.make_node("Pow", ["xb", "three"], ["p"]),
        helper.make_node("Mul", ["p", "c"], ["cube"]),
        helper.make_node("Add", ["xb", "cube"], ["inner"]),
        helper.make_node("Mul", ["inner", "k"], ["scaled"]),
        helper.make_node("Tanh", ["scaled"], ["t"]),
        helper.make_node("Add", ["t", "one"], ["a"]),
        helper.make_node("Mul", ["xb", "half"], ["h"]),
        helper.make_node("Mul", ["h", "a"], ["y"]),
    ]
    extra = [_scalar("three", 3.0), _scalar("c", 0.044715), _scalar("k", 0.7978845608)]
    model = _linear_model(tail, (1, 19, 40), 70, inits=extra)
    strategies, _ = _run(model, (1, 19, 40))
    assert _fused(strategies) == 10
    lir, plan = _lir_and_plan(compile_model(model))
    feed = {"x": np.random.default_rng(4).standard_normal((1, 19, 40)).astype(np.float32)}
    outs = []
    for on in (False, True):
        monkeypatch.setattr(codegen, "EPILOGUE_DAGS", on)
        outs.append(LLVMExecutor(lir, plan).run(feed)["y"])
    np.testing.assert_array_equal(outs[0], outs[1])


def test_dag_epilogue_stops_before_a_result_read_outside():
    # "h" (x / 2) is also an output: the chain may not skip storing it, so the epilogue ends
    # before the step that would leave it unstored.
    tail = [
        helper.make_node("Add", ["m", "bias"], ["xb"]),
        helper.make_node("Tanh", ["xb"], ["t"]),
        helper.make_node("Mul", ["xb", "half"], ["h"]),
        helper.make_node("Mul", ["h", "t"], ["y"]),
    ]
    model = _linear_model(tail, (1, 9, 16), 24, extra_outputs=("h",))
    strategies, _ = _run(model, (1, 9, 16))
    assert 0 < _fused(strategies) < 5


@pytest.mark.parametrize(
    "x_shape,n", [((1, 16, 64), 64), ((2, 9, 37), 37), ((1, 197, 48), 48), ((1, 40, 600), 600)]
)
def test_matmul_bias_and_residual_in_the_gemm(x_shape, n):
    """x @ w + bias + x (a residual connection): one GEMM adds the bias, then the residual
    tensor, to each finished sum; the bits of the three stepped apart, the interpreter's
    values."""
    tail = [
        helper.make_node("Add", ["m", "bias"], ["mb"]),
        helper.make_node("Add", ["x", "mb"], ["y"]),
    ]
    strategies, _ = _run(_linear_model(tail, x_shape, n), x_shape)
    assert _fused(strategies) == 3


def test_residual_after_bias_with_a_later_step():
    # The chain ends at the residual Add; the Relu after it is its own loop.
    tail = [
        helper.make_node("Add", ["bias", "m"], ["mb"]),
        helper.make_node("Add", ["mb", "x"], ["r"]),
        helper.make_node("Relu", ["r"], ["y"]),
    ]
    strategies, _ = _run(_linear_model(tail, (1, 24, 40), 40), (1, 24, 40))
    assert _fused(strategies) == 3


def test_residual_switch_gives_the_same_bits(monkeypatch):
    from compiler.backends.llvm import codegen

    tail = [
        helper.make_node("Add", ["m", "bias"], ["mb"]),
        helper.make_node("Add", ["x", "mb"], ["y"]),
    ]
    model = _linear_model(tail, (1, 300, 96), 96)
    lir, plan = _lir_and_plan(compile_model(model))
    feed = {"x": np.random.default_rng(2).standard_normal((1, 300, 96)).astype(np.float32)}
    outs = []
    for on in (False, True):
        monkeypatch.setattr(codegen, "FUSE_MATMUL_RESIDUAL", on)
        outs.append(LLVMExecutor(lir, plan, threads=2).run(feed)["y"])
    np.testing.assert_array_equal(outs[0], outs[1])
