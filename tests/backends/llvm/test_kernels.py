"""LLVM kernels vs numpy references: GEMM (tiles, edges, epilogues, packing) and conv2d."""

from __future__ import annotations

import numpy as np
import pytest
from llvmlite import ir

from compiler.backends.llvm import target
from compiler.backends.llvm.cache import flush_writes
from compiler.backends.llvm.jit import JITEngine, ModuleCache, module_key
from compiler.backends.llvm.kernels.conv import conv_shape, emit_conv2d
from compiler.backends.llvm.kernels.gemm import emit_matmul, pack_b_constant
from compiler.errors import CodegenError
from tests.backends.llvm.emitted import compile_emitted

ISAS = ["avx512", "avx2", "generic"]


def _addr(a: np.ndarray) -> int:
    return a.ctypes.data


def _matmul(
    M,
    N,
    K,
    *,
    isa=None,
    packed=True,
    transpose_b=False,
    bias=None,
    act=None,
    accumulate=False,
    seed=0,
):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((M, K), dtype=np.float32)
    bm = rng.standard_normal((N, K) if transpose_b else (K, N), dtype=np.float32)
    options = dict(
        a_stride=K,
        b_stride=bm.shape[1],
        c_stride=N,
        transpose_b=transpose_b,
        bias=bias,
        accumulate=accumulate,
        activation=act,
        b_packed=packed,
        isa=isa,
    )

    def emit(m: ir.Module) -> list:
        emit_matmul(m, "mm", M, N, K, **options)
        return []

    # Kept between runs under a key of the code generator and these options (emitted.py).
    compiled, _ = compile_emitted(f"matmul {(M, N, K)} {options!r}", emit, __file__)
    fn = compiled.cfunc("mm")
    bsrc = pack_b_constant(bm, transpose_b=transpose_b, isa=isa) if packed else bm
    c = rng.standard_normal((M, N), dtype=np.float32)
    c0 = c.copy()
    bias_v = rng.standard_normal(N if bias == "row" else M, dtype=np.float32)
    fn(_addr(a), _addr(bsrc), _addr(c), *([_addr(bias_v)] if bias else []))
    ref = gemm_reference(a, bm.T if transpose_b else bm, bias, bias_v, c0, accumulate, act)
    np.testing.assert_allclose(c, ref, rtol=1e-4, atol=1e-4 * np.sqrt(K))


def gemm_reference(a, bm, bias, bias_v, c0, accumulate, act):
    """What ``emit_matmul``'s kernel computes, in float64: A @ B (+ the row or column bias)
    (+ C before the call, accumulating), then ReLU or a ("clip", lo, hi) activation."""
    ref = a.astype(np.float64) @ bm.astype(np.float64)
    if bias == "row":
        ref += bias_v
    elif bias == "col":
        ref += bias_v[:, None]
    if accumulate:
        ref += c0
    if act == "relu":
        ref = np.maximum(ref, 0)
    elif isinstance(act, tuple):
        ref = np.clip(ref, act[1], act[2])
    return ref


SHAPES = [
    (1, 1, 1),
    (3, 17, 33),
    (17, 33, 100),
    (100, 3, 1),
    (1, 100, 17),
    (33, 1, 300),
    (9, 40, 513),
    (16, 64, 64),
    (25, 70, 260),
    (7, 16, 3300),  # a short K: blocks of panels and a partial last block (PANEL_BLOCK_BYTES)
]


@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_matmul_shapes(shape, isa):
    _matmul(*shape, isa=isa, packed=True)
    _matmul(*shape, isa=isa, packed=False)


@pytest.mark.parametrize("packed", [True, False])
def test_matmul_transpose_b(packed):
    _matmul(19, 37, 300, transpose_b=True, packed=packed)


@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize(
    ("bias", "act", "acc"),
    [
        ("row", "relu", False),
        ("col", None, True),
        (None, ("clip", -0.5, 1.5), True),
        ("row", ("clip", 0.0, 6.0), False),
    ],
)
def test_matmul_epilogues(isa, bias, act, acc):
    # K > KC exercises the first/last K-block logic of the epilogue.
    _matmul(13, 35, 600, isa=isa, bias=bias, act=act, accumulate=acc)
    _matmul(7, 5, 30, isa=isa, bias=bias, act=act, accumulate=acc, packed=False)


