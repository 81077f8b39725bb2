"""Builds the hand-made regression models of the fuzzing campaign (issue 11).

Each model reproduces one failure class the campaign (or the issue) found, as small as it gets;
`tests/fuzz/known.py` says what every command must do with it. Models shrunk from random graphs
(`python -m tests.fuzz.shrink --graph-seed N`) are stored beside these with their inputs.

    python tests/fuzz/regressions/generate.py          # rewrites the hand-made .onnx files
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = Path(__file__).resolve().parent
F, I32, I64 = TensorProto.FLOAT, TensorProto.INT32, TensorProto.INT64

BUILDERS: dict[str, Callable[[], onnx.ModelProto]] = {}


def model(name: str) -> Callable[[Callable[[], onnx.ModelProto]], Callable[[], onnx.ModelProto]]:
    def deco(fn: Callable[[], onnx.ModelProto]) -> Callable[[], onnx.ModelProto]:
        BUILDERS[name] = fn
        return fn

    return deco


def _make(nodes, inits, inputs, outputs, opset: int = 17) -> onnx.ModelProto:
    g = helper.make_graph(nodes, "regression", inputs, outputs, inits)
    m = helper.make_model(
        g, opset_imports=[helper.make_opsetid("", opset)], producer_name="glowviz-fuzz"
    )
    m.ir_version = 8
    return m


def _vi(name: str, shape: list, elem: int = F) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, elem, shape)


def _t(name: str, a: np.ndarray) -> onnx.TensorProto:
    return numpy_helper.from_array(np.asarray(a), name)


def _matmul(b: onnx.TensorProto) -> onnx.ModelProto:
    return _make(
        [helper.make_node("MatMul", ["x", "b"], ["y"])], [b], [_vi("x", [1, 4])], [_vi("y", [1, 4])]
    )


def _conv(
    attrs: dict, w_shape=(4, 2, 3, 3), x_shape=(1, 2, 6, 6), w_dtype=np.float32
) -> onnx.ModelProto:
    w = _t("w", np.ones(w_shape, w_dtype))
    return _make(
        [helper.make_node("Conv", ["x", "w"], ["y"], name="conv", **attrs)],
        [w],
        [_vi("x", list(x_shape))],
        [_vi("y", ["n", "c", "h", "w"])],
    )


# -- initializers ----------------------------------------------------------------------------------


@model("raw_data_short")
def _() -> onnx.ModelProto:
    b = _t("b", np.eye(4, dtype=np.float32))
    b.raw_data = b.raw_data[:-4]
    return _matmul(b)


@model("raw_data_long")
def _() -> onnx.ModelProto:
    b = _t("b", np.eye(4, dtype=np.float32))
    b.raw_data = b.raw_data + bytes(8)
    return _matmul(b)


@model("float_data_count")
def _() -> onnx.ModelProto:
    b = _t("b", np.eye(4, dtype=np.float32))
    b.ClearField("raw_data")
    b.float_data.extend([1.0] * 17)
    return _matmul(b)


@model("scalar_for_matrix")
def _() -> onnx.ModelProto:
    return _make(
        [helper.make_node("Gemm", ["x", "b"], ["y"])],
        [_t("b", np.array(2.0, np.float32))],
        [_vi("x", [1, 4])],
        [_vi("y", [1, 4])],
    )


@model("bool_initializer")
def _() -> onnx.ModelProto:
    return _conv({}, w_dtype=bool)


@model("external_data_outside")
def _() -> onnx.ModelProto:
    b = _t("b", np.eye(4, dtype=np.float32))
    b.ClearField("raw_data")
    b.data_location = TensorProto.EXTERNAL
    for k, v in (("location", "../../../../etc/passwd"), ("offset", "0"), ("length", "64")):
        e = b.external_data.add()
        e.key, e.value = k, v
    return _matmul(b)


@model("external_data_dev_zero")
def _() -> onnx.ModelProto:
    b = _t("b", np.eye(4, dtype=np.float32))
    b.ClearField("raw_data")
    b.data_location = TensorProto.EXTERNAL
    for k, v in (("location", "/dev/zero"), ("length", str(1 << 40))):
        e = b.external_data.add()
        e.key, e.value = k, v
    return _matmul(b)


# -- attributes ------------------------------------------------------------------------------------


@model("conv_dilation_0")
def _() -> onnx.ModelProto:
    return _conv({"dilations": [0, 0]})


@model("conv_stride_0")
def _() -> onnx.ModelProto:
    return _conv({"strides": [0, 1]})


@model("conv_group_not_dividing")
def _() -> onnx.ModelProto:
    return _conv({"group": 3}, w_shape=(3, 1, 3, 3), x_shape=(1, 2, 6, 6))


@model("softmax_axis_out_of_range")
def _() -> onnx.ModelProto:
    return _make(
        [helper.make_node("Softmax", ["x"], ["y"], axis=5)],
        [],
        [_vi("x", [2, 3])],
        [_vi("y", [2, 3])],
    )


# -- dims and sizes ---------------------------------------------------------------------------------


def _relu_input(dims: list[int]) -> onnx.ModelProto:
    return _make([helper.make_node("Relu", ["x"], ["y"])], [], [_vi("x", dims)], [_vi("y", dims)])


@model("input_dim_0")
def _() -> onnx.ModelProto:
    return _relu_input([1, 0, 4])


@model("input_dim_int64_max")
def _() -> onnx.ModelProto:
    return _relu_input([1, (1 << 63) - 1])


@model("input_dim_1e12")
def _() -> onnx.ModelProto:
    return _relu_input([10**12, 4])


@model("constant_of_shape_huge")
def _() -> onnx.ModelProto:
    return _make(
        [
            helper.make_node(
                "ConstantOfShape", ["s"], ["c"], value=_t("v", np.array([1.0], np.float32))
            ),
            helper.make_node("Add", ["x", "c"], ["y"]),
        ],
        [_t("s", np.array([100000, 100000], np.int64))],
        [_vi("x", [1, 100000])],
        [_vi("y", [100000, 100000])],
    )


@model("tile_huge")
def _() -> onnx.ModelProto:
    return _make(
        [helper.make_node("Tile", ["x", "r"], ["y"])],
        [_t("r", np.array([1, 1 << 31], np.int64))],
        [_vi("x", [1, 4])],
        [_vi("y", [1, 1 << 33])],
    )


@model("expand_huge")
def _() -> onnx.ModelProto:
    return _make(
        [helper.make_node("Expand", ["x", "s"], ["y"])],
        [_t("s", np.array([1 << 20, 1 << 20], np.int64))],
        [_vi("x", [1, 1])],
        [_vi("y", [1 << 20, 1 << 20])],
    )


@model("pad_2_31")
def _() -> onnx.ModelProto:
    return _make(
        [helper.make_node("Pad", ["x", "p"], ["y"])],
        [_t("p", np.array([0, 1 << 31, 0, 0], np.int64))],
        [_vi("x", [1, 4])],
        [_vi("y", [1, (1 << 31) + 4])],
    )


@model("resize_huge")
def _() -> onnx.ModelProto:
    return _make(
        [helper.make_node("Resize", ["x", "", "s"], ["y"], mode="nearest")],
        [_t("s", np.array([1, 1, 1e5, 1e5], np.float32))],
        [_vi("x", [1, 1, 4, 4])],
        [_vi("y", [1, 1, 400000, 400000])],
    )


@model("range_huge")
def _() -> onnx.ModelProto:
    return _make(
        [helper.make_node("Range", ["a", "b", "d"], ["y"])],
        [
            _t("a", np.array(0, np.int64)),
            _t("b", np.array(10**12, np.int64)),
            _t("d", np.array(1, np.int64)),
        ],
        [],
        [_vi("y", [10**12], I64)],
    )


@model("zero_size_intermediate")
def _() -> onnx.ModelProto:
    # an empty Slice feeding a Concat: a zero-size buffer in the plan (the allocator hang)
    return _make(
        [
            helper.make_node("Slice", ["x", "s", "e", "a"], ["empty"]),
            helper.make_node("Relu", ["empty"], ["r"]),
            helper.make_node("Concat", ["x", "r"], ["y"], axis=1),
        ],
        [
            _t("s", np.array([2], np.int64)),
            _t("e", np.array([2], np.int64)),
            _t("a", np.array([1], np.int64)),
        ],
        [_vi("x", [1, 4])],
        [_vi("y", [1, 4])],
    )


# -- graph size (compile time) ----------------------------------------------------------------------


@model("chain_3000")
def _() -> onnx.ModelProto:
    nodes, prev = [], "x"
    for i in range(3000):
        out = "y" if i == 2999 else f"v{i}"
        nodes.append(helper.make_node("Relu" if i % 2 else "Neg", [prev], [out]))
        prev = out
    return _make(nodes, [], [_vi("x", [1, 8])], [_vi("y", [1, 8])])


@model("fanout_2000")
def _() -> onnx.ModelProto:
    nodes = [helper.make_node("Relu", ["x"], [f"r{i}"]) for i in range(2000)]
    nodes.append(helper.make_node("Sum", [f"r{i}" for i in range(2000)], ["y"]))
    return _make(nodes, [], [_vi("x", [1, 8])], [_vi("y", [1, 8])])


# -- integer semantics -----------------------------------------------------------------------------


def _int_div(op: str, numerator: int, divisor_const: bool, dt: type, elem: int) -> onnx.ModelProto:
    nodes = [
        helper.make_node("Cast", ["x"], ["xi"], to=elem),
        helper.make_node("Add", ["xi", "n"], ["num"]),
    ]
    inits = [_t("n", np.array(numerator, dt))]
    if divisor_const:
        inits.append(_t("d", np.array(0, dt)))
        nodes.append(helper.make_node(op, ["num", "d"], ["y"]))
    else:
        # a run-time divisor that is 0 for inputs in [-1, 1) and -1 for [-1, 0)
        nodes += [
            helper.make_node("Floor", ["x"], ["fx"]),
            helper.make_node("Cast", ["fx"], ["d"], to=elem),
        ]
        nodes.append(helper.make_node(op, ["num", "d"], ["y"]))
    return _make(nodes, inits, [_vi("x", [1, 16])], [_vi("y", [1, 16], elem)])


@model("int_div_by_const_zero")
def _() -> onnx.ModelProto:
    return _int_div("Div", 1, True, np.int32, I32)


@model("int_div_by_runtime_zero")
def _() -> onnx.ModelProto:
    return _int_div("Div", 7, False, np.int64, I64)


@model("int_min_div_minus_one")
def _() -> onnx.ModelProto:
    return _int_div("Div", np.iinfo(np.int32).min, False, np.int32, I32)


# -- NaN and Inf -----------------------------------------------------------------------------------


@model("nan_weight_conv_relu")
def _() -> onnx.ModelProto:
    w = np.full((4, 3, 3, 3), 0.1, np.float32)
    w[1, 0, 1, 1] = np.nan
    return _make(
        [
            helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
            helper.make_node("Relu", ["c"], ["y"]),
        ],
        [_t("w", w)],
        [_vi("x", [1, 3, 8, 8])],
        [_vi("y", [1, 4, 8, 8])],
    )


@model("batchnorm_negative_variance")
def _() -> onnx.ModelProto:
    c = 4
    return _make(
        [
            helper.make_node("Conv", ["x", "w"], ["c"]),
            helper.make_node("BatchNormalization", ["c", "s", "b", "m", "v"], ["bn"]),
            helper.make_node("Relu", ["bn"], ["y"]),
        ],
        [
            _t("w", np.full((c, 3, 1, 1), 0.5, np.float32)),
            _t("s", np.ones(c, np.float32)),
            _t("b", np.zeros(c, np.float32)),
            _t("m", np.zeros(c, np.float32)),
            _t("v", np.array([1.0, -1.0, 1.0, -0.5], np.float32)),
        ],
        [_vi("x", [1, 3, 4, 4])],
        [_vi("y", [1, c, 4, 4])],
    )


@model("batchnorm_nan_epsilon")
def _() -> onnx.ModelProto:
    c = 4
    return _make(
        [
            helper.make_node("Conv", ["x", "w"], ["c"]),
            helper.make_node(
                "BatchNormalization", ["c", "s", "b", "m", "v"], ["bn"], epsilon=float("nan")
            ),
            helper.make_node("Relu", ["bn"], ["y"]),
        ],
        [
            _t("w", np.full((c, 3, 1, 1), 0.5, np.float32)),
            _t("s", np.ones(c, np.float32)),
            _t("b", np.zeros(c, np.float32)),
            _t("m", np.zeros(c, np.float32)),
            _t("v", np.ones(c, np.float32)),
        ],
        [_vi("x", [1, 3, 4, 4])],
        [_vi("y", [1, c, 4, 4])],
    )


@model("clip_nan_bound")
def _() -> onnx.ModelProto:
    return _make(
        [helper.make_node("Clip", ["x", "lo", "hi"], ["y"])],
        [_t("lo", np.array(np.nan, np.float32)), _t("hi", np.array(1.0, np.float32))],
        [_vi("x", [1, 16])],
        [_vi("y", [1, 16])],
    )


@model("log_of_negative")
def _() -> onnx.ModelProto:
    return _make(
        [helper.make_node("Log", ["x"], ["l"]), helper.make_node("Relu", ["l"], ["y"])],
        [],
        [_vi("x", [1, 16])],
        [_vi("y", [1, 16])],
    )


@model("max_with_nan")
def _() -> onnx.ModelProto:
    return _make(
        [helper.make_node("Log", ["x"], ["l"]), helper.make_node("Max", ["l", "z"], ["y"])],
        [_t("z", np.zeros((1, 16), np.float32))],
        [_vi("x", [1, 16])],
        [_vi("y", [1, 16])],
    )


# -- run-time indices ------------------------------------------------------------------------------


@model("gather_index_out_of_range")
def _() -> onnx.ModelProto:
    return _make(
        [helper.make_node("Gather", ["x", "i"], ["y"], axis=1)],
        [_t("i", np.array([1, 100], np.int64))],
        [_vi("x", [1, 4])],
        [_vi("y", [1, 2])],
    )


# -- convolutions on tiny inputs (the implicit-GEMM bug) --------------------------------------------


@model("conv_tiny_spatial_stride2")
def _() -> onnx.ModelProto:
    rng = np.random.default_rng(0)
    return _make(
        [helper.make_node("Conv", ["x", "w", "b"], ["y"], strides=[2, 2], pads=[1, 1, 1, 1])],
        [
            _t("w", rng.standard_normal((16, 3, 3, 3)).astype(np.float32)),
            _t("b", rng.standard_normal(16).astype(np.float32)),
        ],
        [_vi("x", [1, 3, 1, 1])],
        [_vi("y", [1, 16, 1, 1])],
    )


def main(argv: list[str]) -> int:
    names = argv or sorted(BUILDERS)
    for name in names:
        m = BUILDERS[name]()
        (HERE / f"{name}.onnx").write_bytes(m.SerializeToString())
        print(f"{name}.onnx ({len(m.graph.node)} nodes)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
