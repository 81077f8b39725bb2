"""Resource limits of a compile (compiler/limits.py): the planned arena and any single tensor
stay under CompileOptions.max_memory, compile-time tensors under CompileOptions.fold_limit, and
nothing huge is ever allocated while compiling — one clear refusal instead."""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from compiler.errors import CompilerError, ResourceLimitError
from compiler.limits import GIB, KIB, MIB, format_size, parse_size
from compiler.pipeline import CompileOptions, compile_model

LENET = Path(__file__).resolve().parents[1] / "sample_models" / "lenet.onnx"


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("8GiB", 8 * GIB),
        ("8 gib", 8 * GIB),
        ("512MiB", 512 * MIB),
        ("1.5G", int(1.5 * GIB)),
        ("4096", 4096),
        ("64k", 64 * KIB),
        ("2GB", 2 * 1000**3),
        (1024, 1024),
    ],
)
def test_parse_size(text, value) -> None:
    assert parse_size(text) == value


@pytest.mark.parametrize("text", ["", "8 GiBs", "lots", "-1G", "0", "1e3G", "G"])
def test_parse_size_refuses(text) -> None:
    with pytest.raises(CompilerError):
        parse_size(text)


def test_format_size() -> None:
    assert format_size(8 * GIB) == "8.0 GiB"
    assert format_size(300 * MIB) == "300.0 MiB"
    assert format_size(512) == "512 B"


def _model(nodes, inits, inputs, outputs) -> bytes:
    g = helper.make_graph(nodes, "g", inputs, outputs, inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m.SerializeToString()


def _const_of_shape(n: int) -> bytes:
    value = numpy_helper.from_array(np.array([1.0], np.float32))
    return _model(
        [
            helper.make_node("ConstantOfShape", ["s"], ["c"], value=value),
            helper.make_node("Add", ["x", "c"], ["y"]),
        ],
        [numpy_helper.from_array(np.array([n, n], np.int64), "s")],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, n])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [n, n])],
    )


def _peak_mib(fn) -> float:
    tracemalloc.start()
    try:
        fn()
    finally:
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    return peak / MIB


def test_huge_constant_of_shape_is_refused_without_allocating() -> None:
    data = _const_of_shape(100_000)  # a 37 GiB constant

    def compile_it() -> None:
        with pytest.raises(
            ResourceLimitError, match=r"37\.3 GiB, above the memory limit of 8\.0 GiB"
        ):
            compile_model(data)

    assert _peak_mib(compile_it) < 64


def test_raised_memory_limit_compiles_a_huge_plan_without_allocating_it() -> None:
    data = _const_of_shape(100_000)
    box = {}

    def compile_it() -> None:
        box["r"] = compile_model(data, CompileOptions(max_memory=1 << 40))

    assert _peak_mib(compile_it) < 64
    sizes = box["r"].plan.region_sizes
    assert sum(sizes.values()) > 30 * GIB


def test_huge_range_is_refused_at_import() -> None:
    data = _model(
        [helper.make_node("Range", ["a", "b", "d"], ["y"])],
        [
            numpy_helper.from_array(np.array(0, np.int64), "a"),
            numpy_helper.from_array(np.array(10**12, np.int64), "b"),
            numpy_helper.from_array(np.array(1, np.int64), "d"),
        ],
        [],
        [helper.make_tensor_value_info("y", TensorProto.INT64, [10**12])],
    )
    with pytest.raises(ResourceLimitError, match="Range.*constant-folding limit of 256.0 MiB"):
        compile_model(data)


def test_fold_limit_leaves_big_constants_unfolded() -> None:
    # ConstantOfShape of 64x64 floats (16 KiB): materialised under the default budget, a
    # Broadcast node under a 1 KiB one; the result is the same either way
    data = _const_of_shape(64)
    small = compile_model(data, CompileOptions(fold_limit=KIB, low_level=False))
    big = compile_model(data, CompileOptions(low_level=False))
    assert "Broadcast" in {n.op for n in small.module.functions[0].nodes}
    assert "Broadcast" not in {n.op for n in big.module.functions[0].nodes}
    from compiler.executors import make_executor

    x = np.arange(64, dtype=np.float32).reshape(1, 64)
    a = make_executor(small, "graph").run([x])
    b = make_executor(big, "graph").run([x])
    np.testing.assert_array_equal(next(iter(a.values())), next(iter(b.values())))


def test_plan_above_max_memory_is_refused() -> None:
    with pytest.raises(
        ResourceLimitError, match="the memory plan .* above the memory limit of 100.0 KiB"
    ):
        compile_model(LENET, CompileOptions(max_memory=100 * KIB))
    assert compile_model(LENET).plan is not None


def test_input_tensor_above_max_memory_is_refused_after_import() -> None:
    model = onnx.load(LENET)
    with pytest.raises(ResourceLimitError, match="input 'input'"):
        compile_model(model, CompileOptions(max_memory=1 * KIB))


_MLP = str(Path(__file__).resolve().parents[1] / "sample_models" / "mlp.onnx")


@pytest.mark.parametrize(
    "argv",
    [
        ["compile"],
        ["run"],
        ["mem"],
        ["bench", "--reps", "1", "--vs", "none"],
        ["export", "--view", "graph", "--format", "dot", "-o", "{tmp}/g.dot"],
        ["bundle", "-o", "{tmp}/b"],
    ],
    ids=lambda a: a[0],
)
def test_max_memory_on_every_compiling_command(argv: list[str], tmp_path: Path, capsys) -> None:
    """`--max-memory SIZE` (issue 11 Build 2): one line naming the limit and exit 2."""
    from glowviz.cli import main

    args = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    assert main([args[0], _MLP, *args[1:], "--max-memory", "1KiB"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "above the memory limit of 1.0 KiB" in err, err


def test_max_memory_refuses_an_unreadable_size(capsys) -> None:
    from glowviz.cli import main

    with pytest.raises(SystemExit) as e:
        main(["compile", _MLP, "--max-memory", "8 parsecs"])
    assert e.value.code == 2
    assert "cannot read the size '8 parsecs'" in capsys.readouterr().err
