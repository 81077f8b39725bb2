"""The quantization passes as IR text in, IR text (CHECK lines) out: instrument-profile,
quantize-graph (with cases where it must not fire), quant-opt and fold-qdq."""

from __future__ import annotations

import numpy as np
import pytest
from pass_helpers import execute, load, random_inputs, run, text

from compiler.backends.contract import INTERPRETER
from compiler.errors import QuantizationError
from compiler.graph import parse_module, verify_module
from compiler.quantization import (
    InstrumentProfile,
    Profile,
    QuantCleanup,
    QuantizeGraph,
    QuantizeOptions,
    graph_hash,
)
from compiler.quantization.params import calibrate, choose_params
from compiler.quantization.qdq import FoldQDQ
from compiler.quantize import sqnr_db
from tests.filecheck import check

BLOCK = """
module @m {
  placeholder %x : f32<1x3x8x8>
  placeholder %out : f32<1x8x4x4> output
  placeholder %probs : f32<1x8x4x4> output
  constant %w : f32<4x3x3x3> = elided<w>
  constant %b : f32<4> = elided<b>
  constant %w2 : f32<4x3x1x1> = elided<w2>
  constant %b2 : f32<4> = elided<b2>
  func @main {
    %conv_1 = Conv(%x, %w, %b) {pads = [1, 1, 1, 1], activation = "relu"} : f32<1x4x8x8>
    %conv_2 = Conv(%x, %w2, %b2) : f32<1x4x8x8>
    %add = Add(%conv_1, %conv_2) : f32<1x4x8x8>
    %pool = MaxPool(%add) {kernel = [2, 2], strides = [2, 2]} : f32<1x4x4x4>
    %cat = Concat(%pool, %pool) {axis = 1} : f32<1x8x4x4>
    %sm = Softmax(%cat) {axis = 1} : f32<1x8x4x4>
    Save(%cat, %out)
    Save(%sm, %probs)
  }
}
"""


def profile_of(m, samples: int = 4, seed: int = 3) -> Profile:
    """A profile measured the way `glowviz profile` does, on the reference kernels."""
    instrumented = m.clone()
    run(instrumented, InstrumentProfile())
    points = instrumented.meta["profile_points"]
    profile = Profile(instrumented.meta["profile_graph_hash"])
    for i in range(samples):
        outs = execute(instrumented, random_inputs(instrumented, seed + i))
        profile.update({points[k]: v for k, v in outs.items() if k in points})
    return profile


def test_instrument_profile_saves_every_float_activation() -> None:
    m = load(BLOCK)
    before = graph_hash(m)
    assert run(m, InstrumentProfile())
    assert m.meta["profile_graph_hash"] == before
    check(
        text(m),
        """
    CHECK: placeholder %profile.x : f32<1x3x8x8> output
    CHECK: placeholder %profile.conv_1 : f32<1x4x8x8> output
    CHECK: placeholder %profile.sm : f32<1x8x4x4> output
    CHECK-COUNT-9: Save(
    CHECK: Save(%x, %profile.x)
    """,
    )
    assert sorted(m.meta["profile_points"].values()) == sorted(
        ["x", "conv_1", "conv_2", "add", "pool", "cat", "sm"]
    )


def quantized(src: str, **options) -> tuple[object, object]:
    m = load(src)
    profile = profile_of(m)
    q = m.clone()
    qopts = QuantizeOptions(profile, **options)
    run(q, QuantizeGraph(qopts, INTERPRETER), QuantCleanup())
    return m, q


def test_quantize_graph_rewrites_to_int8_nodes_and_folds_relu() -> None:
    m, q = quantized(BLOCK)
    check(
        text(q),
        """
    CHECK: %x_quant = Quantize(%x) {scale = {{[0-9.e-]+}}, offset = {{-?[0-9]+}}} : i8<1x3x8x8:
    CHECK-DAG: %conv_1_q = QConv(%x_quant, %w_i8, %b_i32, %w_scales) {{.*}}offset = -128, qmin = -128, qmax = 127} : i8<1x4x8x8:
    CHECK-DAG: %conv_2_q = QConv(%x_quant, %w2_i8, %b2_i32, %w2_scales)
    CHECK: %add_q = QAdd(%conv_1_q, %conv_2_q)
    CHECK: %pool_q = MaxPool(%add_q) {{.*}} : i8<1x4x4x4:
    CHECK-NOT: RescaleQuantized
    CHECK: %cat_q = Concat(%pool_q, %pool_q) {axis = 1} : i8<1x8x4x4:
    CHECK: %cat_dq = Dequantize(%cat_q) : f32<1x8x4x4>
    CHECK-NOT: Quantize(%cat
    CHECK: Save(%cat_dq, %out)
    CHECK: %sm_q = QSoftmax(%cat_q, %sm_table) {axis = 1, scale = {{.*}}} : i8<1x8x4x4:
    CHECK-NEXT: %sm_dq = Dequantize(%sm_q)
    CHECK-NOT: Softmax(
    """,
    )
    # The float model and the int8 one agree to quantization noise.
    inputs = random_inputs(m, 9)
    want, got = execute(m, inputs), execute(q, inputs)
    assert sqnr_db(want["out"], got["out"]) > 25  # three roundings on 4 profiled samples


