"""The worklist driver: fixed point, dead-node cleanup, provenance, bounded revisits."""

from __future__ import annotations

import numpy as np
import pytest
from pass_helpers import load, text

from compiler.errors import PassError
from compiler.graph import Module, verify_module
from compiler.graph.ir import Node
from compiler.graph.types import f32
from compiler.passes.rewriter import Rewriter, apply_patterns
from tests.filecheck import check


def neg_neg(node: Node, rw: Rewriter) -> bool:
    inner = node.operands[0]
    src = getattr(inner, "node", None)
    if src is None or src.op != "Neg":
        return False
    rw.replace_node(node, src.operands[0])
    return True


def test_fixed_point_and_dead_cleanup() -> None:
    m = load("""
module @m {
  placeholder %x : f32<4>
  placeholder %out : f32<4> output
  func @main {
    %a = Neg(%x) : f32<4>
    %b = Neg(%a) : f32<4>
    %c = Neg(%b) : f32<4>
    %d = Neg(%c) : f32<4>
    %e = Exp(%d) : f32<4>
    Save(%e, %out)
  }
}
""")
    assert apply_patterns(m.main, {"Neg": [neg_neg]})
    verify_module(m)
    check(text(m), "CHECK-NOT: Neg\nCHECK: %e = Exp(%x)")
    kinds = [r.kind for r in m.main.journal]
    assert kinds.count("erase") == 4 and "replace" in kinds
    assert not apply_patterns(m.main, {"Neg": [neg_neg]})


def test_created_nodes_record_origin() -> None:
    m = load("""
module @m {
  placeholder %x : f32<4>
  placeholder %out : f32<4> output
  func @main {
    %a = Relu(%x) : f32<4>
    Save(%a, %out)
  }
}
""")

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
    m = load("""
module @m {
  placeholder %x : f32<4>
  placeholder %out : f32<4> output
  func @main {
    %a = Relu(%x) : f32<4>
    Save(%a, %out)
  }
}
""")

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
