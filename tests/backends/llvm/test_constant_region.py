"""The LLVM executor's constant region (``executor.constant_region``): 64-byte aligned,
its packed-blob part starting on a huge-page boundary, the same results either way."""

from __future__ import annotations

import numpy as np
import pytest

import compiler.backends.llvm.executor as executor
from compiler.backends.llvm.executor import HUGE_PAGE, constant_region


SIZES = [(64, 64), (5000, 128), (3 << 20, 1 << 20), (999_936, 0)]


@pytest.mark.parametrize("sparse", [True, False])
@pytest.mark.parametrize(("size", "dense"), SIZES)
def test_region_is_aligned_and_writable(sparse, size, dense, monkeypatch) -> None:
    monkeypatch.setattr(executor, "SPARSE_CONSTANTS", sparse)
    owner, view = constant_region(size, dense)
    assert view.size == size and view.dtype == np.uint8 and view.ctypes.data % 64 == 0
    assert not view.any()  # the padding between blobs goes into the cache entry as it is
    if sparse and dense < size:
        assert (view.ctypes.data + dense) % HUGE_PAGE == 0
    view[:] = 7
    view[-1] = 9
    assert int(view.sum()) == 7 * (size - 1) + 9
    del owner


def test_executor_runs_alike_on_either_region(monkeypatch) -> None:
    from compiler.backends.llvm.executor import LLVMExecutor, _lir_and_plan
    from compiler.pipeline import compile_model
    from tests.backends.llvm.test_conv_strategies import _pointwise_family_model

    model, feed = _pointwise_family_model([40, 300, 33], 24)
    lir, plan = _lir_and_plan(compile_model(model))
    outs = []
    for sparse in (False, True):
        monkeypatch.setattr(executor, "SPARSE_CONSTANTS", sparse)
        outs.append(LLVMExecutor(lir, plan).run(feed)["y"])
    np.testing.assert_array_equal(outs[0], outs[1])
    assert np.isfinite(outs[0]).all() and outs[0].any()


def test_sink_places_blobs_at_the_offsets_and_grows() -> None:
    """``KernelSink(region=...)``: each blob 64-byte aligned after ``start``, in the order they
    come, the same offsets the copy path computes; past its capacity the region grows and the
    earlier blobs move with it; key-deduplicated blobs are placed once."""
    from llvmlite import ir

    from compiler.backends.llvm.emitters.common import KernelSink

    sink = KernelSink(ir.Module(), region=constant_region, start=192, capacity=100)
    rng = np.random.default_rng(0)
    blobs = [
        rng.standard_normal(7).astype(np.float32),
        rng.integers(-9, 9, (3, 5)).astype(np.int8),
        rng.standard_normal((40, 9)).astype(np.float32),  # past the first capacity
        np.arange(6, dtype=np.int64).reshape(2, 3).T,  # not contiguous
    ]
    idx = [sink.blob(b) for b in blobs]
    assert sink.blob(np.zeros(3, np.float32), key="k") == sink.blob(np.ones(9), key="k") == 4
    assert idx == [0, 1, 2, 3]
    owner, mem = sink.region
    want, at = [], 192
    for b in [*blobs, np.zeros(3, np.float32)]:
        want.append(at)
        at = -(-(at + b.nbytes) // 64) * 64
    assert sink.blob_offsets == want and sink.end == at and mem.size >= at
    assert not mem[:192].any()
    for b, view, off in zip(blobs, sink.blobs, want):
        np.testing.assert_array_equal(view, b)
        assert view.ctypes.data == mem.ctypes.data + off
        assert np.array_equal(mem[off : off + b.nbytes], np.ascontiguousarray(b).view(np.uint8).ravel())


def test_program_region_holds_what_the_copy_path_builds(monkeypatch) -> None:
    """``codegen.DIRECT_BLOBS``: the executor's constant region and outputs are the same bytes
    whether the packed weights were placed as generated or copied in afterwards."""
    import compiler.backends.llvm.codegen as codegen
    from compiler.backends.llvm.executor import LLVMExecutor, _lir_and_plan
    from compiler.backends.llvm.jit import JITEngine
    from compiler.pipeline import compile_model
    from tests.backends.llvm.test_conv_strategies import _pointwise_family_model

    model, feed = _pointwise_family_model([40, 300, 33], 24)
    lir, plan = _lir_and_plan(compile_model(model))
    regions, outs = [], []
    for direct in (False, True):
        monkeypatch.setattr(codegen, "DIRECT_BLOBS", direct)
        # A fresh compile each time: a program from a cache (the process's memory, or the
        # disk cache the LLVM tests keep between runs) would not show the sink at work.
        engine = JITEngine(disk_cache=False)
        ex = LLVMExecutor(lir, plan, engine=engine)
        if ex.from_cache:
            engine.forget(ex.key)
            ex = LLVMExecutor(lir, plan, engine=engine)
        assert not ex.from_cache
        assert (ex.program.region is not None) == direct
        start = ex.info.blob_start
        regions.append(bytes(ex.constants[start : ex.info.constant_size]))
        outs.append(ex.run(feed))
    assert regions[0] == regions[1] and len(regions[0]) > 0
    for name in outs[0]:
        np.testing.assert_array_equal(outs[0][name], outs[1][name])