def test_relu_is_the_clamp_under_a_symmetric_schema() -> None:
    _, q = quantized(BLOCK, schema="symmetric")
    check(text(q), "CHECK: %conv_1_q = QConv({{.*}}offset = 0, qmin = 0, qmax = 127}")


def test_nodes_kept_in_float_and_data_movement_after_them_stays_float() -> None:
    """Max pooling and concatenation only run on int8 when their input already is int8:
    quantizing a float value just to move it would add work."""
    _, q = quantized(BLOCK, keep_float=frozenset({"add"}))
    check(
        text(q),
        """
    CHECK: %conv_1_dq = Dequantize(%conv_1_q)
    CHECK: %add = Add(%conv_1_dq, %conv_2_dq) : f32<1x4x8x8>
    CHECK: %pool = MaxPool(%add) {{.*}} : f32<1x4x4x4>
    CHECK: %cat = Concat(%pool, %pool)
    """,
    )
    assert q.meta["quantization"]["add"] == "kept in float (asked)"


def test_a_profile_of_another_graph_is_refused() -> None:
    profile = profile_of(load(BLOCK))
    edited = load(BLOCK, seed=7)  # the same graph with other weights
    with pytest.raises(QuantizationError, match="another graph"):
        run(edited, QuantizeGraph(QuantizeOptions(profile), INTERPRETER))


CLEANUP = """
module @c {
  placeholder %x : f32<1x4>
  placeholder %out : f32<1x4> output
  placeholder %out2 : f32<1x4> output
  func @main {
    %q = Quantize(%x) {scale = 0.5, offset = 3} : i8<1x4:0.5,3>
    %d = Dequantize(%q) : f32<1x4>
    %same = Quantize(%d) {scale = 0.5, offset = 3} : i8<1x4:0.5,3>
    %other = Quantize(%d) {scale = 0.25, offset = -1} : i8<1x4:0.25,-1>
    %a = QAdd(%same, %other) {scale = 1.0, offset = 0} : i8<1x4:1.0,0>
    %r = RescaleQuantized(%a) {scale = 2.0, offset = 5, qmin = 5} : i8<1x4:2.0,5>
    %y = Dequantize(%r) : f32<1x4>
    %keep = RescaleQuantized(%q) {scale = 0.5, offset = 3} : i8<1x4:0.5,3>
    %y2 = Dequantize(%keep) : f32<1x4>
    Save(%y, %out)
    Save(%y2, %out2)
  }
}
"""


def test_quant_opt_removes_pairs_and_folds_rescales() -> None:
    m = parse_module(CLEANUP)
    verify_module(m)
    assert run(m, QuantCleanup())
    check(
        text(m),
        """
    CHECK: %q = Quantize(%x)
    CHECK-NOT: %same
    CHECK: %y2 = Dequantize(%q)
    CHECK: %other_1 = RescaleQuantized(%q) {scale = 0.25, offset = -1, qmin = -128, qmax = 127}
    CHECK: %a_1 = QAdd(%q, %other_1) {scale = 2.0, offset = 5, qmin = 5, qmax = 127} : i8<1x4:2.0,5>
    CHECK-NOT: RescaleQuantized(%a
    CHECK: %y = Dequantize(%a_1)
    """,
    )


def test_quant_opt_does_nothing_on_a_float_graph() -> None:
    m = load(BLOCK)
    assert not run(m, QuantCleanup())


