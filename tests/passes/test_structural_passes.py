"""transpose-sinking, reshape-merging, arithmetic-simplification, concat-slice-cleanup."""

from __future__ import annotations

import pytest
from pass_helpers import after_conv, assert_rewrites, assert_unchanged, check_pass, module_ir, text

from compiler.passes.arithmetic import ArithmeticSimplification
from compiler.passes.concat_slice import ConcatSliceCleanup
from compiler.passes.reshape import ReshapeMerging
from compiler.passes.transpose_sinking import TransposeSinking
from tests.filecheck import check

TS_SRC = module_ir("""
    placeholder %x : f32<2x3x4>
    placeholder %y : f32<2x3x4>
    placeholder %out : f32<2x3x4> output
    constant %c : f32<4x1x3>
    %tx = Transpose(%x) {perm = [2, 0, 1]} : f32<4x2x3>
    %ty = Transpose(%y) {perm = [2, 0, 1]} : f32<4x2x3>
    %r = Relu(%tx) : f32<4x2x3>
    %s = Add(%r, %ty) : f32<4x2x3>
    %m = Mul(%s, %c) : f32<4x2x3>
    %back = Transpose(%m) {perm = [1, 2, 0]} : f32<2x3x4>
    Save(%back, %out)
""")


def test_transposes_sink_and_cancel() -> None:
    m = assert_rewrites(TS_SRC, TransposeSinking()).check("""
    CHECK: constant %c_t : f32<1x3x4>
    CHECK-NOT: Transpose
    CHECK: = Relu(%x)
    CHECK: = Add(%r_1, %y)
    CHECK: = Mul(%s_1, %c_t)
    CHECK-NEXT: Save(
    """)
    assert len(m.main) == 4


def test_transposes_with_different_perms_do_not_sink_through_binary() -> None:
    src = TS_SRC.replace(
        "%ty = Transpose(%y) {perm = [2, 0, 1]} : f32<4x2x3>",
        "%y2 = Reshape(%y) {shape = [3, 2, 4]} : f32<3x2x4>\n"
        "    %ty = Transpose(%y2) {perm = [2, 1, 0]} : f32<4x2x3>",
    )
    m, changed = check_pass(src, TransposeSinking())
    assert changed  # the Relu still moves
    check(
        text(m),
        """
    CHECK-DAG: = Relu(%x)
    CHECK-DAG: %ty = Transpose(%y2) {perm = [2, 1, 0]}
    CHECK: %s = Add(%tx_1, %ty)
    CHECK: = Mul(%s, %c)
    """,
    )


def test_transpose_pairs_identity_and_constant() -> None:
    src = module_ir("""
    placeholder %x : f32<2x3>
    placeholder %out : f32<2x3> output
    placeholder %out2 : f32<3x2> output
    constant %k : f32<3x2>
    %a = Transpose(%x) {perm = [1, 0]} : f32<3x2>
    %b = Transpose(%a) {perm = [1, 0]} : f32<2x3>
    %i = Transpose(%b) {perm = [0, 1]} : f32<2x3>
    %kt = Transpose(%k) {perm = [1, 0]} : f32<2x3>
    %s = Add(%i, %kt) : f32<2x3>
    Save(%s, %out)
    Save(%a, %out2)
""")
    m, _ = check_pass(src, TransposeSinking())
    check(
        text(m),
        """
    CHECK: constant %k_t : f32<2x3>
    CHECK: %a = Transpose(%x)
    CHECK: %s = Add(%x, %k_t)
    CHECK-COUNT-1: Transpose(
    """,
    )


def test_transpose_of_a_broadcast_splat_is_a_broadcast() -> None:
    # Placeholders, not constants: nothing folds. %w has three elements: its Transpose stays.
    src = module_ir("""
    placeholder %v : f32<1x1>
    placeholder %w : f32<1x3>
    placeholder %out : f32<3x2> output
    placeholder %out2 : f32<3x2> output
    %b = Broadcast(%v) {shape = [2, 3]} : f32<2x3>
    %t = Transpose(%b) {perm = [1, 0]} : f32<3x2>
    %b2 = Broadcast(%w) {shape = [2, 3]} : f32<2x3>
    %t2 = Transpose(%b2) {perm = [1, 0]} : f32<3x2>
    Save(%t, %out)
    Save(%t2, %out2)
""")
    assert_rewrites(src, TransposeSinking()).check("""
    CHECK-DAG: %t2 = Transpose(%b2) {perm = [1, 0]}
    CHECK-DAG: %t_1 = Broadcast(%v) {shape = [3, 2]} : f32<3x2>
    CHECK-NOT: Transpose(%b)
    CHECK: Save(%t_1, %out)
    """)


