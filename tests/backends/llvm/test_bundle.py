"""AOT bundles (compiler/backends/llvm/bundle.py, `glowviz bundle`): the object's symbols,
relocations and architecture, the header as warning-free C99 agreeing with the object, the
weights file, the entry's alignment check, cross targets, determinism across processes, and
`glowviz mem` on a header. Running the example on every sample model: tests/test_bundle_example.py.
"""

from __future__ import annotations

import ctypes
import json
import os
import subprocess
import sys
import zlib
from pathlib import Path

import numpy as np
import pytest

from compiler.backends.llvm import target
from compiler.backends.llvm.bundle import (
    ALLOWED_UNDEFINED,
    BundleOptions,
    _constants_read,
    _dense_plan,
    build_bundle,
)
from compiler.backends.llvm.bundle_header import read_header_report, weights_c_text
from compiler.backends.llvm.codegen import generate
from compiler.executors import make_executor
from compiler.pipeline import compile_model
from glowviz.cli import main
from tests.bundle_tools import (
    EM_AARCH64,
    EM_X86_64,
    ROOT,
    SAMPLES,
    elf_header,
    global_symbols,
    sample_inputs,
    tool,
    undefined_symbols,
)

MLP = SAMPLES / "mlp.onnx"
C99 = ["-std=c99", "-Wall", "-Wextra", "-Werror", "-pedantic"]


@pytest.fixture(scope="module")
def mlp_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("mlp-bundle")
    assert main(["bundle", str(MLP), "-o", str(out), "--embed-weights"]) == 0
    return out


