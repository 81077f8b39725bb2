"""The kernels' thread pool (kernels/parallel.py): every model gives bit-identical results on
1, 2 and 3 threads, in one call of ``run_all`` and stepped, and matches the arena interpreter.

Chunks are normally tens of microseconds of work, so small test models would never split:
``CHUNK_FMAS`` is lowered to make every kernel with a parallel loop cut its work into many
chunks.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from compiler.backends.interpreter.arena import ArenaInterpreter
from compiler.backends.llvm.executor import LLVMExecutor, _lir_and_plan
from compiler.backends.llvm.kernels import parallel
from compiler.executors import make_executor
from compiler.pipeline import CompileOptions, compile_model

F = TensorProto.FLOAT
SAMPLES = Path(__file__).resolve().parents[3] / "sample_models"


@pytest.fixture(autouse=True)
def _small_chunks(monkeypatch):
    monkeypatch.setattr(parallel, "CHUNK_FMAS", 64)


def _infer(model):
    return onnx.shape_inference.infer_shapes(model)


def _feed(lir, seed=0):
    rng = np.random.default_rng(seed)
    return {w.name: rng.standard_normal(w.type.shape).astype(np.float32) for w in lir.inputs()}


def _parallel_loops(ex: LLVMExecutor) -> int:
    """Calls of the pool in the generated code (one per parallel loop)."""
    return ex.program.ir_text.count('@"glowviz_parallel_for"(')


def _same_on_threads(
    model, threads=(1, 2, 3), rtol=1e-4, atol=1e-5, parallel=True, conv_strategy=None
):
    lir, plan = _lir_and_plan(compile_model(model))
    feed = _feed(lir)
    want = ArenaInterpreter(lir, plan).run(feed)
    first = None
    for n in threads:
        ex = LLVMExecutor(lir, plan, threads=n, conv_strategy=conv_strategy)
        if first is None:
            key = ex.key
            if parallel:
                assert _parallel_loops(ex) > 0
        else:
            # Threads are not part of the program: one key, so one module and one IR for
            # every n, whose parallel loops were counted once (generating it takes ~0.1 s).
            assert ex.key == key
        got = ex.run(feed)
        for k in want:
            np.testing.assert_allclose(got[k], want[k], rtol=rtol, atol=atol)
        if first is None:
            first = got
        for k in got:
            np.testing.assert_array_equal(got[k], first[k], err_msg=f"{n} threads, {k}")
        ex.reset(feed)
        while not ex.done:
            ex.step()
        for k, v in ex.outputs().items():
            np.testing.assert_array_equal(v, first[k], err_msg=f"stepped on {n} threads, {k}")
    return lir


@pytest.mark.parametrize(
    "name", ["mlp", "lenet", "resnet_small", "mobilenet_small", "transformer_block", "unet_small"]
)
def test_sample_models_on_threads(name):
    _same_on_threads(onnx.load(SAMPLES / f"{name}.onnx"))


@pytest.mark.parametrize(
    "shapes", [((37, 29), (29, 45)), ((2, 3, 33, 17), (2, 3, 17, 41)), ((3, 1, 70), (70, 100))]
)
def test_matmul_on_threads(shapes):
    sa, sb = shapes
    rng = np.random.default_rng(1)
    nodes = [helper.make_node("MatMul", ["a", "b"], ["y"])]
    inits = []
    ins = [helper.make_tensor_value_info("a", F, list(sa))]
    if len(sb) == 2:  # a constant (packed) B
        inits.append(numpy_helper.from_array(rng.standard_normal(sb).astype(np.float32), "b"))
    else:
        ins.append(helper.make_tensor_value_info("b", F, list(sb)))
    graph = helper.make_graph(nodes, "g", ins, [helper.make_tensor_value_info("y", F, None)], inits)
    _same_on_threads(_infer(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])))


CONVS = [
    # strategy, (C, H, W, K, k, stride, pad, group)
    ("pixel-rows-gemm", (6, 23, 21, 19, 3, 1, 1, 1)),
    ("pixel-rows-gemm", (24, 6, 7, 70, 1, 1, 0, 1)),  # one row chunk: the GEMM is split
    ("padded-shift-gemm", (6, 23, 37, 19, 3, 1, 1, 1)),
    # The fill of the phase images in two channel groups, at strides 1 and 2.
    ("padded-shift-gemm", (48, 37, 41, 8, 3, 1, 1, 1)),
    ("padded-shift-gemm", (48, 37, 41, 8, 3, 2, 1, 1)),
    # One row chunk whose im2col is spread by output rows (groups of 4 and 3 rows).
    ("pixel-rows-gemm", (150, 7, 9, 20, 3, 1, 1, 1)),
    ("gemm-1x1", (13, 19, 23, 21, 1, 1, 0, 1)),
    # A short K: blocks of panels (gemm.PANEL_BLOCK_BYTES) and a last, partial block.
    ("gemm-1x1", (16, 43, 47, 21, 1, 1, 0, 1)),
    ("implicit-gemm", (6, 21, 19, 19, 3, 2, 1, 1)),
    ("implicit-gemm", (8, 17, 15, 12, 3, 1, 1, 2)),  # grouped
    ("direct-vector", (3, 41, 45, 37, 5, 2, 2, 1)),
    # Items of (channel block, row tile): 3 blocks (the last of 5 channels) x row tiles with a
    # remainder, and column runs of a 29-wide row.
    ("direct-lanes", (6, 14, 14, 37, 5, 1, 0, 1)),
    ("direct-lanes", (5, 23, 58, 20, 3, 2, 1, 1)),
    ("depthwise-direct", (13, 27, 35, 13, 5, 2, 2, 13)),
    ("depthwise-direct", (7, 19, 41, 14, 3, 1, 1, 7)),  # channel multiplier 2
    # Input transform in channel groups, the GEMMs by transform position, the output
    # transform in output-channel groups; odd planes (cropped tiles).
    ("winograd", (64, 29, 31, 48, 3, 1, 1, 1)),
    ("winograd-4x4", (64, 29, 31, 48, 3, 1, 1, 1)),
]


@pytest.mark.parametrize("strategy,case", CONVS, ids=[f"{s}-{c}" for s, c in CONVS])
def test_conv_strategies_on_threads(strategy, case):
    C, H, W, K, k, st, pd, g = case
    rng = np.random.default_rng(2)
    w = numpy_helper.from_array(
        (rng.standard_normal((K, C // g, k, k)) * 0.2).astype(np.float32), "w"
    )
    bias = numpy_helper.from_array(rng.standard_normal(K).astype(np.float32), "b")
    node = helper.make_node(
        "Conv", ["x", "w", "b"], ["y"], strides=[st, st], pads=[pd] * 4, group=g
    )
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("x", F, [1, C, H, W])],
        [helper.make_tensor_value_info("y", F, None)],
        [w, bias],
    )
    model = _infer(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]))
    # F(4x4, 3x3): 5-8x a direct GEMM's rounding error, ~1e-5 of the outputs' magnitude (~20
    # here; see tests/backends/llvm/test_winograd.py); the bits across threads stay exact.
    atol = 3e-4 if strategy == "winograd-4x4" else 1e-5
    _same_on_threads(model, conv_strategy=strategy, atol=atol)


@pytest.mark.parametrize(
    "op,attrs",
    [
        ("Softmax", {"axis": -1}),
        ("Softmax", {"axis": 1}),
        ("LogSoftmax", {"axis": -1}),
        ("ReduceMean", {"axes": [2], "keepdims": 1}),
        ("ReduceMax", {"axes": [1, 2], "keepdims": 0}),
        ("Sigmoid", {}),
    ],
)
def test_row_and_element_kernels_on_threads(op, attrs):
    graph = helper.make_graph(
        [helper.make_node(op, ["x"], ["y"], **attrs)],
        "g",
        [helper.make_tensor_value_info("x", F, [4, 37, 19])],
        [helper.make_tensor_value_info("y", F, None)],
    )
    _same_on_threads(_infer(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])))


def test_layernorm_on_threads():
    rng = np.random.default_rng(3)
    scale = numpy_helper.from_array(rng.standard_normal(19).astype(np.float32), "s")
    bias = numpy_helper.from_array(rng.standard_normal(19).astype(np.float32), "b")
    graph = helper.make_graph(
        [helper.make_node("LayerNormalization", ["x", "s", "b"], ["y"], axis=-1)],
        "g",
        [helper.make_tensor_value_info("x", F, [4, 37, 19])],
        [helper.make_tensor_value_info("y", F, None)],
        [scale, bias],
    )
    _same_on_threads(_infer(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])))


def test_compile_options_threads_reach_the_executor():
    model = onnx.load(SAMPLES / "mlp.onnx")
    ex = make_executor(compile_model(model, CompileOptions(threads=2)), "llvm")
    assert ex.executor.threads == 2
    assert ex.executor.compiled.threads == 2
    ex.executor.set_threads(1)
    ex.run(_feed(ex.executor.lir))
    assert ex.executor.compiled.threads == 1


def test_a_model_whose_loops_never_split_has_no_pool_and_still_takes_threads(monkeypatch):
    """The pool's code is emitted by the first loop cut into chunks: a model of small kernels
    gets only no-op entry points (the pool cost three times such a model's own code to
    compile), and asking for threads still works and changes nothing."""
    monkeypatch.setattr(parallel, "CHUNK_FMAS", 1 << 21)  # the shipped chunk size
    graph = helper.make_graph(
        [helper.make_node("Add", ["a", "b"], ["y"])],
        "g",
        [helper.make_tensor_value_info(n, F, [3, 4]) for n in "ab"],
        [helper.make_tensor_value_info("y", F, None)],
    )
    model = _infer(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]))
    _same_on_threads(model, parallel=False)
    lir, plan = _lir_and_plan(compile_model(model))
    ex = LLVMExecutor(lir, plan)
    assert "glowviz.pool.worker" not in ex.program.ir_text
    assert "define void @\"glowviz_pool_start\"" in ex.program.ir_text
    ex.set_threads(2)
    feed = _feed(lir)
    np.testing.assert_array_equal(ex.run(feed)["y"], feed["a"] + feed["b"])


def test_a_model_with_split_loops_carries_the_pool():
    ex = LLVMExecutor(*_lir_and_plan(compile_model(onnx.load(SAMPLES / "mlp.onnx"))))
    assert _parallel_loops(ex) > 0
    assert "glowviz.pool.worker" in ex.program.ir_text


def test_more_threads_than_cores_many_calls():
    """Eight threads on this machine's cores, 30 calls of a model with many parallel loops
    (tiny chunks): workers keep losing their cores and waking for loops that are over; every
    result is still the one-thread result (the generation-tagged claims of parallel.py)."""
    lir, plan = _lir_and_plan(compile_model(onnx.load(SAMPLES / "resnet_small.onnx")))
    feed = _feed(lir)
    want = LLVMExecutor(lir, plan, threads=1).run(feed)
    ex = LLVMExecutor(lir, plan, threads=8)
    for _ in range(30):
        got = ex.run(feed)
        for k in want:
            np.testing.assert_array_equal(got[k], want[k])