QDQ = """
module @qdq {
  placeholder %x : f32<1x3x6x6>
  placeholder %out : f32<1x4x6x6> output
  constant %wq : i8<4x3x3x3> = elided<wq>
  constant %ws : f32<4> = dense<[0.01, 0.02, 0.03, 0.04]>
  constant %wo : i32<4> = dense<[0, 0, 0, 0]>
  constant %bq : i32<4> = dense<[10, -20, 30, -40]>
  constant %bs : f32<4> = dense<[0.0005, 0.001, 0.0015, 0.002]>
  func @main {
    %xq = Quantize(%x) {scale = 0.05, offset = 2} : i8<1x3x6x6:0.05,2>
    %xd = Dequantize(%xq) : f32<1x3x6x6>
    %w = DequantizeAxis(%wq, %ws, %wo) {axis = 0} : f32<4x3x3x3>
    %b = DequantizeAxis(%bq, %bs, %wo) {axis = 0} : f32<4>
    %conv = Conv(%xd, %w, %b) {pads = [1, 1, 1, 1]} : f32<1x4x6x6>
    %relu = Relu(%conv) : f32<1x4x6x6>
    %yq = Quantize(%relu) {scale = 0.1, offset = -128} : i8<1x4x6x6:0.1,-128>
    %y = Dequantize(%yq) : f32<1x4x6x6>
    Save(%y, %out)
  }
}
"""


def test_fold_qdq_turns_a_dq_conv_q_group_into_qconv() -> None:
    m = load(QDQ)
    before = m.clone()
    assert run(m, FoldQDQ())
    check(
        text(m),
        """
    CHECK: %xq = Quantize(%x)
    CHECK: %conv_q = QConv(%xq, %conv_i8, %conv_i32, %conv_scales) {{.*}}scale = 0.1, offset = -128, qmin = -128, qmax = 127} : i8<1x4x6x6:0.1,-128>
    CHECK: %y = Dequantize(%conv_q)
    CHECK-NOT: Conv(
    """,
    )
    # The int32 bias is the model's own (its scale is exactly x_scale * w_scale).
    assert m.constants["conv_i32"].data.tolist() == [10, -20, 30, -40]
    inputs = random_inputs(before, 4)
    want, got = execute(before, inputs)["out"], execute(m, inputs)["out"]
    # Same quantized result, up to float32 rounding of the float conv on the boundary.
    assert np.mean(want == got) > 0.98 and np.max(np.abs(want - got)) <= 0.1 + 1e-6


def test_fold_qdq_leaves_a_conv_whose_result_has_other_users() -> None:
    src = QDQ.replace(
        "    Save(%y, %out)",
        "    Save(%y, %out)\n    Save(%conv, %raw)",
    ).replace(
        "placeholder %out : f32<1x4x6x6> output",
        "placeholder %out : f32<1x4x6x6> output\n  placeholder %raw : f32<1x4x6x6> output",
    )
    m = load(src)
    run(m, FoldQDQ())
    check(text(m), "CHECK: %conv = Conv(%xd, %w, %b)\nCHECK-NOT: QConv")


GELU_TANH = """
module @m {
  placeholder %x : f32<2x16>
  placeholder %out : f32<2x8> output
  constant %w : f32<16x8> = elided<w>
  constant %b : f32<8> = elided<b>
  constant %sqrt2 : f32<> = dense<1.4142135>
  func @main {
    %fc = FullyConnected(%x, %w, %b) : f32<2x8>
    %div = Div(%fc, %sqrt2) : f32<2x8>
    %erf = Erf(%div) : f32<2x8>
    %t = Tanh(%erf) : f32<2x8>
    Save(%t, %out)
  }
}
"""


def test_element_wise_functions_become_lookup_tables() -> None:
    """Div by a scalar, Erf and Tanh of a quantized value: one 256-entry table of the whole
    chain computed at compile time (no Dequantize / Quantize around float ops, and one
    rounding instead of three), read exactly by every executor."""
    m, q = quantized(GELU_TANH)
    check(
        text(q),
        """
    CHECK: %fc_q = QFullyConnected(
    CHECK-NEXT: %t_q = QLookup(%fc_q, %t_table) {scale = {{.*}}} : i8<2x8:
    CHECK-NEXT: %t_dq = Dequantize(%t_q) : f32<2x8>
    CHECK-NOT: Erf
    """,
    )
    assert q.meta["quantization"]["erf"] == "fused into the table of t"
    table = next(c for c in q.constants.values() if c.name == "t_table").data
    assert table.dtype == np.int8 and table.shape == (256,)
    inputs = random_inputs(m, 9)
    assert sqnr_db(execute(m, inputs)["out"], execute(q, inputs)["out"]) > 25


