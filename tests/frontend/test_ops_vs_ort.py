"""One-node (or few-node) models, across opsets and attribute forms, checked against onnxruntime."""

from __future__ import annotations

import numpy as np
import pytest
from frontend_helpers import check_vs_ort, make_model, rand
from onnx import TensorProto, helper

F, I64, B = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL


def i64(*v: int) -> np.ndarray:
    return np.array(v, np.int64)


def f32(*v: float) -> np.ndarray:
    return np.array(v, np.float32)


def one(case_id: str, opset: int, op: str, inputs: dict, inits=None, ins=None, **attrs):
    """A case of one node `y = op(...)` with a float output y; the node reads `ins`, by default
    the inputs then the initializers in order."""
    inits = inits or {}
    node = helper.make_node(op, [*inputs, *inits] if ins is None else ins, ["y"], **attrs)
    return (case_id, opset, [node], inputs, inits, {"y": F})


#: (id, opset, nodes, inputs, initializers, outputs); `one` writes the one-node cases.
CASES = [
    one("softmax_op11_axis1_coerced", 11, "Softmax", {"x": rand(2, 3, 4)}, axis=1),
    one("softmax_op11_default_axis", 11, "Softmax", {"x": rand(2, 3, 4)}),
    one("logsoftmax_op11_axis0", 11, "LogSoftmax", {"x": rand(2, 3, 4)}, axis=0),
    one("softmax_op13_axis1", 13, "Softmax", {"x": rand(2, 3, 4)}, axis=1),
    one("slice_op9_default_axes", 9, "Slice", {"x": rand(4, 5)}, starts=[1, 0], ends=[-1, 100]),
    one(
        "slice_op13_negative_axis_step",
        13,
        "Slice",
        {"x": rand(4, 7)},
        {"s": i64(6), "e": i64(0), "a": i64(-1), "t": i64(-3)},
    ),
    one("slice_op13_empty", 13, "Slice", {"x": rand(4, 7)}, {"s": i64(3, 5), "e": i64(1, 6)}),
    one(
        "gather_negative_indices",
        13,
        "Gather",
        {"x": rand(3, 5)},
        {"i": np.array([[-1, 0], [2, -5]], np.int64)},
        axis=1,
    ),
    one(
        "gather_runtime_indices",
        13,
        "Gather",
        {"x": rand(3, 5), "i": np.array([2, 0, 2], np.int64)},
        axis=0,
    ),
    one("reducesum_op11_attr", 11, "ReduceSum", {"x": rand(2, 3, 4)}, axes=[0, 2], keepdims=0),
    one("reducesum_op13_noaxes", 13, "ReduceSum", {"x": rand(2, 3, 4)}),
    one(
        "reducesum_op13_noop",
        13,
        "ReduceSum",
        {"x": rand(2, 3)},
        {"a": np.zeros(0, np.int64)},
        noop_with_empty_axes=1,
    ),
    one("reducemean_op18_input", 18, "ReduceMean", {"x": rand(2, 3, 4)}, {"a": i64(-1)}),
    one("reducemax_op13_attr", 13, "ReduceMax", {"x": rand(2, 3, 4)}, axes=[1]),
    one("reduceprod_op18", 18, "ReduceProd", {"x": rand(2, 3)}, {"a": i64(0)}, keepdims=0),
    (
        "reducemin_int",
        13,
        [helper.make_node("ReduceMin", ["x"], ["y"], axes=[1])],
        {"x": np.arange(12, dtype=np.int64).reshape(3, 4) - 5},
        {},
        {"y": I64},
    ),
    one("pad_op2_reflect", 9, "Pad", {"x": rand(2, 4)}, pads=[0, 2, 0, 1], mode="reflect"),
    one(
        "pad_op18_axes",
        18,
        "Pad",
        {"x": rand(2, 3, 4)},
        {"p": i64(1, 2, 0, 1), "a": i64(0, 2)},
        ins=["x", "p", "", "a"],
        mode="edge",
    ),
    one("squeeze_op11_all", 11, "Squeeze", {"x": rand(1, 3, 1, 2)}),
    one("squeeze_op13_axes", 13, "Squeeze", {"x": rand(1, 3, 1, 2)}, {"a": i64(-2)}),
    one("unsqueeze_op11_neg", 11, "Unsqueeze", {"x": rand(3, 2)}, axes=[-1, 0]),
    one("flatten_neg_axis", 13, "Flatten", {"x": rand(2, 3, 4)}, axis=-1),
    one("flatten_axis0", 13, "Flatten", {"x": rand(2, 3, 4)}, axis=0),
    one("transpose_default", 13, "Transpose", {"x": rand(2, 3, 4)}),
    one("expand_lower_rank_shape", 13, "Expand", {"x": rand(3, 1)}, {"s": i64(2, 1, 4)}),
    (
        "split_op11_default",
        11,
        [helper.make_node("Split", ["x"], ["a", "b"], axis=1)],
        {"x": rand(2, 6)},
        {},
        {"a": F, "b": F},
    ),
    (
        "split_op13_input",
        13,
        [helper.make_node("Split", ["x", "s"], ["a", "b", "c"], axis=-1)],
        {"x": rand(2, 6)},
        {"s": i64(1, 2, 3)},
        {"a": F, "b": F, "c": F},
    ),
    (
        "argmax_select_last",
        13,
        [helper.make_node("ArgMax", ["x"], ["y"], axis=1, select_last_index=1)],
        {"x": np.array([[1, 3, 3], [2, 2, 0]], np.float32)},
        {},
        {"y": I64},
    ),
    (
        "argmin_keepdims0",
        13,
        [helper.make_node("ArgMin", ["x"], ["y"], axis=-1, keepdims=0)],
        {"x": rand(3, 4)},
        {},
        {"y": I64},
    ),
    (
        "where_broadcast",
        13,
        [
            helper.make_node("Less", ["x", "z"], ["c"]),
            helper.make_node("Where", ["c", "x", "w"], ["y"]),
        ],
        {"x": rand(2, 3)},
        {"z": f32(0.0), "w": rand(3, seed=4)},
        {"y": F},
    ),
    (
        "equal_bool_and_or",
        13,
        [
            helper.make_node("Equal", ["a", "b"], ["e"]),
            helper.make_node("And", ["e", "m"], ["y1"]),
            helper.make_node("Or", ["e", "m"], ["y2"]),
        ],
        {"a": i64(1, 2, 3), "b": i64(1, 0, 3)},
        {"m": np.array([True, True, False])},
        {"y1": B, "y2": B},
    ),
    (
        "cast_float_to_int_and_bool",
        13,
        [
            helper.make_node("Cast", ["x"], ["i"], to=I64),
            helper.make_node("Cast", ["x"], ["b"], to=B),
        ],
        {"x": f32(-2.7, -0.2, 0.0, 1.5, 3.9)},
        {},
        {"i": I64, "b": B},
    ),
    one("lrn", 13, "LRN", {"x": rand(1, 5, 3, 3)}, size=3, alpha=1e-3, beta=0.7, bias=2.0),
    one(
        "conv_transpose_1d",
        13,
        "ConvTranspose",
        {"x": rand(1, 2, 5)},
        {"w": rand(2, 3, 3, seed=1), "b": rand(3, seed=2)},
        strides=[2],
        pads=[1, 0],
    ),
    one(
        "avgpool_1d_ceil",
        13,
        "AveragePool",
        {"x": rand(1, 2, 8)},
        kernel_shape=[3],
        strides=[2],
        ceil_mode=1,
    ),
    one("maxpool_1d", 13, "MaxPool", {"x": rand(1, 2, 5)}, kernel_shape=[2], pads=[1, 1]),
    (
        "global_pools",
        13,
        [
            helper.make_node("GlobalAveragePool", ["x"], ["a"]),
            helper.make_node("GlobalMaxPool", ["x"], ["m"]),
        ],
        {"x": rand(1, 3, 4, 5)},
        {},
        {"a": F, "m": F},
    ),
    one(
        "conv_grouped_dilated",
        13,
        "Conv",
        {"x": rand(1, 4, 6, 6)},
        {"w": rand(6, 2, 3, 3, seed=1)},
        group=2,
        dilations=[2, 1],
        pads=[2, 1, 2, 1],
    ),
    one(
        "conv_runtime_weights",
        13,
        "Conv",
        {"x": rand(1, 2, 6, 6), "w": rand(3, 2, 3, 3, seed=1)},
        strides=[2, 2],
    ),
    one("clip_op6_attrs", 7, "Clip", {"x": rand(3, 4)}, min=-0.1),
    one(
        "clip_op13_only_max",
        13,
        "Clip",
        {"x": rand(3, 4)},
        {"hi": f32(0.2).reshape(())},
        ins=["x", "", "hi"],
    ),
    (
        "dropout_op12_inputs",
        12,
        [helper.make_node("Dropout", ["x", "r", "t"], ["y", "m"])],
        {"x": rand(3, 4)},
        {"r": f32(0.5).reshape(()), "t": np.array(False)},
        {"y": F, "m": B},
    ),
    one("pow_float_int_exponent", 15, "Pow", {"x": np.abs(rand(3, 4)) + 0.5}, {"e": i64(2)}),
    (
        "unary_chain",
        14,
        [
            helper.make_node("Abs", ["x"], ["a"]),
            helper.make_node("Sqrt", ["a"], ["s"]),
            helper.make_node("Log", ["s"], ["l"]),
            helper.make_node("Exp", ["l"], ["e"]),
            helper.make_node("Reciprocal", ["e"], ["r"]),
            helper.make_node("Neg", ["r"], ["n"]),
            helper.make_node("Floor", ["n"], ["f"]),
            helper.make_node("Ceil", ["r"], ["c"]),
            helper.make_node("Erf", ["x"], ["er"]),
            helper.make_node("Sign", ["x"], ["sg"]),
            helper.make_node("Softplus", ["x"], ["sp"]),
            helper.make_node("HardSwish", ["x"], ["hs"]),
        ],
        {"x": rand(3, 4)},
        {},
        {"f": F, "c": F, "er": F, "sg": F, "sp": F, "hs": F},
    ),
    one(
        "resize_op13_sizes_cubic",
        13,
        "Resize",
        {"x": rand(1, 1, 4, 4)},
        {"sz": i64(1, 1, 6, 3)},
        ins=["x", "", "", "sz"],
        mode="cubic",
    ),
    one(
        "resize_op13_nearest_floor_asym",
        13,
        "Resize",
        {"x": rand(1, 1, 3, 4)},
        {"sc": f32(1, 1, 2, 0.5)},
        ins=["x", "", "sc"],
        mode="nearest",
        nearest_mode="floor",
        coordinate_transformation_mode="asymmetric",
    ),
    one(
        "instance_norm",
        13,
        "InstanceNormalization",
        {"x": rand(2, 3, 4, 5)},
        {"s": rand(3, seed=1), "b": rand(3, seed=2)},
    ),
    (
        "constant_of_shape_int",
        15,
        [
            helper.make_node("Shape", ["x"], ["s"], start=1),
            helper.make_node(
                "ConstantOfShape", ["s"], ["c"], value=helper.make_tensor("v", I64, [1], [7])
            ),
            helper.make_node("Cast", ["c"], ["cf"], to=F),
            helper.make_node("Add", ["x", "cf"], ["y"]),
        ],
        {"x": rand(2, 3, 4)},
        {},
        {"y": F},
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_op_vs_onnxruntime(case) -> None:
    _, opset, nodes, inputs, inits, outputs = case
    model = make_model(nodes, inputs, outputs, opset, inits)
    check_vs_ort(model, inputs, rtol=1e-4, atol=1e-5)