def _cc(*args: str | Path, cwd: Path) -> None:
    proc = subprocess.run([tool("cc"), *map(str, args)], cwd=cwd, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


def test_files_symbols_and_architecture(mlp_dir: Path) -> None:
    names = sorted(p.name for p in mlp_dir.iterdir())
    assert names == ["mlp.h", "mlp.o", "mlp.weights.bin", "mlp.weights.c"]  # no temp files left
    obj = mlp_dir / "mlp.o"
    cls, e_type, machine = elf_header(obj.read_bytes())
    assert (cls, e_type) == (2, 1)  # 64-bit relocatable
    assert machine == {"x86_64": EM_X86_64, "aarch64": EM_AARCH64}[os.uname().machine]
    # One entry and its config; every kernel, wrapper and scratch buffer is internal.
    assert global_symbols(obj) == {"mlp", "mlp_config"}
    assert undefined_symbols(obj) <= ALLOWED_UNDEFINED


def test_header_is_c99_and_agrees_with_the_object(mlp_dir: Path, tmp_path: Path) -> None:
    """The header compiles warning-free as C99; its macros and the object's config agree.
    (Built in tmp_path: the bundle's directory keeps only what `glowviz bundle` wrote.)"""
    report = read_header_report((mlp_dir / "mlp.h").read_text())
    b = report["bundle"]["regions"]
    (tmp_path / "check.c").write_text(
        f"""#include <stdio.h>
#include "mlp.h"
typedef char constant_size_ok[MLP_CONSTANT_MEM_SIZE == {b["constant"]} ? 1 : -1];
typedef char activations_ok[MLP_ACTIVATIONS_MEM_SIZE == {b["activations"]} ? 1 : -1];
int main(void) {{
    const glowviz_bundle_config *c = &mlp_config;
    static const uint64_t in_shape[] = MLP_input_SHAPE;
    printf("%d %d %d %d %d %d %d %d %d %d %d\\n",
           c->format_version == MLP_FORMAT_VERSION, c->alignment == MLP_MEM_ALIGN,
           c->constant_size == MLP_CONSTANT_MEM_SIZE, c->mutable_size == MLP_MUTABLE_MEM_SIZE,
           c->activations_size == MLP_ACTIVATIONS_MEM_SIZE,
           c->weights_crc32 == MLP_WEIGHTS_CRC32, c->num_inputs == MLP_NUM_INPUTS,
           c->inputs[0].offset == MLP_input_OFFSET && c->inputs[0].size == MLP_input_SIZE,
           c->inputs[0].rank == MLP_input_RANK && c->inputs[0].shape[1] == in_shape[1],
           c->outputs[0].offset == MLP_output_OFFSET
               && c->outputs[0].elem_kind == MLP_output_ELEM_KIND,
           sizeof in_shape / sizeof in_shape[0] == MLP_input_RANK);
    return 0;
}}
"""
    )
    _cc(*C99, "-I", mlp_dir, "check.c", mlp_dir / "mlp.o", "-o", "check", "-lm", cwd=tmp_path)
    out = subprocess.run([str(tmp_path / "check")], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["1"] * 11
    # the embedded weights too
    _cc(*C99, "-I", mlp_dir, "-c", mlp_dir / "mlp.weights.c", "-o", "weights.o", cwd=tmp_path)


def test_weights_file_is_the_constant_region(mlp_dir: Path) -> None:
    weights = (mlp_dir / "mlp.weights.bin").read_bytes()
    header = (mlp_dir / "mlp.h").read_text()
    assert f"#define MLP_CONSTANT_MEM_SIZE {len(weights)}\n" in header
    assert f"#define MLP_WEIGHTS_CRC32 0x{zlib.crc32(weights):08x}u\n" in header
    assert len(weights) % 64 == 0


def test_bundle_keeps_only_the_constants_the_code_reads() -> None:
    """Packed weights are not stored twice: the bundle's constant region is smaller than the
    JIT's (the plan's constants plus the packed copies)."""
    result = compile_model(str(SAMPLES / "lenet.onnx"))
    jit_region = generate(result.lir, result.plan).constant_size
    bundle = build_bundle(result, BundleOptions())
    assert len(bundle.weights) < 0.6 * jit_region
    assert bundle.info.constant_size == len(bundle.weights)


@pytest.mark.parametrize("model", ["lenet", "resnet_small"])
def test_one_generation_gives_the_program_of_the_dense_plan(model: str) -> None:
    """build_bundle generates once: the kernels over the plan, then the wrappers over the plan
    holding only the constants those kernels read (``generate(relayout=...)``). The program is
    the one a whole generation over that dense plan gives, the bundle's former second pass:
    the same IR text, blobs and constant size, and the same constants read."""
    result = compile_model(str(SAMPLES / f"{model}.onnx"))
    plan = result.plan
    dense: dict[str, object] = {}

    def relayout(calls):
        dense["read"] = _constants_read(calls, plan)
        dense["plan"] = _dense_plan(plan, dense["read"])
        return dense["plan"]

    once = generate(result.lir, plan, relayout=relayout)
    again = generate(result.lir, dense["plan"])
    constants = {w.name for w in result.lir.weights.values() if w.is_constant}
    assert dense["read"] and dense["read"] < constants  # the relayout moves some of them
    assert once.ir_text == again.ir_text
    assert (once.blob_offsets, once.constant_size) == (again.blob_offsets, again.constant_size)
    assert _constants_read(again.entry_calls, dense["plan"]) == dense["read"]


@pytest.mark.parametrize("size", [0, 1, 15, 16, 17, 48, 53, 16 * 7 + 9, 4099])
def test_weights_c_rows_are_the_bytes_sixteen_a_line(size: int, monkeypatch) -> None:
    """`<name>.weights.c`'s array, filled by numpy a block of rows at a time (3 rows here), is
    the text one row at a time gives: across block boundaries, with a short last row, empty."""
    from compiler.backends.llvm import bundle_header

    monkeypatch.setattr(bundle_header, "_ROWS_AT_ONCE", 3)
    weights = np.random.default_rng(size).integers(0, 256, size, dtype=np.uint8).tobytes()
    rows = [
        "    " + ", ".join(f"0x{b:02x}" for b in weights[i : i + 16]) + ","
        for i in range(0, size, 16)
    ]
    text = weights_c_text("w", weights)
    body = text[text.index("{\n") + 2 : text.rindex("\n};")]
    assert body == ("\n".join(rows) if rows else "    0,")


def test_entry_runs_as_the_jit_does_and_checks_alignment(mlp_dir: Path, tmp_path: Path) -> None:
    """Linked into a shared library (only position-independent code links there), the entry
    computes what the in-process LLVM executor computes, and refuses misaligned regions."""
    _cc("-shared", mlp_dir / "mlp.o", "-o", "libmlp.so", "-lm", cwd=tmp_path)
    lib = ctypes.CDLL(str(tmp_path / "libmlp.so"))
    entry = lib.mlp
    entry.restype = ctypes.c_int
    entry.argtypes = [ctypes.c_void_p] * 3
    report = read_header_report((mlp_dir / "mlp.h").read_text())
    regions = report["bundle"]["regions"]

    def aligned(n: int) -> np.ndarray:
        raw = np.zeros(n + 128, dtype=np.uint8)
        shift = (-raw.ctypes.data) % 64
        return raw[shift : shift + n + 64]

    const = aligned(regions["constant"])
    const[: regions["constant"]] = np.frombuffer(
        (mlp_dir / "mlp.weights.bin").read_bytes(), np.uint8
    )
    mutable, acts = aligned(regions["mutable"]), aligned(regions["activations"])
    inputs = sample_inputs("mlp")
    ex = make_executor(compile_model(str(MLP)), "llvm")
    expected = ex.run(inputs)[ex.output_names[0]]
    info = {t["name"]: t for t in _tensors(mlp_dir / "mlp.h")}
    x = inputs["input"]
    mutable[info["input"]["offset"] : info["input"]["offset"] + x.nbytes] = x.view(np.uint8).ravel()
    assert entry(const.ctypes.data, mutable.ctypes.data, acts.ctypes.data) == 0
    o = info["output"]
    got = (
        mutable[o["offset"] : o["offset"] + expected.nbytes]
        .view(np.float32)
        .reshape(expected.shape)
    )
    np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-7)
    assert entry(const.ctypes.data + 4, mutable.ctypes.data, acts.ctypes.data) == 1
    assert entry(const.ctypes.data, mutable.ctypes.data, acts.ctypes.data + 8) == 1


def _tensors(header: Path) -> list[dict[str, int | str]]:
    """Name and offset of every input/output, read from the header's macros."""
    out = []
    for line in header.read_text().splitlines():
        if line.startswith("#define MLP_") and line.split()[1].endswith("_NAME"):
            out.append({"name": line.split('"')[1]})
        elif line.startswith("#define MLP_") and line.split()[1].endswith("_OFFSET"):
            out[-1]["offset"] = int(line.split()[2])
    return out


@pytest.mark.parametrize(
    "triple, cpu, machine",
    [("x86_64-unknown-linux-gnu", "x86-64-v2", EM_X86_64), ("aarch64-linux-gnu", None, EM_AARCH64)],
)
def test_cross_targets(tmp_path: Path, triple: str, cpu: str | None, machine: int) -> None:
    args = ["bundle", str(MLP), "-o", str(tmp_path), "--target", triple]
    assert main(args + (["--cpu", cpu] if cpu else [])) == 0
    obj = tmp_path / "mlp.o"
    assert elf_header(obj.read_bytes()) == (2, 1, machine)
    assert global_symbols(obj) == {"mlp", "mlp_config"}
    assert undefined_symbols(obj) <= ALLOWED_UNDEFINED
    header = (tmp_path / "mlp.h").read_text()
    assert f'#define MLP_TARGET "{triple}"' in header
    assert f'#define MLP_CPU "{cpu or "generic"}"' in header
    if cpu == "x86-64-v2":  # portable: SSE only, no AVX registers anywhere
        asm = subprocess.run(
            [tool("objdump"), "-d", str(obj)], capture_output=True, text=True, check=True
        ).stdout
        assert "%xmm" in asm and "%ymm" not in asm and "%zmm" not in asm


def test_generating_for_specialises_kernels_only_inside_the_block() -> None:
    host = target.default_isa()
    with target.generating_for(target.HostCPU("generic", "")):
        assert target.default_isa() == "generic"
        assert target.vector_width_f32() == 4
    with target.generating_for(target.HostCPU("x86-64-v3", "")):
        assert target.default_isa() == "avx2"
    assert target.default_isa() == host


def test_byte_identical_across_processes(tmp_path: Path) -> None:
    """Two processes with different hash seeds write the same bytes (sets, dicts, names)."""
    dirs = []
    for seed in ("1", "2"):
        out = tmp_path / seed
        env = dict(os.environ, PYTHONHASHSEED=seed)
        cmd = [sys.executable, "-m", "glowviz", "bundle", str(SAMPLES / "lenet.onnx")]
        subprocess.run([*cmd, "-o", str(out), "--embed-weights"], env=env, check=True, cwd=ROOT)
        dirs.append(out)
    files = sorted(p.name for p in dirs[0].iterdir())
    assert files == ["lenet.h", "lenet.o", "lenet.weights.bin", "lenet.weights.c"]
    for name in files:
        assert (dirs[0] / name).read_bytes() == (dirs[1] / name).read_bytes(), name


def test_mem_on_a_header_prints_the_plan(mlp_dir: Path, tmp_path: Path, capsys) -> None:
    assert main(["mem", str(MLP), "--json", str(tmp_path / "model.json")]) == 0
    from_model = capsys.readouterr().out
    assert main(["mem", str(mlp_dir / "mlp.h"), "--json", str(tmp_path / "header.json")]) == 0
    from_header = capsys.readouterr().out
    plan_text = from_model.split("wrote")[0]
    assert from_header.startswith(plan_text)  # the same plan, line for line
    assert "bundle mlp for" in from_header
    model_json = json.loads((tmp_path / "model.json").read_text())
    header_json = json.loads((tmp_path / "header.json").read_text())
    assert header_json.pop("bundle")["regions"]["mutable"] == model_json["regions"]["mutable"]
    assert header_json == model_json


def test_user_errors_exit_2(tmp_path: Path, capsys) -> None:
    out = str(tmp_path / "b")
    assert main(["bundle", str(MLP), "-o", out, "--name", "9lives"]) == 2
    assert "not a C identifier" in capsys.readouterr().err
    assert main(["bundle", str(MLP), "-o", out, "--target", "nonsense-triple"]) == 2
    assert "cannot generate code for target 'nonsense-triple'" in capsys.readouterr().err
    not_a_bundle = tmp_path / "plain.h"
    not_a_bundle.write_text("int f(void);\n")
    assert main(["mem", str(not_a_bundle)]) == 2
    assert "not a glowviz bundle header" in capsys.readouterr().err
    assert main(["bundle", str(MLP), "-o", out, "--quantize", str(tmp_path / "none.json")]) == 2
    assert "none.json" in capsys.readouterr().err


def test_awkward_names_and_no_constants(tmp_path: Path) -> None:
    """Tensor names that are not C identifiers (and clash once sanitised) become distinct
    macros, the config keeps the ONNX names, and a model without constants still builds."""
    import onnx
    from onnx import TensorProto, helper

    from tests.bundle_tools import build_example, parse_outputs

    shape = [2, 3]
    graph = helper.make_graph(
        [
            helper.make_node("Relu", ["in.put"], ["out:1"]),
            helper.make_node("Neg", ["in_put"], ["out/1"]),
        ],
        "awkward",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, shape) for n in ("in.put", "in_put")],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, shape) for n in ("out:1", "out/1")],
    )
    model = tmp_path / "awkward model.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), model)
    out = tmp_path / "b"
    assert main(["bundle", str(model), "-o", str(out), "--embed-weights", "--name", "awk"]) == 0
    header = (out / "awk.h").read_text()
    # A name that is an identifier keeps it; the others are sanitised, then suffixed.
    assert '#define AWK_in_put_NAME "in_put"' in header
    assert '#define AWK_in_put_2_NAME "in.put"' in header
    assert '#define AWK_out_1_NAME "out:1"' in header
    assert '#define AWK_out_1_2_NAME "out/1"' in header
    assert (out / "awk.weights.bin").read_bytes() == b""
    x = np.array([[-1.0, 2.0, -3.0], [4.0, -5.0, 6.0]], dtype=np.float32)
    np.save(tmp_path / "a.npy", x)
    np.save(tmp_path / "b.npy", x * 2)
    for embedded in (False, True):
        program = build_example(out, "awk", embedded=embedded)
        args = [str(program)] + ([] if embedded else ["--weights", str(out / "awk.weights.bin")])
        proc = subprocess.run(
            [*args, str(tmp_path / "a.npy"), str(tmp_path / "b.npy")],
            capture_output=True,
            text=True,
            check=True,
        )
        got = parse_outputs(proc.stdout)
        np.testing.assert_array_equal(got["out:1"], np.maximum(x, 0))
        np.testing.assert_array_equal(got["out/1"], -(x * 2))


