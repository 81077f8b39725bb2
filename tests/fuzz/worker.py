"""A campaign worker: a long-lived child process that runs cases in-process under a memory cap.

Started by `runner.Worker` as `python -m tests.fuzz.worker READ_FD WRITE_FD MEM_LIMIT`; reads
length-prefixed pickled requests, answers each with one pickled reply. Its stdout/stderr go to
a log file the parent reads after a crash or a hang (faulthandler writes Python stacks there on
fatal signals and on SIGUSR1, which the parent sends before killing a hung case).

Tasks:
- `cli`: `glowviz.cli.main(argv)` in-process, as the console script would run it (an exception
  escaping main is what the user would see as a traceback with exit 1);
- `check`: the differential check of one model: interpreter, LLVM and onnxruntime agree (a
  float64 `onnx.reference` run decides where onnxruntime is off), two runs of the same compiled
  program are bit-identical, and stepping the LLVM program instruction by instruction gives
  the one-call result.
"""

from __future__ import annotations

import contextlib
import faulthandler
import io
import os
import pickle
import resource
import signal
import struct
import sys
import traceback
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from .oracle import (
    compare,
    float32_range_exceeded,
    run_onnxruntime,
    run_reference32,
    run_reference64,
    summarize,
)


def read_msg(fd: int) -> Any:
    head = _read_exact(fd, 4)
    if head is None:
        return None
    (n,) = struct.unpack("<I", head)
    body = _read_exact(fd, n)
    return pickle.loads(body) if body is not None else None


def _read_exact(fd: int, n: int) -> bytes | None:
    chunks, left = [], n
    while left:
        b = os.read(fd, min(left, 1 << 20))
        if not b:
            return None
        chunks.append(b)
        left -= len(b)
    return b"".join(chunks)


