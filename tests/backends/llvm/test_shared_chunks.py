"""GEMM chunks that take their shape at run time (``gemm.SHARED_CHUNKS``): M and N in tiles and
panels, the tail panel's width (a run-time lane mask), K, the chunk grid and the operands'
strides come from the task's context, so GEMMs of one structure share one chunk function.

The chunks only exist for GEMMs big enough to split (``parallel.CHUNK_FMAS``); the tests lower
that threshold so small shapes with every kind of tail (odd M, tail panels of one lane to one
lane short of a panel, N under one panel, one K block or several) run through them, merged
(``merge_identical_functions``) as codegen does, against a float64 reference, and bit for bit
alike on one and two threads and with the switch off.
"""

from __future__ import annotations

import numpy as np
import pytest
from llvmlite import ir

import compiler.backends.llvm.kernels.gemm as gemm
import compiler.backends.llvm.kernels.parallel as parallel
from compiler.backends.llvm.codegen import merge_identical_functions
from compiler.backends.llvm.jit import JITEngine, split_functions
from compiler.backends.llvm.kernels.conv import applicable
from compiler.backends.llvm.kernels.gemm import emit_matmul, gemm_config, pack_b_constant
from compiler.backends.interpreter.arena import ArenaInterpreter
from compiler.backends.llvm.executor import LLVMExecutor
from tests.backends.llvm.emitted import compile_emitted
from tests.backends.llvm.test_conv_strategies import (
    WIDE,
    _lir,
    _pointwise_family_model,
    _run_grid,
    _shape,
)
from tests.backends.llvm.test_kernels import gemm_reference

ISAS = ["avx512", "avx2", "generic"]


@pytest.fixture(autouse=True)
def _small_chunks(monkeypatch):
    monkeypatch.setattr(parallel, "CHUNK_FMAS", 1 << 10)


def _shapes(isa: str) -> list[tuple[int, int, int]]:
    """(M, N, K): odd M (tail tiles of 1 and MR-1 rows, M under one tile), N with tail panels
    of 1 lane, one vector, one lane past a vector, one lane short of a panel, and N under one
    panel; K of one block (<= KC) and of several, ending in a partial block."""
    cfg = gemm_config(isa)
    nr, vw, mr, kc = cfg.nr, cfg.vw, cfg.mr, cfg.kc
    return [
        (3 * mr + 1, 2 * nr + 1, 40),
        (5 * mr - 1, 3 * nr + vw, kc + 37),
        (2 * mr + 3, nr + vw + 1, kc),
        (mr - 1, 4 * nr - 1, 70),
        (4 * mr, nr - 1, 2 * kc + 5),
        (2 * mr + 5, 3 * nr, 33),
        (2 * mr + 1, nr + 1, 90),  # the structure of the first: must share its chunks
    ]


def _module(isa: str, shapes, m: ir.Module | None = None, **options):
    m = ir.Module() if m is None else m
    for i, (M, N, K) in enumerate(shapes):
        strides = dict(a_stride=K, b_stride=N, c_stride=N)
        emit_matmul(m, f"mm{i}", M, N, K, **strides, b_packed=True, isa=isa, **options)
    return m


def _run(compiled, isa, shapes, seed, *, bias=None, accumulate=False, act=None):
    rng = np.random.default_rng(seed)
    outs = []
    for i, (M, N, K) in enumerate(shapes):
        a = rng.standard_normal((M, K), dtype=np.float32)
        bm = rng.standard_normal((K, N), dtype=np.float32)
        bias_v = rng.standard_normal(N if bias == "row" else M, dtype=np.float32)
        c = rng.standard_normal((M, N), dtype=np.float32)
        c0 = c.copy()
        packed = pack_b_constant(bm, isa=isa)
        args = [a.ctypes.data, packed.ctypes.data, c.ctypes.data]
        compiled.cfunc(f"mm{i}")(*args, *([bias_v.ctypes.data] if bias else []))
        ref = gemm_reference(a, bm, bias, bias_v, c0, accumulate, act)
        tol = 1e-4 * np.sqrt(K)
        np.testing.assert_allclose(c, ref, rtol=1e-4, atol=tol, err_msg=f"{M}x{N}x{K}")
        outs.append(c)
    return outs