RS_SRC = module_ir("""
    placeholder %x : f32<2x3x4>
    placeholder %out : f32<6x4> output
    constant %k : f32<2x2> = dense<[1.0, 2.0, 3.0, 4.0]>
    %r1 = Reshape(%x) {shape = [24]} : f32<24>
    %r2 = Reshape(%r1) {shape = [6, 4]} : f32<6x4>
    %r3 = Reshape(%r2) {shape = [6, 4]} : f32<6x4>
    %kr = Reshape(%k) {shape = [4]} : f32<4>
    %s = Add(%r3, %kr) : f32<6x4>
    Save(%s, %out)
""")


def test_reshapes_merge_and_fold() -> None:
    assert_rewrites(RS_SRC, ReshapeMerging()).check("""
    CHECK: constant %k_r : f32<4> = dense<[1.0, 2.0, 3.0, 4.0]>
    CHECK: %r2_1 = Reshape(%x) {shape = [6, 4]}
    CHECK-NEXT: %s = Add(%r2_1, %k_r)
    CHECK-COUNT-1: Reshape(
    """)


def test_reshape_with_other_users_stays() -> None:
    src = RS_SRC.replace(
        "placeholder %out : f32<6x4> output",
        "placeholder %out : f32<6x4> output\n  placeholder %o2 : f32<24> output",
    ).replace("Save(%s, %out)", "Save(%s, %out)\n    Save(%r1, %o2)")
    m, _ = check_pass(src, ReshapeMerging())
    check(text(m), "CHECK: %r1 = Reshape(%x)\nCHECK: = Reshape(%x) {shape = [6, 4]}")


AR_SRC = module_ir("""
    placeholder %x : f32<2x3>
    placeholder %out : f32<2x3> output
    constant %one : f32<1> = dense<[1.0]>
    constant %zero : f32<3> = dense<[0.0, 0.0, 0.0]>
    constant %c1 : f32<3> = dense<[1.0, 2.0, 3.0]>
    constant %c2 : f32<1> = dense<[2.0]>
    %a = Mul(%x, %one) : f32<2x3>
    %b = Add(%zero, %a) : f32<2x3>
    %c = Sub(%b, %zero) : f32<2x3>
    %d = Div(%c, %one) : f32<2x3>
    %e = Pow(%d, %one) : f32<2x3>
    %f = Mul(%e, %c1) : f32<2x3>
    %g = Mul(%f, %c2) : f32<2x3>
    %h = Add(%g, %c1) : f32<2x3>
    %i = Sub(%h, %c2) : f32<2x3>
    Save(%i, %out)
""")


def test_arithmetic_identities_and_chains() -> None:
    m = assert_rewrites(AR_SRC, ArithmeticSimplification()).check("""
    CHECK: constant %c1_mul : f32<3> = dense<[2.0, 4.0, 6.0]>
    CHECK: constant %c1_add : f32<3> = dense<[-1.0, 0.0, 1.0]>
    CHECK: = Mul(%x, %c1_mul)
    CHECK-NEXT: = Add(%{{g.*}}, %c1_add)
    CHECK-NEXT: Save(
    """)
    assert len(m.main) == 3


def test_identity_kept_when_broadcast_changes_shape() -> None:
    src = module_ir("""
    placeholder %x : f32<3>
    placeholder %out : f32<2x3> output
    constant %one : f32<2x3> = dense<[1.0, 1.0, 1.0, 1.0, 1.0, 1.0]>
    %a = Mul(%x, %one) : f32<2x3>
    Save(%a, %out)
""")
    assert_unchanged(src, ArithmeticSimplification()).check("CHECK: %a = Mul(%x, %one)")


