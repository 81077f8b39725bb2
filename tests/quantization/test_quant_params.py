"""Scale and offset: the four schemas, the four calibrations, weights and biases."""

from __future__ import annotations

import numpy as np
import pytest

from compiler.errors import QuantizationError
from compiler.kernels.reference_quant import dequantize, quantize
from compiler.quantization import TensorProfile, choose_params
from compiler.quantization.params import calibrate, quantize_bias, quantize_weights


def test_asymmetric_maps_the_range_onto_all_256_steps_with_zero_exact() -> None:
    p = choose_params(-1.0, 3.0, "asymmetric")
    assert p.scale == pytest.approx(4.0 / 255, rel=1e-6)
    lo, hi = p.range()
    assert lo <= -1.0 + p.scale and hi >= 3.0 - p.scale
    assert dequantize(quantize(np.float32(0.0), p.scale, p.offset), p.scale, p.offset) == 0.0


def test_symmetric_schemas() -> None:
    assert choose_params(-1.0, 3.0, "symmetric").offset == 0
    assert choose_params(-1.0, 3.0, "symmetric").scale == pytest.approx(3.0 / 127, rel=1e-6)
    # Non-negative ranges use all 256 steps as unsigned bytes (offset -128), others symmetric.
    u = choose_params(0.0, 2.55, "symmetric-uint8")
    assert (u.offset, u.scale) == (-128, pytest.approx(0.01, rel=1e-6))
    assert choose_params(-0.1, 2.55, "symmetric-uint8").offset == 0
    p2 = choose_params(-1.0, 3.0, "power2")
    assert p2.offset == 0 and np.log2(p2.scale) == int(np.log2(p2.scale))
    assert p2.scale >= 3.0 / 127


def test_degenerate_and_bad_ranges() -> None:
    assert choose_params(0.0, 0.0).scale == 1.0
    assert choose_params(2.0, 5.0).range()[0] <= 0.0  # the range is widened to contain 0
    with pytest.raises(QuantizationError, match="unknown schema"):
        choose_params(0, 1, "nope")
    with pytest.raises(QuantizationError, match="infinite"):
        choose_params(0, float("inf"))


def _profile(values: np.ndarray) -> TensorProfile:
    tp = TensorProfile()
    tp.update(values.astype(np.float32), bins=2048)
    return tp


def test_percentile_and_kl_clip_rare_outliers_minmax_keeps_them() -> None:
    rng = np.random.default_rng(0)
    values = np.concatenate([rng.standard_normal(200_000), [40.0, -35.0]])
    tp = _profile(values)
    assert calibrate(tp, "minmax") == (tp.min, tp.max)
    lo, hi = calibrate(tp, "percentile", percentile=99.99)
    assert 3.0 < hi < 6.0 and -6.0 < lo < -3.0
    for schema in ("asymmetric", "symmetric"):
        klo, khi = calibrate(tp, "kl", schema)
        assert khi < 20 and klo > -20, (schema, klo, khi)
        assert khi > 1.5


def _mse(values: np.ndarray, lo: float, hi: float, schema: str) -> float:
    p = choose_params(lo, hi, schema)
    x = values.astype(np.float32)
    back = dequantize(quantize(x, p.scale, p.offset), p.scale, p.offset)
    return float(np.mean((back.astype(np.float64) - x) ** 2))


@pytest.mark.parametrize("schema", ["asymmetric", "symmetric", "symmetric-uint8", "power2"])
def test_mse_calibration_picks_the_range_of_least_measured_error(schema: str) -> None:
    """Per tensor: a heavy tail is clipped, a bounded distribution keeps its range, a Relu's
    zeros (exact in any grid) do not pull the range in; on the data itself the chosen range
    quantizes with no more error than min-max or the 99.99th percentile."""
    rng = np.random.default_rng(3)
    cases = {
        "laplace": rng.laplace(size=100_000),
        "outliers": np.concatenate([rng.standard_normal(1_000_000), [40.0, -35.0]]),
        "uniform": rng.uniform(-1.0, 3.0, 100_000),
        "relu": np.maximum(rng.standard_normal(100_000), 0.0),
    }
    for name, values in cases.items():
        tp = _profile(values)
        lo, hi = calibrate(tp, "mse", schema)
        best = _mse(values, lo, hi, schema)
        for other in ((tp.min, tp.max), calibrate(tp, "percentile", schema)):
            assert best <= _mse(values, *other, schema) * 1.02, (name, (lo, hi), other)
        if name == "outliers":
            assert hi < 20 and (lo > -20 or schema == "symmetric-uint8")
        if name == "uniform" and schema == "asymmetric":
            assert hi > 0.99 * tp.max and lo < 0.99 * tp.min


@pytest.mark.parametrize("schema", ["asymmetric", "symmetric", "symmetric-uint8", "power2"])
@pytest.mark.parametrize("method", ["mse", "percentile", "kl"])
def test_keep_max_never_clips_the_top_but_still_calibrates_the_bottom(
    schema: str, method: str
) -> None:
    """A Softmax's input keeps its profiled maximum (the row maxima decide the result); the
    low tail, which the Softmax maps to ~0, is still clipped."""
    rng = np.random.default_rng(5)
    values = np.concatenate([rng.standard_normal(1_000_000), [30.0, -40.0]])
    tp = _profile(values)
    lo, hi = calibrate(tp, method, schema)
    assert hi < 20  # without keep_max the top outlier is clipped: the case tests something
    klo, khi = calibrate(tp, method, schema, keep_max=True)
    p = choose_params(klo, khi, schema)
    assert khi == pytest.approx(30.0) and p.range()[1] >= 30.0 - p.scale  # the grid rounds
    if schema == "asymmetric":
        assert klo > -20  # the bottom outlier is still clipped


def test_weights_are_symmetric_per_channel_and_biases_int32() -> None:
    w = np.array([[1.0, -2.0], [0.5, 0.25]], np.float32)
    q, s = quantize_weights(w, axis=0)
    np.testing.assert_allclose(s, [2.0 / 127, 0.5 / 127], rtol=1e-6)
    assert q.dtype == np.int8 and q[0, 1] == -127 and q[1, 0] == 127
    q1, s1 = quantize_weights(w, axis=None)
    assert s1.shape == (1,) and q1[0, 1] == -127
    b = quantize_bias(np.array([1.0, -3e12]), 0.1, np.array([0.01, 0.01], np.float32))
    assert b.dtype == np.int32 and b[0] == 1000 and b[1] == np.iinfo(np.int32).min
