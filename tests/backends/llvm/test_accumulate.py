"""The sum post-op in the LLVM kernels: every conv strategy and the GEMM, with `accumulate`,
compute out = activation(out + op(x)) (the activation applies to the sum, as the arena
interpreter does), and never write outside their output."""

from __future__ import annotations

import numpy as np
import pytest
from llvmlite import ir

from compiler.backends.llvm.jit import JITEngine
from compiler.backends.llvm.kernels.conv import STRATEGY_NAMES, applicable
from compiler.backends.llvm.kernels.gemm import emit_matmul
from compiler.kernels.reference_nn import conv as reference_conv
from tests.backends.llvm import test_conv_strategies
from tests.backends.llvm.emitted import compile_emitted
from tests.backends.llvm.test_conv_strategies import GRID, SENTINEL, _guarded, emit_for_shape


@pytest.mark.slow  # a module of a quarter of the grid's kernels per strategy
@pytest.mark.parametrize("strategy", STRATEGY_NAMES)
def test_every_conv_strategy_accumulates(strategy: str, monkeypatch) -> None:
    rng = np.random.default_rng(11)
    shapes = [s for _, s in GRID if strategy in applicable(s)][::4]
    assert shapes, strategy
    data = []
    for n, s in enumerate(shapes):
        act = ("relu", ("clip", -0.5, 0.5), None)[n % 3]
        x = rng.standard_normal((1, s.C, s.H, s.W)).astype(np.float32)
        w = rng.standard_normal((s.K, s.Cg, s.R, s.S)).astype(np.float32)
        bias = rng.standard_normal(s.K).astype(np.float32)
        old = rng.standard_normal((1, s.K, s.OH, s.OW)).astype(np.float32)
        data.append((s, x, w, bias, old, act))

    def emit(module: ir.Module) -> list:
        return [
            emit_for_shape(
                module, f"acc{n}", s, w, activation=act, strategy=strategy, accumulate=True
            )
            for n, (s, _, w, _, _, act) in enumerate(data)
        ]

    # Kept between runs under a key of the code generator and these inputs (emitted.py).
    what = f"accumulating convs {strategy} seed 11 {shapes!r}"
    compiled, kernels = compile_emitted(what, emit, __file__, test_conv_strategies.__file__)
    assert len(kernels) == len(data)
    for n, (s, x, w, bias, old, act) in enumerate(data):
        made, packed = kernels[n]
        assert made == strategy
        bufs = [_guarded(a, np.nan) for a in (x, packed, bias)]
        obuf, out = _guarded(old, SENTINEL)
        compiled.cfunc(f"acc{n}")(
            bufs[0][1].ctypes.data, bufs[1][1].ctypes.data, out.ctypes.data, bufs[2][1].ctypes.data
        )
        attrs = dict(group=s.group, strides=s.stride, dilations=s.dilation, pads=s.pad)
        attrs.update(activation="none", act_args=())
        want = old + reference_conv([x, w, bias], attrs)[0]
        if act == "relu":
            want = np.maximum(want, 0)
        elif act is not None:
            want = np.clip(want, act[1], act[2])
        tol = 1e-4 * np.sqrt(s.Cg * s.R * s.S)
        np.testing.assert_allclose(
            out.reshape(want.shape), want, rtol=1e-4, atol=tol, err_msg=str(s)
        )
        assert np.all(obuf[:64] == SENTINEL) and np.all(obuf[-64:] == SENTINEL), s


@pytest.mark.parametrize(("M", "N", "K"), [(5, 7, 3), (33, 70, 300), (8, 32, 257)])
def test_gemm_accumulates(M: int, N: int, K: int, monkeypatch) -> None:
    rng = np.random.default_rng(3)
    a = rng.standard_normal((M, K)).astype(np.float32)
    b = rng.standard_normal((K, N)).astype(np.float32)
    bias = rng.standard_normal(N).astype(np.float32)
    c = rng.standard_normal((M, N)).astype(np.float32)
    module = ir.Module()
    emit_matmul(
        module,
        "g",
        M,
        N,
        K,
        a_stride=K,
        b_stride=N,
        c_stride=N,
        bias="row",
        accumulate=True,
        activation="relu",
    )
    fn = JITEngine().compile(module).cfunc("g")
    out = c.copy()
    fn(a.ctypes.data, b.ctypes.data, out.ctypes.data, bias.ctypes.data)
    want = np.maximum(c + a.astype(np.float64) @ b + bias, 0)
    np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize(
    ("strategy", "switch", "value"),
    [("gemm-1x1", "PREFETCH_C_NEXT", True), ("pixel-rows-gemm", "PREFETCH_TRANSPOSE_ROWS", 32)],
)
def test_accumulating_convs_prefetch_what_they_add_to(
    strategy: str, switch: str, value: object, monkeypatch
) -> None:
    """ResNet's residual 1x1 convs prefetch the output they add to: gemm-1x1 tiles (a short k
    loop whose accumulators start from C) the next row tile's C lines, the pixel-rows transpose
    the output rows ahead. The kernel gains prefetches, computes the very same bits as without,
    still matches the reference and writes nothing outside its output."""
    import compiler.backends.llvm.kernels.gemm as gemm
    from compiler.backends.llvm.kernels.conv import conv_shape

    rng = np.random.default_rng(5)
    s = conv_shape(1, 16, 9, 9, 40, 1, 1)  # 81 pixels: a full and a tail panel, a tail row tile
    x = rng.standard_normal((1, s.C, s.H, s.W)).astype(np.float32)
    w = rng.standard_normal((s.K, s.C, 1, 1)).astype(np.float32)
    bias = rng.standard_normal(s.K).astype(np.float32)
    old = rng.standard_normal((1, s.K, s.OH, s.OW)).astype(np.float32)
    outs, prefetches = [], []
    for on in (type(value)(0), value):
        monkeypatch.setattr(gemm, switch, on)
        module = ir.Module()
        ck = emit_for_shape(
            module, "acc", s, w, activation="relu", strategy=strategy, accumulate=True
        )
        assert ck.strategy == strategy
        text = str(module)
        prefetches.append(text.count('call void @"llvm.prefetch.p0"'))
        fn = JITEngine().compile(module).cfunc("acc")
        bufs = [_guarded(a, np.nan) for a in (x, ck.packed_weights, bias)]
        obuf, out = _guarded(old, SENTINEL)
        fn(bufs[0][1].ctypes.data, bufs[1][1].ctypes.data, out.ctypes.data, bufs[2][1].ctypes.data)
        assert np.all(obuf[:64] == SENTINEL) and np.all(obuf[-64:] == SENTINEL)
        outs.append(out.reshape(old.shape).copy())
    assert prefetches[1] > prefetches[0], prefetches
    assert np.array_equal(outs[0], outs[1])
    attrs = dict(group=1, strides=(1, 1), dilations=(1, 1), pads=(0, 0, 0, 0))
    attrs.update(activation="none", act_args=())
    want = np.maximum(old + reference_conv([x, w, bias], attrs)[0], 0)
    np.testing.assert_allclose(outs[1], want, rtol=1e-4, atol=1e-4 * np.sqrt(s.C))
