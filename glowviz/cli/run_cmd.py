"""`glowviz run MODEL` — execute a model; --check compares with onnxruntime.

Compile MODEL, run it on inputs from an .npz file (or random ones), print a summary of every
output, optionally save them and compare them with onnxruntime.
"""

from __future__ import annotations

import argparse
import re
import sys
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

from compiler.errors import CompilerError, InputError
from compiler.executors import EXECUTORS, LOW_LEVEL_EXECUTORS, make_executor
from compiler.graph.types import TensorType
from compiler.pipeline import CompileOptions, compile_model
from glowviz.cli.common import (
    add_common_model_args,
    command_parser,
    input_options,
    non_negative_float,
    non_negative_int,
    quantize_options,
)


def add_parser(sub: argparse._SubParsersAction) -> None:
    kinds = sorted(set(EXECUTORS) | {"llvm"})
    p = command_parser(sub, "run", __doc__)
    add_common_model_args(p)
    p.add_argument(
        "--executor",
        default="interpreter",
        metavar="|".join(kinds),
        help="how to execute (default: interpreter)",
    )
    p.add_argument("--inputs", metavar="IN.npz", help="inputs by input name (default: random)")
    p.add_argument(
        "--seed", type=non_negative_int, default=0, help="seed of the random inputs (default 0)"
    )
    p.add_argument("-o", "--output", metavar="OUT.npz", help="write the outputs to this file")
    p.add_argument(
        "--check",
        action="store_true",
        help="compare with onnxruntime (1 thread); exit 1 on mismatch",
    )
    p.add_argument(
        "--rtol", type=non_negative_float, default=1e-3, help="relative tolerance of --check"
    )
    p.add_argument(
        "--atol", type=non_negative_float, default=1e-4, help="absolute tolerance of --check"
    )
    p.set_defaults(func=run)


def random_input(t: TensorType, rng: np.random.Generator) -> np.ndarray:
    """Seeded inputs: floats ~ N(0, 1); integers in [0, 4) (safe as small indices); bools."""
    if t.elem.is_float:
        return rng.standard_normal(t.shape).astype(t.np_dtype)
    if t.np_dtype == np.bool_:
        return rng.random(t.shape) < 0.5
    return rng.integers(0, 4, size=t.shape).astype(t.np_dtype)


def _read_arrays(path: str, names: list[str], onnx_names: dict[str, str]) -> dict[str, np.ndarray]:
    """The arrays of an .npz by key; a .npy's one array under the model's only input."""
    p = Path(path)
    if not p.is_file():
        raise CompilerError(f"inputs file '{path}' does not exist")
    hint = "expected an .npz written by numpy.savez, or a .npy for a model with one input"
    try:
        loaded = np.load(p, allow_pickle=False)
        if isinstance(loaded, np.ndarray):  # a .npy file
            if len(names) != 1:
                raise CompilerError(
                    f"inputs file '{path}' holds one array but the model has {len(names)} inputs",
                    hint="give an .npz with one array per input name",
                )
            return {onnx_names.get(names[0], names[0]): loaded}
        with loaded as data:
            return {k: data[k] for k in data.files}
    except CompilerError:
        raise
    # numpy raises these for an empty file, a truncated or corrupt archive, pickled objects
    except (OSError, ValueError, EOFError, zipfile.BadZipFile, KeyError) as e:
        why = str(e) or type(e).__name__
        raise CompilerError(f"cannot read inputs file '{path}': {why}", hint=hint) from None


def load_inputs(path: str, names: list[str], onnx_names: dict[str, str]) -> dict[str, np.ndarray]:
    """Arrays of an .npz by input name (the ONNX name or the IR placeholder name)."""
    arrays = _read_arrays(path, names, onnx_names)
    out: dict[str, np.ndarray] = {}
    for name in names:
        onnx_name = onnx_names.get(name, name)
        for key in (onnx_name, name):
            if key in arrays:
                out[name] = arrays.pop(key)
                break
        else:
            raise InputError(
                f"inputs file '{path}' has no array for input '{onnx_name}'",
                hint=f"it holds: {', '.join(sorted(arrays)) or 'nothing'}",
            )
    if arrays:
        raise InputError(
            f"inputs file '{path}' has arrays for unknown inputs: {', '.join(sorted(arrays))}",
            hint=f"the model's inputs are: {', '.join(onnx_names.get(n, n) for n in names)}",
        )
    return out


def summary(a: np.ndarray) -> str:
    if a.size == 0:
        return "empty"
    if a.dtype == np.bool_:
        return f"true={int(a.sum())}/{a.size}"
    f = a.astype(np.float64)
    return f"min={f.min():.6g} max={f.max():.6g} mean={f.mean():.6g}"


def write_npz(path: str, arrays: dict[str, np.ndarray]) -> None:
    """Write atomically (glowviz.exports.render.atomic_write_with)."""
    from glowviz.exports.render import atomic_write_with

    folder = Path(path).parent if str(Path(path).parent) else Path(".")
    if not folder.is_dir():
        raise CompilerError(f"cannot write '{path}': directory '{folder}' does not exist")
    atomic_write_with(path, lambda f: np.savez(f, allow_pickle=False, **arrays))