@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize(
    ("bias", "act", "acc"), [(None, None, False), ("row", "relu", False), ("col", None, True)]
)
def test_shared_chunks_compute_every_tail(isa, bias, act, acc, monkeypatch) -> None:
    shapes = _shapes(isa)
    options = dict(bias=bias, activation=act, accumulate=acc)
    results = {}
    for shared in (False, True):
        monkeypatch.setattr(gemm, "SHARED_CHUNKS", shared)
        if shared:
            m = _module(isa, shapes, **options)
            merge_identical_functions(m)
            # The first and the last GEMM differ only in their sizes: one chunk function.
            assert '@"mm0.gemm"' in split_functions(str(m))[f"mm{len(shapes) - 1}"]
            compiled = JITEngine().compile(m)
        else:
            # Only run: kept between runs under a key of the code generator (its switches
            # included) and these shapes (emitted.py), emitted on a miss only.
            def emit(m: ir.Module) -> list:
                merge_identical_functions(_module(isa, shapes, m, **options))
                return []

            what = f"shared chunks off {isa} {shapes!r} {options!r}"
            compiled, _ = compile_emitted(what, emit, __file__)
        outs = _run(compiled, isa, shapes, 5, bias=bias, accumulate=acc, act=act)
        if not shared:
            results[shared] = outs
            continue
        compiled.set_threads(2)
        two = _run(compiled, isa, shapes, 5, bias=bias, accumulate=acc, act=act)
        for x, y in zip(outs, two):
            np.testing.assert_array_equal(x, y)
        results[shared] = outs
    for x, y in zip(results[False], results[True]):
        np.testing.assert_array_equal(x, y)


def test_chunks_of_one_structure_are_one_function(monkeypatch) -> None:
    """With the switch off every GEMM has chunks of its own; on, the seven shapes' chunks are
    fewer functions: GEMMs of one structure merge, their sizes read from the task's context."""
    isa = "avx512"
    counts = {}
    for shared in (False, True):
        monkeypatch.setattr(gemm, "SHARED_CHUNKS", shared)
        m = _module(isa, _shapes(isa))
        merge_identical_functions(m)
        counts[shared] = [n for n in split_functions(str(m)) if n.endswith(".gemm")]
    assert len(counts[False]) == len(_shapes(isa))
    assert len(counts[True]) < len(counts[False])


@pytest.mark.parametrize("strategy", ["padded-shift-gemm", "gemm-1x1", "pixel-rows-gemm"])
def test_conv_gemm_strategies_through_shared_chunks(strategy: str) -> None:
    """The conv GEMMs split into many chunks on wide planes (20 output channels: a tail tile),
    guarded buffers: no read or write outside them."""
    configs = [(c, _shape(c)) for c in WIDE]
    if strategy == "gemm-1x1":
        pointwise = (dict(c, R=1, S=1, pad=(0, 0, 0, 0), dil=1) for c in WIDE)
        configs = [(c, _shape(c)) for c in pointwise]
    configs = [(c, s) for c, s in configs if strategy in applicable(s)]
    assert configs
    _run_grid(strategy, None, configs)


@pytest.mark.parametrize(
    "strategy, channels, K",
    [("gemm-1x1", [40, 60, 300, 480, 33], 24), ("pixel-rows-gemm", [70, 100, 300, 480, 65], 72)],
)
def test_models_through_shared_chunks(strategy, channels, K, monkeypatch) -> None:
    """1x1 convs over several channel counts (one K block or more, ReLU or the sum post-op),
    their GEMMs in many chunks: against the interpreter, bit-identical on two threads and with
    the switch off."""
    model, feed = _pointwise_family_model(channels, K)
    lir, plan = _lir(model)
    want = ArenaInterpreter(lir, plan).run(feed)
    got, tasks = {}, {}
    for shared in (False, True):
        monkeypatch.setattr(gemm, "SHARED_CHUNKS", shared)
        ex = LLVMExecutor(lir, plan, conv_strategy=strategy)
        got[shared] = ex.run(feed)["y"]
        tasks[shared] = [n for n in split_functions(ex.program.ir_text) if n.endswith(".gemm")]
        np.testing.assert_allclose(got[shared], want["y"], rtol=1e-4, atol=1e-4)
        two = LLVMExecutor(lir, plan, conv_strategy=strategy, threads=2).run(feed)["y"]
        np.testing.assert_array_equal(two, got[shared])
    np.testing.assert_array_equal(got[True], got[False])
    assert tasks[True] and len(tasks[True]) <= len(tasks[False])  # the chunks did run


@pytest.mark.parametrize("isa", ["avx512", "avx2"])
def test_one_chunk_function_for_relu_or_none_and_any_k_blocks(isa, monkeypatch) -> None:
    """ReLU or no activation is a run-time flag and K any number of blocks (``SHARED_FLAGS``):
    GEMMs of one tail structure with one K block or three, with ReLU or without, run one chunk
    function, each computing its own epilogue."""
    cfg = gemm_config(isa)
    nr, mr, kc = cfg.nr, cfg.mr, cfg.kc
    cases = [((2 * mr + 1, nr + 1, 40), "relu"), ((3 * mr + 1, 2 * nr + 1, 2 * kc + 5), None)]
    cases.append(((4 * mr + 1, nr + 1, kc + 3), "relu"))
    m = ir.Module()
    for i, ((M, N, K), act) in enumerate(cases):
        strides = dict(a_stride=K, b_stride=N, c_stride=N)
        emit_matmul(m, f"mm{i}", M, N, K, **strides, b_packed=True, isa=isa, activation=act)
    merge_identical_functions(m)
    fns = split_functions(str(m))
    assert [n for n in fns if n.endswith(".gemm")] == ["mm0.gemm"]
    assert all('@"mm0.gemm"' in fns[f"mm{i}"] for i in range(3))
    compiled = JITEngine().compile(m)
    rng = np.random.default_rng(11)
    for i, ((M, N, K), act) in enumerate(cases):
        a = rng.standard_normal((M, K), dtype=np.float32)
        bm = rng.standard_normal((K, N), dtype=np.float32)
        c = np.full((M, N), np.nan, dtype=np.float32)  # C is never read before it is written
        packed = pack_b_constant(bm, isa=isa)
        compiled.cfunc(f"mm{i}")(a.ctypes.data, packed.ctypes.data, c.ctypes.data)
        ref = a.astype(np.float64) @ bm.astype(np.float64)
        if act == "relu":
            ref = np.maximum(ref, 0)
        assert (c < 0).any() == (act is None)
        np.testing.assert_allclose(c, ref, rtol=1e-4, atol=1e-4 * np.sqrt(K))