@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize(
    ("N", "K", "bias", "act", "acc"),
    [
        (1, 1, None, None, False),
        (17, 40, "row", "relu", False),
        (120, 400, "row", "relu", False),  # LeNet's first FC: 3 full panels and a tail
        (300, 33, None, ("clip", -0.5, 1.5), True),  # 2 groups of 4 panels, 1 more, a tail
        (256, 70, "row", "neg", True),  # 8 full panels; an activation run after the stores
        (40, 30, "col", "relu", True),  # a column bias (one value for the one row)
    ],
)
def test_gemv_of_small_packed_b(isa, N, K, bias, act, acc, monkeypatch):
    """M = 1 with packed B under SMALL_B_BYTES: ``gemv_body`` (several panels per k), and the
    blocked body it replaces, against numpy."""
    import compiler.backends.llvm.kernels.gemm as gemm
    from compiler.backends.llvm.kernels.common import LaneEpilogue

    if act == "neg":
        act = LaneEpilogue(("neg",), lambda b, v: b.fneg(v))
    texts = []
    for on in (True, False):
        monkeypatch.setattr(gemm, "SMALL_GEMV", on)
        m = ir.Module()
        emit_matmul(
            m, "mv", 1, N, K, a_stride=K, b_stride=N, c_stride=N, bias=bias, accumulate=acc,
            activation=act, b_packed=True, isa=isa,
        )
        texts.append(str(m))
    # the switch chooses the body: every case but the column bias takes gemv_body when on
    assert (texts[0] != texts[1]) == (bias != "col")
    for on in (True, False):
        monkeypatch.setattr(gemm, "SMALL_GEMV", on)
        if isinstance(act, LaneEpilogue):
            _gemv_negated(N, K, isa, bias, act, acc)
        else:
            _matmul(1, N, K, isa=isa, bias=bias, act=act, accumulate=acc)


def _gemv_negated(N, K, isa, bias, act, acc):
    rng = np.random.default_rng(4)
    a = rng.standard_normal((1, K), dtype=np.float32)
    bm = rng.standard_normal((K, N), dtype=np.float32)
    bias_v = rng.standard_normal(N, dtype=np.float32)
    c = rng.standard_normal((1, N), dtype=np.float32)
    want = -(a.astype(np.float64) @ bm + (bias_v if bias else 0) + (c if acc else 0))
    m = ir.Module()
    emit_matmul(
        m, "mv", 1, N, K, a_stride=K, b_stride=N, c_stride=N, bias=bias, accumulate=acc,
        activation=act, b_packed=True, isa=isa,
    )
    fn = JITEngine().compile(m).cfunc("mv")
    packed = pack_b_constant(bm, isa=isa)
    fn(_addr(a), _addr(packed), _addr(c), *([_addr(bias_v)] if bias else []))
    np.testing.assert_allclose(c, want, rtol=1e-4, atol=1e-4 * np.sqrt(K))


def test_matmul_strided_operands():
    rng = np.random.default_rng(3)
    big_a = rng.standard_normal((10, 50), dtype=np.float32)
    big_b = rng.standard_normal((40, 30), dtype=np.float32)
    big_c = np.zeros((10, 45), dtype=np.float32)
    m = ir.Module()
    emit_matmul(m, "mm", 10, 21, 40, a_stride=50, b_stride=30, c_stride=45)
    fn = JITEngine().compile(m).cfunc("mm")
    fn(_addr(big_a), _addr(big_b), _addr(big_c))
    np.testing.assert_allclose(big_c[:, :21], big_a[:, :40] @ big_b[:, :21], rtol=1e-4, atol=1e-4)
    assert not big_c[:, 21:].any()


def ref_conv(x, w, b, stride, pad, dil, group):
    n, c, h, wd = x.shape
    k, cg, r_, s_ = w.shape
    (sh, sw), (pt, pl, pb, pr), (dh, dw) = stride, pad, dil
    xp = np.pad(x, ((0, 0), (0, 0), (pt, pb), (pl, pr))).astype(np.float64)
    oh = (h + pt + pb - dh * (r_ - 1) - 1) // sh + 1
    ow = (wd + pl + pr - dw * (s_ - 1) - 1) // sw + 1
    out = np.zeros((n, k, oh, ow))
    kg = k // group
    for g in range(group):
        for r in range(r_):
            for s in range(s_):
                patch = xp[
                    :,
                    g * cg : (g + 1) * cg,
                    r * dh : r * dh + sh * (oh - 1) + 1 : sh,
                    s * dw : s * dw + sw * (ow - 1) + 1 : sw,
                ]
                out[:, g * kg : (g + 1) * kg] += np.einsum(
                    "nchw,kc->nkhw", patch, w[g * kg : (g + 1) * kg, :, r, s]
                )
    if b is not None:
        out += b[None, :, None, None]
    return out


