"""lower, for the ops added with real exports (Trilu, GroupNorm, RMSNorm, Einsum) and the
backend contract's float fallback: IR text in, CHECK lines on the IR out, numerics compared
with the reference kernels of the unlowered module."""

from __future__ import annotations

import pytest
from pass_helpers import check_pass, text

from compiler.passes.lowering import Lower
from tests.filecheck import check


def module(
    body: str, inputs: dict[str, str], out: str, consts: dict[str, str] | None = None
) -> str:
    lines = [f"  placeholder %{k} : {t}" for k, t in inputs.items()]
    lines.append(f"  placeholder %out : {out} output")
    lines += [f"  constant %{k} : {t} = elided<{k}>" for k, t in (consts or {}).items()]
    return "module @m {\n" + "\n".join(lines) + "\n  func @main {\n" + body + "  }\n}\n"


@pytest.mark.parametrize("policy", ["cpu", "lower-all"])
def test_trilu_becomes_where_of_a_constant_mask(policy: str) -> None:
    src = module(
        "    %t = Trilu(%x) {k = 1, upper = 0} : f32<2x3x4>\n    Save(%t, %out)\n",
        {"x": "f32<2x3x4>"},
        "f32<2x3x4>",
    )
    m, changed = check_pass(src, Lower(policy))
    assert changed
    check(
        text(m),
        """
        CHECK: constant %t_mask : bool<3x4>
        CHECK: %t_out = Where(%t_mask, %x, %t_zero) : f32<2x3x4>
        CHECK-NOT: Trilu(
        """,
    )


def test_trilu_of_integers_is_lowered_too() -> None:
    src = module(
        "    %t = Trilu(%x) : i64<3x3>\n    Save(%t, %out)\n", {"x": "i64<3x3>"}, "i64<3x3>"
    )
    m, changed = check_pass(src, Lower())
    assert changed
    check(text(m), "CHECK: Where(%t_mask, %x, %t_zero) : i64<3x3>")


def test_group_norm_becomes_layer_norm_over_each_group() -> None:
    src = module(
        "    %g = GroupNorm(%x, %s, %b) {num_groups = 2, epsilon = 0.001} : f32<2x4x3x3>\n"
        "    Save(%g, %out)\n",
        {"x": "f32<2x4x3x3>"},
        "f32<2x4x3x3>",
        {"s": "f32<4>", "b": "f32<4>"},
    )
    m, changed = check_pass(src, Lower())
    assert changed
    check(
        text(m),
        """
        CHECK: %g_grouped = Reshape(%x) {shape = [2, 2, 18]} : f32<2x2x18>
        CHECK-NEXT: %g_layernorm = LayerNorm(%g_grouped, %g_ones, %g_zeros) {axis = 2
        CHECK-NEXT: %g_ungrouped = Reshape(%g_layernorm) {shape = [2, 4, 3, 3]}
        CHECK: %g_out = Add(%g_scaled, %g_bias_c) : f32<2x4x3x3>
        """,
    )
    # lower-all goes on into LayerNorm's own lowering.
    m, _ = check_pass(src, Lower("lower-all"))
    check(text(m), "CHECK: ReduceMean(%g_grouped)\nCHECK-NOT: LayerNorm(")


def test_rms_norm_becomes_primitives() -> None:
    src = module(
        "    %r = RMSNorm(%x, %s) {axis = -2, epsilon = 0.0001} : f32<2x3x8>\n    Save(%r, %out)\n",
        {"x": "f32<2x3x8>"},
        "f32<2x3x8>",
        {"s": "f32<3x8>"},
    )
    m, changed = check_pass(src, Lower())
    assert changed
    check(
        text(m),
        """
        CHECK: %r_sq = Mul(%x, %x)
        CHECK-NEXT: %r_reducemean = ReduceMean(%r_sq) {axes = [1, 2], keepdims = 1}
        CHECK: Sqrt(
        CHECK: %r_normed = Div(%x, %r_sqrt)
        CHECK-NEXT: %r_out = Mul(%r_normed, %s) : f32<2x3x8>
        """,
    )


EINSUM = [
    (
        "bij,bjk->bik",
        {"a": "f32<2x3x4>", "b": "f32<2x4x5>"},
        "f32<2x3x5>",
        "CHECK: %e_mm0 = MatMul(%a, %b) : f32<2x3x5>\nCHECK-NOT: Transpose(",
    ),
    (
        "bhqd,bhkd->bhqk",
        {"a": "f32<2x3x4x8>", "b": "f32<2x3x6x8>"},
        "f32<2x3x4x6>",
        """
        CHECK: %e_a0_3d = Reshape(%a) {shape = [6, 4, 8]}
        CHECK: %e_b0_t = Transpose(%b) {perm = [0, 1, 3, 2]}
        CHECK: %e_mm0 = MatMul(%e_a0_3d, %e_b0_3d) : f32<6x4x6>
        CHECK: Reshape(%e_mm0) {shape = [2, 3, 4, 6]}
        """,
    ),
    (
        "ij->",
        {"a": "f32<3x4>"},
        "f32<>",
        "CHECK: %e_sum0 = ReduceSum(%a) {axes = [0, 1], keepdims = 0} : f32<>",
    ),
    (
        "ii->i",
        {"a": "f32<4x4>"},
        "f32<4>",
        """
        CHECK: %e_in0_diag0_flat = Reshape(%a) {shape = [16]}
        CHECK-NEXT: Slice(%e_in0_diag0_flat) {starts = [0], ends = [16], steps = [5]} : f32<4>
        """,
    ),
    (
        "ij,kj->ik",
        {"a": "f32<3x4>", "b": "f32<5x4>"},
        "f32<3x5>",
        "CHECK: Transpose(%b) {perm = [1, 0]}\nCHECK: MatMul(",
    ),
]


@pytest.mark.parametrize("equation, inputs, out, checks", EINSUM, ids=[e[0] for e in EINSUM])
def test_einsum_lowering(equation: str, inputs: dict[str, str], out: str, checks: str) -> None:
    args = ", ".join(f"%{k}" for k in inputs)
    src = module(
        f'    %e = Einsum({args}) {{equation = "{equation}"}} : {out}\n    Save(%e, %out)\n',
        inputs,
        out,
    )
    m, changed = check_pass(src, Lower())
    assert changed
    check(text(m), checks + "\nCHECK-NOT: Einsum(")


def test_float16_matmul_computes_in_float32_between_casts() -> None:
    src = module(
        "    %mm = MatMul(%a, %b) : f16<2x3x5>\n    Save(%mm, %out)\n",
        {"a": "f16<2x3x4>", "b": "f16<4x5>"},
        "f16<2x3x5>",
    )
    m, changed = check_pass(src, Lower(), numerics=False)
    assert changed
    check(
        text(m),
        """
        CHECK: %mm_in0_f32 = Cast(%a) {to = "f32"} : f32<2x3x4>
        CHECK-NEXT: %mm_in1_f32 = Cast(%b) {to = "f32"} : f32<4x5>
        CHECK-NEXT: %mm_f32 = MatMul(%mm_in0_f32, %mm_in1_f32) : f32<2x3x5>
        CHECK-NEXT: %mm_out0 = Cast(%mm_f32) {to = "f16"} : f16<2x3x5>
        """,
    )
    # float64 and integer MatMul have a loop kernel of their own: nothing to do.
    for kind in ("f64", "i32"):
        m, changed = check_pass(src.replace("f16<", f"{kind}<"), Lower())
        assert not changed
