"""codegen.merge_identical_functions: internal functions equal but for their names are compiled
once, calls (and task pointers passed as arguments) follow the one kept."""

from __future__ import annotations

import re

import llvmlite.binding as llvm
import numpy as np
from llvmlite import ir

from compiler.backends.llvm import target
from compiler.backends.llvm.codegen import merge_identical_functions
from compiler.backends.llvm.jit import split_functions

F32 = ir.FloatType()
PTR = ir.PointerType()
VOID = ir.VoidType()


def _leaf(m: ir.Module, name: str, k: float) -> ir.Function:
    fn = ir.Function(m, ir.FunctionType(VOID, [PTR]), name)
    fn.linkage = "internal"
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    v = b.load(fn.args[0], typ=F32)
    b.store(b.fmul(v, ir.Constant(F32, k)), fn.args[0])
    b.ret_void()
    return fn


def _caller(m: ir.Module, name: str, leaf: ir.Function, internal: bool = True) -> ir.Function:
    fn = ir.Function(m, ir.FunctionType(VOID, [PTR]), name)
    if internal:
        fn.linkage = "internal"
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    b.call(leaf, [fn.args[0]])
    b.ret_void()
    return fn


def test_merges_leaves_then_their_callers_and_keeps_different_code() -> None:
    m = ir.Module("t")
    a, a2, c = _leaf(m, "a", 2.0), _leaf(m, "a2", 2.0), _leaf(m, "c", 3.0)
    str(m)  # printed once before the merge: llvmlite caches instruction text
    ca, ca2, cc = _caller(m, "ca", a), _caller(m, "ca2", a2), _caller(m, "cc", c)
    e1, e2, e3 = (_caller(m, f"entry{i}", f, internal=False) for i, f in enumerate((ca, ca2, cc)))
    alias = merge_identical_functions(m)
    assert alias == {"a2": "a", "ca2": "ca"}
    names = {f.name for f in m.functions}
    assert {"a", "c", "ca", "cc", "entry0", "entry1", "entry2"} <= names
    assert not names & {"a2", "ca2"}
    text = str(m)
    assert '@"a2"' not in text and '@"ca2"' not in text
    assert 'call void @"ca"' in str(e2) and 'call void @"cc"' in str(e3)
    target.ensure_initialized()
    llvm.parse_assembly(text).verify()


def test_external_functions_are_never_merged() -> None:
    m = ir.Module("t")
    leaf = _leaf(m, "a", 2.0)
    _caller(m, "x", leaf, internal=False)
    _caller(m, "y", leaf, internal=False)
    assert merge_identical_functions(m) == {}



def _two_convs():
    """x[1, 48, 20, 20] -> 3x3 conv -> ReLU -> 3x3 conv (no activation) -> y: two convs of one
    shape whose kernels differ (the epilogue) but whose scratch buffers are the same size."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    inits = [
        numpy_helper.from_array((rng.standard_normal((48, 48, 3, 3)) * 0.1).astype(np.float32), n)
        for n in ("w1", "w2")
    ]
    nodes = [
        helper.make_node("Conv", ["x", "w1"], ["c"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["r"]),
        helper.make_node("Conv", ["r", "w2"], ["y"], pads=[1, 1, 1, 1]),
    ]
    g = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 48, 20, 20])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        inits,
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    return onnx.shape_inference.infer_shapes(m)


def test_pixel_rows_convs_sharing_scratch_match_the_interpreter_on_threads():
    """Two pixel-rows convs of one size use one pair of scratch buffers (``shared_scratch``)
    and still compute what the interpreter does, on one and two threads, bit for bit alike."""
    from compiler.backends.interpreter.arena import ArenaInterpreter
    from compiler.backends.llvm.executor import LLVMExecutor, _lir_and_plan
    from compiler.pipeline import compile_model

    lir, plan = _lir_and_plan(compile_model(_two_convs()))
    feed = {lir.inputs()[0].name: np.random.default_rng(1).standard_normal((1, 48, 20, 20))}
    feed = {k: v.astype(np.float32) for k, v in feed.items()}
    want = ArenaInterpreter(lir, plan).run(feed)
    runs = []
    for threads in (1, 2):
        ex = LLVMExecutor(lir, plan, conv_strategy="pixel-rows-gemm", threads=threads)
        got = ex.run(feed)
        for k in want:
            np.testing.assert_allclose(got[k], want[k], rtol=1e-4, atol=1e-4)
        runs.append(got)
        text = ex.program.ir_text
        convs = [n for n in split_functions(text) if n in ("conv", "conv.1")]
        assert len(convs) == 2  # two kernels...
        assert text.count('@"glowviz.scratch.pixrows.c.') > 2  # ...naming one buffer
        assert len(set(re.findall(r'^@"(glowviz\.scratch\.pixrows\.c\.\d+)"', text, re.M))) == 1
    for k in want:
        np.testing.assert_array_equal(runs[0][k], runs[1][k])
