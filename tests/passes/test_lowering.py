"""lower: every lowering is checked numerically against the reference kernels, and by CHECK
lines for the shape of the result (under "lower-all", which lowers whatever has a lowering);
the CPU policy keeps exactly what the LLVM backend's contract says it runs."""

from __future__ import annotations

import pytest
from pass_helpers import assert_rewrites, assert_unchanged, check_pass, module_ir, text

from compiler.graph.types import ElemKind
from compiler.passes.lowering import (
    CPU_POLICY,
    INTERPRETER_POLICY,
    LOWERINGS,
    Lower,
)
from tests.filecheck import check


def unary_module(op: str, attrs: str = "", shape: str = "2x3x4x5", out: str = "") -> str:
    """`%n = op(%x)` of an f32 tensor of `shape` (result shape `out`, by default the same)."""
    out = out or shape
    return module_ir(f"""
    placeholder %x : f32<{shape}>
    placeholder %out : f32<{out}> output
    %n = {op}(%x){attrs} : f32<{out}>
    Save(%n, %out)
    """)


@pytest.mark.parametrize(
    "op,attrs,expect",
    [
        ("Clip", " {min = -0.5, max = 0.75}", ["Max(%x, %n_min)", "Min(%n_max, %n_max_1)"]),
        ("Clip", " {min = 0.0}", ["Max(%x, %n_min)"]),
        ("Gelu", "", ["Erf(", "Mul(%n_halfx, %n_1p)"]),
        ("Gelu", ' {approximate = "tanh"}', ["Tanh(", "Mul(%n_halfx, %n_1p)"]),
        ("GlobalAvgPool", "", ["ReduceMean(%x) {axes = [2, 3], keepdims = 1}"]),
        ("GlobalMaxPool", "", ["ReduceMax(%x) {axes = [2, 3], keepdims = 1}"]),
        ("HardSigmoid", " {alpha = 0.3, beta = 0.4}", ["Mul(%x, %n_alpha)", "Min("]),
        ("HardSwish", "", ["Max(", "Mul(%x, %n_min)"]),
        ("Elu", " {alpha = 0.7}", ["Greater(%x, %n_zero)", "Where(%n_greater, %x, %n_neg)"]),
        ("Selu", "", ["Where(", "Mul(%n_where, %n_gamma)"]),
        ("Softplus", "", ["Abs(%x)", "Log(", "Relu(%x)"]),
        ("LeakyRelu", " {alpha = 0.1}", ["Less(%x, %n_zero)", "Where(%n_less, %n_scaled, %x)"]),
    ],
)
def test_unary_lowerings(op: str, attrs: str, expect: list[str]) -> None:
    src = unary_module(op, attrs, out="2x3x1x1" if op.startswith("Global") else "")
    checks = "\n".join(f"CHECK: {e}" for e in expect) + f"\nCHECK-NOT: = {op}("
    m = assert_rewrites(src, Lower("lower-all")).check(checks)
    assert all(r.sources == ("n",) for r in m.main.journal if r.kind == "create")


@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax"])
def test_softmax_kept_by_cpu_lowered_by_lower_all(op: str) -> None:
    src = unary_module(op, " {axis = 1}")
    assert_unchanged(src, Lower())
    assert_rewrites(src, Lower("lower-all")).check(
        """
    CHECK: ReduceMax(%x) {axes = [1], keepdims = 1}
    CHECK: Exp(
    CHECK: ReduceSum(
    """
        + ("CHECK: Div(" if op == "Softmax" else "CHECK: Log(\nCHECK: Sub("),
    )


FC_SRC = module_ir("""
    placeholder %x : f32<2x5>
    placeholder %out : f32<2x3> output
    constant %w : f32<5x3>
    constant %b : f32<3>
    %fc = FullyConnected(%x, %w, %b) {activation = "clip", act_args = [-0.5, 0.5]} : f32<2x3>
    Save(%fc, %out)
""")


def test_fully_connected_lowers_to_matmul_add_and_activation() -> None:
    assert_rewrites(FC_SRC, Lower("lower-all")).check("""
    CHECK: %fc_matmul = MatMul(%x, %w) : f32<2x3>
    CHECK-NEXT: %fc_bias = Add(%fc_matmul, %b) : f32<2x3>
    CHECK-NEXT: Max(%fc_bias,
    CHECK-NEXT: Min(
    CHECK-NOT: Clip
    """)


def test_fully_connected_zero_bias_drops_add() -> None:
    src = FC_SRC.replace(
        "constant %b : f32<3> = elided<b>", "constant %b : f32<3> = dense<[0.0, 0.0, 0.0]>"
    )
    m, _ = check_pass(src, Lower("lower-all"))
    check(text(m), "CHECK: %fc_matmul = MatMul(%x, %w)\nCHECK-NOT: Add(")


