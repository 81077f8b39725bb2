"""The quantized instructions: Quantize, Dequantize, RescaleQuantized, QAdd, QMul, the int8
pools and the ONNX import's integer ops (the convolution and matrix products are
emitters/qgemm.py's). Every kernel follows compiler/kernels/reference_quant.py bit for bit: the multipliers
are the reference's own float32 constants (`multipliers`, `ratio`).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from llvmlite import ir

from compiler.backends.llvm.emitters.common import (
    F32,
    I8,
    I32,
    Arg,
    Call,
    EmitContext,
    Emitted,
    broadcast_strides,
    c64,
    collapse,
    contiguous_strides,
    entry_alloca,
    gep,
    linear,
    loop,
    loop_nest,
    register,
    unsupported,
)
from compiler.backends.llvm.kernels import quant as qk
from compiler.backends.llvm.kernels.window import Axis, window_taps
from compiler.graph.types import ElemKind
from compiler.kernels.reference_nn import avg_pool_counts
from compiler.kernels.reference_quant import multiplier, ratio


def qparams(v: Any) -> tuple[float, int]:
    t = v.type
    if t.scale is None or t.offset is None:
        raise ValueError(f"%{v.name} is not quantized ({t})")
    return t.scale, t.offset


def qclamp(ins: Any) -> tuple[int, int, int]:
    """(offset, qmin, qmax) of the instruction's quantized result."""
    return int(ins.attrs["offset"]), int(ins.attrs["qmin"]), int(ins.attrs["qmax"])


def _f32(x: float | np.floating) -> ir.Constant:
    return ir.Constant(F32, float(np.float32(x)))


def _map(ctx: EmitContext, ins: Any, key: Any, fn: Any) -> Emitted:
    """An element-wise kernel over the result's shape with broadcast operand strides:
    `fn(b, [loaded operands]) -> stored value`; operand element types from their LValues."""
    out = ins.operands[0][0]
    srcs = [v for v, _ in ins.operands[1:]]
    shape = out.type.shape
    pats = [list(contiguous_strides(shape))] + [
        list(broadcast_strides(s.type.shape, shape)) for s in srcs
    ]
    cshape, cstrides = collapse(shape, pats)
    etys = [_ety(s) for s in srcs]
    full_key = (key, tuple(cshape), tuple(tuple(s) for s in cstrides), tuple(map(str, etys)))

    def build(f: ir.Function, b: ir.IRBuilder) -> None:
        po, *ps = f.args

        def body(ivs: list[ir.Value]) -> None:
            vals = [
                b.load(gep(b, p, linear(b, ivs, st), ety), typ=ety)
                for p, st, ety in zip(ps, cstrides[1:], etys)
            ]
            res = fn(b, vals)
            b.store(res, gep(b, po, linear(b, ivs, cstrides[0]), res.type))

        loop_nest(b, cshape, body)

    name = ctx.sink.kernel(full_key, 1 + len(srcs), build, ins.kind)
    return Emitted([Call(name, [Arg(value=out)] + [Arg(value=s) for s in srcs])], "loop")


def _ety(v: Any) -> ir.Type:
    return F32 if v.type.elem.is_float else I8


def _map_affine(ctx: EmitContext, ins: Any, fn: Any, scale: float, offset: int) -> Emitted:
    """`_map` of ``fn(b, x, scale, offset)`` (qk.quantize, qk.dequantize) on the one operand;
    the kernel's key starts with the function's name."""
    key = (fn.__name__, scale, offset)
    return _map(ctx, ins, key, lambda b, xs: fn(b, xs[0], scale, offset))


@register("quantize")
def emit_quantize(ctx: EmitContext, ins: Any) -> Emitted:
    scale, offset = float(ins.attrs["scale"]), int(ins.attrs["offset"])
    return _map_affine(ctx, ins, qk.quantize, scale, offset)


