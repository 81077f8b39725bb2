"""Single-core float32 FMA peak of the host, measured with a JIT-compiled FMA loop (the same
probe benchmarks/bench_kernels.py uses), for "% of peak" figures in `glowviz bench`.
"""

from __future__ import annotations

import time
from functools import cache

import numpy as np
from llvmlite import ir

from compiler.backends.llvm.jit import JITEngine
from compiler.backends.llvm.kernels.common import I64, PTR, VOID, fma, i64, splat, vec
from compiler.backends.llvm.target import Isa, vector_width_f32


@cache
def fma_peak_gflops(iters: int = 2_000_000, reps: int = 5, isa: Isa | None = None) -> float:
    """GFLOP/s of 12 independent vector FMA chains on one core: the fastest of `reps` runs

    (a peak is what the core can do, so the least-disturbed run is the honest figure)."""
    vw = vector_width_f32(isa)
    nacc = 12
    m = ir.Module()
    fn = ir.Function(m, ir.FunctionType(VOID, [PTR, I64]), "peak")
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    pre = b.block
    body = b.append_basic_block("body")
    end = b.append_basic_block("end")
    x = b.load(fn.args[0], typ=vec(vw), align=4)
    y = splat(0.999, vw)
    b.branch(body)
    b.position_at_end(body)
    k = b.phi(I64)
    k.add_incoming(i64(0), pre)
    accs = []
    for j in range(nacc):
        p = b.phi(vec(vw))
        p.add_incoming(splat(float(j), vw), pre)
        accs.append(p)
    for p in accs:
        p.add_incoming(fma(b, p, y, x), body)
    nxt = b.add(k, i64(1))
    k.add_incoming(nxt, body)
    b.cbranch(b.icmp_signed("<", nxt, fn.args[1]), body, end)
    b.position_at_end(end)
    s = accs[0]
    for p in accs[1:]:
        s = b.fadd(s, p)
    b.store(s, fn.args[0], align=4)
    b.ret_void()
    f = JITEngine(disk_cache=False).compile(m).cfunc("peak")
    buf = np.ones(vw, dtype=np.float32)
    f(buf.ctypes.data, 1000)
    ts = []
    for _ in range(reps):
        t = time.perf_counter()
        f(buf.ctypes.data, iters)
        ts.append(time.perf_counter() - t)
    return 2 * vw * nacc * iters / float(min(ts)) / 1e9


__all__ = ["fma_peak_gflops"]
