"""GPTQ weight rounding (compiler/quantization/gptq.py): less output error than rounding to
nearest on held-out inputs, the same int8 grid, Hessians gathered while profiling and stored
beside the profile, and int8 models that both executors run bit for bit."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from pass_helpers import execute, load, random_inputs, run, text

from compiler.backends.contract import INTERPRETER
from compiler.errors import QuantizationError
from compiler.executors import make_executor
from compiler.kernels.reference import KERNELS
from compiler.pipeline import CompileOptions, compile_model, import_model
from compiler.quantization import (
    InstrumentProfile,
    Profile,
    QuantCleanup,
    QuantizeGraph,
    QuantizeOptions,
)
from compiler.quantization import gptq
from compiler.quantization.params import quantize_weights
from compiler.quantize import profile_model, random_samples
from tests.filecheck import check

SAMPLES = Path(__file__).resolve().parents[2] / "sample_models"


def correlated_inputs(rng: np.random.Generator, k: int, n: int, mix: np.ndarray) -> np.ndarray:
    """[k, n] inputs with correlated features (a fixed mixing of independent ones) and a
    non-zero mean, as a layer's inputs after a previous layer are."""
    return mix @ rng.standard_normal((k, n)) + 0.5


def test_gptq_has_less_output_error_than_nearest_on_held_out_inputs() -> None:
    rng = np.random.default_rng(0)
    rows, k = 48, 96
    mix = rng.standard_normal((k, k)) / np.sqrt(k) + np.eye(k)
    calib, held_out = correlated_inputs(rng, k, 4000, mix), correlated_inputs(rng, k, 4000, mix)
    w = rng.standard_normal((rows, k)).astype(np.float32)
    nearest, scales = quantize_weights(w, 0)
    q = gptq.gptq_rows(w, calib @ calib.T, scales)
    assert q.dtype == np.int8 and q.shape == w.shape
    assert np.abs(q.astype(np.int32)).max() <= 127
    # The grid is the nearest rounding's: the same per-channel scales (GPTQ moves values
    # between neighbouring steps, never far from the weight).
    assert np.abs(q.astype(np.float32) * scales[:, None] - w).max() <= 4 * scales.max()
    assert np.count_nonzero(q != nearest) > 0.1 * q.size

    def err(qw: np.ndarray) -> float:
        wd = qw.astype(np.float64) * scales[:, None]
        return gptq.output_error(w, wd, held_out @ held_out.T)

    assert err(q) < 0.6 * err(nearest), (err(q), err(nearest))  # measured: 0.51


def test_input_noise_in_the_hessian_moves_gptq_towards_nearest() -> None:
    """With the int8 input's rounding noise in the Hessian the weights' own error stays
    small: a very noisy input leaves nothing to trade, and GPTQ rounds to nearest."""
    rng = np.random.default_rng(1)
    k = 64
    x = correlated_inputs(rng, k, 2000, rng.standard_normal((k, k)) / 8 + np.eye(k))
    w = rng.standard_normal((16, k)).astype(np.float32)
    nearest, scales = quantize_weights(w, 0)
    h = x @ x.T
    loud = gptq.gptq_rows(w, h, scales, noise=1e6 * float(np.trace(h)))
    assert np.array_equal(loud, nearest)


def test_grouped_and_depthwise_layers_round_per_group() -> None:
    rng = np.random.default_rng(2)
    g, k = 6, 9
    cols = rng.standard_normal((g, k, 300)) + 0.3
    h = cols @ cols.transpose(0, 2, 1)
    w = rng.standard_normal((g, k)).astype(np.float32)
    _, scales = quantize_weights(w, 0)
    batched = gptq.gptq_grouped(w, h, scales)
    one_by_one = np.stack(
        [
            gptq.gptq_rows(w[i : i + 1], h[i], scales[i : i + 1], act_order=False)[0]
            for i in range(g)
        ]
    )
    assert np.array_equal(batched, one_by_one)
    # Two rows per group: each group's rows see only that group's Hessian.
    w2 = rng.standard_normal((2 * g, k)).astype(np.float32)
    _, s2 = quantize_weights(w2, 0)
    grouped = gptq.gptq_grouped(w2, h, s2)
    for i in range(g):
        sl = slice(2 * i, 2 * i + 2)
        assert np.array_equal(grouped[sl], gptq.gptq_rows(w2[sl], h[i], s2[sl]))


