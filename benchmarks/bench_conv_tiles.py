"""One 3x3 conv (+bias+ReLU, pad 1) compiled with several conv GEMM register tiles (MR rows x
NV vectors, replacing ``conv_gemm_config``'s), each alternated with onnxruntime (one thread) in
one process: medians of thread CPU time as ratios to onnxruntime.

    python benchmarks/bench_conv_tiles.py C H K STRIDE REPS 8x3,12x2,6x4,4x6
"""

import os
import statistics
import sys
import time
from dataclasses import replace

os.environ.setdefault("OMP_NUM_THREADS", "1")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402
import onnx  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import compiler.backends.llvm.kernels.conv as convmod  # noqa: E402
from compiler.backends.llvm.executor import LLVMExecutor, _lir_and_plan  # noqa: E402
from compiler.backends.llvm.kernels.gemm import conv_gemm_config  # noqa: E402
from compiler.pipeline import CompileOptions, compile_model  # noqa: E402
from glowviz.cli.bench_cmd import _ort_session  # noqa: E402


def main() -> int:
    C, H, K, stride, reps = (int(v) for v in sys.argv[1:6])
    tiles = [tuple(int(x) for x in t.split("x")) for t in sys.argv[6].split(",")]
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array((rng.standard_normal((K, C, 3, 3)) * 0.05).astype(np.float32), "w")
    bias = numpy_helper.from_array(rng.standard_normal(K).astype(np.float32), "b")
    nodes = [
        helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1] * 4, strides=[stride] * 2),
        helper.make_node("Relu", ["c"], ["y"]),
    ]
    g = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, C, H, H])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [w, bias],
    )
    model = onnx.shape_inference.infer_shapes(
        helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    )
    lir, plan = _lir_and_plan(compile_model(model, CompileOptions(low_level=True)))
    exs = []
    for mr, nv in tiles:
        convmod.conv_gemm_config = lambda isa=None, mr=mr, nv=nv: replace(  # type: ignore
            conv_gemm_config(isa), mr=mr, nv=nv
        )
        exs.append(LLVMExecutor(lir, plan))
    convmod.conv_gemm_config = conv_gemm_config
    conv = next(i for i, ins in enumerate(lir.code) if ins.kind == "conv")
    x = rng.standard_normal((1, C, H, H)).astype(np.float32)
    feed = {lir.inputs()[0].name: x}
    sess = _ort_session(model, 1)
    ref = sess.run(None, {"x": x})[0]
    err = max(float(np.max(np.abs(next(iter(e.run(feed).values())) - ref))) for e in exs)
    ts: list[list[float]] = [[] for _ in range(len(exs) + 1)]
    for r in range(reps):
        order = list(range(len(exs)))
        for j in order if r % 2 == 0 else order[::-1]:
            c = time.thread_time()
            exs[j].run(feed)
            ts[j].append(time.thread_time() - c)
        c = time.thread_time()
        sess.run(None, {"x": x})
        ts[-1].append(time.thread_time() - c)
    m = [statistics.median(t) for t in ts]
    cells = "  ".join(f"{mr}x{nv}: {m[i] / m[-1]:.3f}" for i, (mr, nv) in enumerate(tiles))
    print(
        f"{C}x{H}x{H}->{K} s{stride} [{exs[0].strategy(conv)}] ort {m[-1] * 1e6:.0f} us | "
        f"{cells} | max |err| vs ort {err:.1e}, load {os.getloadavg()[0]:.1f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