def _ort_session(model: str, so: Any) -> Any:
    import onnxruntime as ort

    try:
        return ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
    except Exception as e:  # noqa: BLE001 - onnxruntime raises its own unrelated types
        # A newer onnx than onnxruntime writes an IR version onnxruntime refuses although the
        # ops are fine: retry once with the IR version it names as its maximum.
        found = re.search(r"max supported IR version: (\d+)", str(e))
        if not found:
            raise
        import onnx

        proto = onnx.load(model)
        proto.ir_version = int(found.group(1))
        return ort.InferenceSession(
            proto.SerializeToString(), so, providers=["CPUExecutionProvider"]
        )


def run_onnxruntime(model: str, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    try:
        sess = _ort_session(model, so)
        names = [o.name for o in sess.get_outputs()]
        return dict(zip(names, sess.run(None, feeds)))
    except Exception as e:  # noqa: BLE001 - onnxruntime raises its own unrelated types
        raise CompilerError(
            f"onnxruntime could not run '{model}': {str(e).splitlines()[0]}"
        ) from None


def compare(
    ours: np.ndarray, ref: np.ndarray, rtol: float, atol: float
) -> tuple[bool, float, float]:
    """(ok, max abs error, max relative error)."""
    if ours.shape != ref.shape:
        return False, float("inf"), float("inf")
    if ours.size == 0:
        return True, 0.0, 0.0
    if ref.dtype == np.bool_ or ours.dtype == np.bool_:
        ok = bool(np.array_equal(ours, ref))
        return ok, 0.0 if ok else 1.0, 0.0 if ok else 1.0
    a, b = ours.astype(np.float64), ref.astype(np.float64)
    # NaN positions are data: NaN on both sides agrees (log of a negative, NaN weights), as do
    # equal infinities; NaN on one side only is a mismatch of infinite error.
    same = (a == b) | (np.isnan(a) & np.isnan(b))
    with np.errstate(invalid="ignore", over="ignore"):
        diff = np.where(same, 0.0, np.abs(a - b))
        diff = np.where(np.isnan(diff), np.inf, diff)
        scale = np.where(np.isfinite(b), np.abs(b), 0.0)
        rel = diff / np.maximum(scale, np.finfo(np.float32).tiny)
    ok = bool(np.all(diff <= atol + rtol * scale))
    return ok, float(diff.max()), float(rel.max())


def run(args: argparse.Namespace) -> int:
    kind = args.executor
    if kind not in EXECUTORS:
        raise CompilerError(
            f"unknown executor '{kind}'; known executors: {', '.join(sorted(EXECUTORS))}"
        )
    options = CompileOptions(
        **input_options(args),
        low_level=kind in LOW_LEVEL_EXECUTORS,
        quantize=quantize_options(args),
    )
    result = compile_model(args.model, options)
    for note in result.module.meta.get("notes", ()):
        print(f"note: {note}", file=sys.stderr)
    ex = make_executor(result, kind)
    meta: dict[str, Any] = result.module.meta
    onnx_in = {p: o for o, p in meta.get("onnx_inputs", ())}
    onnx_out = {p: o for o, p in meta.get("onnx_outputs", ())}
    if args.inputs:
        inputs = load_inputs(args.inputs, ex.input_names, onnx_in)
    else:
        rng = np.random.default_rng(args.seed)
        inputs = {n: random_input(ex.input_types[n], rng) for n in ex.input_names}
    outputs = ex.run(inputs)
    named = {onnx_out.get(n, n): v for n, v in outputs.items()}
    for name, a in named.items():
        print(f"{name}: shape={list(a.shape)} dtype={a.dtype} {summary(a)}")
    if args.output:
        write_npz(args.output, named)
        print(f"wrote {args.output}")
    if not args.check:
        return 0
    # onnxruntime takes the inputs the model was specialized on (--const-input) like any other.
    ref = run_onnxruntime(
        str(args.model),
        {**options.const_inputs, **{onnx_in.get(n, n): v for n, v in inputs.items()}},
    )
    failed = False
    for name, ours in named.items():
        if name not in ref:
            print(f"check {name}: MISMATCH (onnxruntime has no output '{name}')")
            failed = True
            continue
        ok, abs_err, rel_err = compare(ours, ref[name], args.rtol, args.atol)
        shape_note = (
            ""
            if ours.shape == ref[name].shape
            else f" (shape {list(ours.shape)} vs onnxruntime {list(ref[name].shape)})"
        )
        print(
            f"check {name}: {'ok' if ok else 'MISMATCH'} max_abs_err={abs_err:.3g} "
            f"max_rel_err={rel_err:.3g}{shape_note}"
        )
        failed |= not ok
    print(f"check: {'FAILED' if failed else 'passed'} (rtol={args.rtol:g}, atol={args.atol:g})")
    return 1 if failed else 0