GELU_ERF = """
module @m {
  placeholder %x : f32<2x16>
  placeholder %out : f32<2x8> output
  placeholder %inner : f32<2x8> output
  constant %w : f32<16x8> = elided<w>
  constant %b : f32<8> = elided<b>
  constant %sqrt2 : f32<> = dense<1.4142135>
  constant %one : f32<> = dense<1.0>
  constant %half : f32<> = dense<0.5>
  func @main {
    %fc = FullyConnected(%x, %w, %b) : f32<2x8>
    %div = Div(%fc, %sqrt2) : f32<2x8>
    %erf = Erf(%div) : f32<2x8>
    %add = Add(%erf, %one) : f32<2x8>
    %mul = Mul(%fc, %add) : f32<2x8>
    %gelu = Mul(%mul, %half) : f32<2x8>
    Save(%gelu, %out)
    Save(%fc, %inner)
  }
}
"""


def test_gelu_as_exported_is_one_table_unless_an_inner_value_is_used_elsewhere() -> None:
    """GELU as torch exports it (x * 0.5 * (1 + erf(x / sqrt 2)), x read twice) is a function
    of x alone: one table. When an inner value has another user, it is needed anyway and
    the chain is quantized node by node."""
    m, q = quantized(GELU_ERF)
    check(
        text(q),
        """
    CHECK: %fc_q = QFullyConnected(
    CHECK: %gelu_q = QLookup(%fc_q, %gelu_table)
    CHECK-NOT: QMul
    CHECK-NOT: Erf
    """,
    )
    inputs = random_inputs(m, 9)
    assert sqnr_db(execute(m, inputs)["out"], execute(q, inputs)["out"]) > 30
    shared = GELU_ERF.replace("Save(%fc, %inner)", "Save(%add, %inner)")
    _, q2 = quantized(shared)
    check(text(q2), "CHECK: %erf_q = QLookup(\nCHECK: %add_q = QAdd(\nCHECK: %gelu_q = QMul(")


BIASED = """
module @m {
  placeholder %x : f32<1x8x10x10>
  placeholder %out : f32<1x4x10x10> output
  constant %w : f32<4x8x3x3> = elided<w>
  constant %b : f32<4> = elided<b>
  func @main {
    %r = Relu(%x) : f32<1x8x10x10>
    %conv = Conv(%r, %w, %b) {pads = [1, 1, 1, 1]} : f32<1x4x10x10>
    Save(%conv, %out)
  }
}
"""


def test_bias_correction_removes_the_mean_error_of_quantized_weights() -> None:
    """One large weight per filter makes the per-channel step coarse; on a Relu's positive
    input the weights' rounding errors then shift each channel's mean. The corrected int32
    bias cancels that shift (per channel, over the profiled means and the padding's share of
    each tap); without correction the shift stays."""
    m = load(BIASED)
    w = m.constants["w"]
    data = np.array(w.data)
    data[:, 0, 0, 0] = 20.0
    w.data, w._digest = data, None
    profile = profile_of(m, samples=8)
    inputs = [random_inputs(m, 100 + i) for i in range(8)]
    want = np.stack([execute(m, s)["out"] for s in inputs])

    def channel_bias(correct: bool) -> np.ndarray:
        q = m.clone()
        run(q, QuantizeGraph(QuantizeOptions(profile, bias_correction=correct), INTERPRETER))
        run(q, QuantCleanup())
        got = np.stack([execute(q, s)["out"] for s in inputs])
        return (got - want).mean(axis=(0, 1, 3, 4))

    before, after = channel_bias(False), channel_bias(True)
    assert np.abs(before).max() > 0.05
    assert np.linalg.norm(after) < 0.3 * np.linalg.norm(before), (before, after)


ATTENTION = """
module @m {
  placeholder %q : f32<1x2x16x8>
  placeholder %kt : f32<1x2x8x16>
  placeholder %probs : f32<1x2x16x16> output
  constant %eight : f32<> = dense<8.0>
  constant %mask : f32<1x1x1x16> = elided<mask>
  func @main {
    %scores = MatMul(%q, %kt) : f32<1x2x16x16>
    %scaled = Div(%scores, %eight) : f32<1x2x16x16>
    %masked = Add(%scaled, %mask) : f32<1x2x16x16>
    %sm = Softmax(%masked) {axis = 3} : f32<1x2x16x16>
    Save(%sm, %probs)
  }
}
"""


