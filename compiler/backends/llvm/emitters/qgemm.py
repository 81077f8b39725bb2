"""The int8 convolution and matrix-product instructions (QConv, QFullyConnected, QMatMul and the
ONNX import's IntMatMul): plan the register-tile kernels of kernels/qconv.py and kernels/qgemm.py
(VNNI / AVX2 dot products, requantization fused in the epilogue) from the instruction's constant
weights, or a plain loop nest for two run-time operands. Both follow
compiler/kernels/reference_quant.py bit for bit.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from llvmlite import ir

import compiler.backends.llvm.target as target
from compiler.backends.llvm.emitters.common import (
    F32,
    I8,
    I32,
    Arg,
    Call,
    EmitContext,
    Emitted,
    broadcast_strides,
    contiguous_strides,
    gep,
    linear,
    loop,
    loop_nest,
    register,
    unsupported,
)
from compiler.backends.llvm.emitters.quant import qclamp, qparams
from compiler.backends.llvm.kernels.common import i64
from compiler.backends.llvm.kernels.qconv import (
    build_qconv,
    build_qdepthwise,
    exact_float_bias,
    geometry,
    plan_qconv,
)
from compiler.backends.llvm.kernels.qgemm import (
    build_qfc,
    plan_qfc,
    qfc_scratch_bytes,
    scratch_bytes,
)
from compiler.backends.llvm.kernels.quant import centered, round_to_q
from compiler.kernels.reference_quant import multiplier, multipliers, ratio


def conv_constants(
    ctx: EmitContext, ins: Any
) -> tuple[np.ndarray, np.ndarray, np.ndarray, float, int]:
    """(filter int8, bias int32, multipliers float32, input scale, input offset) of a QConv or
    QFullyConnected whose filter, bias and scales are constants."""
    _, x, w, bias, ws = (v for v, _ in ins.operands)
    datas = [ctx.constant_data(v) for v in (w, bias, ws)]
    if any(d is None for d in datas):
        raise unsupported(ins, "run-time weights, bias or weight scales")
    wd, bd, sd = (np.asarray(d) for d in datas)
    s_in, z_in = qparams(x)
    return wd, bd.astype(np.int32), multipliers(s_in, sd, ins.attrs["scale"]), s_in, z_in


@register("qconv", accumulates=True)
def emit_qconv(ctx: EmitContext, ins: Any) -> Emitted:
    out, x, w = (v for v, _ in ins.operands[:3])
    if ctx.may_alias(out, x):
        raise unsupported(ins, "output overlaps the input")
    wd, bias, mult, _, z_in = conv_constants(ctx, ins)
    g = geometry(x.type.shape, w.type.shape, out.type.shape, ins.attrs)
    q = qclamp(ins)
    sum_q = None
    if ins.accumulates:  # the sum post-op (reference_quant.qconv_accumulating)
        if g.depthwise:
            raise unsupported(ins, "a depthwise int8 convolution accumulating into its output")
        m_r = float(ratio(ins.attrs["sum_scale"], ins.attrs["scale"]))
        sum_q = (int(ins.attrs["sum_offset"]), m_r)
    if g.depthwise:
        vw = {"avx512": 16, "avx2": 8}.get(target.default_isa(), 4)
        nv = 4 if vw == 16 else 2
        fbias = exact_float_bias(wd, bias)
        key: tuple[Any, ...] = ("qdw", g, z_in, q, vw, nv, fbias)

        def build_dw(fn: ir.Function, b: ir.IRBuilder) -> None:
            build_qdepthwise(b, fn, g, z_in, q, vw, nv, b.module, fbias)

        name = ctx.sink.kernel(key, 5, build_dw, "qdw")
        wf = wd.reshape(g.K, -1).astype(np.float32)
        wb = ctx.sink.blob(wf, key=("qdw-w", w.name))
        tag = "qdepthwise"
        bias_arr, mult_arr = bias.astype(np.int32), mult.astype(np.float32)
    else:
        p = plan_qconv(g, wd, bias, mult, z_in, q, sum_q=sum_q)
        key = ("qconv", p.cfg, g, z_in, q, sum_q)

        def build(fn: ir.Function, b: ir.IRBuilder) -> None:
            build_qconv(b, fn, p, b.module)

        name = ctx.sink.kernel(key, 5, build, "qconv")
        wb = ctx.sink.blob(p.weights, key=("qconv-w", w.name, p.cfg))
        tag = f"qconv-{p.cfg.isa}"
        bias_arr, mult_arr = p.bias, p.mult
    bb = ctx.sink.blob(bias_arr, key=("qconv-b", ins.name))
    mb = ctx.sink.blob(mult_arr, key=("qconv-m", ins.name))
    call = Call(name, [Arg(value=x), Arg(blob=wb), Arg(value=out), Arg(blob=bb), Arg(blob=mb)])
    return Emitted([call], tag)


@register("qfullyconnected")
def emit_qfc(ctx: EmitContext, ins: Any) -> Emitted:
    out, x = ins.operands[0][0], ins.operands[1][0]
    if ctx.may_alias(out, x):
        raise unsupported(ins, "output overlaps the input")
    w, bias, mult, _, z_in = conv_constants(ctx, ins)
    M, K = x.type.shape
    q = qclamp(ins)
    p = plan_qfc(w, bias, mult, z_in, M, q)
    key = ("qfc", p.cfg, M, p.N, K, z_in, q)

    def build(fn: ir.Function, b: ir.IRBuilder) -> None:
        build_qfc(b, fn, p, scratch_bytes(b.module, "qfc.a", qfc_scratch_bytes(p)))

    name = ctx.sink.kernel(key, 5, build, "qfc")
    wb = ctx.sink.blob(p.weights, key=("qfc-w", ins.operands[2][0].name, p.cfg))
    bb = ctx.sink.blob(p.bias, key=("qfc-b", ins.name))
    mb = ctx.sink.blob(p.mult, key=("qfc-m", ins.name))
    args = [Arg(value=x), Arg(blob=wb), Arg(value=out), Arg(blob=bb), Arg(blob=mb)]
    return Emitted([Call(name, args)], f"qgemm-{p.cfg.isa}")


def _matmul_loops(ctx: EmitContext, ins: Any, *, requantize: bool) -> Emitted:
    """QMatMul of two run-time operands (or IntMatMul: int32 sums, no requantization): a loop
    nest over int32 sums the vectoriser widens. Row by row of the result: each (a_mk - z_a)
    times row k of B is added into an int32 row of N sums, so the innermost loop runs along
    contiguous B and sums (reading B by columns in the innermost loop kept it scalar: BERT-tiny's
    four attention products took 1.6 of its 1.9 ms). int32 sums wrap as the reference's."""
    out, a, bm = (v for v, _ in ins.operands)
    (sa, za), (sb, zb) = qparams(a), qparams(bm)
    if requantize:
        mult = multiplier(sa, sb, ins.attrs["scale"])
        q = qclamp(ins)
    else:
        mult, q = np.float32(0), (0, 0, 0)
    M, K = a.type.shape[-2:]
    N = bm.type.shape[-1]
    batch = tuple(out.type.shape[:-2])
    sa_b = [s * M * K for s in broadcast_strides(a.type.shape[:-2], batch)]
    sb_b = [s * K * N for s in broadcast_strides(bm.type.shape[:-2], batch)]
    key = ("qmm", batch, M, N, K, tuple(sa_b), tuple(sb_b), za, zb, float(mult), q, requantize)
    oty = I8 if requantize else I32

    def build(fn: ir.Function, b: ir.IRBuilder) -> None:
        po, pa, pb = fn.args
        sums = scratch_bytes(b.module, "qmm.row", N * 4)
        so_b = [s * M * N for s in contiguous_strides(batch)]

        def body(ivs: list[ir.Value]) -> None:
            ab = gep(b, pa, linear(b, ivs, sa_b), I8)
            bb = gep(b, pb, linear(b, ivs, sb_b), I8)
            ob = gep(b, po, linear(b, ivs, so_b), oty)
            with loop(b, 0, M, 1, "m") as m:
                with loop(b, 0, N, 1, "z") as n:
                    b.store(ir.Constant(I32, 0), gep(b, sums, n, I32))
                with loop(b, 0, K, 1, "k") as k:
                    x = centered(b, b.load(gep(b, ab, b.add(b.mul(m, i64(K)), k), I8), typ=I8), za)
                    brow = gep(b, bb, b.mul(k, i64(N)), I8)
                    with loop(b, 0, N, 1, "n") as n:
                        y = centered(b, b.load(gep(b, brow, n, I8), typ=I8), zb)
                        at = gep(b, sums, n, I32)
                        b.store(b.add(b.load(at, typ=I32), b.mul(x, y)), at)
                with loop(b, 0, N, 1, "o") as n:
                    dst = gep(b, ob, b.add(b.mul(m, i64(N)), n), oty)
                    total = b.load(gep(b, sums, n, I32), typ=I32)
                    if requantize:
                        y = b.fmul(b.sitofp(total, F32), ir.Constant(F32, float(mult)))
                        b.store(round_to_q(b, y, *q), dst)
                    else:
                        b.store(total, dst)

        if batch:
            loop_nest(b, list(batch), body, "bt")
        else:
            body([])

    name = ctx.sink.kernel(key, 3, build, "qmm")
    return Emitted([Call(name, [Arg(value=out), Arg(value=a), Arg(value=bm)])], "loop")


@register("qmatmul")
def emit_qmatmul(ctx: EmitContext, ins: Any) -> Emitted:
    return _matmul_loops(ctx, ins, requantize=True)


@register("intmatmul")
def emit_int_matmul(ctx: EmitContext, ins: Any) -> Emitted:
    return _matmul_loops(ctx, ins, requantize=False)


__all__ = ["conv_constants", "emit_int_matmul", "emit_qconv", "emit_qfc", "emit_qmatmul"]
