"""Every conv strategy that applies, forced on the same shapes, against the reference kernel.

The grid holds tiny convolutions (1x1 to 5x5 inputs, 1x1 and 3x3 kernels, strides 1-3, pads
0-2 and asymmetric ones, dilation 1-2, groups 1, 2 and depthwise) where the window sticks out
of the input; each strategy's kernels for the whole grid are compiled as one module. Inputs,
filters and biases sit between NaN guard zones and the output between sentinel zones, so a read
past a buffer shows as NaN and a write past one as a changed sentinel; every kernel runs twice
and must give bit-identical results. ``GLOWVIZ_CONV_GRID=full`` runs the whole product.
Through the emitter: ``LLVMExecutor(conv_strategy=...)`` and ``$GLOWVIZ_CONV_STRATEGY`` against
the arena interpreter, and the error for a strategy that does not apply.
"""

from __future__ import annotations

import itertools
import os

import numpy as np
import onnx
import pytest
from llvmlite import ir
from onnx import TensorProto, helper, numpy_helper

from compiler.backends.interpreter.arena import ArenaInterpreter
from compiler.backends.llvm import target
from compiler.backends.llvm.executor import LLVMExecutor, _lir_and_plan
from compiler.backends.llvm.jit import JITEngine
from compiler.backends.llvm.kernels.conv import (
    STRATEGY_NAMES,
    ConvShape,
    applicable,
    conv_shape,
    emit_conv2d,
)
from compiler.backends.llvm.kernels.direct import padded_size
from compiler.errors import CodegenError
from compiler.kernels.reference_nn import conv as reference_conv
from compiler.pipeline import compile_model
from tests.backends.llvm.emitted import compile_emitted

GUARD = 64  # floats of guard zone on each side of every buffer
SENTINEL = np.float32(-7.25)

# (C, K, group): plain; grouped, depthwise, depthwise with channel multiplier 2
PLAIN = (3, 16, 1)
GROUPED = [(4, 6, 2), (4, 4, 4), (3, 6, 3)]
PADS = [(0, 0, 0, 0), (1, 1, 1, 1), (2, 2, 2, 2), (0, 1, 1, 0), (2, 0, 1, 2)]


