"""Test helpers for AOT bundles: the system tools they need, building and running the C example
(examples/bundle) natively or under qemu, and reading ELF headers.

A missing tool fails the test that needs it (never a skip): `bash dev.sh setup` installs the C
compiler, binutils and make, and on x86-64 the aarch64 cross compiler and qemu-user.
"""

from __future__ import annotations

import platform
import shutil
import struct
import subprocess
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "bundle"
SAMPLES = ROOT / "sample_models"

#: ELF e_machine values of the targets the tests build for.
EM_X86_64 = 62
EM_AARCH64 = 183

_DTYPES = {"<f4": np.float32, "<f2": np.float16, "<i8": np.int64, "<i4": np.int32}
_DTYPES.update({"|i1": np.int8, "|u1": np.uint8, "|b1": np.bool_})


def tool(name: str) -> str:
    """The path of a system tool the bundle tests need; fails (not skips) when it is missing."""
    path = shutil.which(name)
    assert path, f"'{name}' is not installed: `bash dev.sh setup` installs it"
    return path


def elf_header(obj: bytes) -> tuple[int, int, int]:
    """(ELF class: 1 = 32-bit, 2 = 64-bit; e_type: 1 = relocatable; e_machine) of an object."""
    assert obj[:4] == b"\x7fELF", "not an ELF file"
    assert obj[5] == 1, "not little-endian"
    e_type, e_machine = struct.unpack_from("<HH", obj, 16)
    return obj[4], e_type, e_machine


def undefined_symbols(path: Path) -> set[str]:
    out = subprocess.run([tool("nm"), "-u", str(path)], capture_output=True, text=True, check=True)
    return {line.split()[-1] for line in out.stdout.splitlines() if line.strip()}


def global_symbols(path: Path) -> set[str]:
    """Symbols the object defines and exports."""
    out = subprocess.run(
        [tool("nm"), "-g", "--defined-only", str(path)], capture_output=True, text=True, check=True
    ).stdout
    return {line.split()[-1] for line in out.splitlines() if line.strip()}


def aarch64_toolchain() -> tuple[str, list[str]]:
    """(C compiler, command prefix to run its programs) for aarch64: native on an aarch64 host,
    else the Debian cross compiler under qemu-user (build static programs for it)."""
    if platform.machine() in ("aarch64", "arm64"):
        return tool("cc"), []
    return tool("aarch64-linux-gnu-gcc"), [tool("qemu-aarch64")]


def build_example(
    bundle_dir: Path,
    name: str,
    *,
    cc: str | None = None,
    static: bool = False,
    embedded: bool = False,
) -> Path:
    """Compile examples/bundle/main.c against a bundle with its Makefile (-Werror, C99);
    `static` for programs run under qemu-user, which then needs no target sysroot."""
    cc = cc or tool("cc")
    out = bundle_dir / f"{name}_example"
    args = [tool("make"), "-s", "-C", str(EXAMPLE), f"BUNDLE_DIR={bundle_dir}", f"NAME={name}"]
    args += [f"OUT={out}", f"CC={cc}"]
    if static:
        args.append("LDFLAGS=-static")
    if embedded:
        args.append("embedded")
    proc = subprocess.run(args, capture_output=True, text=True)
    assert proc.returncode == 0, f"building the example failed:\n{proc.stdout}\n{proc.stderr}"
    return Path(f"{out}_embedded" if embedded else out)


def save_inputs(directory: Path, inputs: dict[str, np.ndarray]) -> list[Path]:
    """The inputs as .npy files, in order (the example takes one file per input)."""
    paths = []
    for i, (name, value) in enumerate(inputs.items()):
        path = directory / f"input{i}_{name}.npy"
        np.save(path, value)
        paths.append(path)
    return paths


def run_example(
    program: Path,
    inputs: list[Path],
    *,
    weights: Path | None = None,
    prefix: list[str] | None = None,
    repeat: int = 0,
) -> tuple[dict[str, np.ndarray], float | None]:
    """Run the example; (outputs by name, microseconds per call with `repeat`)."""
    args = [*(prefix or []), str(program)]
    if weights is not None:
        args += ["--weights", str(weights)]
    if repeat:
        args += ["--repeat", str(repeat)]
    proc = subprocess.run([*args, *map(str, inputs)], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, f"the example failed ({proc.returncode}):\n{proc.stderr}"
    return parse_outputs(proc.stdout), _latency(proc.stderr)


def parse_outputs(text: str) -> dict[str, np.ndarray]:
    """The example's output: `output I "NAME" DTYPE [D, ...]` then one value per line."""
    outputs: dict[str, np.ndarray] = {}
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        head = lines[i]
        assert head.startswith("output "), f"unexpected line {head!r}"
        name = head.split('"')[1]
        rest = head.split('"')[2].split()
        dtype = _DTYPES[rest[0]]
        dims = head[head.index("[") + 1 : head.index("]")]
        shape = tuple(int(d) for d in dims.split(",")) if dims.strip() else ()
        n = int(np.prod(shape))
        values = [float(v) for v in lines[i + 1 : i + 1 + n]]
        outputs[name] = np.array(values, dtype=np.float64).astype(dtype).reshape(shape)
        i += 1 + n
    return outputs


def _latency(stderr: str) -> float | None:
    for line in stderr.splitlines():
        if line.startswith("latency:"):
            return float(line.split()[1])
    return None


def onnxruntime_outputs(model: Path, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    import onnxruntime

    opts = onnxruntime.SessionOptions()
    opts.intra_op_num_threads = opts.inter_op_num_threads = 1
    sess = onnxruntime.InferenceSession(str(model), opts, providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    return dict(zip(names, sess.run(names, inputs)))


def sample_inputs(name: str) -> dict[str, np.ndarray]:
    with np.load(SAMPLES / f"{name}.input.npz") as f:
        return {k: f[k] for k in f.files}