def test_a_softmax_input_keeps_its_profiled_maximum() -> None:
    """The attention scores, scaled and masked, reach the Softmax through increasing maps:
    each keeps the largest profiled value in its int8 range (a clipped row maximum rescales
    the row's probabilities), while `mse` would clip this heavy upper tail."""
    m = load(ATTENTION)
    instrumented = m.clone()
    run(instrumented, InstrumentProfile())
    points = instrumented.meta["profile_points"]
    profile = Profile(instrumented.meta["profile_graph_hash"])
    rng = np.random.default_rng(4)
    for _ in range(8):
        ins = {p.name: rng.laplace(size=p.type.shape).astype(np.float32) for p in m.inputs()}
        outs = execute(instrumented, ins)
        profile.update({points[k]: v for k, v in outs.items() if k in points})
    q = m.clone()
    run(q, QuantizeGraph(QuantizeOptions(profile), INTERPRETER), QuantCleanup())
    check(
        text(q),
        """
    CHECK: %scores_q = QMatMul(
    CHECK: %scaled_q = QLookup(%scores_q, %scaled_table)
    CHECK: %masked_q = QAdd(%scaled_q, %mask_q)
    CHECK: %sm_q = QSoftmax(%masked_q
    """,
    )
    types = {r.name: r.type for n in q.main.nodes for r in n.results}
    clipped = 0
    for name in ("scores", "scaled", "masked"):
        tp = profile.tensors[name]
        clipped += calibrate(tp, "mse")[1] < tp.max  # what plain mse would do
        t = types[f"{name}_q"]
        assert t.scale * (127 - t.offset) >= tp.max - t.scale, name
    assert clipped >= 1  # the case exercises the rule


def test_feeds_softmax_follows_increasing_maps_only() -> None:
    """Scores reach a Softmax through a positive scaling and a causal Where; a value that
    reaches one only negated or inverted does not keep its maximum."""
    from compiler.quantization.quantizer import feeds_softmax

    m = load(
        """
module @m {
  placeholder %s : f32<1x4x4>
  placeholder %c : f32<1x4x4>
  placeholder %p : f32<1x4x4> output
  placeholder %r : f32<1x4x4> output
  constant %keep : bool<1x4x4> = elided<keep>
  constant %big : f32<> = dense<-1000.0>
  constant %half : f32<> = dense<0.5>
  constant %neg : f32<> = dense<-2.0>
  func @main {
    %scaled = Mul(%s, %half) : f32<1x4x4>
    %masked = Where(%keep, %scaled, %big) : f32<1x4x4>
    %sm = Softmax(%masked) {axis = 2} : f32<1x4x4>
    %flipped = Mul(%c, %neg) : f32<1x4x4>
    %inv = Div(%half, %c) : f32<1x4x4>
    %both = Add(%flipped, %inv) : f32<1x4x4>
    %sm2 = Softmax(%both) {axis = 2} : f32<1x4x4>
    Save(%sm, %p)
    Save(%sm2, %r)
  }
}
"""
    )
    values = {r.name: r for n in m.main.nodes for r in n.results}
    values.update({p.name: p for p in m.inputs()})
    assert feeds_softmax(values["s"]) and feeds_softmax(values["scaled"])
    assert feeds_softmax(values["flipped"]) and feeds_softmax(values["inv"])
    assert not feeds_softmax(values["c"])  # only through -2 x and 0.5 / x: decreasing


JOIN = """
module @m {
  placeholder %x : f32<1x3x8x8>
  placeholder %out : f32<1x8x8x8> output
  constant %w : f32<4x3x3x3> = elided<w>
  constant %b : f32<4> = elided<b>
  constant %w2 : f32<4x3x1x1> = elided<w2>
  constant %b2 : f32<4> = elided<b2>
  constant %three : f32<> = dense<3.0>
  func @main {
    %conv_1 = Conv(%x, %w, %b) {pads = [1, 1, 1, 1], activation = "relu"} : f32<1x4x8x8>
    %conv_2 = Conv(%x, %w2, %b2) : f32<1x4x8x8>
    %big = Mul(%conv_2, %three) : f32<1x4x8x8>
    %cat = Concat(%conv_1, %big) {axis = 1} : f32<1x8x8x8>
    Save(%cat, %out)
  }
}
"""