@register("dequantize")
def emit_dequantize(ctx: EmitContext, ins: Any) -> Emitted:
    scale, offset = qparams(ins.operands[1][0])
    return _map_affine(ctx, ins, qk.dequantize, scale, offset)


@register("rescalequantized")
def emit_rescale(ctx: EmitContext, ins: Any) -> Emitted:
    s_in, z_in = qparams(ins.operands[1][0])
    m = ratio(s_in, ins.attrs["scale"])
    z, lo, hi = qclamp(ins)

    def fn(b: ir.IRBuilder, xs: list[ir.Value]) -> ir.Value:
        return qk.requantize(b, qk.centered(b, xs[0], z_in), _f32(m), z, lo, hi)

    return _map(ctx, ins, ("rescale", float(m), z_in, z, lo, hi), fn)


@register("qlookup")
def emit_qlookup(ctx: EmitContext, ins: Any) -> Emitted:
    """y[i] = table[x[i] + 128]: one byte load from the 256-byte table per element."""
    out, x, table = (v for v, _ in ins.operands)
    n = out.type.numel

    def build(f: ir.Function, b: ir.IRBuilder) -> None:
        po, px, pt = f.args
        with loop(b, 0, n, 1, "i") as i:
            q = b.load(gep(b, px, i, I8), typ=I8)
            idx = b.add(b.sext(q, ir.IntType(64)), c64(128))
            b.store(b.load(gep(b, pt, idx, I8), typ=I8), gep(b, po, i, I8))

    name = ctx.sink.kernel(("qlookup", n), 3, build, ins.kind)
    return Emitted([Call(name, [Arg(value=out), Arg(value=x), Arg(value=table)])], "loop")


@register("qsoftmax")
def emit_qsoftmax(ctx: EmitContext, ins: Any) -> Emitted:
    """Per row along the axis: the max, the int32 sum of table[max - x], then each
    quantize(float32(e) / float32(sum)) (reference_quant._qsoftmax)."""
    out, x, table = (v for v, _ in ins.operands)
    shape = out.type.shape
    axis = ins.attrs["axis"] % len(shape)
    outer, n = math.prod(shape[:axis]), shape[axis]
    inner = math.prod(shape[axis + 1 :])
    scale, z, lo, hi = float(ins.attrs["scale"]), *qclamp(ins)
    i64t = ir.IntType(64)

    def build(f: ir.Function, b: ir.IRBuilder) -> None:
        po, px, pt = f.args
        with loop(b, 0, outer, 1, "o") as o, loop(b, 0, inner, 1, "j") as j:
            base = b.add(b.mul(o, c64(n * inner)), j)

            def at(k: ir.Value) -> ir.Value:
                return b.add(base, b.mul(k, c64(inner)))

            def e_of(k: ir.Value, m: ir.Value) -> ir.Value:
                q = b.sext(b.load(gep(b, px, at(k), I8), typ=I8), I32)
                return b.load(gep(b, pt, b.sext(b.sub(m, q), i64t), I32), typ=I32)

            mx = entry_alloca(b, I32)
            b.store(ir.Constant(I32, -128), mx)
            with loop(b, 0, n, 1, "k") as k:
                q = b.sext(b.load(gep(b, px, at(k), I8), typ=I8), I32)
                cur = b.load(mx, typ=I32)
                b.store(b.select(b.icmp_signed(">", q, cur), q, cur), mx)
            m = b.load(mx, typ=I32)
            acc = entry_alloca(b, I32)
            b.store(ir.Constant(I32, 0), acc)
            with loop(b, 0, n, 1, "s") as k:
                b.store(b.add(b.load(acc, typ=I32), e_of(k, m)), acc)
            total = b.sitofp(b.load(acc, typ=I32), F32)
            with loop(b, 0, n, 1, "w") as k:
                p = b.fdiv(b.sitofp(e_of(k, m), F32), total)
                b.store(qk.quantize(b, p, scale, z, lo, hi), gep(b, po, at(k), I8))

    key = ("qsoftmax", outer, n, inner, scale, z, lo, hi)
    name = ctx.sink.kernel(key, 3, build, ins.kind)
    return Emitted([Call(name, [Arg(value=out), Arg(value=x), Arg(value=table)])], "loop")


