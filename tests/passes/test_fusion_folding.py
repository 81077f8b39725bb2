"""batchnorm-folding, activation-fusion and pad-merging: CHECK lines, numerics, provenance."""

from __future__ import annotations

import numpy as np
import pytest
from pass_helpers import (
    after_conv,
    assert_rewrites,
    assert_unchanged,
    check_pass,
    module_ir,
    text,
)

from compiler.passes.batchnorm_folding import BatchNormFolding
from compiler.passes.fusion import ActivationFusion
from compiler.passes.pad_merge import PadMerging
from tests.filecheck import check

BN_SRC = after_conv("""
    %bn = BatchNorm(%conv_3, %gamma, %beta, %mean, %var) {epsilon = 0.001} : f32<1x4x8x8>
    Save(%bn, %out)
""")


def test_batchnorm_folds_into_conv() -> None:
    m = assert_rewrites(BN_SRC, BatchNormFolding()).check("""
    CHECK-NOT: constant %gamma
    CHECK: constant %w_bn : f32<4x3x3x3>
    CHECK: constant %b_bn : f32<4>
    CHECK: %conv_3_bn = Conv(%x, %w_bn, %b_bn) {strides = [1, 1], pads = [1, 1, 1, 1]
    CHECK-NEXT: Save(%conv_3_bn, %out)
    CHECK-NOT: BatchNorm
    """)
    journal = m.main.journal
    assert any(
        r.kind == "create" and r.node == "conv_3_bn" and r.sources == ("conv_3", "bn")
        for r in journal
    )


def test_batchnorm_not_folded_when_conv_has_two_users() -> None:
    src = BN_SRC.replace(
        "Save(%bn, %out)", "%sum = Add(%bn, %conv_3) : f32<1x4x8x8>\n    Save(%sum, %out)"
    )
    assert_unchanged(src, BatchNormFolding()).check(
        "CHECK: %conv_3 = Conv\nCHECK: %bn = BatchNorm(%conv_3"
    )


def test_batchnorm_not_folded_with_non_constant_params() -> None:
    src = BN_SRC.replace(
        "placeholder %out", "placeholder %g2 : f32<4>\n  placeholder %out"
    ).replace("BatchNorm(%conv_3, %gamma", "BatchNorm(%conv_3, %g2")
    assert_unchanged(src, BatchNormFolding())


@pytest.mark.parametrize(
    "act,attrs,fused",
    [
        ("Relu", "", 'activation = "relu", act_args = []'),
        ("Clip", " {min = 0.0, max = 6.0}", 'activation = "clip", act_args = [0.0, 6.0]'),
        ("LeakyRelu", " {alpha = 0.2}", 'activation = "leaky_relu", act_args = [0.2]'),
        ("Sigmoid", "", 'activation = "sigmoid"'),
        ("Tanh", "", 'activation = "tanh"'),
    ],
)
def test_activation_fusion_into_conv(act: str, attrs: str, fused: str) -> None:
    name = "conv_3_" + fused.split('"')[1]
    m = assert_rewrites(
        after_conv(f"%relu_3 = {act}(%conv_3){attrs} : f32<1x4x8x8>\nSave(%relu_3, %out)"),
        ActivationFusion(),
    ).check(f"""
    CHECK: %{name} = Conv(%x, %w, %b) {{{{.*}}}}{fused}
    CHECK-NEXT: Save(%{name}, %out)
    CHECK-NOT: {act}(
    """)
    creates = [r for r in m.main.journal if r.kind == "create"]
    assert [(r.node, r.op, r.sources) for r in creates] == [(name, "Conv", ("conv_3", "relu_3"))]
    assert m.main.find(name).meta["origin"] == ("conv_3", "relu_3")


def test_activation_fusion_not_when_conv_used_twice() -> None:
    src = after_conv("""
    %relu_3 = Relu(%conv_3) : f32<1x4x8x8>
    %sum = Add(%relu_3, %conv_3) : f32<1x4x8x8>
    Save(%sum, %out)
""")
    assert_unchanged(src, ActivationFusion()).check(
        "CHECK: %conv_3 = Conv\nCHECK: %relu_3 = Relu(%conv_3)"
    )


def test_activation_fusion_into_fully_connected_and_not_twice() -> None:
    src = module_ir("""
    placeholder %x : f32<2x5>
    placeholder %out : f32<2x3> output
    constant %w : f32<5x3>
    constant %b : f32<3>
    %fc = FullyConnected(%x, %w, %b) : f32<2x3>
    %r = Relu(%fc) : f32<2x3>
    %t = Tanh(%r) : f32<2x3>
    Save(%t, %out)
""")
    assert_rewrites(src, ActivationFusion()).check("""
    CHECK: %fc_relu = FullyConnected(%x, %w, %b) {activation = "relu", act_args = []}
    CHECK-NEXT: %t = Tanh(%fc_relu)
    """)