@pytest.mark.parametrize(
    "group, strides, pads, dilations",
    [
        (1, (1, 1), (1, 1, 1, 1), (1, 1)),
        (2, (2, 1), (0, 1, 2, 0), (1, 2)),
        (4, (2, 2), (1, 1, 1, 1), (1, 1)),
    ],
)
def test_conv_columns_are_the_im2col_the_conv_multiplies(group, strides, pads, dilations) -> None:
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 4, 9, 8)).astype(np.float32)
    w = rng.standard_normal((8, 4 // group, 3, 3)).astype(np.float32)
    attrs = {"strides": strides, "pads": pads, "dilations": dilations, "group": group}
    attrs.update(activation="none", act_args=())
    (want,) = KERNELS["Conv"]([x, w, np.zeros(8, np.float32)], attrs)
    cols = gptq.conv_columns(x, w.shape, attrs)  # [G, Cg*R*S, N*OH*OW]
    per = 8 // group
    flat = w.reshape(8, -1).astype(np.float64)
    got = np.concatenate([flat[i * per : (i + 1) * per] @ cols[i] for i in range(group)])
    n, k, oh, ow = want.shape
    got = got.reshape(k, n, oh, ow).transpose(1, 0, 2, 3)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    # A limit gathers only evenly spaced pixels: the same columns as the full im2col's.
    some = gptq.conv_columns(x, w.shape, attrs, limit=7)
    assert some.shape == (group, cols.shape[1], 7)
    idx = np.linspace(0, cols.shape[2] - 1, 7).round().astype(np.int64)
    assert np.array_equal(some, cols[:, :, idx])


BLOCK = """
module @m {
  placeholder %x : f32<1x8x8x8>
  placeholder %out : f32<1x16x8x8> output
  constant %w : f32<16x8x3x3> = elided<w>
  constant %b : f32<16> = elided<b>
  constant %w2 : f32<16x16x1x1> = elided<w2>
  constant %b2 : f32<16> = elided<b2>
  func @main {
    %conv_1 = Conv(%x, %w, %b) {pads = [1, 1, 1, 1], activation = "relu"} : f32<1x16x8x8>
    %conv_2 = Conv(%conv_1, %w2, %b2) : f32<1x16x8x8>
    Save(%conv_2, %out)
  }
}
"""


def profile_with_hessians(m, samples: int = 6) -> Profile:
    instrumented = m.clone()
    run(instrumented, InstrumentProfile())
    points = instrumented.meta["profile_points"]
    layers = instrumented.meta["profile_layers"]
    profile = Profile(instrumented.meta["profile_graph_hash"], hessians=gptq.HessianSet())
    for i in range(samples):
        outs = execute(instrumented, random_inputs(instrumented, 20 + i))
        values = {points[k]: v for k, v in outs.items() if k in points}
        profile.update(values)
        assert profile.hessians is not None
        gptq.add_layer_hessians(profile.hessians, layers, values)
    return profile


def test_instrument_profile_records_the_weighted_layers() -> None:
    m = load(BLOCK)
    run(m, InstrumentProfile())
    layers = m.meta["profile_layers"]
    assert layers["conv_1"] == {
        "op": "Conv",
        "input": "x",
        "weight_shape": [16, 8, 3, 3],
        "strides": [1, 1],
        "pads": [1, 1, 1, 1],
        "dilations": [1, 1],
        "group": 1,
    }
    assert layers["conv_2"]["input"] == "conv_1"


def test_gptq_quantized_graph_is_the_nearest_one_but_for_the_int8_weights() -> None:
    """IR text: the quantize pass with GPTQ rounding builds the same nodes, types and
    scales; only the int8 filters (and the int32 biases bias correction derives from them)
    differ."""
    m = load(BLOCK)
    profile = profile_with_hessians(m)

    def quantized(rounding: str) -> str:
        q = m.clone()
        run(q, QuantizeGraph(QuantizeOptions(profile, weight_rounding=rounding), INTERPRETER))
        run(q, QuantCleanup())
        return text(q)

    near, opt = quantized("nearest"), quantized("gptq")
    check(
        opt,
        """
    CHECK: constant %w_i8 : i8<16x8x3x3>
    CHECK: %x_quant = Quantize(%x)
    CHECK: %conv_1_q = QConv(%x_quant, %w_i8, %b_i32, %w_scales) {{.*}}: i8<1x16x8x8:
    CHECK: %conv_2_q = QConv(%conv_1_q, %w2_i8, %b2_i32, %w2_scales) {{.*}}: i8<1x16x8x8:
    CHECK: %conv_2_dq = Dequantize(%conv_2_q)
    CHECK: Save(%conv_2_dq, %out)
    """,
    )
    differ = [
        (a, b) for a, b in zip(near.splitlines(), opt.splitlines(), strict=True) if a != b
    ]
    assert differ, "GPTQ changed no weight"
    for a, _ in differ:
        assert a.lstrip().startswith("constant %w") or a.lstrip().startswith("constant %b"), a
        assert "_i8" in a or "_i32" in a, a


def test_gptq_without_hessians_is_refused_with_the_fix() -> None:
    m = load(BLOCK)
    instrumented = m.clone()
    run(instrumented, InstrumentProfile())
    profile = Profile(instrumented.meta["profile_graph_hash"])
    points = instrumented.meta["profile_points"]
    outs = execute(instrumented, random_inputs(instrumented, 1))
    profile.update({points[k]: v for k, v in outs.items() if k in points})
    q = m.clone()
    with pytest.raises(QuantizationError, match="Hessians") as e:
        run(q, QuantizeGraph(QuantizeOptions(profile, weight_rounding="gptq"), INTERPRETER))
    assert "--hessians" in str(e.value)
    with pytest.raises(ValueError, match="weight rounding"):
        QuantizeOptions(profile, weight_rounding="stochastic")


def test_hessians_are_saved_beside_the_profile_and_checked(tmp_path: Path) -> None:
    m = load(BLOCK)
    profile = profile_with_hessians(m)
    path = tmp_path / "p.json"
    profile.save(path)
    side = tmp_path / "p.hessians.npz"
    assert side.exists()
    meta = json.loads(path.read_text())["hessians"]
    assert meta["file"] == "p.hessians.npz" and meta["layers"] == 2
    back = Profile.load(path)
    hs = back.load_hessians()
    assert hs is not None and set(hs.layers) == {"conv_1", "conv_2"}
    assert profile.hessians is not None
    for name, lh in profile.hessians.layers.items():
        np.testing.assert_allclose(hs.layers[name].h, lh.h, rtol=1e-6)
        assert hs.layers[name].rows == lh.rows
    # Another file in its place is refused, as is a missing one.
    data = bytearray(side.read_bytes())
    data[-40] ^= 1
    side.write_bytes(bytes(data))
    with pytest.raises(QuantizationError, match="not the Hessians file"):
        Profile.load(path).load_hessians()
    side.unlink()
    with pytest.raises(QuantizationError, match="cannot read"):
        Profile.load(path).load_hessians()


def _types(path: Path) -> dict:
    module, _ = import_model(str(path))
    return {p.name: p.type for p in module.inputs()}


@pytest.mark.parametrize("name", ["mobilenet_small", "transformer_block"])
def test_gptq_models_agree_bit_for_bit_and_keep_the_grid(name: str) -> None:
    """A sample model quantized with GPTQ rounding: both executors compute the same int8
    results; the filters are int8 on the nearest rounding's per-channel scales."""
    path = SAMPLES / f"{name}.onnx"
    types = _types(path)
    profile = profile_model(
        str(path), random_samples(types, 6, seed=1), executor="llvm", hessians=True
    )
    assert profile.hessians is not None and profile.hessians.layers
    near = compile_model(str(path), CompileOptions(quantize=QuantizeOptions(profile)))
    result = compile_model(
        str(path), CompileOptions(quantize=QuantizeOptions(profile, weight_rounding="gptq"))
    )
    consts = {c.name: c for c in result.module.constants.values()}
    near_consts = {c.name: c for c in near.module.constants.values()}
    changed = 0
    for cname, c in consts.items():
        if cname.endswith("_scales"):
            assert np.array_equal(np.asarray(c.data), np.asarray(near_consts[cname].data))
        if cname.endswith("_i8") and cname in near_consts:
            changed += not np.array_equal(np.asarray(c.data), np.asarray(near_consts[cname].data))
    assert changed > 0
    llvm, interp = make_executor(result, "llvm"), make_executor(result, "interpreter")
    for sample in random_samples(types, 2, seed=5):
        got, ref = llvm.run(sample), interp.run(sample)
        for k in ref:
            assert np.array_equal(got[k], ref[k]), k