@register("qadd")
def emit_qadd(ctx: EmitContext, ins: Any) -> Emitted:
    (sa, za), (sb, zb) = qparams(ins.operands[1][0]), qparams(ins.operands[2][0])
    ma, mb = ratio(sa, ins.attrs["scale"]), ratio(sb, ins.attrs["scale"])
    z, lo, hi = qclamp(ins)

    def fn(b: ir.IRBuilder, xs: list[ir.Value]) -> ir.Value:
        a = b.fmul(b.sitofp(qk.centered(b, xs[0], za), F32), _f32(ma))
        c = b.fmul(b.sitofp(qk.centered(b, xs[1], zb), F32), _f32(mb))
        return qk.round_to_q(b, b.fadd(a, c), z, lo, hi)

    return _map(ctx, ins, ("qadd", float(ma), float(mb), za, zb, z, lo, hi), fn)


@register("qmul")
def emit_qmul(ctx: EmitContext, ins: Any) -> Emitted:
    (sa, za), (sb, zb) = qparams(ins.operands[1][0]), qparams(ins.operands[2][0])
    m = multiplier(sa, sb, ins.attrs["scale"])
    z, lo, hi = qclamp(ins)

    def fn(b: ir.IRBuilder, xs: list[ir.Value]) -> ir.Value:
        acc = b.mul(qk.centered(b, xs[0], za), qk.centered(b, xs[1], zb))
        return qk.requantize(b, acc, _f32(m), z, lo, hi)

    return _map(ctx, ins, ("qmul", float(m), za, zb, z, lo, hi), fn)


@register("importquantized")
def emit_import(ctx: EmitContext, ins: Any) -> Emitted:
    unsigned = ins.operands[1][0].type.elem == ElemKind.U8

    def fn(b: ir.IRBuilder, xs: list[ir.Value]) -> ir.Value:
        return b.xor(xs[0], ir.Constant(I8, -128)) if unsigned else xs[0]

    return _map(ctx, ins, ("import", unsigned), fn)


@register("exportquantized")
def emit_export(ctx: EmitContext, ins: Any) -> Emitted:
    unsigned = ins.attrs["to"] == "u8"

    def fn(b: ir.IRBuilder, xs: list[ir.Value]) -> ir.Value:
        return b.xor(xs[0], ir.Constant(I8, -128)) if unsigned else xs[0]

    return _map(ctx, ins, ("export", unsigned), fn)


@register("dequantizeaxis")
def emit_dequantize_axis(ctx: EmitContext, ins: Any) -> Emitted:
    out, x, sc, of = (v for v, _ in ins.operands)
    scales, offsets = ctx.constant_data(sc), ctx.constant_data(of)
    if scales is None or offsets is None:
        raise unsupported(ins, "run-time scales or offsets")
    shape = x.type.shape
    ax = ins.attrs["axis"] % len(shape)
    n = shape[ax]
    outer, inner = math.prod(shape[:ax]), math.prod(shape[ax + 1 :])
    s32 = np.broadcast_to(np.asarray(scales, np.float32).reshape(-1), (n,)).copy()
    o32 = np.broadcast_to(np.asarray(offsets, np.int32).reshape(-1), (n,)).copy()
    elem = x.type.elem
    ety = {1: I8, 4: I32}[elem.itemsize]
    key = ("dqaxis", outer, n, inner, str(elem.value), s32.tobytes(), o32.tobytes())

    def build(f: ir.Function, b: ir.IRBuilder) -> None:
        po, px = f.args
        stab = ctx.sink.global_table(s32, "dqs")
        otab = ctx.sink.global_table(o32, "dqo")
        with loop(b, 0, outer, 1, "o") as o, loop(b, 0, n, 1, "c") as c:
            s_c = b.load(gep(b, stab, c, F32), typ=F32)
            o_c = b.load(gep(b, otab, c, I32), typ=I32)
            base = b.mul(b.add(b.mul(o, c64(n)), c), c64(inner))
            with loop(b, 0, inner, 1, "i") as i:
                v = b.load(gep(b, px, b.add(base, i), ety), typ=ety)
                if elem.itemsize == 1:
                    v = b.zext(v, I32) if elem.value == "u8" else b.sext(v, I32)
                y = b.fmul(b.sitofp(b.sub(v, o_c), F32), s_c)
                b.store(y, gep(b, po, b.add(base, i), F32))

    name = ctx.sink.kernel(key, 2, build, "dqaxis")
    return Emitted([Call(name, [Arg(value=out), Arg(value=x)])], "loop")