PAD_SRC = module_ir("""
    placeholder %x : f32<1x3x8x8>
    placeholder %out : f32<1x4x8x8> output
    constant %w : f32<4x3x3x3>
    constant %b : f32<4>
    %p = Pad(%x) {pads = [0, 0, 1, 1, 0, 0, 1, 1], mode = "constant", value = 0.0} : f32<1x3x10x10>
    %conv = Conv(%p, %w, %b) : f32<1x4x8x8>
    Save(%conv, %out)
""")


def test_pad_merges_into_conv() -> None:
    assert_rewrites(PAD_SRC, PadMerging()).check("""
    CHECK-NOT: Pad(
    CHECK: %conv_1 = Conv(%x, %w, %b) {strides = [1, 1], pads = [1, 1, 1, 1]
    """)


@pytest.mark.parametrize(
    "change",
    [
        ("value = 0.0", "value = 1.0"),  # non-zero pad value
        ("pads = [0, 0, 1, 1, 0, 0, 1, 1]", "pads = [0, 1, 1, 1, 0, 0, 1, 1]"),  # pads channels
        ('mode = "constant"', 'mode = "edge"'),
    ],
)
def test_pad_not_merged_into_conv(change: tuple[str, str]) -> None:
    src = PAD_SRC.replace(*change)
    if "0, 1, 1, 1" in change[1]:
        src = src.replace("f32<1x3x10x10>", "f32<1x4x10x10>").replace(
            "f32<4x3x3x3>", "f32<4x4x3x3>"
        )
    assert_unchanged(src, PadMerging())


POOL_SRC = module_ir("""
    placeholder %x : f32<1x2x6x6>
    placeholder %out : f32<1x2x3x3> output
    %r = Relu(%x) : f32<1x2x6x6>
    %p = Pad(%r) {pads = [0, 0, 1, 1, 0, 0, 1, 1], value = VALUE} : f32<1x2x8x8>
    %pool = POOL(%p) {kernel = [3, 3], strides = [2, 2]EXTRA} : f32<1x2x3x3>
    Save(%pool, %out)
""")


@pytest.mark.parametrize(
    "pool,value,extra,merged",
    [
        ("AvgPool", "0.0", ", count_include_pad = 1", True),
        ("AvgPool", "0.0", "", True),  # no own pads: becomes count_include_pad = 1
        ("AvgPool", "1.0", "", False),
        ("MaxPool", "-inf", "", True),
        ("MaxPool", "0.0", "", True),  # input is a Relu: zeros never win
        ("MaxPool", "2.0", "", False),
    ],
)
def test_pad_merging_into_pools(pool: str, value: str, extra: str, merged: bool) -> None:
    src = POOL_SRC.replace("POOL", pool).replace("VALUE", value).replace("EXTRA", extra)
    m, changed = check_pass(src, PadMerging())
    assert changed == merged
    if merged:
        check(text(m), f"CHECK-NOT: Pad(\nCHECK: = {pool}(%r) {{{{.*}}}}pads = [1, 1, 1, 1]")


def test_zero_pad_not_merged_into_maxpool_of_signed_input() -> None:
    src = POOL_SRC.replace("POOL", "MaxPool").replace("VALUE", "0.0").replace("EXTRA", "")
    src = src.replace("%r = Relu(%x)", "%r = Neg(%x)")
    assert_unchanged(src, PadMerging())


@pytest.mark.parametrize(
    "shape",
    [(64, 3, 7, 7), (3, 512, 3, 3), (1, 1, 1, 1), (2000, 40, 1, 1), (5, 70000, 1, 1), (0, 4, 3, 3)],
)
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_scale_rows_gives_the_whole_array_formula_bit_for_bit(shape, dtype):
    """The blocked per-channel scaling rounds each product once, from float64, exactly as the
    whole-array form did: blocks of one channel, of several, and of all of them."""
    from compiler.passes.batchnorm_folding import SCALE_BLOCK, scale_rows

    rng = np.random.default_rng(7)
    w = (rng.standard_normal(shape) * 3).astype(dtype)
    s = rng.uniform(1e-3, 40.0, shape[0])
    want = (w.astype(np.float64) * s.reshape(-1, 1, 1, 1)).astype(dtype)
    got = scale_rows(w, s, np.dtype(dtype))
    assert got.dtype == np.dtype(dtype) and got.shape == w.shape
    assert np.array_equal(got.view(np.uint8), want.view(np.uint8))
    assert SCALE_BLOCK < 70000  # the (5, 70000) case runs one channel per block