def test_mul_and_add_by_channel_constant_fold_into_conv() -> None:
    src = after_conv("""
    constant %s : f32<4x1x1>
    constant %t : f32<1x4x1x1>
    %m = Mul(%conv_3, %s) : f32<1x4x8x8>
    %a = Add(%t, %m) : f32<1x4x8x8>
    Save(%a, %out)
""")
    assert_rewrites(src, ArithmeticSimplification()).check("""
    CHECK: %conv_3_mul_add = Conv(%x, %w_scaled, %b_scaled_shifted)
    CHECK-NEXT: Save(%conv_3_mul_add, %out)
    """)
    # Not when the constant varies over H/W.
    assert_unchanged(
        src.replace("%s : f32<4x1x1>", "%s : f32<1x8x8>"), ArithmeticSimplification()
    ).check("CHECK: %conv_3 = Conv\nCHECK: %m = Mul(%conv_3, %s)")


CS_SRC = module_ir("""
    placeholder %x : f32<2x3>
    placeholder %y : f32<2x5>
    placeholder %out : f32<2x3> output
    placeholder %out2 : f32<2x10> output
    placeholder %out3 : f32<2x3> output
    placeholder %out4 : f32<1x2> output
    %one = Concat(%x) {axis = 1} : f32<2x3>
    %inner = Concat(%one, %y) {axis = 1} : f32<2x8>
    %outer = Concat(%inner, %x, %x) {axis = -1} : f32<2x14>
    %whole = Slice(%one) {starts = [0, 0], ends = [2, 3], steps = [1, 1]} : f32<2x3>
    %pick = Slice(%outer) {starts = [0, 8], ends = [2, 11], steps = [1, 1]} : f32<2x3>
    %part = Slice(%outer) {starts = [1, 3], ends = [2, 5], steps = [1, 1]} : f32<1x2>
    %sp#0, %sp#1 = Split(%outer) {axis = 1, splits = [4, 10]} : f32<2x4>, f32<2x10>
    %r = Relu(%whole) : f32<2x3>
    Save(%r, %out)
    Save(%sp#1, %out2)
    Save(%pick, %out3)
    Save(%part, %out4)
""")


def test_concat_slice_cleanups() -> None:
    assert_rewrites(CS_SRC, ConcatSliceCleanup()).check("""
    CHECK-DAG: %outer_1 = Concat(%x, %y, %x, %x) {axis = -1}
    CHECK-DAG: %r = Relu(%x)
    CHECK-DAG: %part_1 = Slice(%y) {starts = [1, 0], ends = [2, 2], steps = [1, 1]}
    CHECK-DAG: %sp_1 = Slice(%outer_1) {starts = [0, 4], ends = [2, 14]
    CHECK-DAG: Save(%x, %out3)
    CHECK-NOT: Split
    """)


def test_concat_of_adjacent_slices_is_the_tensor() -> None:
    src = module_ir("""
    placeholder %x : f32<2x6>
    placeholder %out : f32<2x6> output
    %a = Slice(%x) {starts = [0, 0], ends = [2, 2], steps = [1, 1]} : f32<2x2>
    %b = Slice(%x) {starts = [0, 2], ends = [2, 6], steps = [1, 1]} : f32<2x4>
    %c = Concat(%a, %b) {axis = 1} : f32<2x6>
    %d = Concat(%b, %a) {axis = 1} : f32<2x6>
    %s = Add(%c, %d) : f32<2x6>
    Save(%s, %out)
""")
    m, _ = check_pass(src, ConcatSliceCleanup())
    check(text(m), "CHECK: %d = Concat(%b, %a)\nCHECK: %s = Add(%x, %d)")


@pytest.mark.parametrize(
    "sl",
    [
        "{starts = [0, 2], ends = [2, 4], steps = [1, 1]}",  # straddles two inputs
        "{starts = [0, 0], ends = [2, 3], steps = [1, 2]}",  # strided, stays inside %x... but not whole
    ],
)
def test_slice_of_concat_not_rewritten_when_straddling(sl: str) -> None:
    width = 2
    src = f"""
module @m {{
  placeholder %x : f32<2x3>
  placeholder %y : f32<2x3>
  placeholder %out : f32<2x{width}> output
  func @main {{
    %c = Concat(%x, %y) {{axis = 1}} : f32<2x6>
    %s = Slice(%c) {sl} : f32<2x{width}>
    Save(%s, %out)
  }}
}}
"""
    m, changed = check_pass(src, ConcatSliceCleanup())
    if "steps = [1, 2]" in sl:
        assert changed
        check(text(m), "CHECK: = Slice(%x) {starts = [0, 0], ends = [2, 3], steps = [1, 2]}")
    else:
        assert not changed
        check(text(m), "CHECK: %s = Slice(%c)")