@register("intconv")
def emit_int_conv(ctx: EmitContext, ins: Any) -> Emitted:
    """ConvInteger: a plain loop nest over int32 sums (rare: dynamically quantized models)."""
    out, x, w = (v for v, _ in ins.operands)
    (_, zx), (_, zw) = qparams(x), qparams(w)
    at = ins.attrs
    N, C, H, W = x.type.shape
    K, Cg, R, S = w.type.shape
    _, _, OH, OW = out.type.shape
    g = at["group"]
    Kg = K // g
    rows = Axis(H, OH, R, at["strides"][0], at["pads"][0], at["dilations"][0])
    cols = Axis(W, OW, S, at["strides"][1], at["pads"][1], at["dilations"][1])
    key = ("intconv", x.type.shape, w.type.shape, out.type.shape, tuple(sorted(at.items())), zx, zw)

    def build(f: ir.Function, b: ir.IRBuilder) -> None:
        po, px, pw = f.args
        acc = b.alloca(I32)
        with loop(b, 0, N, 1, "n") as n, loop(b, 0, K, 1, "k") as k:
            gi = b.udiv(k, c64(Kg))
            with loop(b, 0, OH, 1, "oh") as oh, loop(b, 0, OW, 1, "ow") as ow:
                b.store(ir.Constant(I32, 0), acc)
                with loop(b, 0, Cg, 1, "c") as c:
                    cin = b.add(b.mul(gi, c64(Cg)), c)
                    xb = b.mul(b.add(b.mul(n, c64(C)), cin), c64(H * W))
                    wb = b.mul(b.add(b.mul(k, c64(Cg)), c), c64(R * S))
                    for tap, okh, okw, ih, iw in window_taps(b, rows, cols, oh, ow):
                        ok = b.and_(okh, okw)
                        idx = b.select(ok, b.add(xb, b.add(b.mul(ih, c64(W)), iw)), c64(0))
                        xv = qk.centered(b, b.load(gep(b, px, idx, I8), typ=I8), zx)
                        xv = b.select(ok, xv, ir.Constant(I32, 0))
                        wv = b.load(gep(b, pw, b.add(wb, c64(tap)), I8), typ=I8)
                        prod = b.mul(xv, qk.centered(b, wv, zw))
                        b.store(b.add(b.load(acc, typ=I32), prod), acc)
                o = b.add(
                    b.mul(b.add(b.mul(n, c64(K)), k), c64(OH * OW)), b.add(b.mul(oh, c64(OW)), ow)
                )
                b.store(b.load(acc, typ=I32), gep(b, po, o, I32))

    name = ctx.sink.kernel(key, 3, build, "intconv")
    return Emitted([Call(name, [Arg(value=out), Arg(value=x), Arg(value=w)])], "direct")


# -- pools -------------------------------------------------------------------------------------------


