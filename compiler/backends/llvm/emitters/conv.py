"""Conv and ConvTranspose emitters (the LIR side of kernels/conv.py).

A conv picks a row of the strategy table ``kernels.conv.STRATEGIES`` from its shape (or the one
forced by ``CodeGen(conv_strategy=...)`` / ``$GLOWVIZ_CONV_STRATEGY``); a constant float32
filter is packed at compile time, as the row wants, into a blob appended to the constant
region; the fused activation (relu or clip, the backend contract's) runs in the kernel, after
the sum when the conv accumulates into its destination (`@inout`, the sum post-op).
ConvTranspose is a direct scatter loop.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from llvmlite import ir

from compiler.backends.llvm.emitters.common import (
    F32,
    F32_ONLY,
    Arg,
    Call,
    EmitContext,
    Emitted,
    c64,
    gep,
    loop,
    register,
    unsupported,
)
from compiler.backends.llvm.emitters.elementwise import kernel_activation
from compiler.backends.llvm.kernels.common import Epilogue, hand_tiled
from compiler.backends.llvm.kernels.conv import ConvPtrs, conv_shape, select
from compiler.backends.llvm.kernels.conv_gemm import shared_cin
from compiler.backends.llvm.kernels.gemm import conv_gemm_config
from compiler.backends.llvm.kernels.window import Axis, window_taps
from compiler.graph.types import ElemKind


def _operands(ctx: EmitContext, ins: Any, out: Any, what: str) -> tuple[Any, Any, Any, Any]:
    """(out, x, w, bias) of a float32 conv whose output does not overlap its input (what the
    kernels take; `out` may be a sum post-op's accumulation target)."""
    _, x, w, bias = (v for v, _ in ins.operands)
    if not all(v.type.elem == ElemKind.F32 for v in (out, x, w, bias)):
        raise unsupported(ins, f"{what} of non-float32")
    if ctx.may_alias(out, x):
        raise unsupported(ins, f"{what} output overlaps its input")
    return out, x, w, bias


#: Kernels shared by convs that differ only in their input channels (``shared_cin``).
SHARE_CHANNELS = True
#: The strategies whose 1x1 kernels take their input channels as an argument.
_SHARED_ROWS = ("gemm-1x1", "pixel-rows-gemm")


@register("conv", elems=F32_ONLY, accumulates=True)
def emit_conv(ctx: EmitContext, ins: Any) -> Emitted:
    out, x, w, bias = _operands(ctx, ins, ctx.result(ins), "conv")
    at = ins.attrs
    N, C, H, W = x.type.shape
    K, _, R, S = w.type.shape
    try:
        s = conv_shape(
            N,
            C,
            H,
            W,
            K,
            R,
            S,
            stride=tuple(at["strides"]),
            pad=tuple(at["pads"]),
            dilation=tuple(at["dilations"]),
            group=at["group"],
        )
    except ValueError as e:
        raise unsupported(ins, str(e)) from None
    if (s.OH, s.OW) != tuple(out.type.shape[2:]):
        raise unsupported(ins, f"output {out.type.shape} does not match {s}")
    data = ctx.constant_data(w)
    row = select(
        s, constant=data is not None, forced=ctx.conv_strategy, where=ins.name, weights=data
    )
    kact = ctx.with_epilogue(kernel_activation(at["activation"], at["act_args"]))
    cfg = conv_gemm_config()
    # The sum post-op: add to the destination, then the activation.
    ep = Epilogue(kact, ins.accumulates)

    # 1x1 convs that differ only in their input channels (DenseNet's 61 bottlenecks) share a
    # kernel taking them as an argument: each such kernel cost 10-50 ms of LLVM time.
    shared = SHARE_CHANNELS and row.name in _SHARED_ROWS and s.pointwise and s.group == 1
    ks = replace(s, C=shared_cin(s.C, cfg)) if shared else s

    def build(fn: ir.Function, b: ir.IRBuilder) -> None:
        if row.hand_tiled:
            hand_tiled(fn)
        row.body(b, ks, cfg, ConvPtrs(*fn.args), ep)

    name = ctx.sink.kernel(("conv", row.name, ks, ep, shared), 4, build, "conv", scalars=shared)
    if row.pack is None:
        warg = Arg(value=w)  # the kernel reads the filter operand as it is
    else:
        assert data is not None
        warg = Arg(blob=ctx.sink.blob(row.pack(data, s, cfg), key=(row.name, w.name, s.group)))
    args = [Arg(value=x), warg, Arg(value=out), Arg(value=bias)]
    return Emitted([Call(name, args + [Arg(scalar=s.C)] * shared)], row.name)


@register("convtranspose", elems=F32_ONLY)
def emit_conv_transpose(ctx: EmitContext, ins: Any) -> Emitted:
    out, x, w, bias = _operands(ctx, ins, ins.operands[0][0], "conv-transpose")
    at = ins.attrs
    N, C, H, W = x.type.shape
    _, Kg, R, S = w.type.shape
    _, K, OH, OW = out.type.shape
    g = at["group"]
    Cg = C // g
    (sh, sw), (dh, dw) = at["strides"], at["dilations"]
    # The scatter's window runs the other way: input pixel h, tap r writes output row
    # h * sh + r * dh - pt, which must fall inside the output.
    rows = Axis(OH, H, R, sh, at["pads"][0], dh)
    cols = Axis(OW, W, S, sw, at["pads"][1], dw)
    key = (
        "convT",
        x.type.shape,
        w.type.shape,
        out.type.shape,
        at["strides"],
        at["pads"],
        at["dilations"],
        g,
    )

    def build(fn: ir.Function, b: ir.IRBuilder) -> None:
        px, pw, po, pb = fn.args
        # out = bias, then scatter-accumulate every input pixel times its filter taps.
        with loop(b, 0, N, 1, "n") as n, loop(b, 0, K, 1, "k") as k:
            bv = b.load(gep(b, pb, k, F32), typ=F32)
            base = b.mul(b.add(b.mul(n, c64(K)), k), c64(OH * OW))
            with loop(b, 0, OH * OW, 1, "p") as p:
                b.store(bv, gep(b, po, b.add(base, p), F32))
        with loop(b, 0, N, 1, "n2") as n, loop(b, 0, C, 1, "c") as c:
            gi = b.udiv(c, c64(Cg))
            with loop(b, 0, H, 1, "h") as h, loop(b, 0, W, 1, "w") as wi:
                xv = b.load(
                    gep(
                        b,
                        px,
                        b.add(
                            b.mul(b.add(b.mul(n, c64(C)), c), c64(H * W)),
                            b.add(b.mul(h, c64(W)), wi),
                        ),
                        F32,
                    ),
                    typ=F32,
                )
                with loop(b, 0, Kg, 1, "kg") as kg:
                    k = b.add(b.mul(gi, c64(Kg)), kg)
                    obase = b.mul(b.add(b.mul(n, c64(K)), k), c64(OH * OW))
                    wbase = b.mul(b.add(b.mul(c, c64(Kg)), kg), c64(R * S))
                    for tap, okh, okw, oh, ow in window_taps(b, rows, cols, h, wi):
                        ok = b.and_(okh, okw)
                        oidx = b.add(obase, b.add(b.mul(oh, c64(OW)), ow))
                        wv = b.load(gep(b, pw, b.add(wbase, c64(tap)), F32), typ=F32)
                        optr = gep(b, po, oidx, F32)
                        cur = b.load(optr, typ=F32)
                        b.store(b.select(ok, b.fadd(cur, b.fmul(xv, wv)), cur), optr)

    name = ctx.sink.kernel(key, 4, build, "convT")
    return Emitted(
        [Call(name, [Arg(value=x), Arg(value=w), Arg(value=out), Arg(value=bias)])], "direct"
    )


__all__ = ["emit_conv", "emit_conv_transpose"]
