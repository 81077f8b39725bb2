"""The ``winograd`` conv strategy (kernels/winograd.py): its transforms in numpy, its kernel on
odd planes, pads, tile-row tails, blocks of tile rows, channel counts past a K block and the
GEMM's register tiles, with the epilogues, against the reference conv; threads bit-identical;
the table's choice.

Tolerance: F(2x2, 3x3) computes each output as A^T (sum_c U V) A, where U = G g G^T and
V = B^T d B are sums of up to 9 and 4 terms and the output transform adds 9 of the 16 sums
back together. Those sums cancel: their terms are up to ~4x the result's, so the float32
rounding error grows by about that factor over a direct dot product's (measured on the grid
below, standard-normal data: at most ~3x the direct row's error). The tolerance is the grid
test's (1e-4 relative, 1e-4 * sqrt(C * 9) absolute) times 4; the direct strategies keep theirs.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from llvmlite import ir

from compiler.backends.interpreter.arena import ArenaInterpreter
from compiler.backends.llvm import target
from compiler.backends.llvm.executor import LLVMExecutor
from compiler.backends.llvm.jit import JITEngine
from compiler.backends.llvm.kernels import winograd
from compiler.backends.llvm.kernels.conv import applicable, conv_shape, emit_conv2d, select
from compiler.backends.llvm.kernels.gemm import conv_gemm_config, pack_a_constant
from compiler.kernels.reference_nn import conv as reference_conv
from tests.backends.llvm.test_conv_strategies import _conv_model, _lir

#: F(2x2, 3x3)'s input and output transforms, as matrices (the kernel spells them as adds).
BT = np.array([[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]], dtype=np.float64)
AT = np.array([[1, 1, 1, 0], [0, 1, -1, -1]], dtype=np.float64)


def test_the_transforms_compute_a_3x3_correlation() -> None:
    """A^T [(G g G^T) * (B^T d B)] A is the 2x2 valid correlation of a 4x4 patch d."""
    rng = np.random.default_rng(0)
    g = rng.standard_normal((3, 3))
    d = rng.standard_normal((4, 4))
    u = winograd.transform_filter(g[None, None]).astype(np.float64)[:, :, 0, 0]
    y = AT @ (u * (BT @ d @ BT.T)) @ AT.T
    want = np.array([[np.sum(d[i : i + 3, j : j + 3] * g) for j in range(2)] for i in range(2)])
    np.testing.assert_allclose(y, want, rtol=1e-6, atol=1e-6)


def test_the_packed_filter_is_each_transform_in_gemm_panels() -> None:
    """``pack`` lays out U[xi] as ``pack_a_constant`` does, K a multiple of MR or not."""
    rng = np.random.default_rng(1)
    for k, c, mr in ((16, 5, 8), (13, 7, 8), (9, 3, 6)):
        w = rng.standard_normal((k, c, 3, 3)).astype(np.float32)
        cfg = replace(conv_gemm_config("avx2"), mr=mr)
        u = winograd.transform_filter(w).reshape(16, k, c)
        want = np.concatenate([pack_a_constant(u[xi], mr).ravel() for xi in range(16)])
        got = winograd.pack(w, conv_shape(1, c, 6, 6, k, 3, 3), cfg)
        np.testing.assert_array_equal(got, want)
    # the transform itself, against G g G^T in float64
    w = rng.standard_normal((3, 4, 3, 3))
    want = np.einsum("ir,kcrs,js->ijkc", winograd.G, w, winograd.G)
    np.testing.assert_allclose(winograd.transform_filter(w), want, rtol=1e-6, atol=1e-6)


def test_applies_to_3x3_stride_1_single_group_only() -> None:
    ok = conv_shape(1, 8, 9, 9, 8, 3, 3, pad=1)
    assert winograd.applies(ok)
    for kw in (dict(stride=2), dict(dilation=2), dict(group=2)):
        assert not winograd.applies(conv_shape(1, 8, 9, 9, 8, 3, 3, pad=1, **kw))
    assert not winograd.applies(conv_shape(1, 8, 9, 9, 8, 5, 5, pad=2))
    assert not winograd.applies(conv_shape(1, 8, 9, 9, 8, 1, 3, pad=(0, 1, 0, 1)))


def test_big_images_go_in_blocks_of_tile_rows() -> None:
    """V and M of one block stay under BLOCK_FLOATS; the blocks cover every tile row."""
    for c, hw in ((64, 224), (256, 56), (3, 9), (512, 7)):
        s = conv_shape(1, c, hw, hw, c, 3, 3, pad=1)
        g = winograd.geometry(s, 16)
        assert g.blocks * g.bt >= g.th > (g.blocks - 1) * g.bt
        assert g.blocks == 1 or 16 * 2 * c * g.pb <= winograd.BLOCK_FLOATS
        assert g.hp >= s.H + 2 and g.wp >= s.W + 2
    assert winograd.geometry(conv_shape(1, 64, 224, 224, 64, 3, 3, pad=1), 16).blocks > 1


# (N, C, H, W, K, pads): odd and even planes (tile-row and tile-column tails), pads 0, 1, 2
# and asymmetric, a row past a vector of tiles (TW = 18), channel counts past the GEMM's
# register tile and K block (C = 300 > KC = 256), a batch of two.
CASES = [
    (1, 5, 6, 7, 9, (0, 0, 0, 0)),
    (1, 3, 7, 6, 16, (1, 1, 1, 1)),
    (1, 4, 9, 11, 6, (2, 0, 1, 2)),
    (1, 2, 3, 19, 5, (1, 1, 1, 1)),
    (1, 3, 17, 35, 20, (1, 1, 1, 1)),
    (1, 6, 5, 5, 7, (2, 2, 2, 2)),
    (1, 300, 4, 4, 10, (1, 1, 1, 1)),
    (1, 33, 14, 14, 70, (1, 1, 1, 1)),
    (2, 4, 8, 8, 8, (0, 1, 1, 0)),
    (1, 1, 3, 3, 1, (0, 0, 0, 0)),
]


def _run(cases, *, activation=None, accumulate=False, isa=None, block_floats=None, monkeypatch):
    if block_floats is not None:
        monkeypatch.setattr(winograd, "BLOCK_FLOATS", block_floats)
    rng = np.random.default_rng(11)
    module = ir.Module()
    built = []
    for n, (N, C, H, W, K, pads) in enumerate(cases):
        x = rng.standard_normal((N, C, H, W)).astype(np.float32)
        w = rng.standard_normal((K, C, 3, 3)).astype(np.float32)
        bias = rng.standard_normal(K).astype(np.float32)
        ck = emit_conv2d(
            module,
            f"cv{n}",
            N=N,
            C=C,
            H=H,
            W=W,
            K=K,
            R=3,
            S=3,
            weights=w,
            pad=pads,
            activation=activation,
            accumulate=accumulate,
            isa=isa,
            strategy="winograd",
        )
        assert ck.strategy == "winograd"
        built.append((x, w, bias, ck))
    compiled = JITEngine(disk_cache=False).compile(module)
    for n, (x, w, bias, ck) in enumerate(built):
        s = ck.shape
        start = rng.standard_normal((s.N, s.K, s.OH, s.OW)).astype(np.float32)
        # One float of sentinel on each side catches a store past the output.
        out = np.full(start.size + 2, -7.25, np.float32)
        out[1:-1] = start.ravel() if accumulate else 0.0
        packed = np.ascontiguousarray(ck.packed_weights)
        args = (x.ctypes.data, packed.ctypes.data, out[1:].ctypes.data, bias.ctypes.data)
        compiled.cfunc(f"cv{n}")(*args)
        attrs = dict(group=1, strides=(1, 1), dilations=(1, 1), pads=s.pad)
        attrs.update(activation="none", act_args=())
        want = reference_conv(
            [x.astype(np.float64), w.astype(np.float64), bias.astype(np.float64)], attrs
        )[0]
        if accumulate:
            want = want + start
        if activation == "relu":
            want = np.maximum(want, 0.0)
        got = out[1:-1].reshape(want.shape)
        tol = 4e-4 * np.sqrt(s.C * 9)
        np.testing.assert_allclose(got, want, rtol=4e-4, atol=tol, err_msg=str(s))
        assert out[0] == out[-1] == np.float32(-7.25), f"{s}: wrote outside its output"


def test_kernel_against_the_reference(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("GLOWVIZ_CACHE_DIR", str(tmp_path))
    _run(CASES, monkeypatch=monkeypatch)


def test_fused_relu_and_the_sum_post_op(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("GLOWVIZ_CACHE_DIR", str(tmp_path))
    _run(CASES[:4], activation="relu", monkeypatch=monkeypatch)
    _run(CASES[2:6], activation="relu", accumulate=True, monkeypatch=monkeypatch)


def test_blocks_of_tile_rows(monkeypatch, tmp_path) -> None:
    """A block budget of a few tile rows: several blocks, the last running past the grid (its
    padding tile rows must store nothing), the padded plane's rows copied per block."""
    monkeypatch.setenv("GLOWVIZ_CACHE_DIR", str(tmp_path))
    cases = [
        (1, 3, 17, 35, 20, (1, 1, 1, 1)),
        (1, 4, 9, 11, 6, (2, 0, 1, 2)),
        (2, 2, 12, 5, 3, (0, 0, 0, 0)),
    ]
    for _, C, H, W, K, pads in cases:
        s = conv_shape(1, C, H, W, K, 3, 3, pad=pads)
        assert winograd.geometry(s, 16).blocks == 1
    _run(cases, block_floats=16 * 23 * 18 * 2, activation="relu", monkeypatch=monkeypatch)
    s = conv_shape(1, 3, 17, 35, 20, 3, 3, pad=1)
    assert winograd.geometry(s, 16).blocks > 2