@pytest.mark.parametrize(("op", "want"), [("Div", [7, 2, -2, -(2**31)]), ("Mod", [0, 2, 3, 0])])
def test_entry_reports_integer_division_by_zero(tmp_path: Path, op: str, want: list[int]) -> None:
    """A bundle's integer Div and Mod never trap: a zero divisor makes the entry return
    GLOWVIZ_BUNDLE_EDIVZERO, and the next call with good divisors returns OK again."""
    import onnx
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node(op, ["a", "b"], ["y"])],
        "idiv",
        [helper.make_tensor_value_info(n, TensorProto.INT32, [4]) for n in ("a", "b")],
        [helper.make_tensor_value_info("y", TensorProto.INT32, [4])],
    )
    model = tmp_path / "idiv.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), model)
    out = tmp_path / "b"
    assert main(["bundle", str(model), "-o", str(out), "--name", "idiv"]) == 0
    header = (out / "idiv.h").read_text()
    assert "#define GLOWVIZ_BUNDLE_EDIVZERO 2" in header
    _cc("-shared", "idiv.o", "-o", "libidiv.so", cwd=out)
    entry = ctypes.CDLL(str(out / "libidiv.so")).idiv
    entry.restype = ctypes.c_int
    entry.argtypes = [ctypes.c_void_p] * 3
    regions = read_header_report(header)["bundle"]["regions"]
    offset = {}
    for line in header.splitlines():
        words = line.split()
        if len(words) == 3 and words[1].startswith("IDIV_") and words[1].endswith("_OFFSET"):
            offset[words[1][5:-7]] = int(words[2])
    mem = [np.zeros(max(regions[r], 1) + 64, np.uint8) for r in ("constant", "mutable")]
    acts = np.zeros(max(regions["activations"], 1) + 64, np.uint8)
    bufs = [m[(-m.ctypes.data) % 64 :] for m in (*mem, acts)]

    def run(a: list[int], b: list[int]) -> tuple[int, np.ndarray]:
        mutable = bufs[1]
        for name, v in (("a", a), ("b", b)):
            mutable[offset[name] : offset[name] + 16] = np.array(v, np.int32).view(np.uint8)
        rc = entry(*(x.ctypes.data for x in bufs))
        return rc, mutable[offset["y"] : offset["y"] + 16].view(np.int32).copy()

    assert run([7, 8, 9, -(2**31)], [1, 0, 3, -1])[0] == 2
    rc, y = run([7, 8, -9, -(2**31)], [1, 3, 4, -1])
    assert rc == 0
    np.testing.assert_array_equal(y, want)
