"""channel-split: a Conv whose result only a per-channel downsampling node reads is computed in
channel halves, each reduced into its slice of a Concat, where that pair is the widest step of
every schedule (CHECK lines, numerics through the reference kernels, and where it must not
fire). End to end (zero-copy slices, arena with poison, LLVM) on the benchmark models:
tests/memory/test_certificates.py."""

from __future__ import annotations

import pytest
from pass_helpers import assert_rewrites, check_pass, module_ir, text

from compiler.passes.channel_split import ChannelSplit
from compiler.pipeline import CompileOptions, compile_model

# A stem: conv 3->16 at 32x32 (64 KiB) read only by a 2x2/2 max-pool (16 KiB): the pool's step
# (80 KiB) is the widest of every order; split, each half's step needs 32 + 16 KiB. (Constants
# are declared where they are read; `module_ir` moves them to module scope.)
STEM = module_ir("""
    placeholder %x : f32<1x3x32x32>
    placeholder %out : f32<1x8x16x16> output
    constant %w : f32<16x3x3x3>
    constant %b : f32<16>
    %c = Conv(%x, %w, %b) {pads = [1, 1, 1, 1], activation = "relu"} : f32<1x16x32x32>
    %p = MaxPool(%c) {kernel = [2, 2], strides = [2, 2]} : f32<1x16x16x16>
    constant %w2 : f32<8x16x1x1>
    constant %b2 : f32<8>
    %y = Conv(%p, %w2, %b2) : f32<1x8x16x16>
    Save(%y, %out)
""")


def test_the_widest_conv_pool_pair_is_split_in_channel_halves() -> None:
    m = assert_rewrites(STEM, ChannelSplit()).check("""
    CHECK: constant %w_c0 : f32<8x3x3x3>
    CHECK: %c_c0 = Conv(%x, %w_c0, %b_c0) {{.*}}activation = "relu"
    CHECK-NEXT: %p_c0 = MaxPool(%c_c0)
    CHECK-NEXT: %c_c8 = Conv(%x, %w_c8, %b_c8)
    CHECK-NEXT: %p_c8 = MaxPool(%c_c8)
    CHECK-NEXT: %p_cat = Concat(%p_c0, %p_c8) {axis = 1} : f32<1x16x16x16>
    CHECK-NEXT: %y = Conv(%p_cat, %w2, %b2)
    """)
    assert "constant %w :" not in text(m)  # the whole filter went with the whole conv


def test_a_depthwise_conv_reads_its_half_too() -> None:
    src = STEM.replace(
        "%p = MaxPool(%c) {kernel = [2, 2], strides = [2, 2]}",
        "%p = Conv(%c, %dw, %db) {strides = [2, 2], pads = [1, 1, 1, 1], group = 16}",
    ).replace(
        "  func @main",
        "  constant %dw : f32<16x1x3x3> = elided<dw>\n"
        "  constant %db : f32<16> = elided<db>\n  func @main",
    )
    assert_rewrites(src, ChannelSplit()).check("""
    CHECK: %p_c0 = Conv(%c_c0, %dw_c0, %db_c0) {{.*}}group = 8
    CHECK: %p_cat = Concat(%p_c0, %p_c8) {axis = 1}
    """)


@pytest.mark.parametrize(
    "edits",
    [
        # The pool's result is a graph output: its copy writes it whole, no slices.
        [
            ("%y = Conv(%p, %w2, %b2) : f32<1x8x16x16>\n    Save(%y, %out)", "Save(%p, %out)"),
            ("%out : f32<1x8x16x16>", "%out : f32<1x16x16x16>"),
        ],
        # The conv's result is read again later: both halves would have to live anyway.
        [
            ("Save(%y, %out)", "Save(%y, %out)\n    Save(%c, %out2)"),
            ("  constant %w :", "  placeholder %out2 : f32<1x16x32x32> output\n  constant %w :"),
        ],
        # Not the widest step: a later 1x1 conv to 128 channels needs more (16 + 128 KiB).
        [
            (
                "%y = Conv(%p, %w2, %b2)",
                "%wide = Conv(%p, %w3, %b3) : f32<1x128x16x16>\n    %y = Conv(%wide, %w4, %b2)",
            ),
            (
                "  func @main",
                "  constant %w3 : f32<128x16x1x1> = elided<w3>\n"
                "  constant %b3 : f32<128> = elided<b3>\n"
                "  constant %w4 : f32<8x128x1x1> = elided<w4>\n  func @main",
            ),
        ],
        # A grouped producer: its halves would read different input channels.
        [
            ('activation = "relu"}', 'activation = "relu", group = 2}'),
            ("%w : f32<16x3x3x3>", "%w : f32<16x2x3x3>"),
            ("1x3x32x32", "1x4x32x32"),
        ],
        # Batch 2: the halves' slices of the concat would not be contiguous.
        [
            ("1x3x32x32", "2x3x32x32"),
            ("1x16x32x32", "2x16x32x32"),
            ("1x16x16x16", "2x16x16x16"),
            ("1x8x16x16", "2x8x16x16"),
        ],
        # Halves narrower than MIN_CHANNELS.
        [
            ("16x3x3x3", "8x3x3x3"),
            ("%b : f32<16>", "%b : f32<8>"),
            ("1x16x", "1x8x"),
            ("8x16x1x1", "8x8x1x1"),
        ],
    ],
    ids=["pool-is-output", "conv-read-twice", "not-the-widest", "grouped", "batch-2", "narrow"],
)
def test_must_not_split(edits: list[tuple[str, str]]) -> None:
    src = STEM
    for old, new in edits:
        assert old in src, old
        src = src.replace(old, new)
    m, changed = check_pass(src, ChannelSplit())
    assert not changed, text(m)


def test_inception_stem_split_lowers_the_bound_of_every_schedule() -> None:
    """Compiled: the halves write their slices (zero-copy), the plan drops from the unsplit
    stem's 80 KiB to the next widest step, and the certificate proves it optimal."""
    from tests.passes.pass_helpers import load

    res = compile_model(load(STEM))
    assert res.plan.peak_bytes == 48 * 1024
    assert {a.alias_kind for a in res.plan.aliases} == {"slice"}
    assert res.plan.certificate is not None and res.plan.certificate.schedule_proven_optimal
    off = compile_model(load(STEM), CompileOptions(disabled_passes=("channel-split",)))
    assert off.plan.peak_bytes == 80 * 1024
