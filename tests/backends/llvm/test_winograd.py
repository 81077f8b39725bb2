"""The ``winograd`` and ``winograd-4x4`` conv strategies (kernels/winograd.py): their transforms
in numpy, their kernels on odd planes, pads, tile-row tails, blocks of tile rows, channel counts
past a K block and the GEMM's register tiles, with the epilogues, against the reference conv;
threads bit-identical; the table's choice.

Tolerance: the direct rows' (1e-4 relative, 1e-4 * sqrt(C * 9) absolute), not looser. The
transforms cancel large terms (F(4x4)'s A^T has coefficients up to 8, B^T up to 5), but each
GEMM sums only C products instead of 9 * C. Measured against a float64 reference on standard
normal data (C = 5 to 300, 3x3, 14x14 and 28x28 planes): F(2x2) 0.4-0.9x the error of
padded-shift-gemm, F(4x4) 5-8x it (1e-5 of the output's magnitude at C = 256), both well
inside the tolerance; ResNet-50's logits moved by the same ~1e-6 relative with either.
"""

from __future__ import annotations

import itertools
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
from tests.backends.llvm.emitted import compile_emitted
from tests.backends.llvm.test_conv_strategies import _conv_model, _lir

VARIANTS = {"winograd": winograd.F2, "winograd-4x4": winograd.F4}


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_the_transforms_compute_a_3x3_correlation(name: str) -> None:
    """A^T [(G g G^T) * (B^T d B)] A is the m x m valid correlation of an n x n patch d."""
    v = VARIANTS[name]
    bt, at = np.array(v.bt), np.array(v.at)
    rng = np.random.default_rng(0)
    g = rng.standard_normal((3, 3))
    d = rng.standard_normal((v.n, v.n))
    u = winograd.transform_filter(g[None, None], v).astype(np.float64)[:, :, 0, 0]
    y = at @ (u * (bt @ d @ bt.T)) @ at.T
    want = [[np.sum(d[i : i + 3, j : j + 3] * g) for j in range(v.m)] for i in range(v.m)]
    np.testing.assert_allclose(y, np.array(want), rtol=1e-5, atol=1e-5)


def test_the_packed_filter_is_each_transform_in_gemm_panels() -> None:
    """``pack`` lays out U[xi] as ``pack_a_constant`` does, K a multiple of MR or not."""
    rng = np.random.default_rng(1)
    for (k, c, mr), v in itertools.product(((16, 5, 8), (13, 7, 8), (9, 3, 6)), VARIANTS.values()):
        w = rng.standard_normal((k, c, 3, 3)).astype(np.float32)
        cfg = replace(conv_gemm_config("avx2"), mr=mr)
        nn = v.n * v.n
        u = winograd.transform_filter(w, v).reshape(nn, k, c)
        want = np.concatenate([pack_a_constant(u[xi], mr).ravel() for xi in range(nn)])
        got = winograd.pack(w, conv_shape(1, c, 6, 6, k, 3, 3), cfg, v)
        np.testing.assert_array_equal(got, want)
    # the transform itself, against G g G^T in float64
    for v in VARIANTS.values():
        w = rng.standard_normal((3, 4, 3, 3))
        g = np.array(v.g)
        want = np.einsum("ir,kcrs,js->ijkc", g, w, g)
        np.testing.assert_allclose(winograd.transform_filter(w, v), want, rtol=1e-6, atol=1e-6)


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


STRATEGIES = sorted(VARIANTS)


