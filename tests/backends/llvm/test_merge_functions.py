"""codegen.merge_identical_functions: internal functions equal but for their names are compiled
once, calls (and task pointers passed as arguments) follow the one kept."""

from __future__ import annotations

import llvmlite.binding as llvm
from llvmlite import ir

from compiler.backends.llvm import target
from compiler.backends.llvm.codegen import merge_identical_functions

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