def bn_module(params: str) -> str:
    """A BatchNorm over 3 channels whose parameters are declared by `params`."""
    return module_ir(
        params
        + """
    placeholder %x : f32<2x3x4x4>
    placeholder %out : f32<2x3x4x4> output
    %bn = BatchNorm(%x, %gamma, %beta, %mean, %var) {epsilon = 0.01} : f32<2x3x4x4>
    Save(%bn, %out)
    """
    )


def test_batchnorm_lowering_with_constant_parameters() -> None:
    params = "\n".join(
        f"constant %{n} : f32<3> = elided<{n}>" for n in ("gamma", "beta", "mean", "var")
    )
    assert_rewrites(bn_module(params), Lower("lower-all")).check("""
    CHECK: constant %bn_scale : f32<1x3x1x1>
    CHECK: constant %bn_shift : f32<1x3x1x1>
    CHECK: %bn_mul = Mul(%x, %bn_scale)
    CHECK-NEXT: %bn_add = Add(%bn_mul, %bn_shift)
    """)


def test_batchnorm_lowering_with_placeholder_parameters() -> None:
    params = "\n".join(
        [f"placeholder %{n} : f32<3>" for n in ("gamma", "beta", "mean")]
        + ["constant %var : f32<3> = elided<v>"]
    )
    assert_rewrites(bn_module(params), Lower("lower-all")).check(
        "CHECK: Sub(%x, %bn_mean_r)\nCHECK: Sqrt(\nCHECK: Div(\nCHECK-NOT: BatchNorm"
    )


LN_SRC = module_ir("""
    placeholder %x : f32<2x3x8>
    placeholder %out : f32<2x3x8> output
    constant %s : f32<8>
    constant %b : f32<8>
    %ln = LayerNorm(%x, %s, %b) {axis = -1, epsilon = 0.001} : f32<2x3x8>
    Save(%ln, %out)
""")


def test_layernorm_lowering() -> None:
    assert_rewrites(LN_SRC, Lower("lower-all")).check("""
    CHECK: %ln_mean = ReduceMean(%x) {axes = [2], keepdims = 1}
    CHECK: %ln_centered = Sub(%x, %ln_mean)
    CHECK: %ln_var = ReduceMean(%ln_sq)
    CHECK: Sqrt(%ln_var_eps)
    CHECK: %ln_normed = Div(%ln_centered,
    CHECK: %ln_shifted = Add(%ln_scaled, %b)
    """)


def test_tile_and_prelu_lowering() -> None:
    src = module_ir("""
    placeholder %x : f32<2x3>
    placeholder %out : f32<4x9> output
    constant %slope : f32<3>
    %p = PRelu(%x, %slope) : f32<2x3>
    %t = Tile(%p) {repeats = [2, 3]} : f32<4x9>
    Save(%t, %out)
""")
    assert_rewrites(src, Lower("lower-all")).check("""
    CHECK: %p_scaled = Mul(%x, %slope)
    CHECK: Where(%p_less, %p_scaled, %x)
    CHECK: %t_tile0 = Concat(%p_where, %p_where) {axis = 0}
    CHECK: %t_tile1 = Concat(%t_tile0, %t_tile0, %t_tile0) {axis = 1}
    """)


CONV_SRC = module_ir("""
    placeholder %x : f32<1x4x6x6>
    placeholder %out : f32<1x6x4x4> output
    constant %w : f32<6x2x3x3>
    constant %b : f32<6>
    %conv = Conv(%x, %w, %b) {group = 2, activation = "ACT"} : f32<1x6x4x4>
    Save(%conv, %out)
""")


def test_grouped_conv_kept_by_cpu_split_by_lower_all() -> None:
    assert_unchanged(CONV_SRC.replace("ACT", "relu"), Lower())
    assert_rewrites(CONV_SRC.replace("ACT", "relu"), Lower("lower-all")).check("""
    CHECK-DAG: %conv_split#0, %conv_split#1 = Split(%x) {axis = 1, splits = [2, 2]}
    CHECK-DAG: Split(%w) {axis = 0, splits = [3, 3]}
    CHECK: %conv_g0 = Conv(%conv_split#0, %conv_wsplit#0, %conv_bsplit#0) {{.*}}group = 1, activation = "relu"
    CHECK: %conv_g1 = Conv(%conv_split#1
    CHECK: %conv_concat = Concat(%conv_g0, %conv_g1) {axis = 1}
    """)


def test_depthwise_conv_kept_even_by_lower_all() -> None:
    src = (
        CONV_SRC.replace("f32<6x2x3x3>", "f32<4x1x3x3>")
        .replace("f32<6>", "f32<4>")
        .replace("group = 2", "group = 4")
        .replace("1x6x4x4", "1x4x4x4")
    )
    assert_unchanged(src.replace("ACT", "none"), Lower("lower-all"))


