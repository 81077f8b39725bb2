"""import_onnx: structure, names, shapes, folding, old-opset forms and numerics vs onnxruntime."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from frontend_helpers import check_vs_ort, make_model, rand, run_ours
from onnx import TensorProto, helper

from compiler.backends.interpreter.graph_interpreter import run_graph
from compiler.errors import CompilerError, ShapeError, UnsupportedError
from compiler.frontend import import_onnx
from compiler.graph import parse_module, print_module, verify_module
from sample_models.generate import MODELS as SAMPLE_BUILDERS

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "sample_models"
F = TensorProto.FLOAT
I64 = TensorProto.INT64


# -- sample and exported models -------------------------------------------------------------------

#: Every committed sample model (tests/test_sample_models_onnxruntime.py guards the list).
SAMPLE_NAMES = list(SAMPLE_BUILDERS)


@pytest.mark.parametrize("name", SAMPLE_NAMES)
def test_sample_models_match_recorded_outputs(name: str) -> None:
    m = import_onnx(SAMPLES / f"{name}.onnx")
    verify_module(m)
    assert parse_module(print_module(m)) is not None
    inp = dict(np.load(SAMPLES / f"{name}.input.npz"))
    exp = dict(np.load(SAMPLES / f"{name}.expected.npz"))
    out = run_graph(m, inp)
    np.testing.assert_allclose(out["output"], exp["output"], rtol=1e-4, atol=1e-5)
    assert m.meta["source"] == str(SAMPLES / f"{name}.onnx")
    assert m.meta["opset"] == (9 if name.endswith("opset9") else 17)


TORCH = ROOT / "tests" / "torch_models"


@pytest.mark.parametrize("path", sorted(TORCH.glob("*.onnx")), ids=lambda p: p.stem)
def test_pytorch_exports(path: Path) -> None:
    inp = dict(np.load(path.with_suffix(".input.npz")))
    exp = dict(np.load(path.with_suffix(".expected.npz")))
    m = import_onnx(path, input_shapes={k: v.shape for k, v in inp.items()})
    verify_module(m)
    # Everything computable at compile time was folded: no node reads only constants.
    from compiler.graph import Constant

    assert all(not all(isinstance(v, Constant) for v in n.operands) for n in m.main)
    out = run_graph(m, inp)
    for onnx_name, pname in m.meta["onnx_outputs"]:
        np.testing.assert_allclose(out[pname], exp[onnx_name], rtol=1e-4, atol=1e-5)


def test_lenet_shape_chain_folds() -> None:
    m = import_onnx(SAMPLES / "lenet.onnx")
    ops = [n.op for n in m.main]
    assert "Gather" not in ops and "Concat" not in ops
    # Small shape constants never reach the module.
    assert all(c.type.elem.value == "f32" for c in m.constants.values())


def test_pytorch_style_flatten_chain_folds() -> None:
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Gather", ["s", "zero"], ["n"], axis=0),
        helper.make_node("Unsqueeze", ["n", "axes"], ["n1"]),
        helper.make_node("Concat", ["n1", "minus1"], ["shape"], axis=0),
        helper.make_node("Reshape", ["x", "shape"], ["y"]),
    ]
    model = make_model(
        nodes,
        {"x": rand(2, 3, 4)},
        {"y": (F, [2, 12])},
        13,
        {
            "zero": np.array(0, np.int64),
            "axes": np.array([0], np.int64),
            "minus1": np.array([-1], np.int64),
        },
    )
    m = import_onnx(model)
    verify_module(m)
    assert [n.op for n in m.main] == ["Reshape", "Save"]
    assert m.outputs()[0].type.shape == (2, 12)
    check_vs_ort(model, {"x": rand(2, 3, 4)})


# -- names, order, provenance ---------------------------------------------------------------------


def test_names_order_and_provenance() -> None:
    nodes = [
        helper.make_node("Add", ["b", "a"], ["s"], name="the sum"),
        helper.make_node("Relu", ["s"], ["r"]),
        helper.make_node("Neg", ["a"], ["n"]),
    ]
    model = make_model(nodes, {"b": rand(3), "a": rand(3)}, {"r": F, "n": F}, 17)
    m = import_onnx(model, name="demo")
    assert m.name == "demo"
    assert [p.name for p in m.inputs()] == ["b", "a"]
    assert [p.name for p in m.outputs()] == ["r", "n"]
    assert list(m.placeholders) == ["b", "a", "r", "n"]
    add = next(n for n in m.main if n.op == "Add")
    assert add.name == "the_sum"
    assert add.meta["onnx_node"] == "the sum" and add.meta["origin"] == ("the sum",)
    relu = next(n for n in m.main if n.op == "Relu")
    assert relu.name == "Relu_1" and relu.meta["onnx_node"] == "Relu_1"
    assert m.meta["onnx_inputs"] == [("b", "b"), ("a", "a")]


def test_output_that_is_an_input_or_a_constant() -> None:
    nodes = [helper.make_node("Identity", ["x"], ["y"]), helper.make_node("Shape", ["x"], ["s"])]
    model = make_model(nodes, {"x": rand(2, 5)}, {"y": F, "s": I64}, 17)
    got = run_ours(model, {"x": rand(2, 5)})
    np.testing.assert_array_equal(got[0], rand(2, 5))
    np.testing.assert_array_equal(got[1], [2, 5])


def test_unused_initializers_do_not_become_constants() -> None:
    nodes = [helper.make_node("Relu", ["x"], ["y"])]
    model = make_model(nodes, {"x": rand(4)}, {"y": F}, 17, {"unused": rand(1000)})
    assert not import_onnx(model).constants


# -- symbolic shapes ------------------------------------------------------------------------------


def _dynamic_model() -> onnx.ModelProto:
    nodes = [helper.make_node("Relu", ["x"], ["y"])]
    return make_model(nodes, {"x": (F, ["batch", 3])}, {"y": F}, 17)


def test_symbolic_dim_needs_input_shapes() -> None:
    with pytest.raises(ShapeError) as info:
        import_onnx(_dynamic_model())
    msg = str(info.value)
    assert "'x'" in msg and "--input-shape x=" in msg and "input_shapes=" in msg


def test_symbolic_dim_with_input_shapes() -> None:
    m = import_onnx(_dynamic_model(), input_shapes={"x": (5, 3)})
    assert m.inputs()[0].type.shape == (5, 3)


@pytest.mark.parametrize(
    "shapes, pattern",
    [
        ({"nope": (1, 3)}, "'nope', which is not an input"),
        ({"x": (1, 3, 1)}, "rank 3"),
        ({"x": (1, 4)}, "dim 1 = 4, but the model fixes it to 3"),
    ],
)
def test_bad_input_shapes(shapes, pattern) -> None:
    with pytest.raises(ShapeError, match=pattern):
        import_onnx(_dynamic_model(), input_shapes=shapes)


# -- refusals -------------------------------------------------------------------------------------


def test_unknown_op() -> None:
    model = make_model(
        [helper.make_node("Frobnicate", ["x"], ["y"], name="frob")], {"x": rand(2)}, {"y": F}, 17
    )
    with pytest.raises(UnsupportedError) as info:
        import_onnx(model)
    msg = str(info.value)
    assert "frob" in msg and "Frobnicate" in msg and "opset 17" in msg
    assert info.value.op == "Frobnicate" and info.value.node == "frob"


def test_unsupported_dtype() -> None:
    node = helper.make_node("Relu", ["x"], ["y"])
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.COMPLEX64, [2])],
        [helper.make_tensor_value_info("y", TensorProto.COMPLEX64, [2])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    with pytest.raises(UnsupportedError, match="'x' has element type complex64"):
        import_onnx(model)


def test_unsupported_domain_and_opset() -> None:
    node = helper.make_node("FusedGemm", ["x"], ["y"], domain="com.microsoft")
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("x", F, [2])],
        [helper.make_tensor_value_info("y", F, [2])],
    )
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)]
    )
    with pytest.raises(UnsupportedError, match="domain 'com.microsoft'"):
        import_onnx(model)
    model = make_model([helper.make_node("Relu", ["x"], ["y"])], {"x": rand(2)}, {"y": F}, 17)
    model.opset_import[0].version = 99
    with pytest.raises(CompilerError):
        import_onnx(model)


def test_runtime_shape_operand_is_refused() -> None:
    nodes = [helper.make_node("Reshape", ["x", "shape"], ["y"])]
    model = make_model(nodes, {"x": rand(6), "shape": (I64, [2])}, {"y": F}, 17)
    with pytest.raises(UnsupportedError, match="must be known at compile time"):
        import_onnx(model)


def test_used_dropout_mask_before_opset_10_is_refused() -> None:
    nodes = [helper.make_node("Dropout", ["x"], ["y", "mask"])]
    model = make_model(nodes, {"x": rand(4)}, {"y": F, "mask": F}, 9)
    with pytest.raises(UnsupportedError, match="mask"):
        import_onnx(model)


def test_same_auto_pad_with_dilated_pool_is_refused() -> None:
    # onnxruntime and the ONNX spec disagree on these pads: refuse rather than guess.
    node = helper.make_node(
        "MaxPool", ["x"], ["y"], kernel_shape=[2, 2], auto_pad="SAME_UPPER", dilations=[2, 2]
    )
    model = make_model([node], {"x": rand(1, 1, 5, 5)}, {"y": F}, 19)
    with pytest.raises(UnsupportedError, match="dilations"):
        import_onnx(model)


def test_conv4d_is_refused() -> None:
    # 1-, 2- and 3-D convolutions run (3-D as sums of 2-D ones); 4-D spatial ones do not.
    nodes = [helper.make_node("Conv", ["x", "w"], ["y"])]
    model = make_model(
        nodes, {"x": rand(1, 1, 3, 3, 3, 3)}, {"y": F}, 17, {"w": rand(1, 1, 2, 2, 2, 2)}
    )
    with pytest.raises(UnsupportedError, match="4-D spatial"):
        import_onnx(model)


# -- old-opset attribute forms, vs onnxruntime ----------------------------------------------------


def test_opset9_attribute_forms() -> None:
    x = rand(1, 4, 6, 6)
    nodes = [
        helper.make_node("Slice", ["x"], ["s"], starts=[1, -5], ends=[4, 1000], axes=[1, 3]),
        helper.make_node(
            "Pad", ["s"], ["p"], pads=[0, 0, 1, 2, 0, 0, 2, 1], mode="constant", value=0.5
        ),
        helper.make_node("Clip", ["p"], ["c"], min=-0.5, max=0.7),
        helper.make_node("Unsqueeze", ["c"], ["u"], axes=[0]),
        helper.make_node("Squeeze", ["u"], ["q"], axes=[0]),
        helper.make_node("BatchNormalization", ["q", "g", "b", "m", "v"], ["bn"], epsilon=1e-3),
        helper.make_node("Dropout", ["bn"], ["d"], ratio=0.3),
        helper.make_node("Upsample", ["d", "scales"], ["up"], mode="nearest"),
        helper.make_node("Softmax", ["up"], ["sm"], axis=2),
        helper.make_node("ReduceMean", ["sm"], ["y"], axes=[3], keepdims=0),
    ]
    inits = {
        "g": rand(3, seed=1),
        "b": rand(3, seed=2),
        "m": rand(3, seed=3),
        "v": np.abs(rand(3, seed=4)) + 0.5,
        "scales": np.array([1, 1, 2, 2], np.float32),
    }
    model = make_model(nodes, {"x": x}, {"y": F}, 9, inits)
    check_vs_ort(model, {"x": x})


def test_opset7_batchnorm_spatial_and_softmax_coercion() -> None:
    x = rand(2, 3, 4, 5)
    nodes = [
        helper.make_node("BatchNormalization", ["x", "g", "b", "m", "v"], ["bn"], spatial=1),
        helper.make_node("LogSoftmax", ["bn"], ["y"], axis=1),
    ]
    inits = {
        "g": rand(3, seed=1),
        "b": rand(3, seed=2),
        "m": rand(3, seed=3),
        "v": np.abs(rand(3, seed=4)) + 0.5,
    }
    model = make_model(nodes, {"x": x}, {"y": F}, 7, inits)
    check_vs_ort(model, {"x": x})
    bad = make_model(
        [helper.make_node("BatchNormalization", ["x", "g", "b", "m", "v"], ["y"], spatial=0)],
        {"x": x},
        {"y": F},
        7,
        inits,
    )
    with pytest.raises(UnsupportedError, match="spatial"):
        import_onnx(bad)


def test_opset11_resize_and_clip_inputs() -> None:
    x = rand(1, 2, 3, 4)
    nodes = [
        helper.make_node(
            "Resize",
            ["x", "roi", "scales"],
            ["r"],
            mode="linear",
            coordinate_transformation_mode="align_corners",
        ),
        helper.make_node("Clip", ["r", "lo", "hi"], ["y"]),
    ]
    inits = {
        "roi": np.zeros(0, np.float32),
        "scales": np.array([1, 1, 2, 1.5], np.float32),
        "lo": np.array(-0.3, np.float32),
        "hi": np.array(0.4, np.float32),
    }
    model = make_model(nodes, {"x": x}, {"y": F}, 11, inits)
    check_vs_ort(model, {"x": x})


@pytest.mark.parametrize(
    "trans_a, trans_b, alpha, beta, c_shape",
    [
        (0, 0, 1.0, 1.0, (5,)),
        (0, 1, 1.0, 1.0, (1, 5)),
        (1, 1, 0.5, 2.0, (3, 5)),
        (0, 1, 2.0, 1.0, None),
        (1, 0, 1.0, 0.5, (3, 1)),
        (0, 0, 1.0, 1.0, ()),
    ],
)
def test_gemm_forms(trans_a, trans_b, alpha, beta, c_shape) -> None:
    a = rand(4, 3) if trans_a else rand(3, 4)
    b = rand(5, 4, seed=1) if trans_b else rand(4, 5, seed=1)
    inits = {"b": b}
    ins = ["a", "b"]
    if c_shape is not None:
        inits["c"] = rand(*c_shape, seed=2)
        ins.append("c")
    node = helper.make_node(
        "Gemm", ins, ["y"], transA=trans_a, transB=trans_b, alpha=alpha, beta=beta
    )
    model = make_model([node], {"a": a}, {"y": F}, 13, inits)
    check_vs_ort(model, {"a": a})
    m = import_onnx(model)
    assert "Transpose" not in [n.op for n in m.main if n.operands[0].name == "b"]


def test_gemm_with_vector_bias_is_fully_connected() -> None:
    node = helper.make_node("Gemm", ["a", "w", "c"], ["y"], transB=1)
    model = make_model(
        [node], {"a": rand(2, 4)}, {"y": F}, 17, {"w": rand(3, 4, seed=1), "c": rand(3, seed=2)}
    )
    ops = [n.op for n in import_onnx(model).main]
    assert ops == ["FullyConnected", "Save"]


@pytest.mark.parametrize(
    "sa, sb", [((4,), (4, 3)), ((2, 4), (4,)), ((4,), (4,)), ((2, 1, 3, 4), (5, 4, 2))]
)
def test_matmul_shapes(sa, sb) -> None:
    model = make_model(
        [helper.make_node("MatMul", ["a", "b"], ["y"])],
        {"a": rand(*sa), "b": rand(*sb, seed=1)},
        {"y": F},
        13,
    )
    check_vs_ort(model, {"a": rand(*sa), "b": rand(*sb, seed=1)}, rtol=1e-4)


@pytest.mark.parametrize("auto_pad", ["NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"])
def test_conv_1d_and_auto_pad(auto_pad: str) -> None:
    x = rand(1, 2, 9)
    kw = {"strides": [2], "auto_pad": auto_pad}
    if auto_pad == "NOTSET":
        kw["pads"] = [1, 2]
    node = helper.make_node("Conv", ["x", "w", "b"], ["y"], **kw)
    model = make_model(
        [node], {"x": x}, {"y": F}, 13, {"w": rand(3, 2, 3, seed=1), "b": rand(3, seed=2)}
    )
    check_vs_ort(model, {"x": x}, rtol=1e-4)


@pytest.mark.parametrize(
    "kw",
    [
        {"strides": [2, 2]},
        {"strides": [2, 2], "output_padding": [1, 0], "pads": [0, 1, 1, 0]},
        {"strides": [2, 2], "auto_pad": "SAME_UPPER"},
        {"strides": [2, 2], "auto_pad": "SAME_LOWER"},
        {"strides": [2, 2], "dilations": [2, 2], "output_shape": [9, 9]},  # crops 1 on each side
        {"strides": [2, 2], "group": 2, "dilations": [2, 1]},
    ],
)
def test_conv_transpose_forms(kw) -> None:
    x = rand(1, 2, 3, 3)
    groups = kw.get("group", 1)
    node = helper.make_node("ConvTranspose", ["x", "w"], ["y"], **kw)
    model = make_model([node], {"x": x}, {"y": F}, 13, {"w": rand(2, 4 // groups, 3, 3, seed=1)})
    check_vs_ort(model, {"x": x}, rtol=1e-4)


def test_conv_transpose_ambiguous_output_shape_is_refused() -> None:
    # total padding 1: the spec pads the start, onnxruntime the end.
    node = helper.make_node("ConvTranspose", ["x", "w"], ["y"], output_shape=[3, 3])
    model = make_model([node], {"x": rand(1, 2, 3, 3)}, {"y": F}, 13, {"w": rand(2, 1, 2, 2)})
    with pytest.raises(UnsupportedError, match="ambiguous"):
        import_onnx(model)


@pytest.mark.parametrize(
    "op, kw",
    [
        (
            "MaxPool",
            {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1], "ceil_mode": 1},
        ),
        ("MaxPool", {"kernel_shape": [2, 2], "auto_pad": "SAME_UPPER"}),
        ("MaxPool", {"kernel_shape": [2, 2], "pads": [1, 0, 1, 1], "dilations": [2, 2]}),
        ("AveragePool", {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "count_include_pad": 0}),
        (
            "AveragePool",
            {
                "kernel_shape": [3, 2],
                "strides": [2, 1],
                "pads": [1, 0, 1, 1],
                "count_include_pad": 1,
            },
        ),
        (
            "AveragePool",
            {
                "kernel_shape": [2, 2],
                "strides": [2, 2],
                "dilations": [2, 2],
                "pads": [1, 1, 1, 1],
                "ceil_mode": 1,
            },
        ),
    ],
)
def test_pools(op: str, kw: dict) -> None:
    x = rand(1, 2, 7, 8)
    model = make_model([helper.make_node(op, ["x"], ["y"], **kw)], {"x": x}, {"y": F}, 19)
    check_vs_ort(model, {"x": x})


def test_slice_negative_steps_and_int_max() -> None:
    x = rand(5, 6)
    node = helper.make_node("Slice", ["x", "st", "en", "ax", "sp"], ["y"])
    inits = {
        "st": np.array([-1, 2**62], np.int64),
        "en": np.array([-(2**63), 1], np.int64),
        "ax": np.array([0, 1], np.int64),
        "sp": np.array([-2, -1], np.int64),
    }
    model = make_model([node], {"x": x}, {"y": F}, 13, inits)
    check_vs_ort(model, {"x": x})


def test_slice_negative_step_start_before_the_first_element() -> None:
    # ONNX clamps such a start to 0 (one element), Python's slice.indices to -1 (empty): found
    # by the fuzzing campaign (tests/fuzz) as a [1, 1, 0] output where onnxruntime gives [1, 1, 1]
    x = rand(1, 3, 4)
    node = helper.make_node("Slice", ["x", "st", "en", "ax", "sp"], ["y"])
    inits = {
        "st": np.array([-3, -9], np.int64),
        "en": np.array([-2, -12], np.int64),
        "ax": np.array([0, 2], np.int64),
        "sp": np.array([-1, -2], np.int64),
    }
    model = make_model([node], {"x": x}, {"y": F}, 13, inits)
    check_vs_ort(model, {"x": x})


@pytest.mark.parametrize("mode", ["constant", "reflect", "edge"])
def test_pad_modes_and_negative_pads(mode: str) -> None:
    x = rand(3, 5)
    node = helper.make_node("Pad", ["x", "pads", "v"], ["y"], mode=mode)
    inits = {"pads": np.array([1, -1, 2, 2], np.int64), "v": np.array(1.5, np.float32)}
    model = make_model([node], {"x": x}, {"y": F}, 13, inits)
    check_vs_ort(model, {"x": x})


def test_reshape_zero_minus_one_allowzero_and_expand_tile() -> None:
    x = rand(2, 3, 4)
    nodes = [
        helper.make_node("Reshape", ["x", "s1"], ["r"]),
        helper.make_node("Expand", ["r", "e"], ["ex"]),
        helper.make_node("Tile", ["ex", "t"], ["y"]),
    ]
    inits = {
        "s1": np.array([0, -1, 1], np.int64),
        "e": np.array([2, 1, 12, 3], np.int64),
        "t": np.array([1, 2, 1, 1], np.int64),
    }
    model = make_model(nodes, {"x": x}, {"y": F}, 14, inits)
    check_vs_ort(model, {"x": x})


def test_integer_and_bool_ops() -> None:
    a = np.array([[3, -7, 8], [1, 0, -2]], np.int64)
    b = np.array([2, 3, -3], np.int64)
    nodes = [
        helper.make_node("Div", ["a", "b"], ["d"]),
        helper.make_node("Greater", ["d", "zero"], ["g"]),
        helper.make_node("Not", ["g"], ["ng"]),
        helper.make_node("Where", ["ng", "a", "d"], ["w"]),
        helper.make_node("Cast", ["w"], ["y"], to=TensorProto.INT32),
        helper.make_node("ArgMax", ["a"], ["am"], axis=1, keepdims=0),
        helper.make_node("ReduceMax", ["a"], ["rm"], axes=[0], keepdims=1),
        helper.make_node("Clip", ["a", "lo", "hi"], ["c"]),
    ]
    inits = {
        "zero": np.array(0, np.int64),
        "lo": np.array(-1, np.int64),
        "hi": np.array(5, np.int64),
    }
    model = make_model(
        nodes, {"a": a, "b": b}, {"y": TensorProto.INT32, "am": I64, "rm": I64, "c": I64}, 13, inits
    )
    check_vs_ort(model, {"a": a, "b": b})


def test_variadic_and_activations() -> None:
    xs = {k: rand(2, 3, seed=i) for i, k in enumerate("abc")}
    nodes = [
        helper.make_node("Sum", ["a", "b", "c"], ["s"]),
        helper.make_node("Mean", ["a", "b", "c"], ["m"]),
        helper.make_node("Max", ["s", "m"], ["mx"]),
        helper.make_node("HardSigmoid", ["mx"], ["h"], alpha=0.3),
        helper.make_node("Selu", ["h"], ["se"]),
        helper.make_node("LeakyRelu", ["se"], ["lr"], alpha=0.2),
        helper.make_node("Elu", ["lr"], ["el"]),
        helper.make_node("PRelu", ["a", "slope"], ["pr"]),
        helper.make_node("Mul", ["el", "pr"], ["y"]),
    ]
    model = make_model(nodes, xs, {"y": F}, 13, {"slope": rand(3, seed=9)})
    check_vs_ort(model, xs)


def test_split_forms() -> None:
    x = rand(7, 2)
    nodes = [helper.make_node("Split", ["x"], ["a", "b", "c"], axis=0, num_outputs=3)]
    model = make_model(nodes, {"x": x}, {"a": F, "b": F, "c": F}, 18)
    check_vs_ort(model, {"x": x})
    nodes = [helper.make_node("Split", ["x"], ["a", "b"], axis=0, split=[3, 4])]
    model = make_model(nodes, {"x": x}, {"a": F, "b": F}, 11)
    check_vs_ort(model, {"x": x})


def test_layernorm_and_gelu() -> None:
    x = rand(2, 4, 8)
    nodes = [
        helper.make_node("LayerNormalization", ["x", "g", "b"], ["ln"], axis=-1, epsilon=1e-5),
        helper.make_node("Gelu", ["ln"], ["y"]),
    ]
    model = make_model(nodes, {"x": x}, {"y": F}, 20, {"g": rand(8, seed=1), "b": rand(8, seed=2)})
    check_vs_ort(model, {"x": x}, rtol=1e-4)


def test_constant_folding_of_constant_subgraph() -> None:
    nodes = [
        helper.make_node("Constant", [], ["c"], value_floats=[1.0, 2.0, 3.0]),
        helper.make_node("Mul", ["c", "c"], ["c2"]),
        helper.make_node(
            "ConstantOfShape", ["shape"], ["ones"], value=helper.make_tensor("v", F, [1], [1.0])
        ),
        helper.make_node("Add", ["c2", "ones"], ["c3"]),
        helper.make_node("Add", ["x", "c3"], ["y"]),
    ]
    model = make_model(
        nodes, {"x": rand(2, 3)}, {"y": F}, 13, {"shape": np.array([2, 3], np.int64)}
    )
    m = import_onnx(model)
    assert [n.op for n in m.main] == ["Add", "Save"]
    check_vs_ort(model, {"x": rand(2, 3)})


def test_large_model_imports_without_copying_weights() -> None:
    w = rand(256, 256)
    nodes = [
        helper.make_node("MatMul", ["x" if i == 0 else f"h{i - 1}", "w"], [f"h{i}"])
        for i in range(50)
    ]
    model = make_model(nodes, {"x": rand(1, 256)}, {"h49": F}, 17, {"w": w})
    m = import_onnx(model)
    assert len(m.constants) == 1 and len(m.main) == 51