def _run(
    cases, strategy, *, activation=None, accumulate=False, isa=None, block_floats=None, monkeypatch
):
    if block_floats is not None:
        monkeypatch.setattr(winograd, "BLOCK_FLOATS", block_floats)
    rng = np.random.default_rng(11)
    data = []
    for N, C, H, W, K, pads in cases:
        x = rng.standard_normal((N, C, H, W)).astype(np.float32)
        w = rng.standard_normal((K, C, 3, 3)).astype(np.float32)
        bias = rng.standard_normal(K).astype(np.float32)
        data.append((x, w, bias, conv_shape(N, C, H, W, K, 3, 3, pad=pads)))

    def emit(module: ir.Module) -> list:
        kernels = []
        for n, (_, w, _, s) in enumerate(data):
            ck = emit_conv2d(
                module,
                f"cv{n}",
                N=s.N,
                C=s.C,
                H=s.H,
                W=s.W,
                K=s.K,
                R=3,
                S=3,
                weights=w,
                pad=s.pad,
                activation=activation,
                accumulate=accumulate,
                isa=isa,
                strategy=strategy,
            )
            assert ck.shape == s
            kernels.append(ck)
        return kernels

    # Kept between runs under a key of the code generator and these inputs (emitted.py);
    # BLOCK_FLOATS is a switch of kernels/winograd.py, in the key as it is now.
    what = f"winograd {strategy} {cases!r} act {activation} acc {accumulate} isa {isa} seed 11"
    compiled, kernels = compile_emitted(what, emit, __file__)
    for n, ((x, w, bias, s), (made, packed)) in enumerate(zip(data, kernels, strict=True)):
        assert made == strategy
        start = rng.standard_normal((s.N, s.K, s.OH, s.OW)).astype(np.float32)
        # One float of sentinel on each side catches a store past the output.
        out = np.full(start.size + 2, -7.25, np.float32)
        out[1:-1] = start.ravel() if accumulate else 0.0
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
        tol = 1e-4 * np.sqrt(s.C * 9)  # the grid test's (tests/.../test_conv_strategies.py)
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=tol, err_msg=str(s))
        assert out[0] == out[-1] == np.float32(-7.25), f"{s}: wrote outside its output"


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_kernel_against_the_reference(strategy: str, monkeypatch) -> None:
    _run(CASES, strategy, monkeypatch=monkeypatch)


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_fused_relu_and_the_sum_post_op(strategy: str, monkeypatch) -> None:
    _run(CASES[:4], strategy, activation="relu", monkeypatch=monkeypatch)
    _run(CASES[2:6], strategy, activation="relu", accumulate=True, monkeypatch=monkeypatch)


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_blocks_of_tile_rows(strategy: str, monkeypatch) -> None:
    """A block budget of a few tile rows: several blocks, the last running past the grid (its
    padding tile rows must store nothing), the padded plane's rows copied per block."""
    cases = [
        (1, 3, 17, 35, 20, (1, 1, 1, 1)),
        (1, 4, 9, 11, 6, (2, 0, 1, 2)),
        (2, 2, 12, 5, 3, (0, 0, 0, 0)),
    ]
    v = VARIANTS[strategy]
    for _, C, H, W, K, pads in cases:
        s = conv_shape(1, C, H, W, K, 3, 3, pad=pads)
        assert winograd.geometry(s, 16, v).blocks == 1
    budget = v.n * v.n * 23 * 9 * 2  # two tile rows of the first case (F(2x2): 18 a row)
    _run(cases, strategy, block_floats=budget, activation="relu", monkeypatch=monkeypatch)
    s = conv_shape(1, 3, 17, 35, 20, 3, 3, pad=1)
    assert winograd.geometry(s, 16, v).blocks > 2


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_rows_past_the_unrolled_length(strategy: str, monkeypatch) -> None:
    """OW = 2200: 1100 (F(2x2)) or 550 tiles a row, run in a loop of whole vectors and a
    constant last run."""
    cases = [(1, 2, 3, 2200, 3, (1, 1, 1, 1)), (1, 2, 6, 2055, 3, (0, 0, 0, 0))]
    _run(cases, strategy, monkeypatch=monkeypatch)


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("isa", [i for i in ("avx2", "generic") if i != target.default_isa()])
def test_other_isas(isa: str, strategy: str, monkeypatch) -> None:
    _run(CASES[::2], strategy, isa=isa, activation="relu", monkeypatch=monkeypatch)


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_executor_threads_bit_identical(strategy: str, monkeypatch) -> None:
    """A ResNet-like 3x3 conv + ReLU: one thread and two give the same bits; both agree with
    the interpreter."""
    # 28x28, 128 channels: every phase runs in several parallel chunks
    model, feed = _conv_model(C=128, H=28, W=28, K=128, k=3, pads=(1, 1, 1, 1), act="Relu")
    lir, plan = _lir(model)
    conv = next(i for i, ins in enumerate(lir.code) if ins.kind == "conv")
    one = LLVMExecutor(lir, plan, conv_strategy=strategy)
    assert one.strategy(conv).startswith(strategy)
    want = ArenaInterpreter(lir, plan).run(feed)
    got = one.run(feed)
    np.testing.assert_allclose(got["y"], want["y"], rtol=1e-4, atol=1e-4 * np.sqrt(1152))
    two = LLVMExecutor(lir, plan, threads=2, conv_strategy=strategy).run(feed)
    np.testing.assert_array_equal(two["y"], got["y"])


