"""Import-time validation (compiler/frontend/validate.py): what the ONNX checker lets through is
refused with one InvalidModelError naming the node or tensor, the attribute and the value."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from compiler.errors import CompilerError, InvalidModelError, UnsupportedError
from compiler.frontend import import_onnx, load_model

F = TensorProto.FLOAT


def _model(nodes, inits, inputs, outputs, opset: int = 17) -> onnx.ModelProto:
    g = helper.make_graph(nodes, "g", inputs, outputs, inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m


def _out(rank: int) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info("y", F, [f"d{i}" for i in range(rank)])


def _conv_model(**attrs) -> onnx.ModelProto:
    w = numpy_helper.from_array(np.ones((4, 2, 3, 3), np.float32), "w")
    return _model(
        [helper.make_node("Conv", ["x", "w"], ["y"], name="conv1", **attrs)],
        [w],
        [helper.make_tensor_value_info("x", F, [1, 2, 6, 6])],
        [_out(4)],
    )


def _matmul_model(b: onnx.TensorProto) -> onnx.ModelProto:
    return _model(
        [helper.make_node("MatMul", ["x", "b"], ["y"], name="mm")],
        [b],
        [helper.make_tensor_value_info("x", F, [1, 4])],
        [helper.make_tensor_value_info("y", F, [1, 4])],
    )


def _refusal(model: onnx.ModelProto, cls: type[CompilerError] = InvalidModelError) -> str:
    with pytest.raises(cls) as info:
        import_onnx(model)
    text = str(info.value)
    assert "\n" not in text
    return text


def _weights() -> onnx.TensorProto:
    return numpy_helper.from_array(np.eye(4, dtype=np.float32), "b")


@pytest.mark.parametrize("delta", [-4, -1, 3, 100])
def test_raw_data_length_must_match_shape(delta: int) -> None:
    b = _weights()
    b.raw_data = b.raw_data[:delta] if delta < 0 else b.raw_data + bytes(delta)
    msg = _refusal(_matmul_model(b))
    assert "initializer 'b'" in msg and f"holds {64 + delta} bytes" in msg and "needs 64" in msg


def _typed(field: str, values: list[float], keep_raw: bool = False) -> onnx.TensorProto:
    """The 4x4 weights with `values` in the typed `field`, their raw_data cleared or kept."""
    b = _weights()
    if not keep_raw:
        b.ClearField("raw_data")
    getattr(b, field).extend(values)
    return b


def _dims(*dims: int) -> onnx.TensorProto:
    b = _weights()
    b.dims[:] = dims
    return b


@pytest.mark.parametrize(
    ("weights", "message"),
    [
        (_typed("float_data", [1.0] * 17), "float_data holds 17 values"),
        (_typed("float_data", []), "holds no data"),
        (_typed("int64_data", [1] * 16, keep_raw=True), "both raw_data and int64_data"),
        (_typed("int64_data", [1] * 16), "stored in int64_data"),
        (_dims(4, -4), "dim 1 is -4"),
        (_dims(1 << 40, 4), "above the largest supported dim"),
    ],
    ids=["count", "no-data", "twice", "wrong-field", "negative-dim", "huge-dim"],
)
def test_initializer_data_must_match_its_type_and_shape(
    weights: onnx.TensorProto, message: str
) -> None:
    assert message in _refusal(_matmul_model(weights))


def test_scalar_or_bool_where_a_matrix_is_expected() -> None:
    scalar = numpy_helper.from_array(np.array(2.0, np.float32), "b")
    assert "scalar" in _refusal(_matmul_model(scalar), UnsupportedError)
    flags = numpy_helper.from_array(np.eye(4, dtype=bool), "b")
    msg = _refusal(_matmul_model(flags))
    assert "input 1 ('B', 'b') is bool; MatMul takes" in msg and "float, float16" in msg


def test_operand_types_the_schema_does_not_allow() -> None:
    """A Conv with a bool bias (fuzz mutants 1513, 1535, 1779 of seed 2026): onnxruntime refuses
    the model; the interpreter used to run it and the LLVM backend to refuse it at codegen."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 5, 5])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3, 3, 3])
    w = numpy_helper.from_array(np.ones((3, 2, 3, 3), np.float32), "w")
    bias = numpy_helper.from_array(np.array([True, False, True]), "bias")
    conv = helper.make_node("Conv", ["x", "w", "bias"], ["y"], name="conv")
    graph = helper.make_graph([conv], "g", [x], [y], [w, bias])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    msg = _refusal(model)
    assert "node 'conv'" in msg and "input 2 ('B', 'bias') is bool; Conv takes" in msg


