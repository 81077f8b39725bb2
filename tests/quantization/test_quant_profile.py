"""Profiles: histograms that grow with the data, merging, the JSON form, the graph hash."""

from __future__ import annotations

import json

import numpy as np
import pytest

from compiler.errors import QuantizationError
from compiler.quantization import Profile, TensorProfile
from compiler.quantization.profile import FORMAT


def test_histogram_keeps_every_count_when_the_range_grows() -> None:
    rng = np.random.default_rng(0)
    tp = TensorProfile()
    batches = [rng.standard_normal(1000) * s for s in (0.1, 1.0, 5.0)]
    for b in batches:
        tp.update(b, bins=64)
    allv = np.concatenate(batches)
    assert tp.min == pytest.approx(float(allv.min())) and tp.max == pytest.approx(float(allv.max()))
    assert tp.hist.sum() == pytest.approx(3000)
    assert tp.hist_min <= tp.min and tp.hist_max >= tp.max
    # Spread by overlap: the median of the histogram stays near the data's.
    cdf = np.cumsum(tp.hist) / tp.hist.sum()
    median = tp.bin_edges()[1:][np.searchsorted(cdf, 0.5)]
    assert abs(median - np.median(allv)) < 0.5


def test_non_finite_values_are_counted_not_binned() -> None:
    tp = TensorProfile()
    tp.update(np.array([1.0, np.nan, np.inf, -2.0], np.float32))
    assert (tp.min, tp.max, tp.count, tp.nonfinite) == (-2.0, 1.0, 2, 2)


def test_constant_tensor_gets_a_histogram_of_positive_width() -> None:
    tp = TensorProfile()
    tp.update(np.zeros(10, np.float32))
    assert tp.hist_max > tp.hist_min and tp.hist.sum() == 10


def test_merge_equals_one_profile_of_both() -> None:
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal(500), rng.standard_normal(500) * 3 + 1
    one, p, q = TensorProfile(), TensorProfile(), TensorProfile()
    one.update(a, 256)
    one.update(b, 256)
    p.update(a, 256)
    q.update(b, 256)
    p.merge(q)
    assert (p.min, p.max, p.count) == (one.min, one.max, one.count)
    assert p.hist.sum() == pytest.approx(one.hist.sum())


def test_exact_zeros_and_channel_means_are_recorded_merged_and_saved(tmp_path) -> None:
    """What the MSE calibration (exact zeros) and bias correction (channel means along axis 1
    and the last axis) read; a profile without them (an older one) loads with neither."""
    rng = np.random.default_rng(2)
    a = np.maximum(rng.standard_normal((2, 3, 4, 5)), 0).astype(np.float32) + np.arange(5)
    b = np.maximum(rng.standard_normal((2, 3, 4, 5)), 0).astype(np.float32)
    one, p, q = TensorProfile(), TensorProfile(), TensorProfile()
    for tp, batches in ((one, (a, b)), (p, (a,)), (q, (b,))):
        for x in batches:
            tp.update(x, 64)
    p.merge(q)
    both = np.concatenate([a, b])
    assert p.zeros == one.zeros == int((both == 0).sum())
    for tp in (one, p):
        np.testing.assert_allclose(tp.channel_means("1"), both.mean(axis=(0, 2, 3)), rtol=1e-6)
        np.testing.assert_allclose(tp.channel_means("-1"), both.mean(axis=(0, 1, 2)), rtol=1e-6)
    back = TensorProfile.from_json(json.loads(json.dumps(p.to_json())))
    assert back.zeros == p.zeros
    np.testing.assert_allclose(back.channel_means("-1"), p.channel_means("-1"))
    old = p.to_json()
    for key in ("zeros", "axis_sums", "axis_counts"):
        del old[key]
    legacy = TensorProfile.from_json(old)
    assert legacy.zeros == 0 and legacy.channel_means("1") is None


def test_json_round_trip(tmp_path) -> None:
    prof = Profile("sha256:abc", source="m.onnx", bins=32, executor="llvm")
    prof.update({"x": np.arange(10, dtype=np.float32), "y": -np.ones(3, np.float32)})
    path = tmp_path / "p.json"
    prof.save(path)
    data = json.loads(path.read_text())
    assert data["format"] == FORMAT and data["graph_hash"] == "sha256:abc"
    assert set(data["tensors"]["x"]) >= {"min", "max", "hist", "hist_min", "hist_max", "count"}
    back = Profile.load(path)
    assert back.inputs == 1 and back["x"].max == 9.0 and back["y"].min == -1.0
    np.testing.assert_allclose(back["x"].hist, prof["x"].hist)


def test_stale_and_broken_profiles_are_refused(tmp_path) -> None:
    prof = Profile("sha256:" + "0" * 64)
    with pytest.raises(QuantizationError, match="another graph"):
        prof.check_hash("sha256:" + "1" * 64)
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(QuantizationError, match="not JSON"):
        Profile.load(bad)
    bad.write_text('{"format": "something/else"}')
    with pytest.raises(QuantizationError, match="not a quantization profile"):
        Profile.load(bad)
    with pytest.raises(QuantizationError, match="cannot read"):
        Profile.load(tmp_path / "missing.json")