def test_chosen_by_default_where_it_fills_a_vector(monkeypatch) -> None:
    """ResNet's 3x3 stride-1 planes get F(2x2) where its tile grid fills a vector of the
    host's lanes, not on 4x4 planes or with few channels; with ``CHOOSE_F4``, F(4x4) where
    its own grid does (a 14x14 plane's 16 tiles) and F(2x2) on 7x7 (F(4x4)'s 4 tiles)."""
    vw = conv_gemm_config().vw

    def pick(c: int, hw: int, k: int) -> str:
        return select(conv_shape(1, c, hw, hw, k, 3, 3, pad=1)).name

    for c, hw in ((64, 56), (128, 28), (256, 14)):
        assert pick(c, hw, c) == "winograd"
    assert pick(512, 7, 512) == ("winograd" if vw <= 16 else pick(512, 7, 512))
    assert not pick(256, 4, 256).startswith("winograd")
    assert not pick(4, 28, 16).startswith("winograd")
    monkeypatch.setattr(winograd, "CHOOSE_F4", True)
    assert pick(64, 56, 64) == pick(128, 28, 128) == "winograd-4x4"
    assert pick(256, 14, 256) == ("winograd-4x4" if vw <= 16 else "winograd")
    assert pick(512, 7, 512) == ("winograd" if vw <= 16 else pick(512, 7, 512))


@pytest.mark.parametrize("isa", ["avx512", "avx2"])
def test_the_choice_follows_the_vector_width(isa: str, monkeypatch) -> None:
    """Tiles on the lanes: a 7x7 plane's 16 F(2x2) tiles fill one AVX-512 vector or two AVX2
    ones (chosen); a 5x5 plane's 9 would leave 7 of 16 AVX2 lanes idle (not chosen; measured
    1.3x slower than pixel rows); a 4x4 plane's 4, most of a vector (never)."""
    monkeypatch.setattr(winograd, "conv_gemm_config", lambda: conv_gemm_config(isa))

    def prefers(hw: int) -> bool:
        return winograd.prefers(conv_shape(1, 64, hw, hw, 64, 3, 3, pad=1))

    assert prefers(7) and prefers(14) and not prefers(4) and not prefers(5)
    assert prefers(12)  # 36 tiles: 3/4 of three AVX-512 vectors, 9/10 of five AVX2 ones


