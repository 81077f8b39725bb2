"""The int8 arithmetic every executor follows (compiler/kernels/reference_quant.py):
rounding half to even, saturation, NaN, float32 multipliers."""

from __future__ import annotations

import numpy as np

from compiler.kernels.reference_quant import (
    clamp_bounds,
    dequantize,
    multipliers,
    quantize,
    requantize,
)


def test_quantize_rounds_half_to_even_and_saturates() -> None:
    x = np.array([0.5, 1.5, 2.5, -0.5, -1.5, 1000.0, -1000.0, np.nan, np.inf], np.float32)
    q = quantize(x, 1.0, 0)
    assert q.tolist() == [0, 2, 2, 0, -2, 127, -128, -128, 127]
    assert quantize(np.float32([0.0]), 0.1, -128).tolist() == [-128]  # zero is the offset


def test_quantize_divides_by_the_scale_in_float32() -> None:
    # x / s, not x * (1 / s): 0.3 / 0.1 rounds to 2.9999998 in float32 and quantizes to 3.
    assert quantize(np.float32([0.3]), 0.1, 0).tolist() == [3]


def test_dequantize_and_requantize() -> None:
    q = np.array([-128, 0, 127], np.int8)
    np.testing.assert_array_equal(dequantize(q, 0.5, -128), np.float32([0.0, 64.0, 127.5]))
    acc = np.array([0, 5, -5, 1 << 30], np.int32)
    out = requantize(acc, np.float32(0.1), 3, -128, 127)
    # float32(5) * float32(0.1) is exactly 0.5: ties to even round it (and -0.5) to 0.
    assert out.tolist() == [3, 3, 3, 127]
    assert clamp_bounds(3) == (np.float32(-131), np.float32(124))


def test_multipliers_are_float32_products_then_quotients() -> None:
    m = multipliers(0.1, np.array([0.2, 0.3], np.float32), 0.7)
    want = (np.float32(0.1) * np.float32([0.2, 0.3])) / np.float32(0.7)
    assert m.dtype == np.float32 and np.array_equal(m, want)