def test_unsupported_fused_activation_is_split_off() -> None:
    assert_rewrites(CONV_SRC.replace("ACT", "sigmoid"), Lower()).check("""
    CHECK: %conv_base = Conv(%x, %w, %b) {{.*}}activation = "none"
    CHECK-NEXT: %conv_sigmoid = Sigmoid(%conv_base)
    """)


def test_cpu_policy_keeps_primitives() -> None:
    f32 = [ElemKind.F32]
    for op in (
        "Conv",
        "MatMul",
        "MaxPool",
        "AvgPool",
        "Softmax",
        "Concat",
        "Transpose",
        "Reshape",
        "ReduceMean",
        "Relu",
        "Pad",
        "Resize",
        "LRN",
        "Gather",
    ):
        assert CPU_POLICY.backend.runs(op, f32), op
    assert {"Softmax", "LogSoftmax"} <= set(LOWERINGS)


#: The CPU backend's decision for every op that has a lowering (see the lowering module's doc):
#: kept where the LLVM kernel is at least as fast, lowered where the lowered chain is faster.
CPU_KEEPS = {
    "FullyConnected": True,
    "BatchNorm": True,
    "LayerNorm": True,
    "Clip": True,
    "Tile": True,
    "HardSigmoid": True,
    "HardSwish": True,
    "LeakyRelu": True,
    "PRelu": True,
    "Softmax": True,
    "LogSoftmax": True,
    "Gelu": False,
    "Elu": False,
    "Selu": False,
    "Softplus": False,
    "GlobalAvgPool": False,
    "GlobalMaxPool": False,
    "Trilu": False,
    "GroupNorm": False,
    "RMSNorm": False,
    "Einsum": False,
}


def test_cpu_decision_for_every_lowerable_op() -> None:
    assert set(CPU_KEEPS) <= set(LOWERINGS)
    for op, kept in CPU_KEEPS.items():
        assert CPU_POLICY.backend.runs(op, [ElemKind.F32]) is kept, op
        assert INTERPRETER_POLICY.backend.runs(op, [ElemKind.F32]), op


@pytest.mark.parametrize(
    "op,attrs",
    [("Clip", " {min = 0.0}"), ("HardSwish", ""), ("LeakyRelu", " {alpha = 0.1}"), ("Gelu", "")],
)
def test_kept_by_cpu_and_interpreter_lowered_by_lower_all(op: str, attrs: str) -> None:
    src = unary_module(op, attrs)
    assert check_pass(src, Lower())[1] is not CPU_KEEPS[op]
    assert not check_pass(src, Lower("interpreter"))[1]
    assert check_pass(src, Lower("lower-all"))[1]


def test_cpu_keeps_layernorm_of_float32_only() -> None:
    assert_unchanged(LN_SRC, Lower())
    # The LLVM layer-norm kernel is float32 only: a float16 one runs in float32 between Casts
    # (the backend contract's float fallback; its numerics are float16's, so the float32
    # tolerance of check_pass does not apply) ...
    assert_rewrites(LN_SRC.replace("f32<", "f16<"), Lower(), numerics=False).check("""
    CHECK: %ln_in0_f32 = Cast(%x) {to = "f32"} : f32<2x3x8>
    CHECK: %ln_f32 = LayerNorm(%ln_in0_f32, %ln_in1_f32, %ln_in2_f32)
    CHECK-SAME: : f32<2x3x8>
    CHECK-NEXT: %ln_out0 = Cast(%ln_f32) {to = "f16"} : f16<2x3x8>
    """)
    # ... and a float64 one is lowered, so it computes in float64.
    assert_rewrites(LN_SRC.replace("f32<", "f64<"), Lower(), numerics=False).check(
        "CHECK: ReduceMean(%x)\nCHECK-NOT: LayerNorm(\nCHECK-NOT: f32<"
    )


def test_cpu_keeps_fully_connected_with_a_kernel_activation() -> None:
    assert_unchanged(FC_SRC, Lower())
    assert_rewrites(FC_SRC.replace('"clip", act_args = [-0.5, 0.5]', '"tanh"'), Lower()).check("""
    CHECK: %fc_base = FullyConnected(%x, %w, %b) {activation = "none", act_args = []}
    CHECK-NEXT: %fc_tanh = Tanh(%fc_base)
    """)


def test_activation_fusion_after_lowering_respects_the_backend() -> None:
    from compiler.passes.fusion import ActivationFusion

    m, _ = check_pass(CONV_SRC.replace("ACT", "sigmoid"), Lower(), ActivationFusion())
    check(text(m), 'CHECK: activation = "none"\nCHECK-NEXT: Sigmoid(%conv_base)')
    assert m.meta["fused_activations"] == CPU_POLICY.fused_activations
