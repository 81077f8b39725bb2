"""AOT bundles vs the in-process LLVM executor vs onnxruntime (one thread) on the sample models:
object and weights sizes, the three regions, and latency per call of examples/bundle.

Run: ``python benchmarks/bench_bundle.py [--only lenet mlp ...] [--repeat 2000] [--int8]``
(`--int8`: also the int8 bundles, `glowviz bundle --quantize` with a profile of 8 random
inputs, against the int8 LLVM executor; onnxruntime stays fp32). Bundles and
example programs go to benchmarks/out/bundle/ (not committed). Latencies are medians per call
measured in this same run: the C example's over --repeat calls (inputs copied in before each,
as `executor.run` does), the other two `glowviz bench`'s.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from glowviz.cli import main as glowviz  # noqa: E402
from glowviz.cli.bench_cmd import bench_model  # noqa: E402
from tests.bundle_tools import (  # noqa: E402 - the same build/run helpers the tests use
    build_example,
    run_example,
    sample_inputs,
    save_inputs,
)

MODELS = ["lenet", "mlp", "mobilenet_small", "resnet_small"]
#: Repetitions per model: enough for ~a second of bundle calls.
REPEAT = {"mlp": 20000, "lenet": 5000, "mobilenet_small": 2000, "resnet_small": 300}


def _profile(model: Path, path: Path) -> Path:
    """A quantization profile of `model` from 8 random inputs (as the bundle tests make)."""
    from compiler.quantize import model_input_types, profile_model, random_samples

    samples = random_samples(model_input_types(str(model)), 8, seed=2)
    path.parent.mkdir(parents=True, exist_ok=True)
    profile_model(str(model), samples, executor="graph").save(path)
    return path


def measure(name: str, out: Path, repeat: int | None, int8: bool = False) -> dict:
    from compiler.backends.llvm.bundle_header import read_header_report
    from compiler.quantization import QuantizeOptions

    model = ROOT / "sample_models" / f"{name}.onnx"
    bdir = out / (f"{name}_int8" if int8 else name)
    args = ["bundle", str(model), "-o", str(bdir)]
    quantize = None
    if int8:
        profile = _profile(model, bdir / f"{name}.profile.json")
        args += ["--quantize", str(profile)]
        quantize = QuantizeOptions(profile)
    if glowviz(args) != 0:
        raise SystemExit(f"glowviz bundle failed on {name}")
    report = read_header_report((bdir / f"{name}.h").read_text())["bundle"]
    program = build_example(bdir, name)
    inputs = save_inputs(bdir, sample_inputs(name))
    reps = repeat or REPEAT[name]
    _, bundle_us = run_example(program, inputs, weights=bdir / f"{name}.weights.bin", repeat=reps)
    inproc = bench_model(
        model, reps=max(20, reps // 10), with_compile_times=False, quantize=quantize
    )
    return {
        "name": f"{name} int8" if int8 else name,
        "object": report["object"],
        "weights": (bdir / f"{name}.weights.bin").stat().st_size,
        "regions": report["regions"],
        "bundle_us": bundle_us,
        "llvm_us": inproc["ours_s"] * 1e6,
        "ort_us": inproc["ort_s"] * 1e6,
    }


def print_table(rows: list[dict]) -> None:
    print(
        f"{'model':<16} {'object B':>9} {'text':>7} {'bss':>8} {'weights B':>9} "
        f"{'constant':>9} {'mutable':>8} {'activ.':>8} {'bundle us':>10} {'llvm us':>9} "
        f"{'ort us':>8} {'bundle/ort':>10}"
    )
    for r in rows:
        o, g = r["object"], r["regions"]
        print(
            f"{r['name']:<16} {o['bytes']:>9} {o['text']:>7} {o['bss']:>8} {r['weights']:>9} "
            f"{g['constant']:>9} {g['mutable']:>8} {g['activations']:>8} "
            f"{r['bundle_us']:>10.1f} {r['llvm_us']:>9.1f} {r['ort_us']:>8.1f} "
            f"{r['bundle_us'] / r['ort_us']:>10.2f}"
        )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", nargs="*", default=None, help=f"models (default: {MODELS})")
    ap.add_argument("--repeat", type=int, default=None, help="bundle calls to time per model")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "out" / "bundle")
    ap.add_argument("--int8", action="store_true", help="also the int8 (--quantize) bundles")
    args = ap.parse_args(argv)
    rows = [measure(n, args.out, args.repeat) for n in args.only or MODELS]
    if args.int8:
        rows += [measure(n, args.out, args.repeat, int8=True) for n in args.only or MODELS]
    print_table(rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
