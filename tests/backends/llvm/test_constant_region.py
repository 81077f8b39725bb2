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