def test_a_concat_input_is_computed_in_the_concat_parameters() -> None:
    """Inputs of different ranges whose only user is a Concat are requantized straight into
    the Concat's scale and offset: no RescaleQuantized, one rounding per value."""
    m, q = quantized(JOIN)
    check(
        text(q),
        """
    CHECK: %conv_1_q = QConv(
    CHECK: %big_q = QMul(
    CHECK-NOT: RescaleQuantized
    CHECK: %cat_q = Concat(%conv_1_q, %big_q) {axis = 1}
    """,
    )
    types = {r.name: r.type for n in q.main.nodes for r in n.results}
    want = (types["cat_q"].scale, types["cat_q"].offset)
    assert (types["conv_1_q"].scale, types["conv_1_q"].offset) == want
    assert (types["big_q"].scale, types["big_q"].offset) == want
    # Their own ranges differ (conv_1 is a Relu's, big three times conv_2's): the case tests
    # something.
    profile = profile_of(m)
    own = {n: choose_params(*calibrate(profile.tensors[n], "mse")) for n in ("conv_1", "big")}
    assert own["conv_1"] != own["big"]
    inputs = random_inputs(m, 9)
    assert sqnr_db(execute(m, inputs)["out"], execute(q, inputs)["out"]) > 25


def _dense(a: np.ndarray) -> str:
    return "dense<[" + ", ".join(f"{v:.4f}" for v in a.reshape(-1)) + "]>"


_rng = np.random.default_rng(5)
TOKENS = f"""
module @m {{
  placeholder %x : f32<1x4x8>
  placeholder %out : f32<1x5x8> output
  constant %w : f32<8x8> = elided<w>
  constant %w2 : f32<8x8> = elided<w2>
  constant %cls : f32<1x1x8> = {_dense(0.02 * _rng.standard_normal(8))}
  constant %pos : f32<1x5x8> = {_dense(0.02 * _rng.standard_normal(40))}
  func @main {{
    %emb = MatMul(%x, %w) : f32<1x4x8>
    %tokens = Concat(%cls, %emb) {{axis = 1}} : f32<1x5x8>
    %pos_add = Add(%tokens, %pos) : f32<1x5x8>
    %h = MatMul(%pos_add, %w2) : f32<1x5x8>
    %res = Add(%pos_add, %h) : f32<1x5x8>
    Save(%res, %out)
  }}
}}
"""


def test_a_concat_of_very_different_ranges_stays_float() -> None:
    """A ViT's class token (values ~0.02) concatenated with patch embeddings (one int8 step
    of their range is ~0.1) would keep a step or two on the Concat's grid: the Concat, the
    position Add (its class row is still small) and the nodes reading that sum stay float,
    with the reason in the decisions; `min_slice_steps=0` quantizes them anyway."""
    m, q = quantized(TOKENS)
    check(
        text(q),
        """
    CHECK: %emb_dq = Dequantize(
    CHECK: %tokens = Concat(%cls, %emb_dq) {axis = 1} : f32<1x5x8>
    CHECK-NEXT: %pos_add = Add(%tokens, %pos) : f32<1x5x8>
    CHECK: %res = Add(%pos_add, {{.*}}) : f32<1x5x8>
    CHECK-NOT: Quantize(%pos_add
    """,
    )
    why = q.meta["quantization"]
    assert why["tokens"].startswith("float: slice 0:1 of axis 1 spans")
    assert why["pos_add"].startswith("float: slice 0:1 of axis 1 spans")
    assert why["h"] == why["res"] == "float: reads pos_add, which one int8 scale cannot hold"
    assert why["emb"] == "quantized"

    _, forced = quantized(TOKENS, min_slice_steps=0)
    check(
        text(forced),
        """
    CHECK: %tokens_q = Concat(
    CHECK: %pos_add_q = QAdd(%tokens_q,
    """,
    )
    # What it buys: the class row (the token a ViT's head reads) keeps its values.
    inputs = random_inputs(m, 9)
    want = execute(m, inputs)["out"][:, 0]
    kept = sqnr_db(want, execute(q, inputs)["out"][:, 0])
    lost = sqnr_db(want, execute(forced, inputs)["out"][:, 0])
    assert kept > 40 and lost < 15, (kept, lost)


def test_a_concat_of_similar_ranges_is_still_int8() -> None:
    """The rule is about the ranges, not the op: a Concat of comparable inputs stays int8."""
    m = load(TOKENS)
    cls = m.constants["cls"]
    scaled = TOKENS.replace(
        "constant %cls : f32<1x1x8> = " + _dense(np.asarray(cls.data)),
        "constant %cls : f32<1x1x8> = " + _dense(100 * np.asarray(cls.data)),
    )
    assert scaled != TOKENS
    _, q = quantized(scaled)
    check(text(q), "CHECK: %tokens_q = Concat(")
    assert q.meta["quantization"]["tokens"] == "quantized"
