"""GFLOP/s of the LLVM GEMM and conv kernels vs numpy (BLAS) and onnxruntime (one thread).

Run: ``python benchmarks/bench_kernels.py [--reps 20] [--isa avx512|avx2|generic]``. Medians;
the ratio measured in the same run is the figure that counts on shared machines.
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

import numpy as np  # noqa: E402
from llvmlite import ir  # noqa: E402

from compiler.backends.llvm.jit import JITEngine  # noqa: E402
from compiler.backends.llvm.kernels.conv import emit_conv2d  # noqa: E402
from compiler.backends.llvm.kernels.gemm import emit_matmul, pack_b_constant  # noqa: E402
from compiler.backends.llvm.peak import fma_peak_gflops  # noqa: E402
from compiler.backends.llvm.target import default_isa, host_cpu  # noqa: E402

GEMMS = [
    (512, 512, 512),
    (1, 1000, 2048),
    (49, 512, 4608),
    (196, 256, 2304),
    (3136, 64, 576),
    (16, 64, 64),
]
# name, C, H, W, K, R, stride, pad
CONVS = [
    ("stem 7x7/2", 3, 224, 224, 64, 7, 2, 3),
    ("res2 3x3", 64, 56, 56, 64, 3, 1, 1),
    ("res3 3x3", 128, 28, 28, 128, 3, 1, 1),
    ("res4 3x3", 256, 14, 14, 256, 3, 1, 1),
    ("res5 3x3", 512, 7, 7, 512, 3, 1, 1),
    ("res2 1x1 64->256", 64, 56, 56, 256, 1, 1, 0),
    ("res2 1x1 256->64", 256, 56, 56, 64, 1, 1, 0),
    ("res4 1x1 1024->256", 1024, 14, 14, 256, 1, 1, 0),
    ("res5 1x1 512->2048", 512, 7, 7, 2048, 1, 1, 0),
]


def median_time(fn, reps: int) -> float:
    fn()
    ts = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    return float(np.median(ts))


def measure_peak(isa: str, reps: int) -> float:
    """Single-core FMA peak for `isa` (compiler/backends/llvm/peak.py owns the probe)."""
    return fma_peak_gflops(reps=max(5, reps // 4), isa=isa)


def bench_gemm(isa: str, reps: int) -> list[tuple]:
    rows = []
    rng = np.random.default_rng(0)
    for M, N, K in GEMMS:
        a = rng.standard_normal((M, K), dtype=np.float32)
        bm = rng.standard_normal((K, N), dtype=np.float32)
        c = np.empty((M, N), dtype=np.float32)
        m = ir.Module()
        emit_matmul(m, "mm", M, N, K, a_stride=K, b_stride=N, c_stride=N, b_packed=True, isa=isa)
        f = JITEngine().compile(m).cfunc("mm")
        bp = pack_b_constant(bm, isa=isa)
        args = (a.ctypes.data, bp.ctypes.data, c.ctypes.data)
        t_ours = median_time(lambda f=f, args=args: f(*args), reps)
        t_np = median_time(lambda a=a, bm=bm, c=c: np.matmul(a, bm, out=c), reps)
        fl = 2 * M * N * K
        rows.append((f"{M}x{N}x{K}", fl / t_ours / 1e9, fl / t_np / 1e9))
    return rows


def _ort_conv(x, w, bias, stride, pad):
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper

    node = helper.make_node(
        "Conv", ["x", "w", "b"], ["y"], strides=[stride, stride], pads=[pad] * 4
    )
    graph = helper.make_graph(
        [node],
        "conv",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x.shape))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(bias, "b")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=9)
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    return lambda: sess.run(None, {"x": x})[0]


def bench_conv(isa: str, reps: int) -> list[tuple]:
    rows = []
    rng = np.random.default_rng(0)
    for name, C, H, W, K, R, st, pd in CONVS:
        x = rng.standard_normal((1, C, H, W), dtype=np.float32)
        w = rng.standard_normal((K, C, R, R), dtype=np.float32) * 0.05
        bias = rng.standard_normal(K, dtype=np.float32)
        m = ir.Module()
        ck = emit_conv2d(
            m,
            "cv",
            N=1,
            C=C,
            H=H,
            W=W,
            K=K,
            R=R,
            S=R,
            weights=w,
            stride=st,
            pad=pd,
            bias=True,
            isa=isa,
        )
        f = JITEngine().compile(m).cfunc("cv")
        out = np.empty((1, K, ck.shape.OH, ck.shape.OW), dtype=np.float32)
        args = (x.ctypes.data, ck.packed_weights.ctypes.data, out.ctypes.data, bias.ctypes.data)
        ort_run = _ort_conv(x, w, bias, st, pd)
        f(*args)
        np.testing.assert_allclose(out, ort_run(), rtol=1e-3, atol=1e-3)
        t_ours = median_time(lambda f=f, args=args: f(*args), reps)
        t_ort = median_time(ort_run, reps)
        fl = 2 * K * ck.shape.OH * ck.shape.OW * C * R * R
        rows.append((f"{name} {C}x{H}x{W}->{K}", fl / t_ours / 1e9, fl / t_ort / 1e9))
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--isa", default=None)
    ap.add_argument("--only", choices=["gemm", "conv", "peak"], default=None)
    args = ap.parse_args()
    isa = args.isa or default_isa()
    cpu = host_cpu()
    print(f"cpu={cpu.name} isa={isa} reps={args.reps} (medians, single thread)")
    peak = measure_peak(isa, args.reps) if args.only in (None, "peak", "gemm", "conv") else 0.0
    print(f"measured FMA peak: {peak:.1f} GFLOP/s\n")
    if args.only in (None, "gemm"):
        print(f"{'GEMM MxNxK':<22}{'ours':>9}{'numpy':>9}{'ratio':>8}{'%peak':>8}")
        for name, ours, ref in bench_gemm(isa, args.reps):
            print(f"{name:<22}{ours:9.1f}{ref:9.1f}{ours / ref:8.2f}{100 * ours / peak:7.0f}%")
        print()
    if args.only in (None, "conv"):
        print(f"{'Conv (ResNet-50, N=1)':<34}{'ours':>9}{'ort':>9}{'ratio':>8}{'%peak':>8}")
        for name, ours, ref in bench_conv(isa, args.reps):
            print(f"{name:<34}{ours:9.1f}{ref:9.1f}{ours / ref:8.2f}{100 * ours / peak:7.0f}%")


if __name__ == "__main__":
    main()
