"""Property test of the LLVM backend on generated element-wise / matmul / conv graphs: its
outputs equal the arena interpreter's on the same compiled program, and both equal the graph
interpreter's on the module before any pass ran (the reference kernels are the oracle)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings

from compiler.backends.interpreter.graph_interpreter import run_graph
from compiler.executors import make_executor
from compiler.pipeline import CompileOptions, compile_model
from tests.graph_strategies import NUMERIC_OPS, GraphCase, graphs


@settings(max_examples=15)
@given(graphs(NUMERIC_OPS, max_nodes=5))
def test_llvm_matches_the_interpreters(case: GraphCase) -> None:
    want = run_graph(case.module, case.inputs)
    result = compile_model(case.module.clone(), CompileOptions())
    arena = make_executor(result, "interpreter").run(case.inputs)
    llvm = make_executor(result, "llvm").run(case.inputs)
    assert list(arena) == list(llvm) == list(want)
    for k in want:
        np.testing.assert_allclose(arena[k], want[k], rtol=1e-5, atol=1e-5, err_msg=k)
        np.testing.assert_allclose(llvm[k], arena[k], rtol=1e-4, atol=1e-5, err_msg=k)
