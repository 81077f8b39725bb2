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


# (id, opset, nodes, inputs, initializers, outputs)
CASES = [
    ("softmax_op11_axis1_coerced", 11, [helper.make_node("Softmax", ["x"], ["y"], axis=1)],
     {"x": rand(2, 3, 4)}, {}, {"y": F}),
    ("softmax_op11_default_axis", 11, [helper.make_node("Softmax", ["x"], ["y"])],
     {"x": rand(2, 3, 4)}, {}, {"y": F}),
    ("logsoftmax_op11_axis0", 11, [helper.make_node("LogSoftmax", ["x"], ["y"], axis=0)],
     {"x": rand(2, 3, 4)}, {}, {"y": F}),
    ("softmax_op13_axis1", 13, [helper.make_node("Softmax", ["x"], ["y"], axis=1)],
     {"x": rand(2, 3, 4)}, {}, {"y": F}),
    ("slice_op9_default_axes", 9, [helper.make_node("Slice", ["x"], ["y"], starts=[1, 0],
                                                     ends=[-1, 100])],
     {"x": rand(4, 5)}, {}, {"y": F}),
    ("slice_op13_negative_axis_step", 13, [helper.make_node("Slice", ["x", "s", "e", "a", "t"], ["y"])],
     {"x": rand(4, 7)}, {"s": i64(6), "e": i64(0), "a": i64(-1), "t": i64(-3)}, {"y": F}),
    ("slice_op13_empty", 13, [helper.make_node("Slice", ["x", "s", "e"], ["y"])],
     {"x": rand(4, 7)}, {"s": i64(3, 5), "e": i64(1, 6)}, {"y": F}),
    ("gather_negative_indices", 13, [helper.make_node("Gather", ["x", "i"], ["y"], axis=1)],
     {"x": rand(3, 5)}, {"i": np.array([[-1, 0], [2, -5]], np.int64)}, {"y": F}),
    ("gather_runtime_indices", 13, [helper.make_node("Gather", ["x", "i"], ["y"], axis=0)],
     {"x": rand(3, 5), "i": np.array([2, 0, 2], np.int64)}, {}, {"y": F}),
    ("reducesum_op11_attr", 11, [helper.make_node("ReduceSum", ["x"], ["y"], axes=[0, 2], keepdims=0)],
     {"x": rand(2, 3, 4)}, {}, {"y": F}),
    ("reducesum_op13_noaxes", 13, [helper.make_node("ReduceSum", ["x"], ["y"])],
     {"x": rand(2, 3, 4)}, {}, {"y": F}),
    ("reducesum_op13_noop", 13, [helper.make_node("ReduceSum", ["x", "a"], ["y"], noop_with_empty_axes=1)],
     {"x": rand(2, 3)}, {"a": np.zeros(0, np.int64)}, {"y": F}),
    ("reducemean_op18_input", 18, [helper.make_node("ReduceMean", ["x", "a"], ["y"])],
     {"x": rand(2, 3, 4)}, {"a": i64(-1)}, {"y": F}),
    ("reducemax_op13_attr", 13, [helper.make_node("ReduceMax", ["x"], ["y"], axes=[1])],
     {"x": rand(2, 3, 4)}, {}, {"y": F}),
    ("reduceprod_op18", 18, [helper.make_node("ReduceProd", ["x", "a"], ["y"], keepdims=0)],
     {"x": rand(2, 3)}, {"a": i64(0)}, {"y": F}),
    ("reducemin_int", 13, [helper.make_node("ReduceMin", ["x"], ["y"], axes=[1])],
     {"x": np.arange(12, dtype=np.int64).reshape(3, 4) - 5}, {}, {"y": I64}),
    ("pad_op2_reflect", 9, [helper.make_node("Pad", ["x"], ["y"], pads=[0, 2, 0, 1], mode="reflect")],
     {"x": rand(2, 4)}, {}, {"y": F}),
    ("pad_op18_axes", 18, [helper.make_node("Pad", ["x", "p", "", "a"], ["y"], mode="edge")],
     {"x": rand(2, 3, 4)}, {"p": i64(1, 2, 0, 1), "a": i64(0, 2)}, {"y": F}),
    ("squeeze_op11_all", 11, [helper.make_node("Squeeze", ["x"], ["y"])],
     {"x": rand(1, 3, 1, 2)}, {}, {"y": F}),
    ("squeeze_op13_axes", 13, [helper.make_node("Squeeze", ["x", "a"], ["y"])],
     {"x": rand(1, 3, 1, 2)}, {"a": i64(-2)}, {"y": F}),
    ("unsqueeze_op11_neg", 11, [helper.make_node("Unsqueeze", ["x"], ["y"], axes=[-1, 0])],
     {"x": rand(3, 2)}, {}, {"y": F}),
    ("flatten_neg_axis", 13, [helper.make_node("Flatten", ["x"], ["y"], axis=-1)],
     {"x": rand(2, 3, 4)}, {}, {"y": F}),
    ("flatten_axis0", 13, [helper.make_node("Flatten", ["x"], ["y"], axis=0)],
     {"x": rand(2, 3, 4)}, {}, {"y": F}),
    ("transpose_default", 13, [helper.make_node("Transpose", ["x"], ["y"])],
     {"x": rand(2, 3, 4)}, {}, {"y": F}),
    ("expand_lower_rank_shape", 13, [helper.make_node("Expand", ["x", "s"], ["y"])],
     {"x": rand(3, 1)}, {"s": i64(2, 1, 4)}, {"y": F}),
    ("split_op11_default", 11, [helper.make_node("Split", ["x"], ["a", "b"], axis=1)],
     {"x": rand(2, 6)}, {}, {"a": F, "b": F}),
    ("split_op13_input", 13, [helper.make_node("Split", ["x", "s"], ["a", "b", "c"], axis=-1)],
     {"x": rand(2, 6)}, {"s": i64(1, 2, 3)}, {"a": F, "b": F, "c": F}),
    ("argmax_select_last", 13, [helper.make_node("ArgMax", ["x"], ["y"], axis=1, select_last_index=1)],
     {"x": np.array([[1, 3, 3], [2, 2, 0]], np.float32)}, {}, {"y": I64}),
    ("argmin_keepdims0", 13, [helper.make_node("ArgMin", ["x"], ["y"], axis=-1, keepdims=0)],
     {"x": rand(3, 4)}, {}, {"y": I64}),
    ("where_broadcast", 13, [helper.make_node("Less", ["x", "z"], ["c"]),
                             helper.make_node("Where", ["c", "x", "w"], ["y"])],
     {"x": rand(2, 3)}, {"z": f32(0.0), "w": rand(3, seed=4)}, {"y": F}),
    ("equal_bool_and_or", 13, [helper.make_node("Equal", ["a", "b"], ["e"]),
                               helper.make_node("And", ["e", "m"], ["y1"]),
                               helper.make_node("Or", ["e", "m"], ["y2"])],
     {"a": i64(1, 2, 3), "b": i64(1, 0, 3)}, {"m": np.array([True, True, False])},
     {"y1": B, "y2": B}),
    ("cast_float_to_int_and_bool", 13, [helper.make_node("Cast", ["x"], ["i"], to=I64),
                                        helper.make_node("Cast", ["x"], ["b"], to=B)],
     {"x": f32(-2.7, -0.2, 0.0, 1.5, 3.9)}, {}, {"i": I64, "b": B}),
    ("lrn", 13, [helper.make_node("LRN", ["x"], ["y"], size=3, alpha=1e-3, beta=0.7, bias=2.0)],
     {"x": rand(1, 5, 3, 3)}, {}, {"y": F}),
    ("conv_transpose_1d", 13, [helper.make_node("ConvTranspose", ["x", "w", "b"], ["y"], strides=[2],
                                                pads=[1, 0])],
     {"x": rand(1, 2, 5)}, {"w": rand(2, 3, 3, seed=1), "b": rand(3, seed=2)}, {"y": F}),
    ("avgpool_1d_ceil", 13, [helper.make_node("AveragePool", ["x"], ["y"], kernel_shape=[3],
                                              strides=[2], ceil_mode=1)],
     {"x": rand(1, 2, 8)}, {}, {"y": F}),
    ("maxpool_1d", 13, [helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[2], pads=[1, 1])],
     {"x": rand(1, 2, 5)}, {}, {"y": F}),
    ("global_pools", 13, [helper.make_node("GlobalAveragePool", ["x"], ["a"]),
                          helper.make_node("GlobalMaxPool", ["x"], ["m"])],
     {"x": rand(1, 3, 4, 5)}, {}, {"a": F, "m": F}),
    ("conv_grouped_dilated", 13, [helper.make_node("Conv", ["x", "w"], ["y"], group=2,
                                                   dilations=[2, 1], pads=[2, 1, 2, 1])],
     {"x": rand(1, 4, 6, 6)}, {"w": rand(6, 2, 3, 3, seed=1)}, {"y": F}),
    ("conv_runtime_weights", 13, [helper.make_node("Conv", ["x", "w"], ["y"], strides=[2, 2])],
     {"x": rand(1, 2, 6, 6), "w": rand(3, 2, 3, 3, seed=1)}, {}, {"y": F}),
    ("clip_op6_attrs", 7, [helper.make_node("Clip", ["x"], ["y"], min=-0.1)],
     {"x": rand(3, 4)}, {}, {"y": F}),
    ("clip_op13_only_max", 13, [helper.make_node("Clip", ["x", "", "hi"], ["y"])],
     {"x": rand(3, 4)}, {"hi": f32(0.2).reshape(())}, {"y": F}),
    ("dropout_op12_inputs", 12, [helper.make_node("Dropout", ["x", "r", "t"], ["y", "m"])],
     {"x": rand(3, 4)}, {"r": f32(0.5).reshape(()), "t": np.array(False)}, {"y": F, "m": B}),
    ("pow_float_int_exponent", 15, [helper.make_node("Pow", ["x", "e"], ["y"])],
     {"x": np.abs(rand(3, 4)) + 0.5}, {"e": i64(2)}, {"y": F}),
    ("unary_chain", 14, [helper.make_node("Abs", ["x"], ["a"]),
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
                         helper.make_node("HardSwish", ["x"], ["hs"])],
     {"x": rand(3, 4)}, {}, {"f": F, "c": F, "er": F, "sg": F, "sp": F, "hs": F}),
    ("resize_op13_sizes_cubic", 13, [helper.make_node("Resize", ["x", "", "", "sz"], ["y"],
                                                      mode="cubic")],
     {"x": rand(1, 1, 4, 4)}, {"sz": i64(1, 1, 6, 3)}, {"y": F}),
    ("resize_op13_nearest_floor_asym", 13, [helper.make_node(
        "Resize", ["x", "", "sc"], ["y"], mode="nearest", nearest_mode="floor",
        coordinate_transformation_mode="asymmetric")],
     {"x": rand(1, 1, 3, 4)}, {"sc": f32(1, 1, 2, 0.5)}, {"y": F}),
    ("instance_norm", 13, [helper.make_node("InstanceNormalization", ["x", "s", "b"], ["y"])],
     {"x": rand(2, 3, 4, 5)}, {"s": rand(3, seed=1), "b": rand(3, seed=2)}, {"y": F}),
    ("constant_of_shape_int", 15, [helper.make_node("Shape", ["x"], ["s"], start=1),
                                   helper.make_node("ConstantOfShape", ["s"], ["c"],
                                                    value=helper.make_tensor("v", I64, [1], [7])),
                                   helper.make_node("Cast", ["c"], ["cf"], to=F),
                                   helper.make_node("Add", ["x", "cf"], ["y"])],
     {"x": rand(2, 3, 4)}, {}, {"y": F}),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_op_vs_onnxruntime(case) -> None:
    _, opset, nodes, inputs, inits, outputs = case
    model = make_model(nodes, inputs, outputs, opset, inits)
    check_vs_ort(model, inputs, rtol=1e-4, atol=1e-5)