def _pair(v):
    return (v, v) if isinstance(v, int) else tuple(v)


def _conv(
    N,
    C,
    H,
    W,
    K,
    R,
    S,
    *,
    stride=1,
    pad=0,
    dil=1,
    group=1,
    bias=True,
    act=None,
    isa=None,
    expect=None,
    strategy=None,
):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((N, C, H, W), dtype=np.float32)
    w = rng.standard_normal((K, C // group, R, S), dtype=np.float32)
    bv = rng.standard_normal(K, dtype=np.float32)
    dims = dict(N=N, C=C, H=H, W=W, K=K, R=R, S=S)
    window = dict(stride=stride, pad=pad, dilation=dil, group=group)
    options = dict(bias=bias, activation=act, isa=isa, strategy=strategy)
    shape = conv_shape(N, C, H, W, K, R, S, **window)

    def emit(m: ir.Module) -> list:
        ck = emit_conv2d(m, "cv", **dims, weights=w, **window, **options)
        assert ck.shape == shape
        return [ck]

    # Kept between runs under a key of the code generator and these inputs (emitted.py).
    what = f"conv {dims!r} {window!r} {options!r} seed 1"
    compiled, [(made, packed)] = compile_emitted(what, emit, __file__)
    if expect:
        assert made == expect
    fn = compiled.cfunc("cv")
    out = np.full((N, K, shape.OH, shape.OW), np.nan, dtype=np.float32)
    guarded = np.full(x.size + 128, np.nan, dtype=np.float32)  # a read past x gives NaN
    guarded[64 : 64 + x.size] = x.ravel()
    xg = guarded[64 : 64 + x.size]
    fn(_addr(xg), _addr(packed), _addr(out), *([_addr(bv)] if bias else []))
    p4 = (pad,) * 4 if isinstance(pad, int) else pad
    ref = ref_conv(x, w, bv if bias else None, _pair(stride), p4, _pair(dil), group)
    if act == "relu":
        ref = np.maximum(ref, 0)
    elif isinstance(act, tuple):
        ref = np.clip(ref, act[1], act[2])
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4 * np.sqrt(C * R * S))


CONVS = [
    dict(N=1, C=3, H=7, W=9, K=5, R=3, S=3, expect="implicit-gemm"),
    dict(N=2, C=4, H=10, W=11, K=6, R=3, S=3, stride=2, pad=(1, 0, 2, 1)),
    dict(N=1, C=6, H=13, W=12, K=9, R=3, S=2, dil=2, pad=1, group=3, act="relu"),
    dict(N=1, C=8, H=9, W=33, K=8, R=3, S=3, pad=1, group=8, expect="depthwise-direct"),
    dict(N=1, C=8, H=9, W=37, K=8, R=3, S=3, pad=1, stride=2, group=8, act=("clip", 0.0, 6.0)),
    dict(
        N=2, C=6, H=11, W=19, K=12, R=5, S=5, stride=(2, 1), pad=(2, 1, 0, 3), dil=(1, 2), group=6
    ),
    dict(N=1, C=7, H=9, W=10, K=7, R=3, S=3, stride=3, pad=2, group=7),
    dict(N=1, C=17, H=5, W=7, K=33, R=1, S=1, bias=False, expect="gemm-1x1"),
    dict(N=1, C=300, H=9, W=9, K=17, R=3, S=3, pad=1),
    dict(N=1, C=3, H=23, W=23, K=16, R=7, S=7, stride=2, pad=3),
    dict(N=1, C=4, H=6, W=6, K=4, R=3, S=3, pad=4),  # padding wider than the kernel reach
    # The window sticks out on both sides with stride > 1 (issue 11's fuzzing campaign), in
    # the implicit GEMM (the table now picks direct-lanes there; every row runs it in
    # test_conv_strategies.py's grid).
    dict(
        N=1, C=3, H=1, W=1, K=16, R=3, S=3, stride=2, pad=1, strategy="implicit-gemm",
        expect="implicit-gemm",
    ),
    dict(N=1, C=4, H=5, W=4, K=6, R=3, S=3, stride=2, pad=(1, 0, 0, 2), dil=2, group=2),
]


@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("case", CONVS, ids=lambda c: "-".join(f"{k}{v}" for k, v in c.items()))
def test_conv2d(case, isa):
    _conv(**case, isa=isa)


def test_env_override_forces_avx2(monkeypatch):
    monkeypatch.setenv("GLOWVIZ_LLVM_CPU", "haswell")
    monkeypatch.setenv("GLOWVIZ_LLVM_FEATURES", "+avx,+avx2,+fma,-avx512f")
    assert target.default_isa() == "avx2"
    assert target.vector_width_f32() == 8
    _matmul(9, 40, 70)
    asm = _asm_of_matmul()
    assert "zmm" not in asm and "ymm" in asm


def test_env_override_generic(monkeypatch):
    monkeypatch.setenv("GLOWVIZ_LLVM_CPU", "x86-64")
    monkeypatch.setenv("GLOWVIZ_LLVM_FEATURES", "")
    assert target.default_isa() == "generic"
    _matmul(9, 40, 70)
    _conv(N=1, C=5, H=8, W=9, K=6, R=3, S=3, pad=1)


def _asm_of_matmul() -> str:
    m = ir.Module()
    emit_matmul(m, "mm_asm", 8, 32, 16, a_stride=16, b_stride=32, c_stride=32, b_packed=True)
    return JITEngine(disk_cache=False).compile(m).assembly("mm_asm")


def test_jit_disk_cache_roundtrip(tmp_path):
    m = ir.Module()
    emit_matmul(m, "mm_cache", 5, 7, 9, a_stride=9, b_stride=7, c_stride=7)
    text = str(m)
    first = JITEngine(directory=tmp_path).compile(text)
    flush_writes()  # entries are written in the background (as a later process finds them)
    assert not first.from_disk and list(tmp_path.glob("*.gvz"))
    JITEngine._memory.clear()
    second = JITEngine(directory=tmp_path).compile(text)
    assert second.from_disk
    assert "define" in second.optimized_ir and "mm_cache:" in second.assembly("mm_cache")
    rng = np.random.default_rng(0)
    a, b = (
        rng.standard_normal((5, 9), dtype=np.float32),
        rng.standard_normal((9, 7), dtype=np.float32),
    )
    c = np.zeros((5, 7), dtype=np.float32)
    second.cfunc("mm_cache")(_addr(a), _addr(b), _addr(c))
    np.testing.assert_allclose(c, a @ b, rtol=1e-5, atol=1e-5)


def _two_kernel_module(tag: str) -> ir.Module:
    m = ir.Module()
    for name, n in ((f"{tag}_a", 9), (f"{tag}_b", 40)):
        emit_matmul(m, name, 4, n, 7, a_stride=7, b_stride=n, c_stride=n)
    return m


def test_assembly_of_one_function_leaves_the_others_out() -> None:
    compiled = JITEngine(disk_cache=False).compile(_two_kernel_module("asm1"))
    one = compiled.assembly_of(["asm1_a", "no_such_function"])
    assert list(one) == ["asm1_a"]
    assert one["asm1_a"].startswith("asm1_a:") and "asm1_b" not in one["asm1_a"]
    assert compiled.assembly("asm1_a") == one["asm1_a"]
    assert "define" in compiled.function_ir("asm1_b") and compiled.function_ir("nope") is None
    whole = compiled.assembly()
    assert "asm1_a:" in whole and "asm1_b:" in whole
    with pytest.raises(CodegenError, match="no assembly for function 'nope'"):
        compiled.assembly("nope")


def test_assembly_of_a_function_a_global_refers_to_elsewhere() -> None:
    """A global naming a function left out of the small module: the whole-module fallback."""
    m = _two_kernel_module("asm2")
    table = ir.GlobalVariable(m, ir.PointerType(), "asm2_table")
    table.initializer = m.get_global("asm2_b")
    compiled = JITEngine(disk_cache=False).compile(m)
    one = compiled.assembly_of(["asm2_a"])
    assert one["asm2_a"].startswith("asm2_a:") and "asm2_b:" not in one["asm2_a"]


def test_jit_memory_cache_is_bounded_lru(monkeypatch) -> None:
    cache = ModuleCache(max_entries=2, max_bytes=1 << 40)
    monkeypatch.setattr(JITEngine, "_memory", cache)
    engine = JITEngine(disk_cache=False)
    mods = [str(_two_kernel_module(f"lru{i}")) for i in range(3)]
    a = engine.compile(mods[0])
    b = engine.compile(mods[1])
    assert engine.compile(mods[0]) is a  # a hit; mods[1] is now the least recently used
    engine.compile(mods[2])
    assert len(cache) == 2 and a.key in cache and b.key not in cache
    assert cache.nbytes == sum(cache.get(k).nbytes for k in (a.key, module_key(mods[2])))
    cache.max_bytes = a.nbytes  # a byte budget that holds one module
    engine.compile(mods[1])
    assert len(cache) == 1 and a.key not in cache
    assert cache.pop("missing") is None
    cache.clear()
    assert len(cache) == 0 and cache.nbytes == 0