@register("qglobalavgpool")
def emit_qglobal_avgpool(ctx: EmitContext, ins: Any) -> Emitted:
    out, x = (v for v, _ in ins.operands)
    s_in, z_in = qparams(x)
    m = ratio(s_in, ins.attrs["scale"])
    z, lo, hi = qclamp(ins)
    nc = math.prod(x.type.shape[:2])
    hw = math.prod(x.type.shape[2:])
    key = ("qgap", nc, hw, float(m), z_in, z, lo, hi)

    def build(f: ir.Function, b: ir.IRBuilder) -> None:
        po, px = f.args
        with loop(b, 0, nc, 1, "c") as c:
            base = gep(b, px, b.mul(c, c64(hw)), I8)
            acc = entry_alloca(b, I32)
            b.store(ir.Constant(I32, 0), acc)
            with loop(b, 0, hw, 1, "p") as p:
                v = qk.centered(b, b.load(gep(b, base, p, I8), typ=I8), z_in)
                b.store(b.add(b.load(acc, typ=I32), v), acc)
            y = b.fmul(b.sitofp(b.load(acc, typ=I32), F32), _f32(m))
            y = b.fdiv(y, _f32(hw))
            b.store(qk.round_to_q(b, y, z, lo, hi), gep(b, po, c, I8))

    name = ctx.sink.kernel(key, 2, build, "qgap")
    return Emitted([Call(name, [Arg(value=out), Arg(value=x)])], "loop")


@register("qavgpool")
def emit_qavgpool(ctx: EmitContext, ins: Any) -> Emitted:
    out, x = (v for v, _ in ins.operands)
    at = ins.attrs
    s_in, z_in = qparams(x)
    m = ratio(s_in, at["scale"])
    z, lo, hi = qclamp(ins)
    N, C, H, W = x.type.shape
    _, _, OH, OW = out.type.shape
    kh, kw = at["kernel"]
    sh, sw = at["strides"]
    counts = avg_pool_counts(x.type.shape, at, np.float32).astype(np.float32)
    rows_ax = Axis(H, OH, kh, sh, at["pads"][0], 1)
    cols_ax = Axis(W, OW, kw, sw, at["pads"][1], 1)
    key = (
        ("qavgpool", x.type.shape, out.type.shape, at["kernel"], at["strides"], at["pads"]),
        (counts.tobytes(), float(m), z_in, z, lo, hi),
    )

    def build(f: ir.Function, b: ir.IRBuilder) -> None:
        po, px = f.args
        ctab = ctx.sink.global_table(counts, "qcnt")
        acc = entry_alloca(b, I32)
        with loop(b, 0, N * C, 1, "nc") as nc, loop(b, 0, OH, 1, "oh") as oh:
            with loop(b, 0, OW, 1, "ow") as ow:
                b.store(ir.Constant(I32, 0), acc)
                xb = gep(b, px, b.mul(nc, c64(H * W)), I8)
                for r in range(kh):
                    okr, ih = rows_ax.tap(b, oh, r)
                    for t in range(kw):
                        okc, iw = cols_ax.tap(b, ow, t)
                        ok = b.and_(okr, okc)
                        idx = b.select(ok, b.add(b.mul(ih, c64(W)), iw), c64(0))
                        v = qk.centered(b, b.load(gep(b, xb, idx, I8), typ=I8), z_in)
                        v = b.select(ok, v, ir.Constant(I32, 0))
                        b.store(b.add(b.load(acc, typ=I32), v), acc)
                pos = b.add(b.mul(oh, c64(OW)), ow)
                y = b.fmul(b.sitofp(b.load(acc, typ=I32), F32), _f32(m))
                y = b.fdiv(y, b.load(gep(b, ctab, pos, F32), typ=F32))
                o = b.add(b.mul(nc, c64(OH * OW)), pos)
                b.store(qk.round_to_q(b, y, z, lo, hi), gep(b, po, o, I8))

    name = ctx.sink.kernel(key, 2, build, "qavgpool")
    return Emitted([Call(name, [Arg(value=out), Arg(value=x)])], "window")


__all__ = [
    "qclamp",
    "qparams",
    "emit_dequantize",
    "emit_qadd",
    "emit_qavgpool",
    "emit_qglobal_avgpool",
    "emit_qmul",
    "emit_quantize",
    "emit_rescale",
]