def test_external_data_segments(tmp_path) -> None:
    data = np.eye(4, dtype=np.float32)
    (tmp_path / "w.bin").write_bytes(data.tobytes())

    def with_external(**entries) -> str:
        b = _weights()
        b.ClearField("raw_data")
        b.data_location = TensorProto.EXTERNAL
        for k, v in entries.items():
            e = b.external_data.add()
            e.key, e.value = k, str(v)
        path = tmp_path / "m.onnx"
        path.write_bytes(_matmul_model(b).SerializeToString())
        with pytest.raises(CompilerError) as info:
            load_model(path)
        return str(info.value)

    assert "names no file" in with_external()
    assert "outside the model's folder" in with_external(location="../w.bin")
    assert "outside the model's folder" in with_external(location="/dev/zero")
    assert "'missing.bin' does not exist" in with_external(location="missing.bin")
    assert "runs past the end" in with_external(location="w.bin", offset=32, length=64)
    assert "holds 32 bytes" in with_external(location="w.bin", offset=0, length=32)
    assert "is -1" in with_external(location="w.bin", offset=-1)
    # the segment that fits loads
    b = _weights()
    b.ClearField("raw_data")
    b.data_location = TensorProto.EXTERNAL
    for k, v in {"location": "w.bin", "offset": "0", "length": "64"}.items():
        e = b.external_data.add()
        e.key, e.value = k, v
    path = tmp_path / "ok.onnx"
    path.write_bytes(_matmul_model(b).SerializeToString())
    import_onnx(path)


@pytest.mark.parametrize(
    ("attrs", "needle"),
    [
        ({"dilations": [0, 0]}, "dilations=[0, 0]: every value must be >= 1, got 0"),
        ({"strides": [1, 0]}, "strides=[1, 0]: every value must be >= 1, got 0"),
        ({"kernel_shape": [0, 3]}, "kernel_shape=[0, 3]"),
        ({"pads": [0, -1, 0, 0]}, "pads=[0, -1, 0, 0]: every value must be >= 0, got -1"),
        ({"pads": [1, 1]}, "pads=[1, 1] has 2 values; the 2-D input needs 4"),
        ({"group": 0}, "group=0 must be >= 1"),
        ({"group": 3}, "group=3 does not divide the 2 input channels"),
    ],
)
def test_conv_attribute_ranges(attrs, needle) -> None:
    msg = _refusal(_conv_model(**attrs))
    assert "node 'conv1'" in msg and "op Conv" in msg and needle in msg


def test_group_must_divide_output_channels() -> None:
    w = numpy_helper.from_array(np.ones((3, 1, 3, 3), np.float32), "w")
    m = _model(
        [helper.make_node("Conv", ["x", "w"], ["y"], name="c", group=2)],
        [w],
        [helper.make_tensor_value_info("x", F, [1, 2, 6, 6])],
        [_out(4)],
    )
    assert "group=2 does not divide the 3 output channels" in _refusal(m)


@pytest.mark.parametrize(
    ("op", "attrs", "needle"),
    [
        ("Softmax", {"axis": 2}, "axis=2 is out of range for a rank-2 input"),
        ("Flatten", {"axis": 3}, "axis=3 is out of range"),
        ("Transpose", {"perm": [0, 0]}, "perm=[0, 0] is not a permutation"),
        ("ReduceMean", {"axes": [5]}, "axes=[5]: 5 is out of range for rank 2"),
        ("ReduceMean", {"axes": [1, -1]}, "names an axis twice"),
        ("LRN", {"size": 0}, "size=0 must be >= 1"),
    ],
)
def test_axis_perm_and_size_ranges(op, attrs, needle) -> None:
    m = _model(
        [helper.make_node(op, ["x"], ["y"], name="n1", **attrs)],
        [],
        [helper.make_tensor_value_info("x", F, [2, 3] if op != "LRN" else [1, 3, 2, 2])],
        [_out({"Flatten": 2, "LRN": 4, "ReduceMean": 2}.get(op, 2))],
        opset=13 if op == "ReduceMean" else 17,
    )
    msg = _refusal(m)
    assert "node 'n1'" in msg and needle in msg


@pytest.mark.parametrize("dim", [(1 << 31), 10**12, (1 << 63) - 1])
def test_input_dims_within_limits(dim: int) -> None:
    m = _model(
        [helper.make_node("Relu", ["x"], ["y"])],
        [],
        [helper.make_tensor_value_info("x", F, [1, dim])],
        [_out(2)],
    )
    assert f"input 'x' dim 1 is {dim}, above the largest supported dim" in _refusal(m)


def test_empty_inputs_are_legal() -> None:
    # a dim of 0 is an empty tensor (ONNX's empty-set reductions): it imports and compiles
    m = _model(
        [helper.make_node("Relu", ["x"], ["y"])],
        [],
        [helper.make_tensor_value_info("x", F, [1, 0, 4])],
        [_out(3)],
    )
    assert import_onnx(m).placeholders["x"].type.shape == (1, 0, 4)


def test_valid_models_pass(tmp_path) -> None:
    # the sample models and the attribute forms above with legal values import as before
    import_onnx(_conv_model(dilations=[1, 1], strides=[2, 2], pads=[1, 1, 1, 1], group=1))
    import_onnx(_matmul_model(_weights()))