def write_msg(fd: int, obj: Any) -> None:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    view = memoryview(struct.pack("<I", len(data)) + data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def _cap_memory(limit: int) -> None:
    if limit > 0:
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def _forget_jit() -> None:
    """Drop the JIT's in-memory cache between cases: cases stay independent and memory stays
    flat. Within a case it is kept: `run --executor llvm` and the check JIT-compile the same
    module, and LLVM's O3 was two thirds of a long run's time (py-spy), half of it the
    check's second compile of a module the case had just compiled."""
    from compiler.backends.llvm.jit import JITEngine

    JITEngine._memory.clear()


# -- tasks ---------------------------------------------------------------------------------------


def task_cli(req: dict[str, Any], tmp: Path) -> dict[str, Any]:
    from glowviz.cli import main

    model = tmp / "model.onnx"
    model.write_bytes(req["model"])
    out = tmp / "out"
    argv = [a.replace("{model}", str(model)).replace("{out}", str(out)) for a in req["argv"]]
    stdout, stderr = io.StringIO(), io.StringIO()
    code: int
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
                code = int(main(argv) or 0)
        except SystemExit as e:  # argparse
            code = e.code if isinstance(e.code, int) else 1
        except BaseException:  # noqa: BLE001 - what the console script would show
            stderr.write(traceback.format_exc())
            code = 1
    text = "".join(f"{w.filename}:{w.lineno}: {w.category.__name__}: {w.message}\n" for w in caught)
    for p in tmp.iterdir():
        if p.name != "model.onnx":
            if p.is_dir():
                import shutil

                shutil.rmtree(p, ignore_errors=True)
            else:
                p.unlink(missing_ok=True)
    return {"exit": code, "stdout": stdout.getvalue()[-4000:], "stderr": text + stderr.getvalue()}


def _onnx_names(module: Any) -> tuple[dict[str, str], dict[str, str]]:
    ins = {p: o for o, p in module.meta.get("onnx_inputs", ())}
    outs = {p: o for o, p in module.meta.get("onnx_outputs", ())}
    return ins, outs


def _same_bits(x: dict[str, np.ndarray], y: dict[str, np.ndarray]) -> bool:
    """Bit-identical outputs, compared in place (a bytes copy of every output ran the oracle
    out of memory on a 1,048,576x Tile)."""

    def raw(a: np.ndarray) -> memoryview:
        return memoryview(np.ascontiguousarray(a).reshape(-1).view(np.uint8))

    return x.keys() == y.keys() and all(
        x[k].shape == y[k].shape and x[k].dtype == y[k].dtype and raw(x[k]) == raw(y[k]) for k in x
    )


def task_check(req: dict[str, Any], tmp: Path) -> dict[str, Any]:
    """The differential check; returns cls ok/refusal/invalid/float32-range/wrong (or raises:
    traceback)."""
    import onnx

    from compiler.errors import CompilerError
    from compiler.executors import make_executor
    from compiler.pipeline import CompileOptions, compile_model

    data: bytes = req["model"]
    feeds: dict[str, np.ndarray] | None = req.get("feeds")
    try:
        result = compile_model(data, CompileOptions())
    except CompilerError as e:
        return {"cls": "refusal", "cause": type(e).__name__, "detail": str(e)}
    in_names, out_names = _onnx_names(result.module)
    interp = make_executor(result, "interpreter")
    if feeds is None:
        from glowviz.cli.run_cmd import random_input

        rng = np.random.default_rng(req.get("seed", 0))
        feeds = {
            in_names.get(n, n): random_input(interp.input_types[n], rng) for n in interp.input_names
        }
    try:
        ort = run_onnxruntime(data, feeds)
    except Exception as e:  # noqa: BLE001 - onnxruntime refuses the model: nothing to compare
        return {
            "cls": "invalid",
            "cause": "onnxruntime refuses",
            "detail": str(e).splitlines()[0][:300],
        }
    try:
        ours_i = interp.run(feeds)
    except CompilerError as e:
        return {"cls": "refusal", "cause": type(e).__name__, "detail": f"interpreter: {e}"}
    try:
        llvm = make_executor(result, "llvm")
        ours_l = llvm.run(feeds)
    except CompilerError as e:  # what `run --executor llvm` would refuse too
        return {"cls": "refusal", "cause": type(e).__name__, "detail": f"llvm: {e}"}
    try:
        again_l = llvm.run(feeds)
        again_i = interp.run(feeds)
        # stepping: the IDE debugger's path (the LLVM executor's per-instruction entries)
        ex = llvm.executor
        ex.reset(llvm._inputs(feeds))
        while not ex.done:
            ex.step()
        stepped = ex.outputs()
    except CompilerError as e:
        # Both executors and their outputs are alive now: under the case's memory cap a run
        # that fits alone may not fit a second time (an ExecutionError saying out of memory),
        # which is the refusal the first run would have given.
        return {"cls": "refusal", "cause": type(e).__name__, "detail": f"second run: {e}"}
    problems: list[tuple[str, str]] = []
    wrong_outputs: list[str] = []
    ref64: dict[str, np.ndarray] | None = None
    beyond: list[str] | None = None
    ref32: dict[str, np.ndarray] | None = None
    ranged: set[str] = set()
    for kind, outs in (("interpreter", ours_i), ("llvm", ours_l)):
        for p, a in outs.items():
            name = out_names.get(p, p)
            if name not in ort:
                problems.append((f"vs-ort {kind}", f"onnxruntime has no output {name}"))
                continue
            c = compare(a, ort[name])
            if c.ok:
                continue
            if ref64 is None:
                try:
                    ref64 = run_reference64(onnx.load_from_string(data), feeds)
                except Exception as e:  # noqa: BLE001
                    ref64 = {"__error__": np.array(str(e)[:200])}
            r = ref64.get(name)
            if r is not None and compare(a, r).ok:
                continue  # onnxruntime is the one that is off
            if r is not None and beyond is None:
                beyond, ref32 = _float32_range(data, feeds)
            r32 = (ref32 or {}).get(name)
            if beyond and r32 is not None and compare(a, r32).ok:
                ranged.add(name)  # float32 cannot hold the float64 answer: see _float32_range
                continue
            wrong_outputs.append(name)
            what = (
                "nan"
                if "NaN" in c.note
                else "inf"
                if "infin" in c.note
                else "shape"
                if "shape" in c.note
                else "values"
            )
            problems.append(
                (
                    f"vs-ort {kind}: {what}",
                    f"{name}: {c.note or f'max_abs={c.max_abs:.3g} max_rel={c.max_rel:.3g}'}; "
                    f"ours {summarize(a)} ort {summarize(ort[name])}"
                    + (f" ref64 {summarize(r)}" if r is not None else " (no float64 reference)"),
                )
            )
    if not _same_bits(ours_l, again_l):
        problems.append(("nondeterministic llvm", "two runs of one compiled program differ"))
    if not _same_bits(ours_i, again_i):
        problems.append(("nondeterministic interpreter", "two runs differ"))
    if not _same_bits({k: stepped[k] for k in ours_l}, ours_l):
        diff = [k for k in ours_l if not np.array_equal(stepped[k], ours_l[k], equal_nan=True)]
        problems.append(("step-vs-run llvm", f"stepping differs from one-call run on {diff}"))
    if problems:
        kinds = sorted({k for k, _ in problems})
        return {
            "cls": "wrong",
            "cause": ", ".join(kinds),
            "detail": " | ".join(d for _, d in problems)[:1500],
            "wrong_outputs": wrong_outputs,
        }
    if ranged:
        return {
            "cls": "float32-range",
            "cause": "beyond float32 in the float64 reference",
            "detail": f"outputs {sorted(ranged)} equal the float32-rounded reference; "
            f"tensors beyond FLT_MAX in float64: {', '.join(beyond or [])}"[:1500],
        }
    return {"cls": "ok", "cause": "", "detail": ""}


def _float32_range(
    data: bytes, feeds: dict[str, np.ndarray]
) -> tuple[list[str], dict[str, np.ndarray] | None]:
    """The rule for outputs float32 cannot decide (docs/fuzzing.md): the tensors whose float64
    reference value is finite but beyond FLT_MAX and, when there are any, the reference
    computed op by op in float64 and rounded to float32 after each op, which ours must then
    equal. Without such a tensor ([], None) a disagreement stays a wrong answer."""
    import onnx

    model = onnx.load_from_string(data)
    try:
        beyond = float32_range_exceeded(model, feeds)
        return beyond, (run_reference32(model, feeds) if beyond else None)
    except Exception:  # noqa: BLE001 - no reference: the disagreement stays a wrong answer
        return [], None


TASKS = {"cli": task_cli, "check": task_check}


def serve(rfd: int, wfd: int, mem_limit: int, tmp_dir: str) -> None:
    faulthandler.enable(file=sys.stderr, all_threads=False)
    faulthandler.register(signal.SIGUSR1, file=sys.stderr, all_threads=False)
    if "GLOWVIZ_CACHE_DIR" not in os.environ:  # the runner's cache when it gives one
        os.environ.setdefault("GLOWVIZ_NO_DISK_CACHE", "1")
    # import everything before capping memory: the cap measures the case, not the imports
    import onnxruntime  # noqa: F401

    import compiler.backends.llvm.executor  # noqa: F401
    import glowviz.cli  # noqa: F401
    from glowviz.cli import build_parser

    build_parser()
    _cap_memory(mem_limit)
    # tmp_dir is the runner's: it removes it, also after killing this process on a hang
    tmp = Path(tmp_dir)
    write_msg(wfd, {"ready": os.getpid()})
    case = None
    while True:
        req = read_msg(rfd)
        if req is None:
            return
        print(f"=== case {req.get('id')}", file=sys.stderr, flush=True)
        if str(req.get("id", "")).split(" ")[0] != case:
            case = str(req.get("id", "")).split(" ")[0]
            with contextlib.suppress(Exception):
                _forget_jit()
        try:
            reply = TASKS[req["task"]](req, tmp)
        except MemoryError:
            reply = {"cls": "memory", "error": traceback.format_exc()}
        except BaseException:  # noqa: BLE001
            reply = {"cls": "traceback", "error": traceback.format_exc()}
        write_msg(wfd, reply)


if __name__ == "__main__":
    serve(int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4])
