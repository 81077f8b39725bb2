"""The reference Conv in blocks of output rows (issue 11, mutant 1824: a U-Net 100,000 pixels
wide ran the interpreter out of its 3 GiB): the same answer for any block size, and temporaries
bounded by `CONV_BLOCK_BYTES` beyond the output."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

from compiler.kernels import reference_nn
from compiler.kernels.reference_nn import conv
from tests.fuzz.oracle import compare, run_onnxruntime

# N, C, H, W, K, group, kernel, strides, dilations, pads (top, left, bottom, right)
SHAPES = {
    "stem-stride2": (1, 3, 9, 10, 16, 1, (3, 3), (2, 2), (1, 1), (1, 1, 1, 1)),
    "batch-depthwise": (2, 8, 7, 7, 8, 8, (3, 3), (1, 2), (1, 1), (2, 0, 1, 2)),
    "grouped-dilated": (1, 8, 11, 5, 12, 4, (3, 2), (3, 1), (2, 1), (0, 1, 3, 0)),
    "tiny-input": (1, 4, 1, 1, 8, 2, (3, 3), (2, 2), (1, 1), (1, 1, 1, 1)),
    "tall-kernel": (1, 6, 20, 3, 6, 3, (5, 1), (2, 1), (1, 1), (4, 0, 4, 0)),
    "pads-beyond-input": (1, 2, 3, 3, 4, 1, (3, 3), (1, 1), (1, 1), (6, 6, 6, 6)),
    "kernel-beyond-input": (1, 2, 5, 5, 4, 1, (7, 7), (1, 1), (1, 1), (3, 3, 3, 3)),
    "nonfinite": (1, 4, 6, 6, 4, 2, (3, 3), (1, 1), (1, 1), (1, 1, 1, 1)),
}


def _case(name: str) -> tuple[list[np.ndarray], dict]:
    n, c, h, w, k, g, ks, st, dil, pads = SHAPES[name]
    rng = np.random.default_rng(5)
    x = rng.standard_normal((n, c, h, w)).astype(np.float32)
    wt = rng.standard_normal((k, c // g, *ks)).astype(np.float32)
    if name == "nonfinite":
        wt[0, 0, 0, 0], wt[1, 1, 1, 1], x[0, 1, 2, 2] = np.inf, np.nan, -np.inf
    b = rng.standard_normal(k).astype(np.float32)
    return [x, wt, b], {"group": g, "strides": st, "dilations": dil, "pads": pads}


def _onnxruntime(ins: list[np.ndarray], attrs: dict) -> np.ndarray:
    from onnx import TensorProto, helper, numpy_helper

    x, w, b = ins
    node = helper.make_node(
        "Conv",
        ["x", "w", "b"],
        ["y"],
        group=attrs["group"],
        strides=list(attrs["strides"]),
        dilations=list(attrs["dilations"]),
        pads=list(attrs["pads"]),
        kernel_shape=list(w.shape[2:]),
    )
    graph = helper.make_graph(
        [node],
        "conv",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x.shape))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    return run_onnxruntime(model, {"x": x})["y"]


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_any_block_size_gives_the_same_answer(name: str, monkeypatch) -> None:
    ins, attrs = _case(name)
    with np.errstate(invalid="ignore"):
        whole = conv(ins, attrs)[0]
        for block in (1, 200, 1000):  # one output row per block, a few, most
            monkeypatch.setattr(reference_nn, "CONV_BLOCK_BYTES", block)
            got = conv(ins, attrs)[0]
            c = compare(got, whole, rtol=1e-6)
            assert c.ok, (block, c.note, c.max_rel)
    if name != "nonfinite":  # onnxruntime's grouped conv multiplies the padding (0 * inf)
        c = compare(whole, _onnxruntime(ins, attrs))
        assert c.ok, c.note


def test_temporaries_are_bounded_by_the_block(monkeypatch) -> None:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 16, 64, 2048)).astype(np.float32)  # 8 MiB
    w = rng.standard_normal((16, 16, 3, 3)).astype(np.float32)
    b = np.zeros(16, np.float32)
    attrs = {"group": 1, "strides": (1, 1), "dilations": (1, 1), "pads": (1, 1, 1, 1)}
    block = 1 << 20
    monkeypatch.setattr(reference_nn, "CONV_BLOCK_BYTES", block)
    tracemalloc.start()
    try:
        y = conv([x, w, b], attrs)[0]
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # the output, plus one block's input rows and product (each tap's, not one per tap); one
    # unblocked tap alone was an input-sized copy and an output-sized product: 16 MiB more
    assert peak <= y.nbytes + 2 * block + (256 << 10), (peak, y.nbytes)
