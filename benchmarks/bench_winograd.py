"""One 3x3 stride-1 conv (+bias+ReLU, pad 1) under each of several conv strategies, alternated
with onnxruntime (one thread) in one process: medians of thread CPU time as ratios to
onnxruntime, and each strategy's error against onnxruntime.

    python benchmarks/bench_winograd.py REPS C:H:K [C:H:K ...] [--strategies a,b]

Default strategies: the table's choice without the ``winograd`` rows (``base``) and ``winograd``.
"""

import argparse
import os
import statistics
import sys
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402
import onnx  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from compiler.backends.llvm.executor import LLVMExecutor, _lir_and_plan  # noqa: E402
from compiler.backends.llvm.kernels import conv as convmod  # noqa: E402
from compiler.pipeline import CompileOptions, compile_model  # noqa: E402
from glowviz.cli.bench_cmd import _ort_session  # noqa: E402


def _model(C: int, H: int, K: int) -> onnx.ModelProto:
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array((rng.standard_normal((K, C, 3, 3)) * 0.05).astype(np.float32), "w")
    bias = numpy_helper.from_array(rng.standard_normal(K).astype(np.float32), "b")
    nodes = [
        helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1] * 4),
        helper.make_node("Relu", ["c"], ["y"]),
    ]
    g = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, C, H, H])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [w, bias],
    )
    return onnx.shape_inference.infer_shapes(
        helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    )


def _base_choice(s) -> str:
    """The table's choice with the winograd row left out."""
    rows = [r for r in convmod.STRATEGIES if not r.name.startswith("winograd")]
    return next(r.name for r in rows if r.usable(s) and r.prefers(s))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("reps", type=int)
    ap.add_argument("shapes", nargs="+")
    ap.add_argument("--strategies", default="base,winograd")
    a = ap.parse_args()
    for spec in a.shapes:
        C, H, K = (int(v) for v in spec.split(":"))
        model = _model(C, H, K)
        lir, plan = _lir_and_plan(compile_model(model, CompileOptions(low_level=True)))
        conv = next(i for i, ins in enumerate(lir.code) if ins.kind == "conv")
        s = convmod.conv_shape(1, C, H, H, K, 3, 3, pad=1)
        names = [(_base_choice(s) if n == "base" else n) for n in a.strategies.split(",")]
        exs = [LLVMExecutor(lir, plan, conv_strategy=n) for n in names]
        rng = np.random.default_rng(1)
        x = rng.standard_normal((1, C, H, H)).astype(np.float32)
        feed = {lir.inputs()[0].name: x}
        sess = _ort_session(model, 1)
        ref = sess.run(None, {"x": x})[0]
        errs = [float(np.max(np.abs(next(iter(e.run(feed).values())) - ref))) for e in exs]
        ts: list[list[float]] = [[] for _ in range(len(exs) + 1)]
        for r in range(a.reps):
            order = list(range(len(exs)))
            for j in order if r % 2 == 0 else order[::-1]:
                c = time.thread_time()
                exs[j].run(feed)
                ts[j].append(time.thread_time() - c)
            c = time.thread_time()
            sess.run(None, {"x": x})
            ts[-1].append(time.thread_time() - c)
        m = [statistics.median(t) for t in ts]
        cells = "  ".join(
            f"{n}: {m[i] / m[-1]:.3f} (err {errs[i]:.1e})" for i, n in enumerate(names)
        )
        load = os.getloadavg()[0]
        print(f"{C}x{H}x{H}->{K} ort {m[-1] * 1e6:.0f} us | {cells} | load {load:.1f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
