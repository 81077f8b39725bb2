"""How the ops added for real exports import, as IR text with CHECK lines: which graph ops
(and so which LIR instructions and kernels) each ONNX op becomes."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper
from test_extra_ops_vs_ort import model_of

from compiler.frontend import import_onnx
from compiler.graph import print_module
from compiler.lir.irgen import irgen
from compiler.lir.printer import print_lir
from tests.filecheck import check

X = np.zeros((2, 3, 6, 6), np.float32)

CASES = [
    (
        "topk_is_argtopk_and_gatherelements",
        [helper.make_node("TopK", ["x", "k"], ["v", "i"], axis=1, largest=0)],
        {"k": np.array([2], np.int64)},
        ["v", "i"],
        11,
        """
        CHECK: %TopK_0.indices = ArgTopK(%x) {k = 2, axis = 1, largest = 0, sorted = 1} : i64<2x2x6x6>
        CHECK-NEXT: %TopK_0.values = GatherElements(%x, %TopK_0.indices) {axis = 1} : f32<2x2x6x6>
        """,
    ),
    (
        "maxpool_indices_is_maxpoolargmax",
        [helper.make_node("MaxPool", ["x"], ["y", "i"], kernel_shape=[2, 2], strides=[2, 2])],
        {},
        ["y", "i"],
        12,
        """
        CHECK-DAG: = MaxPool(%x) {kernel = [2, 2]
        CHECK-DAG: = MaxPoolArgmax(%x) {kernel = [2, 2]
        CHECK-SAME: storage_order = 0} : i64<2x3x3x3>
        """,
    ),
    (
        "mod_and_round_are_elementwise",
        [
            helper.make_node("Mod", ["x", "m"], ["r"], fmod=1),
            helper.make_node("Round", ["r"], ["y"]),
        ],
        {"m": np.array(1.5, np.float32)},
        ["y"],
        13,
        """
        CHECK: %Mod_0 = Mod(%x, %m) {fmod = 1} : f32<2x3x6x6>
        CHECK-NEXT: %Round_1 = Round(%Mod_0) : f32<2x3x6x6>
        """,
    ),
    (
        "conv3d_is_a_sum_of_conv2d",
        [helper.make_node("Conv", ["x5", "w"], ["y"], pads=[1, 0, 0, 1, 0, 0])],
        {"w": np.ones((4, 3, 3, 1, 1), np.float32)},
        ["y"],
        13,
        """
        CHECK: Transpose(%Conv_0.depth_pad) {perm = [0, 2, 1, 3, 4]}
        CHECK-COUNT-3: = Conv(
        CHECK: Transpose(%Conv_0.depth_major_out) {perm = [0, 2, 1, 3, 4]} : f32<2x4x2x6x6>
        """,
    ),
    (
        # int16 (and every form but int8 / uint8 with constant per-tensor parameters)
        "quantize_is_integer_arithmetic",
        [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["y"])],
        {"s": np.array(0.1, np.float32), "z": np.array(3, np.int16)},
        ["y"],
        21,
        """
        CHECK: %QuantizeLinear_0.ratio = Div(%x,
        CHECK-NEXT: %QuantizeLinear_0.rounded = Round(%QuantizeLinear_0.ratio)
        CHECK: Max(
        CHECK: Min(
        CHECK: Cast({{.*}}) {to = "i16"} : i16<2x3x6x6>
        """,
    ),
    (
        # int8 with constant per-tensor parameters: a quantized value the int8 kernels take
        # (the quantization passes fold QDQ groups around it); a graph output is exported as
        # the integers ONNX declares.
        "quantize_int8_is_a_quantized_value",
        [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["y"])],
        {"s": np.array(0.1, np.float32), "z": np.array(3, np.int8)},
        ["y"],
        13,
        """
        CHECK: %QuantizeLinear_0 = Quantize(%x) {scale = 0.10000000149011612, offset = 3} : i8<2x3x6x6:0.10000000149011612,3>
        CHECK-NEXT: ExportQuantized(%QuantizeLinear_0) {to = "i8"} : i8<2x3x6x6>
        """,
    ),
]


@pytest.mark.parametrize(
    "name, nodes, inits, outs, opset, checks", CASES, ids=[c[0] for c in CASES]
)
def test_import(name: str, nodes, inits, outs, opset, checks) -> None:
    feeds = {"x5": np.zeros((2, 3, 2, 6, 6), np.float32)} if "conv3d" in name else {"x": X}
    module = import_onnx(model_of(nodes, feeds, outs, opset, inits))
    check(print_module(module), checks)


def test_new_ops_become_their_own_instructions() -> None:
    """Ops with kernels of their own keep them through IRGen (the LIR is derived)."""
    x = np.zeros((4, 5), np.float32)
    nodes = [
        helper.make_node("CumSum", ["x", "ax"], ["c"], reverse=1),
        helper.make_node("GatherElements", ["c", "i"], ["g"], axis=1),
        helper.make_node("ScatterND", ["g", "j", "u"], ["y"], reduction="add"),
    ]
    inits = {
        "ax": np.array(1, np.int64),
        "i": np.zeros((4, 2), np.int64),
        "j": np.array([[1], [3]], np.int64),
        "u": np.ones((2, 2), np.float32),
    }
    module = import_onnx(model_of(nodes, {"x": x}, ["y"], 16, inits))
    check(
        print_lir(irgen(module)),
        """
        CHECK: cumsum @out %CumSum_0_res, @in %x
        CHECK: gatherelements @out %GatherElements_1_res, @in %CumSum_0_res, @in %i
        CHECK: scatternd @out %ScatterND_2_res, @in %GatherElements_1_res, @in %j, @in %u
        """,
    )
