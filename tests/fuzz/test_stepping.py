"""Stepping equals one-call execution on random valid graphs (issue 11, done-when): the LLVM
executor's per-instruction entries (the IDE debugger's path) give bit for bit what `@run_all`
(fused element-wise loops, one call) gives, and two runs of one program agree.

The campaign's differential check does the same on every graph it makes; this is the plain
test of it, over `GLOWVIZ_STEP_GRAPHS` graphs (default 12).
"""

from __future__ import annotations

import os

import numpy as np
import pytest

from compiler.executors import make_executor
from compiler.pipeline import compile_model
from tests.llvm_cache import llvm_test_cache  # noqa: F401 - autouse: the kept cache

from .graphgen import random_graph

COUNT = int(os.environ.get("GLOWVIZ_STEP_GRAPHS", "12"))


def _bits(outs: dict[str, np.ndarray]) -> dict[str, bytes]:
    return {k: np.ascontiguousarray(v).tobytes() for k, v in outs.items()}


@pytest.mark.parametrize("seed", range(1100, 1100 + COUNT))
def test_stepping_equals_one_call_on_random_graphs(seed: int) -> None:
    model, feeds, desc = random_graph(seed)
    llvm = make_executor(compile_model(model), "llvm")  # valid graphs: never refused
    once = llvm.run(feeds)
    again = llvm.run(feeds)
    ex = llvm.executor  # type: ignore[attr-defined]
    ex.reset(llvm._inputs(feeds))  # type: ignore[attr-defined]
    n = 0
    while not ex.done:
        ex.step()
        n += 1
    assert n == len(ex.lir.code)
    stepped = {k: v for k, v in ex.outputs().items() if k in once}
    assert _bits(again) == _bits(once), desc
    assert _bits(stepped) == _bits(once), desc


@pytest.mark.parametrize("seed", range(1100, 1100 + max(1, COUNT // 3)))
def test_the_ide_debugger_steps_to_the_one_call_answer(seed: int, tmp_path) -> None:
    """The IDE's path: a CompileSession's Debugger steps the LLVM executor with the arena
    interpreter in lock-step (comparing and re-synchronising it after every instruction); what
    it ends with is bit for bit the one-call LLVM run's outputs, and the interpreter's."""
    from glowviz.session import CompileSession

    model, _, desc = random_graph(seed)
    path = tmp_path / "graph.onnx"
    path.write_bytes(model if isinstance(model, bytes) else model.SerializeToString())
    s = CompileSession(str(path)).compile()
    assert s.error is None, s.error.headline()
    dbg = s.get_debugger()
    assert dbg.available and dbg.executor.name == "llvm" and dbg.reference is not None
    while not dbg.finished:
        dbg.step()
    outputs = [w.name for w in s.result.lir.outputs()]
    stepped = {n: dbg.executor.read(n) for n in outputs}
    inputs = dbg.inputs()
    once = make_executor(s.result, "llvm").executor.run(inputs)  # type: ignore[attr-defined]
    assert _bits(stepped) == _bits({n: once[n] for n in outputs}), desc
    interp = make_executor(s.result, "interpreter").interpreter  # type: ignore[attr-defined]
    by_interp = interp.run(inputs)
    for n in outputs:
        np.testing.assert_allclose(stepped[n], by_interp[n], rtol=1e-4, atol=1e-5, err_msg=desc)