def test_forced_by_the_environment(monkeypatch) -> None:
    model, feed = _conv_model(C=3, H=7, W=9, K=5, k=3, pads=(1, 0, 1, 2))
    lir, plan = _lir(model)
    conv = next(i for i, ins in enumerate(lir.code) if ins.kind == "conv")
    assert not LLVMExecutor(lir, plan).strategy(conv).startswith("winograd")
    monkeypatch.setenv("GLOWVIZ_CONV_STRATEGY", "winograd")
    ex = LLVMExecutor(lir, plan)
    assert ex.strategy(conv).startswith("winograd")
    want = ArenaInterpreter(lir, plan).run(feed)
    np.testing.assert_allclose(ex.run(feed)["y"], want["y"], rtol=1e-4, atol=1e-4 * np.sqrt(27))


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


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("bad", [np.inf, -np.inf, np.nan])
@pytest.mark.parametrize("act", [None, "Relu"])
def test_a_non_finite_input_gives_what_a_direct_sum_gives(bad, act, strategy) -> None:
    """An infinity or a NaN in the input reaches the outputs whose windows hold it, as +-inf
    or NaN as a direct sum makes them: the kernel sees it and runs the direct loop nest on the
    filter recovered from U (the transforms reach the same outputs, but an infinity meets
    itself with both signs there: NaN for +-inf). Finite inputs still take the Winograd path."""
    model, feed = _conv_model(C=16, H=10, W=11, K=24, k=3, pads=(1, 1, 1, 1), act=act)
    lir, plan = _lir(model)
    conv = next(i for i, ins in enumerate(lir.code) if ins.kind == "conv")
    ex = LLVMExecutor(lir, plan, conv_strategy=strategy)
    assert ex.strategy(conv).startswith(strategy)
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


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize(
    "geo",
    [
        dict(C=16, H=10, W=11, K=24, pads=(1, 1, 1, 1), act=None),
        dict(C=9, H=7, W=13, K=17, pads=(0, 2, 1, 0), act="Relu"),
        dict(C=16, H=8, W=8, K=16, pads=(0, 0, 0, 0), act=None),
    ],
)
def test_the_shared_fallback_gives_the_per_shape_fallbacks_bits(strategy, geo, monkeypatch):
    """``SHARED_FALLBACK``: one non-finite fallback per module with the geometry as arguments
    sums what the loop nest pasted into each kernel summed, in the same order: the same bits,
    NaNs and infinities where they were."""
    model, feed = _conv_model(k=3, **geo)
    lir, plan = _lir(model)
    x = feed["x"].copy()
    x[0, 3, 4, 5] = np.inf
    x[0, 1, 0, 2] = np.nan
    x[0, 2, x.shape[2] - 1, x.shape[3] - 1] = -np.inf
    outs = {}
    for shared in (False, True):
        monkeypatch.setattr(winograd, "SHARED_FALLBACK", shared)
        ex = LLVMExecutor(lir, plan, conv_strategy=strategy, engine=JITEngine())
        conv = next(i for i, ins in enumerate(lir.code) if ins.kind == "conv")
        assert ex.strategy(conv).startswith(strategy)
        outs[shared] = ex.run({"x": x})["y"]
        names = [f.name for f in ex.program.module.functions if "nonfinite" in f.name]
        assert len(names) == (1 if shared else 0)
    assert np.isnan(outs[True]).any() and np.isinf(outs[True]).any()
    np.testing.assert_array_equal(outs[True].view(np.uint32), outs[False].view(np.uint32))


def test_one_shared_fallback_serves_convs_of_different_shapes() -> None:
    """Two Winograd convs of different planes and channel counts, one epilogue: one fallback."""
    mod = ir.Module()
    cfg = conv_gemm_config()
    fn = ir.Function(mod, ir.FunctionType(ir.VoidType(), []), "k")
    b = ir.IRBuilder(fn.append_basic_block())
    ep = winograd.Epilogue()
    f1 = winograd._fallback(mod, cfg, ep, True, winograd.F2)
    f2 = winograd._fallback(mod, cfg, ep, True, winograd.F2)
    f3 = winograd._fallback(mod, cfg, ep, False, winograd.F2)
    assert f1 is f2 and f1 is not f3
    assert winograd._fallback(ir.Module(), cfg, ep, True, winograd.F2) is not f1
    b.ret_void()
