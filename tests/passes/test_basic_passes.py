"""dce, cse and constant-folding: IR text in, CHECK lines out, numerics preserved."""

from __future__ import annotations

from pass_helpers import assert_rewrites, assert_unchanged, check_pass, load, module_ir, run, text

from compiler.passes.constant_folding import ConstantFolding
from compiler.passes.cse import CommonSubexpressionElimination
from compiler.passes.dce import DeadCodeElimination
from tests.filecheck import check

DCE_SRC = module_ir("""
    placeholder %x : f32<2x3>
    placeholder %out : f32<2x3> output
    constant %c : f32<3> = dense<[1.0, 2.0, 3.0]>
    constant %unused : f32<1> = dense<[5.0]>
    %dead = Add(%x, %c) : f32<2x3>
    %dead2 = Exp(%dead) : f32<2x3>
    %live = Relu(%x) : f32<2x3>
    Save(%live, %out)
""")


def test_dce_removes_dead_chain_and_constants() -> None:
    assert_rewrites(DCE_SRC, DeadCodeElimination()).check("""
    CHECK-NOT: constant %c
    CHECK-NOT: constant %unused
    CHECK: %live = Relu(%x)
    CHECK-NEXT: Save(%live, %out)
    CHECK-NOT: Add
    """)


def test_dce_keeps_everything_live() -> None:
    src = (
        DCE_SRC.replace("%dead2 = Exp(%dead) : f32<2x3>\n", "")
        .replace("%live = Relu(%x)", "%live = Relu(%dead)")
        .replace("constant %unused : f32<1> = dense<[5.0]>\n", "")
    )
    assert_unchanged(src, DeadCodeElimination()).check(
        "CHECK: %dead = Add\nCHECK: %live = Relu(%dead)"
    )


CSE_SRC = module_ir("""
    placeholder %x : f32<2x3>
    placeholder %out : f32<2x3> output
    constant %c1 : f32<3> = dense<[1.0, 2.0, 3.0]>
    constant %c2 : f32<3> = dense<[1.0, 2.0, 3.0]>
    %a = Add(%x, %c1) : f32<2x3>
    %b = Add(%c2, %x) : f32<2x3>
    %ea = Exp(%a) : f32<2x3>
    %eb = Exp(%b) : f32<2x3>
    %s = Mul(%ea, %eb) : f32<2x3>
    %l1 = LeakyRelu(%s) {alpha = 0.1} : f32<2x3>
    %l2 = LeakyRelu(%s) {alpha = 0.2} : f32<2x3>
    %r = Sub(%l1, %l2) : f32<2x3>
    Save(%r, %out)
""")


def test_cse_merges_equal_nodes_and_constants_but_not_different_attrs() -> None:
    assert_rewrites(CSE_SRC, CommonSubexpressionElimination(), DeadCodeElimination()).check("""
    CHECK-NOT: constant %c2
    CHECK: %a = Add(%x, %c1)
    CHECK-NOT: %b = Add
    CHECK: %ea = Exp(%a)
    CHECK-NOT: %eb = Exp
    CHECK: %s = Mul(%ea, %ea)
    CHECK-DAG: %l1 = LeakyRelu(%s) {alpha = 0.1}
    CHECK-DAG: %l2 = LeakyRelu(%s) {alpha = 0.2}
    CHECK: %r = Sub(%l1, %l2)
    """)


def test_cse_keeps_non_commutative_operand_order() -> None:
    src = CSE_SRC.replace("Add(%x, %c1)", "Sub(%x, %c1)").replace("Add(%c2, %x)", "Sub(%c2, %x)")
    m, _ = check_pass(src, CommonSubexpressionElimination())
    check(text(m), "CHECK: %a = Sub(%x, %c1)\nCHECK: %b = Sub(%c1, %x)\nCHECK: %eb = Exp(%b)")


CF_SRC = module_ir("""
    placeholder %x : f32<2x3>
    placeholder %out : f32<2x3> output
    constant %c : f32<3> = dense<[1.0, 2.0, 3.0]>
    constant %d : f32<3> = dense<[0.5, 0.5, 0.5]>
    %k = Mul(%c, %d) : f32<3>
    %k2 = Exp(%k) : f32<3>
    %y = Add(%x, %k2) : f32<2x3>
    Save(%y, %out)
""")


def test_constant_folding_folds_chains() -> None:
    m = assert_rewrites(CF_SRC, ConstantFolding(), DeadCodeElimination()).check("""
    CHECK-NOT: constant %c :
    CHECK: constant %k2_folded : f32<3> = dense<[1.64872
    CHECK: %y = Add(%x, %k2_folded)
    CHECK-NOT: Mul
    """)
    assert len(m.main) == 2


def test_constant_folding_does_not_fold_non_constants_or_huge_results() -> None:
    # %k has 3 elements > 2 but does not grow the operands (3 <= 3 + 3): still folded.
    assert check_pass(CF_SRC, ConstantFolding(max_elements=2))[1]
    m = load(
        module_ir("""
    placeholder %x : f32<2x3>
    placeholder %out : f32<64x3> output
    constant %c : f32<1x3> = dense<[1.0, 2.0, 3.0]>
    %big = Tile(%c) {repeats = [64, 1]} : f32<64x3>
    %y = Relu(%x) : f32<2x3>
    Save(%big, %out)
""")
    )
    assert not run(m, ConstantFolding(max_elements=100))
    check(text(m), "CHECK: %big = Tile(%c)\nCHECK: %y = Relu(%x)")
    assert run(m, ConstantFolding())
    check(text(m), "CHECK: constant %big_folded : f32<64x3>\nCHECK-NOT: Tile")


def _big_constants_src(second: list[float]) -> str:
    first = [float(i % 7) for i in range(100)]
    dense = lambda v: "dense<[" + ", ".join(str(x) for x in v) + "]>"  # noqa: E731
    return module_ir(f"""
    placeholder %x : f32<100>
    placeholder %out : f32<100> output
    constant %c1 : f32<100> = {dense(first)}
    constant %c2 : f32<100> = {dense(second)}
    %a = Add(%x, %c1) : f32<100>
    %b = Mul(%a, %c2) : f32<100>
    Save(%b, %out)
""")


def test_cse_merges_big_equal_constants_and_keeps_ones_equal_where_it_samples() -> None:
    """Constants over 64 elements are told apart by a few sampled elements before their
    digest: equal ones still merge; ones equal in the samples but not elsewhere do not."""
    same = [float(i % 7) for i in range(100)]
    assert_rewrites(_big_constants_src(same), CommonSubexpressionElimination()).check(
        "CHECK: %b = Mul(%a, %c1)"
    )
    other = list(same)
    other[30] = 99.0  # outside the first, middle and last 16 elements
    assert_unchanged(_big_constants_src(other), CommonSubexpressionElimination()).check(
        "CHECK: %b = Mul(%a, %c2)"
    )