def test_rows_past_the_unrolled_length(monkeypatch, tmp_path) -> None:
    """OW = 1100: 550 tiles a row, run in a loop of whole vectors and a constant last run."""
    monkeypatch.setenv("GLOWVIZ_CACHE_DIR", str(tmp_path))
    cases = [(1, 2, 3, 1100, 3, (1, 1, 1, 1)), (1, 2, 4, 1027, 3, (0, 0, 0, 0))]
    _run(cases, monkeypatch=monkeypatch)


@pytest.mark.parametrize("isa", [i for i in ("avx2", "generic") if i != target.default_isa()])
def test_other_isas(isa: str, monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("GLOWVIZ_CACHE_DIR", str(tmp_path))
    _run(CASES[::2], isa=isa, activation="relu", monkeypatch=monkeypatch)


def test_executor_threads_bit_identical_and_chosen_by_default(monkeypatch, tmp_path) -> None:
    """A ResNet-like 3x3 conv + ReLU: the table picks winograd; one thread and two give the
    same bits; both agree with the interpreter."""
    monkeypatch.setenv("GLOWVIZ_CACHE_DIR", str(tmp_path))
    # 28x28, 128 channels: every phase runs in several parallel chunks
    model, feed = _conv_model(C=128, H=28, W=28, K=128, k=3, pads=(1, 1, 1, 1), act="Relu")
    lir, plan = _lir(model)
    conv = next(i for i, ins in enumerate(lir.code) if ins.kind == "conv")
    one = LLVMExecutor(lir, plan)
    assert one.strategy(conv).startswith("winograd")
    want = ArenaInterpreter(lir, plan).run(feed)
    got = one.run(feed)
    np.testing.assert_allclose(got["y"], want["y"], rtol=4e-4, atol=4e-4 * np.sqrt(128 * 9))
    two = LLVMExecutor(lir, plan, threads=2).run(feed)
    np.testing.assert_array_equal(two["y"], got["y"])


def test_forced_by_the_environment(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("GLOWVIZ_CACHE_DIR", str(tmp_path))
    model, feed = _conv_model(C=3, H=7, W=9, K=5, k=3, pads=(1, 0, 1, 2))
    lir, plan = _lir(model)
    conv = next(i for i, ins in enumerate(lir.code) if ins.kind == "conv")
    assert not LLVMExecutor(lir, plan).strategy(conv).startswith("winograd")
    monkeypatch.setenv("GLOWVIZ_CONV_STRATEGY", "winograd")
    ex = LLVMExecutor(lir, plan)
    assert ex.strategy(conv).startswith("winograd")
    want = ArenaInterpreter(lir, plan).run(feed)
    np.testing.assert_allclose(ex.run(feed)["y"], want["y"], rtol=4e-4, atol=4e-4 * np.sqrt(27))


def test_a_non_finite_filter_still_gets_direct() -> None:
    """Padded taps multiply zeros: an infinite weight must not make NaNs (``skips_padding``)."""
    w = np.ones((4, 3, 3, 3), np.float32)
    w[0, 0, 0, 0] = np.inf
    s = conv_shape(1, 3, 8, 8, 4, 3, 3, pad=1)
    assert "winograd" in applicable(s)
    assert select(s, forced="winograd", weights=w).name == "direct"
    w[0, 0, 0, 0] = 1.0
    assert select(s, forced="winograd", weights=w).name == "winograd"
    # unpadded too: the transform would spread the infinity as inf - inf
    s0 = conv_shape(1, 32, 12, 12, 32, 3, 3)
    w0 = np.ones((32, 32, 3, 3), np.float32)
    assert select(s0, weights=w0).name == "winograd"
    w0[3, 2, 1, 1] = -np.inf
    assert select(s0, weights=w0).name != "winograd"
    assert select(s0, forced="winograd", weights=w0).name == "direct"


@pytest.mark.parametrize("bad", [np.inf, -np.inf, np.nan])
@pytest.mark.parametrize("act", [None, "Relu"])
def test_a_non_finite_input_gives_what_a_direct_sum_gives(bad, act) -> None:
    """An infinity or a NaN in the input reaches the outputs whose windows hold it, as +-inf
    or NaN as a direct sum makes them: the kernel sees it and runs the direct loop nest on the
    filter recovered from U (the transforms reach the same outputs, but an infinity meets
    itself with both signs there: NaN for +-inf). Finite inputs still take the Winograd path."""
    model, feed = _conv_model(C=16, H=10, W=11, K=24, k=3, pads=(1, 1, 1, 1), act=act)
    lir, plan = _lir(model)
    conv = next(i for i, ins in enumerate(lir.code) if ins.kind == "conv")
    ex = LLVMExecutor(lir, plan)
    assert ex.strategy(conv).startswith("winograd")
    ref = ArenaInterpreter(lir, plan)
    tol = dict(rtol=4e-4, atol=4e-4 * np.sqrt(16 * 9))
    np.testing.assert_allclose(ex.run(feed)["y"], ref.run(feed)["y"], **tol)
    x = feed["x"].copy()
    x[0, 3, 4, 5] = bad  # one pixel: 3x3 outputs around it of every output channel
    x[0, 9, 0, 10] = bad  # a corner: the padded edge of a cropped tile
    got, want = ex.run({"x": x})["y"], ref.run({"x": x})["y"]
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(np.isposinf(got), np.isposinf(want))
    np.testing.assert_array_equal(np.isneginf(got), np.isneginf(want))
    assert np.isfinite(want).sum() > want.size // 2  # most outputs stay finite
    ok = np.isfinite(want)
    np.testing.assert_allclose(got[ok], want[ok], **tol)
    # and back to finite inputs: the Winograd path again, the same numbers as before
    np.testing.assert_allclose(ex.run(feed)["y"], ref.run(feed)["y"], **tol)


def test_a_filter_whose_transform_overflows_gets_direct() -> None:
    """Finite taps above float32's largest / 2.25 could make infinities in U: direct."""
    s = conv_shape(1, 32, 12, 12, 32, 3, 3)
    w = np.ones((32, 32, 3, 3), np.float32)
    assert select(s, weights=w).name == "winograd"
    w[1, 1, 0, :] = np.float32(3e38)
    assert select(s, weights=w).name != "winograd"
    assert select(s, forced="winograd", weights=w).name == "direct"
