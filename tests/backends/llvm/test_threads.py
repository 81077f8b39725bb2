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
from compiler.backends.llvm.kernels import gemm
from compiler.executors import make_executor
from compiler.pipeline import CompileOptions, compile_model

F = TensorProto.FLOAT
SAMPLES = Path(__file__).resolve().parents[3] / "sample_models"


@pytest.fixture(autouse=True)
def _small_chunks(monkeypatch, tmp_path_factory):
    monkeypatch.setenv("GLOWVIZ_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "llvm-cache"))
    monkeypatch.setattr(gemm, "CHUNK_FMAS", 64)


def _infer(model):
    return onnx.shape_inference.infer_shapes(model)


def _feed(lir, seed=0):
    rng = np.random.default_rng(seed)
    return {w.name: rng.standard_normal(w.type.shape).astype(np.float32) for w in lir.inputs()}


def _parallel_loops(ex: LLVMExecutor) -> int:
    """Calls of the pool in the generated code (one per parallel loop)."""
    return ex.program.ir_text.count('@"glowviz_parallel_for"(')


def _same_on_threads(model, threads=(1, 2, 3), rtol=1e-4, atol=1e-5, parallel=True):
    lir, plan = _lir_and_plan(compile_model(model))
    feed = _feed(lir)
    want = ArenaInterpreter(lir, plan).run(feed)
    first = None
    for n in threads:
        ex = LLVMExecutor(lir, plan, threads=n)
        if parallel:
            assert _parallel_loops(ex) > 0
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


def test_compile_options_threads_reach_the_executor():
    model = onnx.load(SAMPLES / "mlp.onnx")
    ex = make_executor(compile_model(model, CompileOptions(threads=2)), "llvm")
    assert ex.executor.threads == 2
    assert ex.executor.compiled.threads == 2
    ex.executor.set_threads(1)
    ex.run(_feed(ex.executor.lir))
    assert ex.executor.compiled.threads == 1
