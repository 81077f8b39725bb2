"""load_model: every bad input is one clear ModelLoadError naming the file and the problem."""

from __future__ import annotations

from pathlib import Path

import onnx
import pytest
from onnx import TensorProto, helper

from compiler.errors import ModelLoadError, UnsupportedError
from compiler.frontend import import_onnx, load_model

SAMPLES = Path(__file__).resolve().parents[2] / "sample_models"


def test_loads_path_str_bytes_and_proto() -> None:
    path = SAMPLES / "mlp.onnx"
    a = load_model(path)
    b = load_model(str(path))
    c = load_model(path.read_bytes())
    d = load_model(a)
    assert a == b == c and d is a
    assert a.graph.node


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ModelLoadError, match=r"nope\.onnx' does not exist"):
        load_model(tmp_path / "nope.onnx")


def test_directory(tmp_path: Path) -> None:
    with pytest.raises(ModelLoadError, match="is a directory"):
        load_model(tmp_path)


def test_empty_file(tmp_path: Path) -> None:
    f = tmp_path / "empty.onnx"
    f.write_bytes(b"")
    with pytest.raises(ModelLoadError, match=r"empty\.onnx' is empty"):
        load_model(f)


@pytest.mark.parametrize(
    "data", [b"this is not an onnx model at all\n" * 3, b"\x08\x07", b"\x00\x01\x02\x03garbage"]
)
def test_not_onnx_bytes(tmp_path: Path, data: bytes) -> None:
    f = tmp_path / "junk.onnx"
    f.write_bytes(data)
    with pytest.raises(ModelLoadError, match="junk.onnx") as info:
        load_model(f)
    assert "\n" not in str(info.value)


def test_truncated_file(tmp_path: Path) -> None:
    data = (SAMPLES / "lenet.onnx").read_bytes()
    f = tmp_path / "cut.onnx"
    f.write_bytes(data[: len(data) // 2])
    with pytest.raises(ModelLoadError, match="cut.onnx"):
        load_model(f)


def test_model_without_graph() -> None:
    m = onnx.ModelProto()
    m.ir_version = 8
    m.opset_import.add().version = 17
    with pytest.raises(ModelLoadError, match="no graph"):
        load_model(m.SerializeToString())


def test_checker_failure_is_a_load_error() -> None:
    # A node reading a value nothing defines fails the checker.
    node = helper.make_node("Relu", ["missing"], ["y"])
    graph = helper.make_graph(
        [node], "g", [], [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])]
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    with pytest.raises((ModelLoadError, UnsupportedError)):
        import_onnx(model)


def test_import_onnx_names_the_file_in_errors(tmp_path: Path) -> None:
    f = tmp_path / "bad.onnx"
    f.write_bytes(b"nonsense" * 10)
    with pytest.raises(ModelLoadError, match="bad.onnx"):
        import_onnx(f)


def test_the_checker_reads_the_file_bytes_not_a_reserialized_proto(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Importing a file handed the ONNX checker the parsed proto, which it serialized again:
    1.4-2 s of a 340 MiB BERT's 2.5 s import (parsing it took 0.12 s). The checker now reads
    the bytes the file gave, unless the weights came from external files (then the proto, so
    that it sees them)."""
    from compiler.frontend import loader
    from compiler.pipeline import import_model

    seen: list[type] = []
    real = onnx.checker.check_model

    def spy(model, *a, **kw):
        seen.append(type(model))
        return real(model, *a, **kw)

    monkeypatch.setattr(onnx.checker, "check_model", spy)
    path = SAMPLES / "mlp.onnx"
    import_model(str(path))
    import_onnx(path)
    assert seen == [bytes, bytes]
    # a model that keeps its weights in an external file: the checker gets the proto
    model = onnx.load(path)
    onnx.save_model(
        model,
        tmp_path / "ext.onnx",
        save_as_external_data=True,
        all_tensors_to_one_file=True,
        location="ext.bin",
        size_threshold=0,
    )
    seen.clear()
    proto, data = loader.read_model(tmp_path / "ext.onnx")
    assert data is None and seen == [onnx.ModelProto]
    seen.clear()
    import_onnx(tmp_path / "ext.onnx")
    assert seen == [onnx.ModelProto]