def _canonical(text: str) -> str:
    """The IR with the GEMM chunk tasks renamed in order of first mention (which duplicate a
    conv's chunk was built or merged under does not matter)."""
    import re

    names: dict[str, str] = {}

    def rename(m: re.Match[str]) -> str:
        return '@"' + names.setdefault(m.group(1), f"task{len(names)}") + '"'

    return re.sub(r'@"([\w.]+\.gemm(?:\.\d+)?)"', rename, text)


@pytest.mark.parametrize("model", ["resnet_small", "mobilenet_small", "transformer_block"])
@pytest.mark.parametrize("chunk_fmas", [1 << 10, 1 << 21])
def test_keyed_tasks_build_what_the_merge_would_keep(model, chunk_fmas, monkeypatch) -> None:
    """Chunks built once per key (``KEYED_TASKS``, ``Split.key``) give the program the merge
    gives when every GEMM builds its own: the keys miss nothing the code depends on."""
    from pathlib import Path

    from compiler.backends.llvm.codegen import generate
    from compiler.backends.llvm.executor import _lir_and_plan
    from compiler.pipeline import compile_model

    monkeypatch.setattr(parallel, "CHUNK_FMAS", chunk_fmas)  # many chunks, or the default
    path = Path(__file__).resolve().parents[3] / "sample_models" / f"{model}.onnx"
    lir, plan = _lir_and_plan(compile_model(str(path)))
    texts = []
    for keyed in (False, True):
        monkeypatch.setattr(gemm, "KEYED_TASKS", keyed)
        texts.append(_canonical(generate(lir, plan).ir_text))
    assert texts[0] == texts[1]
    assert "task0" in texts[0] or chunk_fmas > 1 << 10


@pytest.mark.parametrize("shared", [False, True])
@pytest.mark.parametrize("threads", [1, 2])
def test_chunks_past_the_last_panel_or_tile_do_not_run_the_tail(shared, threads, monkeypatch):
    """A chunk grid that overshoots (5 panels in 4 chunks of 2; 5 tiles in 4 chunks of 2)
    leaves the last chunk an empty range: it must not run the tail panel or tail tile too.
    It did, adding A @ B into C twice in an accumulating GEMM (wrong on any thread count) and,
    with several K blocks, racing with the owner on two threads (ResNet-50's 7x7 1x1 convs:
    43 panels in 24 chunks of 2)."""
    monkeypatch.setattr(gemm, "SHARED_CHUNKS", shared)
    isa = "avx512"
    cfg = gemm_config(isa)
    nr, mr, kc = cfg.nr, cfg.mr, cfg.kc
    # (M, N, K): 2 tiles x 5 panels (the last a tail), and 5 tiles (the last a tail) x 1 panel.
    for M, N, K in [(2 * mr, 4 * nr + 3, 2 * kc + 7), (4 * mr + 3, nr, kc + 9)]:
        monkeypatch.setattr(parallel, "CHUNK_FMAS", M * N * K // 4)  # four chunks
        strides = dict(a_stride=K, b_stride=N, c_stride=N)

        def emit(m: ir.Module, M=M, N=N, K=K, strides=strides) -> list:
            emit_matmul(m, "mm", M, N, K, **strides, b_packed=True, isa=isa, accumulate=True)
            return []

        # Kept between runs (emitted.py): CHUNK_FMAS and SHARED_CHUNKS are in the key as set.
        compiled, _ = compile_emitted(f"overshooting chunks {isa} {(M, N, K)}", emit, __file__)
        if threads > 1:
            compiled.set_threads(threads)
        rng = np.random.default_rng(3)
        a = rng.standard_normal((M, K), dtype=np.float32)
        bm = rng.standard_normal((K, N), dtype=np.float32)
        packed = pack_b_constant(bm, isa=isa)
        for _ in range(5 if threads > 1 else 1):
            c = np.ones((M, N), dtype=np.float32)
            compiled.cfunc("mm")(a.ctypes.data, packed.ctypes.data, c.ctypes.data)
            ref = a.astype(np.float64) @ bm.astype(np.float64) + 1.0
            np.testing.assert_allclose(c, ref, rtol=1e-4, atol=1e-4 * np.sqrt(K))
