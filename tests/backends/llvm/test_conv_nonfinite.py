"""Infinite and NaN filter weights: NaN and infinities land where onnxruntime puts them, on the
interpreter and on every conv strategy of the LLVM executor (issue 11 item 5).

A padded tap contributes nothing: onnxruntime's plain and depthwise convolutions skip it (0 * inf
would be NaN all along the border); its grouped ones multiply it, and there the float64
reference, which skips it too, is the answer (`GROUPED_PADDED`). The interpreter goes tap by
tap over the input region each tap reads; the LLVM executor gives a padded conv with a
non-finite constant filter the ``direct`` row, the one that skips padded taps, whatever strategy
is forced; an unpadded one keeps the forced strategy, but for ``winograd`` (its filter
transform adds taps together: one infinite tap would give inf - inf elsewhere), which gives
way to ``direct`` too.
The comparison treats NaN positions and infinities as data (`tests/fuzz/oracle.compare`).
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from compiler.backends.interpreter.arena import ArenaInterpreter
from compiler.backends.llvm.executor import LLVMExecutor, _lir_and_plan
from compiler.backends.llvm.kernels.conv import applicable
from compiler.pipeline import compile_model
from tests.backends.llvm.test_conv_strategies import lir_conv_shape
from tests.fuzz.oracle import compare, run_onnxruntime, run_reference64

F = TensorProto.FLOAT

# name: C, K, H, W, kernel, stride, pads, dilation, group, activation. onnxruntime's grouped
# (not depthwise) conv multiplies the padding (im2col): grouped padded shapes are below.
SHAPES = {
    "stem": (3, 16, 9, 10, 3, 2, (1, 1, 1, 1), 1, 1, None),
    "plain": (8, 16, 6, 6, 3, 1, (1, 1, 1, 1), 1, 1, "Relu"),
    "wide-pads": (4, 8, 5, 7, 3, 1, (2, 0, 1, 2), 1, 1, None),
    "dilated": (4, 8, 7, 7, 3, 1, (2, 2, 2, 2), 2, 1, None),
    "tiny": (3, 16, 1, 1, 3, 2, (1, 1, 1, 1), 1, 1, "Relu"),
    "depthwise": (8, 8, 6, 6, 3, 2, (1, 1, 1, 1), 1, 8, "Relu"),
    "unpadded": (8, 16, 6, 6, 3, 1, (0, 0, 0, 0), 1, 1, None),
    "pointwise": (8, 16, 4, 4, 1, 1, (0, 0, 0, 0), 1, 1, None),
    "grouped-unpadded": (4, 6, 6, 6, 3, 1, (0, 0, 0, 0), 1, 2, None),
}


# Padded convs onnxruntime computes by im2col over a zero-padded copy: grouped ones, and
# depthwise ones with a channel multiplier (its depthwise kernel takes one filter per input
# channel only). There an infinite tap in the padding gives 0 * inf = NaN along the border.
# Decided: a padded tap adds nothing on every conv (as onnxruntime's other convs do), so these
# follow the float64 reference, which skips padded taps too (tests/fuzz/oracle.py's Conv).
GROUPED_PADDED = {
    "grouped": (4, 6, 6, 6, 3, 1, (1, 1, 1, 1), 1, 2, None),
    "grouped-dilated-stride2": (8, 8, 7, 7, 3, 2, (2, 1, 2, 1), 2, 4, "Relu"),
    "depthwise-multiplier-2": (4, 8, 6, 6, 3, 1, (1, 1, 1, 1), 1, 4, None),
    "grouped-tiny": (4, 8, 1, 1, 3, 2, (1, 1, 1, 1), 1, 2, None),
}


def _model(name: str) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    C, K, H, W, k, st, pads, dil, g, act = {**SHAPES, **GROUPED_PADDED}[name]
    rng = np.random.default_rng(11)
    w = rng.standard_normal((K, C // g, k, k)).astype(np.float32)
    # a corner tap (padded on the border), a centre tap, and a NaN in another channel
    w[0, 0, 0, 0] = np.inf
    w[1 % K, 0, k // 2, k // 2] = -np.inf
    w[2 % K, -1, k - 1, 0] = np.nan
    b = rng.standard_normal(K).astype(np.float32)
    x = rng.standard_normal((1, C, H, W)).astype(np.float32)
    x[0, 0, 0, 0] = 0.0  # 0 * inf inside the input is NaN everywhere
    conv = helper.make_node(
        "Conv",
        ["x", "w", "b"],
        ["c"],
        kernel_shape=[k, k],
        strides=[st, st],
        pads=list(pads),
        dilations=[dil, dil],
        group=g,
    )
    nodes = [conv, helper.make_node(act or "Identity", ["c"], ["y"])]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", F, [1, C, H, W])],
        [helper.make_tensor_value_info("y", F, None)],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    return onnx.shape_inference.infer_shapes(model), {"x": x}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_nonfinite_filter_matches_onnxruntime_on_every_strategy(name: str) -> None:
    model, feed = _model(name)
    want = run_onnxruntime(model.SerializeToString(), feed)["y"]
    assert np.isnan(want).any() and np.isinf(want).any() or name == "tiny", name
    _agree_everywhere(model, feed, want)


def _agree_everywhere(
    model: onnx.ModelProto, feed: dict[str, np.ndarray], want: np.ndarray
) -> None:
    """The interpreter and every applicable LLVM conv strategy give `want`."""
    lir, plan = _lir_and_plan(compile_model(model))
    (got_i,) = ArenaInterpreter(lir, plan).run(feed).values()
    c = compare(got_i, want)
    assert c.ok, f"interpreter: {c.note}"
    (idx,) = [i for i, ins in enumerate(lir.code) if ins.kind == "conv"]
    s = lir_conv_shape(lir.code[idx])
    for strategy in applicable(s):
        ex = LLVMExecutor(lir, plan, conv_strategy=strategy)
        used = ex.strategy(idx)
        # winograd adds filter taps together (inf - inf): never on a non-finite filter
        direct = any(s.pad) or strategy.startswith("winograd")
        assert used.startswith("direct" if direct else strategy), (strategy, used)
        (got,) = ex.run(feed).values()
        c = compare(got, want)
        assert c.ok, f"{strategy} (ran {used}): {c.note}"


@pytest.mark.parametrize("name", sorted(GROUPED_PADDED))
def test_padded_grouped_conv_adds_nothing_for_padded_infinite_taps(name: str) -> None:
    model, feed = _model(name)
    want = run_reference64(model, feed)["y"]
    ort = run_onnxruntime(model.SerializeToString(), feed)["y"]
    # onnxruntime differs from the decided semantics by NaN in the padded border only: NaN
    # where the reference has none, never a NaN missing, every other element equal
    nan_extra = np.isnan(ort) & ~np.isnan(want)
    assert nan_extra.any() and not (np.isnan(want) & ~np.isnan(ort)).any(), name
    assert compare(np.where(nan_extra, want, ort), want).ok, name
    _agree_everywhere(model, feed, want)
