"""The LLVM executor end to end: sample models vs onnxruntime's recorded outputs, stepping vs
one-call bit-exactness, the executor table and ONNX backend entry, the disk cache, and the ONNX
node conformance suite run with executor="llvm".
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from compiler.backends.llvm.cache import read_entry
from compiler.backends.llvm.executor import LLVMExecutor, _lir_and_plan
from compiler.backends.llvm.jit import JITEngine
from compiler.executors import make_executor
from compiler.pipeline import compile_model

SAMPLES = Path(__file__).resolve().parents[3] / "sample_models"
MODELS = sorted(p.stem for p in SAMPLES.glob("*.onnx"))
#: Per-model tolerance vs the recorded onnxruntime output (rtol, atol).
TOL = {"transformer_block": (1e-4, 2e-5)}


def _io(name: str) -> tuple[dict, np.ndarray]:
    with np.load(SAMPLES / f"{name}.input.npz") as f:
        inputs = {k: f[k] for k in f.files}
    with np.load(SAMPLES / f"{name}.expected.npz") as f:
        expected = f["output"]
    return inputs, expected


@pytest.mark.parametrize("name", MODELS)
def test_sample_model_matches_onnxruntime(name: str) -> None:
    inputs, expected = _io(name)
    ex = make_executor(compile_model(str(SAMPLES / f"{name}.onnx")), "llvm")
    assert ex.kind == "llvm"
    out = ex.run(inputs)
    got = out[ex.output_names[0]]
    rtol, atol = TOL.get(name, (1e-4, 1e-5))
    np.testing.assert_allclose(got, expected, rtol=rtol, atol=atol)


@pytest.mark.parametrize("name", MODELS)
def test_stepping_is_bit_exact_with_run_all(name: str) -> None:
    inputs, _ = _io(name)
    lir, plan = _lir_and_plan(compile_model(str(SAMPLES / f"{name}.onnx")))
    ex = LLVMExecutor(lir, plan)
    feed = dict(zip([w.name for w in lir.inputs()], inputs.values()))
    once = ex.run(feed)
    ex.reset(feed)
    n = 0
    while not ex.done:
        ex.step()
        n += 1
    assert n == len(lir.code)
    for k, v in ex.outputs().items():
        np.testing.assert_array_equal(v, once[k])
    # run_to / breakpoints move pc like the arena interpreter's.
    ex.reset(feed)
    ex.run_to(len(lir.code) // 2)
    assert ex.pc == len(lir.code) // 2
    ex.run()
    assert ex.done
    for k, v in ex.outputs().items():
        np.testing.assert_array_equal(v, once[k])


def test_onnx_backend_defaults_to_llvm() -> None:
    from compiler import onnx_backend

    inputs, expected = _io("mlp")
    rep = onnx_backend.prepare(str(SAMPLES / "mlp.onnx"))
    assert rep.executor.kind == "llvm"
    (got,) = rep.run([inputs["input"]])
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5)
    (got,) = onnx_backend.prepare(str(SAMPLES / "lenet.onnx"), executor="llvm").run(
        [_io("lenet")[0]["input"]]
    )
    np.testing.assert_allclose(got, _io("lenet")[1], rtol=1e-4, atol=1e-5)


def test_disk_cache_hit_on_second_compile(tmp_path) -> None:
    lir, plan = _lir_and_plan(compile_model(str(SAMPLES / "lenet.onnx")))
    from compiler.backends.llvm.executor import executor_key

    engine = JITEngine(directory=tmp_path)
    engine.forget(executor_key(lir, plan))  # cold
    first = LLVMExecutor(lir, plan, engine=engine)
    assert not first.compiled.from_disk and not first.from_cache
    engine.forget(first.key)  # forget the in-memory copy
    second = LLVMExecutor(lir, plan, engine=engine)
    assert second.compiled.from_disk and second.from_cache
    assert second.compiled.key == first.compiled.key
    assert list(tmp_path.glob("*.gvz"))
    inputs, expected = _io("lenet")
    feed = {lir.inputs()[0].name: inputs["input"]}
    np.testing.assert_array_equal(
        first.run(feed)[lir.outputs()[0].name], second.run(feed)[lir.outputs()[0].name]
    )


def test_disk_cache_stores_the_model_object_not_the_engine_seed(tmp_path) -> None:
    """MCJIT reports every module of an engine to the object cache, the empty seed module too
    and in no promised order; the cached file must be the model's object (it defines the
    entries), or a later process loads an object without them."""
    lir, plan = _lir_and_plan(compile_model(str(SAMPLES / "mlp.onnx")))
    from compiler.backends.llvm.cache import flush_writes
    from compiler.backends.llvm.executor import executor_key

    key = executor_key(lir, plan)
    for attempt in range(4):
        JITEngine().forget(key)
        directory = tmp_path / str(attempt)
        ex = LLVMExecutor(lir, plan, engine=JITEngine(directory=directory))
        obj_key = ex.compiled.key
        flush_writes()  # the entries are written in the background
        assert len(list(directory.glob("*.gvz"))) == 2  # the program's entry, its object's
        assert b"run_all" in bytes(read_entry(directory / f"{obj_key}.gvz", obj_key)["object"])
        JITEngine().forget(key)
        again = LLVMExecutor(lir, plan, engine=JITEngine(directory=directory))
        assert again.compiled.from_disk
        assert again.compiled.address("run_all")


def test_constants_reach_the_arena_only_when_looked_at() -> None:
    """The code reads its own copy of the constants: the arena's constant region is written on
    the first look at a constant (read, a stepped view), and then holds the weights' data."""
    lir, plan = _lir_and_plan(compile_model(str(SAMPLES / "lenet.onnx")))
    inputs, expected = _io("lenet")
    ex = LLVMExecutor(lir, plan)
    (got,) = ex.run(inputs).values()
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5)
    assert not ex._constants_filled
    w = next(w for w in lir.weights.values() if w.is_constant and w.data is not None)
    np.testing.assert_array_equal(ex.read(w.name), np.asarray(w.data, dtype=w.type_.np_dtype))
    assert ex._constants_filled