def _grid(full: bool) -> list[tuple[dict, ConvShape]]:
    """Conv configurations: every (input size, kernel, stride, pads) combination with one plain
    conv (dilation alternating) and, every other combination, a grouped one (dilation and
    grouping rotating); ``full``: the whole product with every dilation and grouping."""
    out = []
    combos = itertools.product(range(1, 6), (1, 3), (1, 2, 3), PADS)
    for i, (hw, k, st, pads) in enumerate(combos):
        if full:
            variants = list(itertools.product((1, 2), [PLAIN, *GROUPED]))
        else:
            variants = [((1, 2)[i % 2], PLAIN)]
            if i % 2:
                variants.append(((1, 2)[(i // 2) % 2], GROUPED[(i // 2) % len(GROUPED)]))
        for dil, (c, kk, g) in variants:
            out.append(dict(H=hw, W=hw, R=k, S=k, stride=st, pad=pads, dil=dil, C=c, K=kk, group=g))
    # The fuzzing campaign's cases (issue 11), whatever the rotation above chose.
    out += [
        dict(H=1, W=1, R=3, S=3, stride=2, pad=(1, 1, 1, 1), dil=1, C=3, K=16, group=1),
        dict(H=1, W=1, R=1, S=1, stride=1, pad=(0, 0, 0, 0), dil=1, C=3, K=16, group=1),
        dict(H=1, W=1, R=1, S=1, stride=2, pad=(1, 1, 1, 1), dil=1, C=4, K=6, group=2),
        dict(H=4, W=5, R=3, S=3, stride=2, pad=(0, 1, 2, 0), dil=1, C=3, K=16, group=1),
        dict(H=5, W=4, R=3, S=3, stride=2, pad=(1, 0, 0, 2), dil=2, C=4, K=6, group=2),
        dict(H=3, W=3, R=3, S=3, stride=2, pad=(1, 1, 1, 1), dil=2, C=4, K=4, group=4),
        dict(H=2, W=3, R=3, S=1, stride=(3, 2), pad=(2, 1, 1, 2), dil=(2, 1), C=3, K=16, group=1),
    ]
    valid = []
    for cfg in out:
        try:
            valid.append((cfg, _shape(cfg)))
        except ValueError:
            pass  # an empty output: not a conv
    return valid


def _shape(cfg: dict):
    return conv_shape(
        1,
        cfg["C"],
        cfg["H"],
        cfg["W"],
        cfg["K"],
        cfg["R"],
        cfg["S"],
        stride=cfg["stride"],
        pad=cfg["pad"],
        dilation=cfg["dil"],
        group=cfg["group"],
    )


GRID = _grid(os.environ.get("GLOWVIZ_CONV_GRID") == "full")


def _guarded(a: np.ndarray, fill: float) -> tuple[np.ndarray, np.ndarray]:
    """(buffer, view): ``a`` copied between two guard zones of ``fill``."""
    buf = np.full(a.size + 2 * GUARD, fill, dtype=np.float32)
    view = buf[GUARD : GUARD + a.size]
    view[:] = np.ravel(a)
    return buf, view


def emit_for_shape(module: ir.Module, name: str, s: ConvShape, w: np.ndarray, **options):
    """`emit_conv2d` of the conv `s` (batch 1) with filter `w`; `options`: its other arguments."""
    dims = dict(N=1, C=s.C, H=s.H, W=s.W, K=s.K, R=s.R, S=s.S, group=s.group)
    window = dict(stride=s.stride, pad=s.pad, dilation=s.dilation)
    return emit_conv2d(module, name, **dims, **window, weights=w, **options)


def _run_grid(strategy: str, isa: str | None, configs: list) -> None:
    rng = np.random.default_rng(7)
    data = []
    for cfg, s in configs:
        x = rng.standard_normal((1, s.C, s.H, s.W)).astype(np.float32)
        w = rng.standard_normal((s.K, s.Cg, s.R, s.S)).astype(np.float32)
        bias = rng.standard_normal(s.K).astype(np.float32)
        data.append((cfg, s, x, w, bias))
    assert data, f"no grid shape for {strategy}"

    def emit(module: ir.Module) -> list:
        return [
            emit_for_shape(module, f"cv{n}", s, w, isa=isa, strategy=strategy)
            for n, (_, s, _, w, _) in enumerate(data)
        ]

    # Kept between runs under a key of the code generator and these inputs (emitted.py).
    what = f"conv grid {strategy} isa {isa} seed 7 {[cfg for cfg, _ in configs]!r}"
    compiled, kernels = compile_emitted(what, emit, __file__)
    cases = []
    for (cfg, s, x, w, bias), (made, packed) in zip(data, kernels, strict=True):
        assert made == strategy
        cases.append((cfg, s, x, w, bias, packed))
    failures = []
    for n, (_, s, x, w, bias, packed) in enumerate(cases):
        bufs = [_guarded(a, np.nan) for a in (x, packed, bias)]
        obuf, out = _guarded(np.zeros(s.K * s.OH * s.OW, np.float32), SENTINEL)
        fn = compiled.cfunc(f"cv{n}")
        args = (
            bufs[0][1].ctypes.data,
            bufs[1][1].ctypes.data,
            out.ctypes.data,
            bufs[2][1].ctypes.data,
        )
        fn(*args)
        first = out.copy()
        out[:] = SENTINEL
        fn(*args)
        attrs = dict(group=s.group, strides=s.stride, dilations=s.dilation, pads=s.pad)
        attrs.update(activation="none", act_args=())
        want = reference_conv(
            [x.astype(np.float64), w.astype(np.float64), bias.astype(np.float64)], attrs
        )[0]
        got = out.reshape(want.shape)
        tol = 1e-4 * np.sqrt(s.Cg * s.R * s.S)
        if not np.allclose(got, want, rtol=1e-4, atol=tol):
            err = np.nanmax(np.abs(got - want)) if not np.isnan(got).any() else np.nan
            failures.append(f"{s}: max error {err}")
        elif not np.array_equal(first, out):
            failures.append(f"{s}: two runs differ")
        elif not (np.all(obuf[:GUARD] == SENTINEL) and np.all(obuf[-GUARD:] == SENTINEL)):
            failures.append(f"{s}: wrote outside its output")
    assert not failures, f"{strategy}: {len(failures)} of {len(cases)} wrong:\n" + "\n".join(
        failures[:20]
    )


@pytest.mark.slow  # 10-30 s a strategy: O3 over a module of the whole grid's kernels
@pytest.mark.parametrize("strategy", STRATEGY_NAMES)
def test_every_strategy_on_the_grid(strategy: str, monkeypatch) -> None:
    _run_grid(strategy, None, [(c, s) for c, s in GRID if strategy in applicable(s)])


@pytest.mark.parametrize("isa", [i for i in ("avx2", "generic") if i != target.default_isa()])
@pytest.mark.parametrize("strategy", STRATEGY_NAMES)
def test_strategies_on_other_isas(strategy: str, isa: str, monkeypatch) -> None:
    """The register tiles and vector widths of the other ISAs, on every 10th grid shape (or,
    for a row that applies to none of those, on its first three)."""
    mine = [(c, s) for c, s in GRID if strategy in applicable(s)]
    tenth = [(c, s) for c, s in GRID[::10] if strategy in applicable(s)]
    _run_grid(strategy, isa, tenth or mine[:3])


def test_the_grid_reaches_every_strategy() -> None:
    for name in STRATEGY_NAMES:
        assert sum(name in applicable(s) for _, s in GRID) >= 5, name


def test_forced_strategy_that_does_not_apply_is_refused() -> None:
    w = np.ones((6, 1, 3, 3), np.float32)  # depthwise: no GEMM over the whole image
    kw = dict(N=1, C=3, H=5, W=5, K=6, R=3, S=3, weights=w, stride=2, pad=1, group=3)
    with pytest.raises(CodegenError, match="'padded-shift-gemm' does not apply.*these do: "):
        emit_conv2d(ir.Module(), "cv", strategy="padded-shift-gemm", **kw)
    with pytest.raises(CodegenError, match="unknown conv strategy 'fft'"):
        emit_conv2d(ir.Module(), "cv", strategy="fft", **kw)


# -- through the emitter table and the executor ------------------------------------------------

F = TensorProto.FLOAT


def _conv_model(
    C, H, W, K, k, *, stride=1, pads=(0, 0, 0, 0), dil=1, group=1, act=None, runtime_w=False
):
    rng = np.random.default_rng(3)
    w = (rng.standard_normal((K, C // group, k, k)) * 0.3).astype(np.float32)
    b = rng.standard_normal(K).astype(np.float32)
    conv = helper.make_node(
        "Conv",
        ["x", "w", "b"],
        ["c"],
        strides=[stride] * 2,
        pads=list(pads),
        dilations=[dil] * 2,
        group=group,
    )
    nodes = [conv, helper.make_node(act or "Identity", ["c"], ["y"])]
    inputs = [helper.make_tensor_value_info("x", F, [1, C, H, W])]
    inits = [numpy_helper.from_array(b, "b")]
    if runtime_w:
        inputs.append(helper.make_tensor_value_info("w", F, list(w.shape)))
    else:
        inits.append(numpy_helper.from_array(w, "w"))
    graph = helper.make_graph(
        nodes, "g", inputs, [helper.make_tensor_value_info("y", F, None)], inits
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model = onnx.shape_inference.infer_shapes(model)  # the checker wants the output's shape
    feed = {"x": rng.standard_normal((1, C, H, W)).astype(np.float32)}
    if runtime_w:
        feed["w"] = w
    return model, feed


EXECUTOR_CASES = [
    # name, model arguments
    ("stem", dict(C=3, H=9, W=10, K=32, k=3, stride=2, pads=(1, 1, 1, 1))),
    ("tiny-s2", dict(C=3, H=1, W=1, K=16, k=3, stride=2, pads=(1, 1, 1, 1), act="Relu")),
    ("stride1", dict(C=4, H=9, W=9, K=8, k=3, pads=(1, 0, 2, 1), act="Sigmoid")),
    ("pointwise", dict(C=8, H=3, W=4, K=8, k=1)),
    ("depthwise", dict(C=6, H=5, W=7, K=6, k=3, stride=2, pads=(1, 1, 1, 1), group=6, act="Relu")),
    # 5x5 stride 2: depthwise reads the padded copy split into column phases
    ("depthwise-5x5s2", dict(C=6, H=11, W=13, K=12, k=5, stride=2, pads=(2, 1, 2, 2), group=6)),
    ("depthwise-5x5s2-odd", dict(C=4, H=9, W=36, K=4, k=5, stride=2, pads=(1, 2, 0, 1), group=4)),
    ("dilated-grouped", dict(C=4, H=5, W=5, K=6, k=3, stride=2, pads=(2, 1, 0, 1), dil=2, group=2)),
    ("runtime-filter", dict(C=4, H=6, W=5, K=6, k=3, pads=(1, 1, 1, 1), group=2, runtime_w=True)),
    # rows longer than UNROLL_FLOATS are copied by a loop and a tail, not unrolled
    ("wide-row-s2", dict(C=3, H=3, W=1201, K=8, k=3, stride=2, pads=(1, 1, 1, 1))),
    ("wide-row", dict(C=4, H=2, W=1013, K=8, k=3, pads=(1, 2, 1, 0), act="Relu")),
    # 49 and 35 pixel rows: 7-row register tiles (``fit_mr``) in pixel-rows-gemm
    ("plane-7x7", dict(C=20, H=7, W=7, K=40, k=3, pads=(1, 1, 1, 1), act="Relu")),
    ("plane-5x7", dict(C=70, H=5, W=7, K=24, k=1)),
    # pixel-rows' register transpose of vw x vw blocks (conv_gemm.VECTOR_TRANSPOSE): a pixel
    # and a channel tail (36 pixels, 33 channels), and whole blocks only (32 x 48)
    ("plane-6x6-k33", dict(C=20, H=6, W=6, K=33, k=1, act="Relu")),
    ("plane-4x8-k48", dict(C=24, H=4, W=8, K=48, k=1)),
    # strides above 2 load only a tail vector's valid lanes (the padded copy has no slack for
    # the rest): one full vector and a tail, a depthwise one, and a stride past the image
    ("stride3-tail", dict(C=3, H=7, W=60, K=16, k=3, stride=3, pads=(1, 1, 1, 1))),
    ("depthwise-s3", dict(C=4, H=7, W=60, K=4, k=3, stride=3, pads=(1, 1, 1, 1), group=4)),
    ("stride-1000", dict(C=3, H=5, W=5, K=8, k=3, stride=1000, pads=(1, 1, 1, 1), act="Relu")),
]


def lir_conv_shape(conv) -> ConvShape:
    """The ConvShape of a LIR conv instruction."""
    x, w = (v for v, _ in conv.operands[1:3])
    return conv_shape(
        *x.type.shape,
        w.type.shape[0],
        *w.type.shape[2:],
        stride=tuple(conv.attrs["strides"]),
        pad=tuple(conv.attrs["pads"]),
        dilation=tuple(conv.attrs["dilations"]),
        group=conv.attrs["group"],
    )


def _lir(model):
    return _lir_and_plan(compile_model(model))


@pytest.mark.parametrize("case", EXECUTOR_CASES, ids=[c[0] for c in EXECUTOR_CASES])
def test_executor_runs_every_applicable_strategy(case, monkeypatch) -> None:
    args = dict(case[1])
    model, feed = _conv_model(**args)
    lir, plan = _lir(model)
    want = ArenaInterpreter(lir, plan).run(feed)
    (conv,) = [i for i in lir.code if i.kind == "conv"]
    s = lir_conv_shape(conv)
    names = applicable(s, constant=not args.get("runtime_w", False))
    assert "direct" in names and len(names) >= (1 if args.get("runtime_w") else 2)
    for name in names:
        ex = LLVMExecutor(lir, plan, conv_strategy=name)
        assert ex.strategy(lir.code.index(conv)).startswith(name)
        got = ex.run(feed)
        for k in want:
            # F(4x4, 3x3)'s transforms have coefficients up to 8 (A^T) and 5 (B^T) and cancel
            # terms larger than the result: measured 5-8x a direct GEMM's rounding error,
            # ~1e-5 of the outputs' magnitude (3e-5 on plane-7x7's), so for it alone an
            # absolute tolerance of 2e-5 of that magnitude (tests/backends/llvm/test_winograd.py
            # has the measurements).
            scale = float(np.abs(want[k]).max())
            atol = max(1e-5, 2e-5 * scale) if name == "winograd-4x4" else 1e-5
            np.testing.assert_allclose(got[k], want[k], rtol=1e-4, atol=atol, err_msg=name)
        again = ex.run(feed)
        for k in want:
            np.testing.assert_array_equal(again[k], got[k], err_msg=f"{name}: two runs differ")


def test_env_var_forces_a_strategy_and_refuses_one_that_does_not_apply(
    monkeypatch
) -> None:
    model, feed = _conv_model(C=3, H=6, W=6, K=4, k=3, stride=2, pads=(1, 1, 1, 1))
    lir, plan = _lir(model)
    idx = next(i for i, ins in enumerate(lir.code) if ins.kind == "conv")
    monkeypatch.setenv("GLOWVIZ_CONV_STRATEGY", "direct")
    assert LLVMExecutor(lir, plan).strategy(idx) == "direct"
    monkeypatch.setenv("GLOWVIZ_CONV_STRATEGY", "depthwise-direct")
    with pytest.raises(CodegenError, match=r"instruction '.*'.*'depthwise-direct' does not apply"):
        LLVMExecutor(lir, plan)
    monkeypatch.delenv("GLOWVIZ_CONV_STRATEGY")
    assert LLVMExecutor(lir, plan).strategy(idx) == "implicit-gemm"


def _pointwise_family_model(channels: list[int], K: int = 24, H: int = 5, W: int = 7):
    """One 1x1 conv per input of ``channels`` channels (odd plane), summed: the first two with a
    ReLU, the rest accumulating into the sum (the sum post-op)."""
    rng = np.random.default_rng(5)
    nodes, inputs, inits, feed = [], [], [], {}
    acc = None
    for i, c in enumerate(channels):
        inputs.append(helper.make_tensor_value_info(f"x{i}", F, [1, c, H, W]))
        feed[f"x{i}"] = rng.standard_normal((1, c, H, W)).astype(np.float32)
        w = (rng.standard_normal((K, c, 1, 1)) / np.sqrt(c)).astype(np.float32)
        inits += [numpy_helper.from_array(w, f"w{i}")]
        inits += [numpy_helper.from_array(rng.standard_normal(K).astype(np.float32), f"b{i}")]
        nodes.append(helper.make_node("Conv", [f"x{i}", f"w{i}", f"b{i}"], [f"c{i}"]))
        out = f"c{i}"
        if i < 2:
            nodes.append(helper.make_node("Relu", [out], [f"r{i}"]))
            out = f"r{i}"
        if acc is not None:
            nodes.append(helper.make_node("Add", [acc, out], [f"s{i}"]))
            out = f"s{i}"
        acc = out
    nodes.append(helper.make_node("Identity", [acc], ["y"]))
    graph = helper.make_graph(
        nodes, "g", inputs, [helper.make_tensor_value_info("y", F, None)], inits
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    return onnx.shape_inference.infer_shapes(model), feed


@pytest.mark.parametrize(
    "strategy, channels, K",
    [("gemm-1x1", [40, 60, 300, 480, 33], 24), ("pixel-rows-gemm", [70, 100, 300, 480, 65], 72)],
)
def test_pointwise_convs_share_a_kernel_across_channel_counts(
    strategy, channels, K, monkeypatch
) -> None:
    """1x1 convs that differ only in their input channels run one kernel taking them as an
    argument (one per K-block class and power of two: the first two, and the next two), on
    one thread and two, against the interpreter and bit-identical between thread counts."""
    model, feed = _pointwise_family_model(channels, K)
    lir, plan = _lir(model)
    want = ArenaInterpreter(lir, plan).run(feed)
    convs = [i for i, ins in enumerate(lir.code) if ins.kind == "conv"]
    one = LLVMExecutor(lir, plan)
    assert {one.strategy(i) for i in convs} == {strategy}
    names = [one.kernels_of(i)[0] for i in convs]
    assert names[0] == names[1] and names[2] == names[3] and len(set(names)) == 3
    got = one.run(feed)
    np.testing.assert_allclose(got["y"], want["y"], rtol=1e-4, atol=1e-4)
    two = LLVMExecutor(lir, plan, threads=2).run(feed)
    np.testing.assert_array_equal(two["y"], got["y"])


@pytest.mark.parametrize("K", [72, 33])
def test_pixel_rows_register_transpose_changes_no_bits(K, monkeypatch) -> None:
    """The pixel-rows output transpose through registers (``VECTOR_TRANSPOSE``), with the
    sum post-op's adds, gives the bits of the scalar one, and both match the interpreter."""
    from compiler.backends.llvm.kernels import conv_gemm

    model, feed = _pointwise_family_model([70, 100, 300], K)
    lir, plan = _lir(model)
    want = ArenaInterpreter(lir, plan).run(feed)
    outs = []
    for on in (True, False):
        monkeypatch.setattr(conv_gemm, "VECTOR_TRANSPOSE", on)
        ex = LLVMExecutor(lir, plan, conv_strategy="pixel-rows-gemm")
        convs = [i for i, ins in enumerate(lir.code) if ins.kind == "conv"]
        assert {ex.strategy(i) for i in convs} == {"pixel-rows-gemm"}
        outs.append(ex.run(feed)["y"])
    np.testing.assert_allclose(outs[0], want["y"], rtol=1e-4, atol=1e-4)
    np.testing.assert_array_equal(outs[0], outs[1])


@pytest.mark.parametrize("n", [4, 8, 16])
def test_transpose_square_transposes(n: int) -> None:
    from compiler.backends.llvm.kernels.common import transpose_square

    vt = ir.VectorType(ir.FloatType(), n)
    module = ir.Module(name="t")
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [ir.PointerType()] * 2), "tr")
    b = ir.IRBuilder(fn.append_basic_block())
    src, dst = fn.args

    def at(p: ir.Value, i: int) -> ir.Value:
        return b.gep(p, [ir.Constant(ir.IntType(64), i * n)], source_etype=ir.FloatType())

    rows = [b.load(at(src, i), typ=vt, align=4) for i in range(n)]
    for i, v in enumerate(transpose_square(b, rows)):
        b.store(v, at(dst, i), align=4)
    b.ret_void()
    a = np.arange(n * n, dtype=np.float32).reshape(n, n)
    out = np.zeros_like(a)
    compiled = JITEngine().compile(module)  # held: its code lives as long as it does
    compiled.cfunc("tr")(a.ctypes.data, out.ctypes.data)
    np.testing.assert_array_equal(out, a.T)


def test_fit_mr_picks_a_tile_height_that_divides_the_rows() -> None:
    from compiler.backends.llvm.kernels.conv_gemm import fit_mr

    assert [fit_mr(m, 8) for m in (49, 35, 48, 196, 197, 12, 1)] == [7, 7, 8, 8, 8, 6, 8]
    assert [fit_mr(m, 6) for m in (49, 25, 20)] == [6, 5, 5]


def test_the_padded_copy_does_not_grow_with_the_stride() -> None:
    """A stride of 2**31 once asked for a 275 GB padded-input buffer (fuzz mutant 1909)."""
    for stride in (1, 2, 3, 2**31):
        s = conv_shape(1, 3, 9, 9, 8, 3, 3, stride=(stride, stride), pad=(1, 1, 1, 1))
        hp, wp, size = padded_size(s, 16)
        assert hp * wp <= size <= hp * wp + 2 * 16 * 2 + 2 * 1 + 1


#: Planes of several GEMM column chunks and NR panels, for the kernels whose layout depends on
#: the row length (padded-shift's rows that share their padding columns, its column chunks,
#: the 8x3 tile's 48-wide panels): every pad split and a dilation, wider than the grid's 5x5.
WIDE = [
    dict(H=h, W=w, R=3, S=3, stride=st, pad=pads, dil=dil, C=3, K=20, group=1)
    for (h, w), st, pads, dil in [
        ((30, 29), 1, (1, 1, 1, 1), 1),
        ((14, 14), 1, (0, 2, 1, 0), 1),
        ((17, 23), 1, (2, 1, 0, 3), 2),
        ((7, 40), 1, (1, 0, 1, 0), 1),
        ((9, 9), 1, (3, 3, 3, 3), 1),
        ((28, 28), 2, (1, 1, 1, 1), 1),
    ]
]


@pytest.mark.parametrize(
    "strategy", ["padded-shift-gemm", "implicit-gemm", "pixel-rows-gemm", "direct-lanes"]
)
def test_gemm_strategies_on_wide_planes(strategy: str, monkeypatch) -> None:
    _run_grid(strategy, None, [(c, _shape(c)) for c in WIDE])


#: ``direct-lanes``'s tails: output channels short of the lanes (6 on 8-lane vectors, 21 = a
#: block and 5, 40), rows split into column runs (29, 50 wide), row tiles with a remainder,
#: strides 2 and 3, dilation 2, asymmetric pads, unpadded planes, many input channels.
LANES = [
    dict(H=h, W=w, R=r, S=r, stride=st, pad=pads, dil=dil, C=c, K=k, group=1)
    for (h, w), r, st, pads, dil, c, k in [
        ((28, 28), 5, 1, (2, 2, 2, 2), 1, 1, 6),
        ((14, 14), 5, 1, (0, 0, 0, 0), 1, 6, 16),
        ((11, 29), 3, 1, (1, 0, 2, 1), 1, 5, 21),
        ((9, 50), 3, 2, (0, 1, 1, 0), 1, 3, 40),
        ((13, 7), 5, 1, (2, 2, 2, 2), 2, 4, 17),
        ((10, 12), 3, 3, (1, 1, 1, 1), 1, 7, 9),
        ((7, 7), 3, 1, (0, 0, 0, 0), 1, 40, 24),
        ((5, 9), 1, 2, (0, 0, 1, 1), 1, 3, 12),
    ]
]


@pytest.mark.parametrize("isa", [None, "avx2"])
def test_direct_lanes_tails(isa, monkeypatch) -> None:
    _run_grid("direct-lanes", isa, [(c, _shape(c)) for c in LANES])


def test_direct_lanes_batches_and_epilogue(monkeypatch) -> None:
    """Two images, a fused ReLU, and the sum post-op (out = relu(out + conv)) against numpy."""
    rng = np.random.default_rng(11)
    N, C, H, W, K = 2, 3, 9, 11, 19
    x = rng.standard_normal((N, C, H, W)).astype(np.float32)
    w = rng.standard_normal((K, C, 3, 3)).astype(np.float32)
    bias = rng.standard_normal(K).astype(np.float32)
    module = ir.Module()
    kw = dict(N=N, C=C, H=H, W=W, K=K, R=3, S=3, weights=w, stride=2, pad=(1, 0, 1, 2))
    plain = emit_conv2d(module, "plain", activation="relu", strategy="direct-lanes", **kw)
    summed = emit_conv2d(
        module, "summed", activation="relu", accumulate=True, strategy="direct-lanes", **kw
    )
    compiled = JITEngine().compile(module)
    attrs = dict(group=1, strides=(2, 2), dilations=(1, 1), pads=(1, 0, 1, 2))
    attrs.update(activation="none", act_args=())
    conv = reference_conv([x.astype(np.float64), w.astype(np.float64), bias], attrs)[0]
    prior = rng.standard_normal(conv.shape).astype(np.float32)
    for ck, start, want in [
        (plain, np.zeros(conv.shape, np.float32), np.maximum(conv, 0)),
        (summed, prior.copy(), np.maximum(prior + conv, 0)),
    ]:
        out = np.ascontiguousarray(start)
        packed = np.ascontiguousarray(ck.packed_weights)
        ptrs = (a.ctypes.data for a in (x, packed, out, bias))
        compiled.cfunc(ck.fn.name)(*ptrs)
        np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-4, err_msg=ck.fn.name)


def test_direct_lanes_is_chosen_where_it_was_measured_faster() -> None:
    """LeNet's second conv (6->16, 5x5 on 14x14) on hosts of 8 or more lanes; never for 1x1
    filters, outputs over MAX_PIXELS, inputs over MAX_INPUT_BYTES, channels short of 8 lanes
    or 3/4 of them, and not where
    an earlier row (the stem's direct-vector, Winograd) is preferred."""
    from compiler.backends.llvm.kernels import lanes
    from compiler.backends.llvm.kernels.conv import select
    from compiler.backends.llvm.kernels.gemm import conv_gemm_config

    wide = conv_gemm_config().vw >= 8
    lenet2 = conv_shape(1, 6, 14, 14, 16, 5, 5)
    assert (select(lenet2).name == "direct-lanes") == wide
    assert select(conv_shape(1, 1, 28, 28, 6, 5, 5, pad=2)).name == "direct-vector"
    assert not lanes.prefers(conv_shape(1, 16, 12, 12, 4, 3, 3, pad=1))  # 4 lanes
    assert not lanes.prefers(conv_shape(1, 16, 12, 12, 16, 1, 1, stride=2))  # 1x1
    assert not lanes.prefers(conv_shape(1, 16, 28, 28, 16, 5, 5, pad=2))  # 784 pixels
    assert not lanes.prefers(conv_shape(1, 8, 16, 16, 24, 5, 5, pad=2))  # 24 of 32 lanes
    assert lanes.prefers(conv_shape(1, 16, 16, 16, 32, 3, 3, stride=2, pad=1)) == wide
    assert not lanes.prefers(conv_shape(1, 256, 28, 28, 256, 3, 3, stride=2, pad=1))  # > L1
    assert select(conv_shape(1, 32, 16, 16, 32, 3, 3, pad=1)).name.startswith("winograd")
