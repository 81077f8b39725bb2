"""LSTM, GRU and RNN: unrolled at import into FullyConnected / MatMul / element-wise / Slice /
Concat (checked as IR text), and numerically against onnxruntime on every execution path,
for every direction, with initial states, sequence_lens (constant and run-time), layout 1,
clip, peepholes and GRU's linear_before_reset."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from onnx import helper
from test_extra_ops_vs_ort import check_paths, model_of

from compiler.frontend import import_onnx
from compiler.graph import print_module
from tests.filecheck import check

RNG = np.random.default_rng(7)
SEQ, BATCH, INPUT, HIDDEN = 4, 3, 5, 6
GATES = {"LSTM": 4, "GRU": 3, "RNN": 1}


def _rnd(*shape: int) -> np.ndarray:
    return (RNG.standard_normal(shape) * 0.5).astype(np.float32)


def recurrent_model(
    op: str,
    direction: str = "forward",
    *,
    bias: bool = True,
    initial: bool = False,
    seq_lens: str | None = None,  # None, "const" or "input"
    layout: int = 0,
    peepholes: bool = False,
    **attrs,
):
    dirs = 2 if direction == "bidirectional" else 1
    g = GATES[op]
    x = _rnd(BATCH, SEQ, INPUT) if layout else _rnd(SEQ, BATCH, INPUT)
    feeds = {"x": x}
    inits = {"w": _rnd(dirs, g * HIDDEN, INPUT), "r": _rnd(dirs, g * HIDDEN, HIDDEN)}
    names = ["x", "w", "r", "", "", "", "", ""]
    if bias:
        inits["b"] = _rnd(dirs, 2 * g * HIDDEN)
        names[3] = "b"
    lens = np.array([4, 2, 3][:BATCH], np.int32)
    if seq_lens == "const":
        inits["lens"] = lens
        names[4] = "lens"
    elif seq_lens == "input":
        feeds["lens"] = lens
        names[4] = "lens"
    state = (BATCH, dirs, HIDDEN) if layout else (dirs, BATCH, HIDDEN)
    if initial:
        feeds["h0"] = _rnd(*state)
        names[5] = "h0"
        if op == "LSTM":
            feeds["c0"] = _rnd(*state)
            names[6] = "c0"
    if peepholes:
        inits["p"] = _rnd(dirs, 3 * HIDDEN)
        names[7] = "p"
    while names and not names[-1]:
        names.pop()
    outs = ["y", "y_h", "y_c"] if op == "LSTM" else ["y", "y_h"]
    node = helper.make_node(
        op, names, outs, hidden_size=HIDDEN, direction=direction, layout=layout, **attrs
    )
    return model_of([node], feeds, outs, 14, inits), feeds


CASES = [
    (op, direction, initial, seq_lens)
    for op, direction, (initial, seq_lens) in itertools.product(
        ["LSTM", "GRU", "RNN"],
        ["forward", "reverse", "bidirectional"],
        [(False, None), (True, "const"), (True, "input")],
    )
]


@pytest.mark.parametrize("op, direction, initial, seq_lens", CASES)
def test_recurrent_vs_ort(op: str, direction: str, initial: bool, seq_lens: str | None) -> None:
    model, feeds = recurrent_model(op, direction, initial=initial, seq_lens=seq_lens)
    check_paths(model, feeds, 1e-5, 1e-5)


@pytest.mark.parametrize("op", ["LSTM", "GRU", "RNN"])
def test_batch_major_layout(op: str) -> None:
    # onnxruntime has no layout 1: onnx's reference implementation is the oracle.
    from onnx.reference import ReferenceEvaluator

    model, feeds = recurrent_model(op, "bidirectional", initial=True, layout=1)
    want = [np.asarray(w) for w in ReferenceEvaluator(model).run(None, feeds)]
    check_paths(model, feeds, 1e-5, 1e-5, want=want)


def test_lstm_peepholes_and_clip() -> None:
    model, feeds = recurrent_model("LSTM", "bidirectional", peepholes=True, clip=0.4)
    check_paths(model, feeds, 1e-5, 1e-5)


@pytest.mark.parametrize("lbr", [0, 1])
def test_gru_linear_before_reset(lbr: int) -> None:
    model, feeds = recurrent_model("GRU", "forward", initial=True, linear_before_reset=lbr)
    check_paths(model, feeds, 1e-5, 1e-5)


def test_custom_activations() -> None:
    model, feeds = recurrent_model(
        "LSTM",
        "forward",
        activations=["HardSigmoid", "LeakyRelu", "Softsign"],
        activation_alpha=[0.3, 0.1],
        activation_beta=[0.6],
    )
    check_paths(model, feeds, 1e-5, 1e-5)


def test_lstm_unrolls_into_linear_algebra() -> None:
    # Step 0's H @ R^T folds away (the initial state is a zero constant): SEQ - 1 MatMuls.
    model, _ = recurrent_model("LSTM", "forward", bias=True)
    text = print_module(import_onnx(model))
    check(
        text,
        f"""
        CHECK: FullyConnected(%LSTM_0.x2d, %LSTM_0.w0_t, %LSTM_0.bias0)
        CHECK-SAME: : f32<{SEQ * BATCH}x{4 * HIDDEN}>
        CHECK-COUNT-{SEQ - 1}: = MatMul(
        CHECK-NOT: LSTM(
        CHECK: Concat(
        CHECK-SAME: {{axis = 0}} : f32<{SEQ}x1x{BATCH}x{HIDDEN}>
        """,
    )
    for gate in ("i", "o", "f"):
        assert text.count(f"= Sigmoid(%LSTM_0.d0_t0_{gate}_pre)") == 1, gate
