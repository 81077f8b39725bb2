"""The rewriter and its worklist driver: fixed point, dead-node cleanup, provenance by
construction (default origin, one numbered rewrite per pattern), checked pattern tables,
bounded revisits."""

from __future__ import annotations

import importlib

import numpy as np
import pytest
from pass_helpers import load, module_ir, text

from compiler.errors import CompilerError, PassError
from compiler.graph import Module, verify_module
from compiler.graph.ir import Node
from compiler.graph.types import f32
from compiler.passes.rewriter import (
    PatternTable,
    Rewriter,
    apply_patterns,
    graph_patterns,
    lir_patterns,
)
from tests.filecheck import check


def chain(*ops: str) -> Module:
    """%x -> ops[0] -> ops[1] ... -> %out over f32<4>, the nodes named %a, %b, %c, ..."""
    names = "abcdefgh"[: len(ops)]
    nodes = [f"%{n} = {op}(%{p}) : f32<4>" for n, p, op in zip(names, "x" + names, ops)]
    ios = ["placeholder %x : f32<4>", "placeholder %out : f32<4> output"]
    return load(module_ir("\n".join([*ios, *nodes, f"Save(%{names[-1]}, %out)"])))


def neg_neg(node: Node, rw: Rewriter) -> bool:
    inner = node.operands[0]
    src = getattr(inner, "node", None)
    if src is None or src.op != "Neg":
        return False
    rw.replace_node(node, src.operands[0])
    return True


def test_fixed_point_and_dead_cleanup() -> None:
    m = chain("Neg", "Neg", "Neg", "Neg", "Exp")
    assert apply_patterns(m.main, {"Neg": [neg_neg]})
    verify_module(m)
    check(text(m), "CHECK-NOT: Neg\nCHECK: %e = Exp(%x)")
    kinds = [r.kind for r in m.main.journal]
    assert kinds.count("erase") == 4 and "replace" in kinds
    assert not apply_patterns(m.main, {"Neg": [neg_neg]})


def test_created_nodes_record_origin() -> None:
    m = chain("Relu")

    def relu_to_max(node: Node, rw: Rewriter) -> bool:
        zero = rw.constant("zero", np.zeros(1, np.float32))
        new = rw.create("Max", [node.operands[0], zero], name="max", origin=[node])
        rw.replace_node(node, new)
        return True

    assert apply_patterns(m.main, {"Relu": [relu_to_max]})
    verify_module(m)
    (rec,) = [r for r in m.main.journal if r.kind == "create"]
    assert (rec.node, rec.op, rec.sources) == ("max", "Max", ("a",))


def test_non_converging_patterns_are_reported() -> None:
    m = chain("Relu")

    def flip(node: Node, rw: Rewriter) -> bool:
        other = "Abs" if node.op == "Relu" else "Relu"
        rw.replace_node(node, rw.create(other, node.operands, origin=[node]))
        return True

    with pytest.raises(PassError, match="did not converge"):
        apply_patterns(m.main, {"Relu": [flip], "Abs": [flip]})


def test_visits_are_linear_in_graph_size() -> None:
    def chain(n: int) -> Module:
        m = Module("c")
        v = m.add_placeholder("x", f32(8))
        fn = m.create_function()
        for _ in range(n):
            v = fn.create("Neg", [v]).result
        out = m.add_placeholder("out", f32(8), is_output=True)
        fn.create("Save", [v, out])
        return m

    calls = []
    for n in (200, 2000):
        count = 0

        def counting(node: Node, rw: Rewriter) -> bool:
            nonlocal count
            count += 1
            return neg_neg(node, rw)

        m = chain(n)
        apply_patterns(m.main, {"Neg": [counting]})
        verify_module(m)
        assert len(m.main) == 1  # an even number of Negs cancels completely
        calls.append(count)
    assert calls[1] <= 12 * calls[0]  # ~linear: 10x the nodes, about 10x the visits


def test_created_nodes_come_from_the_matched_node_by_default() -> None:
    m = chain("Relu")

    def relu_to_max(node: Node, rw: Rewriter) -> bool:
        zero = rw.constant("zero", np.zeros(1, np.float32))
        rw.replace_node(node, rw.create("Max", [node.operands[0], zero], name="max"))
        return True

    assert apply_patterns(m.main, {"Relu": [relu_to_max]})
    assert [(r.kind, r.node, r.sources, r.rule, r.rewrite) for r in m.main.journal] == [
        ("create", "max", ("a",), "relu_to_max", 1),
        ("replace", "a", ("max",), "relu_to_max", 1),
        ("erase", "a", (), "relu_to_max", 1),
    ]
    assert m.main.find("max").meta["origin"] == ("a",)


def test_each_fired_pattern_is_one_numbered_rewrite() -> None:
    m = chain("Neg", "Neg", "Exp", "Neg", "Neg")
    assert apply_patterns(m.main, {"Neg": [neg_neg]})
    assert [(r.kind, r.node, r.rule, r.rewrite) for r in m.main.journal] == [
        ("replace", "b", "neg_neg", 1),
        ("erase", "b", "neg_neg", 1),
        ("replace", "e", "neg_neg", 2),
        ("erase", "e", "neg_neg", 2),
        ("erase", "a", "erase-dead", 3),  # the inner Negs die with their only user
        ("erase", "d", "erase-dead", 4),
    ]
    check(text(m), "CHECK: %c = Exp(%x)\nCHECK: Save(%c, %out)")


def test_mistyped_pattern_keys_fail_when_the_table_is_built() -> None:
    with pytest.raises(CompilerError, match="unknown op 'Mull' \\(did you mean 'Mul'\\?\\)"):
        graph_patterns({"Mull": [neg_neg]})
    with pytest.raises(CompilerError, match="unknown instruction kind 'cpy'"):
        lir_patterns({"cpy": [neg_neg]})
    with pytest.raises(CompilerError, match="unknown op 'relu'"):
        apply_patterns(Module("m").create_function(), {"relu": [neg_neg]})
    assert graph_patterns({"Neg": [neg_neg], "*": [neg_neg]}).for_key("Neg") == (neg_neg,)


def test_a_pass_module_with_a_mistyped_table_fails_at_import(tmp_path, monkeypatch) -> None:
    (tmp_path / "typo_pass.py").write_text(
        "from compiler.passes.rewriter import graph_patterns\n"
        "def fold(node, rw):\n"
        "    return False\n"
        'PATTERNS = graph_patterns({"BatchNorm": [fold], "Transpse": [fold]})\n'
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(CompilerError, match="'Transpse' \\(did you mean 'Transpose'\\?\\)"):
        importlib.import_module("typo_pass")


def test_every_shipped_pattern_table_is_checked() -> None:
    from compiler.lir.passes import peephole
    from compiler.passes import arithmetic, batchnorm_folding, concat_slice, pad_merge, reshape

    for mod in (arithmetic, batchnorm_folding, concat_slice, pad_merge, reshape, peephole):
        assert isinstance(mod.PATTERNS, PatternTable), mod.__name__
