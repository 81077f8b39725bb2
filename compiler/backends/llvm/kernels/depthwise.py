"""The depthwise convolution kernel (one input channel per group, ``depthwise-direct`` in the
strategy table of kernels/conv.py): per input channel, a zero-padded copy of the channel in a
scratch buffer, then a register tile of RB output rows x one vector of output columns per step.

With the padding materialised, no tap needs a bounds test, and each loaded input vector feeds
every output row of the tile it reaches (with R = 5, a 4-row tile loads 8 rows x 5 taps for 100
multiply-adds instead of 100 loads). Stride-2 columns come from one double-width load and a
shuffle. Bias and the fused activation run on the accumulators before the (masked) store.
"""

from __future__ import annotations

from llvmlite import ir

from compiler.backends.llvm.kernels.common import (
    F32,
    Activation,
    apply_activation,
    broadcast,
    fma,
    gep,
    i64,
    loop,
    mul,
    scratch,
    splat,
)
from compiler.backends.llvm.kernels.gemm import GemmConfig
from compiler.backends.llvm.kernels.rows import masked_load, masked_store
from compiler.backends.llvm.kernels.window import ConvPtrs, ConvShape

#: Output rows per register tile (each holds one vector of columns).
ROW_TILE = 4


def _strided(b: ir.IRBuilder, ptr: ir.Value, vw: int, stride: int) -> ir.Value:
    """``vw`` floats at ``ptr[0], ptr[stride], ...`` (the padded buffer has slack behind)."""
    if stride == 1:
        return b.load(ptr, typ=ir.VectorType(F32, vw), align=4)
    if stride == 2:
        wide = b.load(ptr, typ=ir.VectorType(F32, 2 * vw), align=4)
        idx = ir.Constant(ir.VectorType(ir.IntType(32), vw), [2 * i for i in range(vw)])
        return b.shuffle_vector(wide, ir.Constant(wide.type, ir.Undefined), idx)
    v = ir.Constant(ir.VectorType(F32, vw), ir.Undefined)
    for i in range(vw):
        v = b.insert_element(
            v, b.load(gep(b, ptr, i * stride), typ=F32), ir.Constant(ir.IntType(32), i)
        )
    return v


def padded_size(s: ConvShape, vw: int) -> tuple[int, int, int]:
    """(Hp, Wp, floats): the padded channel's rows, row length and buffer size with slack for
    the last vector's over-read (wide stride-2 loads read up to 2 * vw * stride floats)."""
    pt, pl, pb, pr = s.pad
    hp, wp = s.H + pt + pb, s.W + pl + pr
    return hp, wp, hp * wp + 2 * vw * s.stride[1] + s.S * s.dilation[1]


def depthwise_body(
    b: ir.IRBuilder, s: ConvShape, cfg: GemmConfig, p: ConvPtrs, activation: Activation
) -> None:
    """out[n, c*mult + m] = bias + sum_rt w[c*mult + m, r, t] * x[n, c] shifted by (r, t)."""
    vw = cfg.vw
    mult = s.Kg
    H, W, OH, OW, R, S = s.H, s.W, s.OH, s.OW, s.R, s.S
    (sh, sw), (dh, dw) = s.stride, s.dilation
    pt, pl = s.pad[0], s.pad[1]
    hp, wp, size = padded_size(s, vw)
    # The padding is zero from the start: only the interior is ever written.
    xpad = scratch(b.module, f"{b.function.name}.xpad", size)
    nfull, tail = divmod(OW, vw)
    zero = ir.Constant(F32, 0.0)

    def tile(out: ir.Value, oh0: ir.Value, rows: int, ow0: ir.Value, valid: int, wb, bias) -> None:
        """Output rows oh0 .. oh0+rows-1, columns ow0 .. ow0+valid-1 of channel plane ``out``."""
        acc = [bias] * rows
        base = gep(b, xpad, b.add(b.mul(b.mul(oh0, i64(sh)), i64(wp)), b.mul(ow0, i64(sw))))
        for rin in range((rows - 1) * sh + (R - 1) * dh + 1):
            outs = [(i, (rin - i * sh) // dh) for i in range(rows)]
            outs = [(i, r) for i, r in outs if rin - i * sh >= 0 and (rin - i * sh) % dh == 0]
            outs = [(i, r) for i, r in outs if r < R]
            if not outs:
                continue
            for t in range(S):
                v = _strided(b, gep(b, base, rin * wp + t * dw), vw, sw)
                for i, r in outs:
                    acc[i] = fma(b, v, wb[r * S + t], acc[i])
        for i in range(rows):
            ptr = gep(b, out, b.add(b.mul(b.add(oh0, i64(i)), i64(OW)), ow0))
            masked_store(b, apply_activation(b, acc[i], activation), ptr, vw, valid)

    with loop(b, 0, s.N, 1, "dn") as n, loop(b, 0, s.C, 1, "dc") as c:
        xc = gep(b, p.x, b.add(mul(b, n, s.C * H * W), mul(b, c, H * W)))
        # The channel into the padded buffer, one row at a time (vectors, masked tail).
        with loop(b, 0, H, 1, "dh") as h:
            src = gep(b, xc, b.mul(h, i64(W)))
            dst = gep(b, xpad, b.add(b.mul(h, i64(wp)), i64(pt * wp + pl)))
            for j0 in range(0, W, vw):
                valid = min(vw, W - j0)
                masked_store(
                    b, masked_load(b, gep(b, src, j0), vw, valid), gep(b, dst, j0), vw, valid
                )
        for m in range(mult):
            k = b.add(b.mul(c, i64(mult)), i64(m)) if mult > 1 else c
            wk = gep(b, p.w, b.mul(k, i64(R * S)))
            wb = [broadcast(b, b.load(gep(b, wk, i), typ=F32), vw) for i in range(R * S)]
            bv = b.load(gep(b, p.bias, k), typ=F32) if p.bias is not None else zero
            bias = broadcast(b, bv, vw) if p.bias is not None else splat(0.0, vw)
            out = gep(b, p.out, b.mul(b.add(b.mul(n, i64(s.K)), k), i64(OH * OW)))

            def row_tiles(oh0: ir.Value, rows: int, out=out, wb=wb, bias=bias) -> None:
                if nfull:
                    with loop(b, 0, nfull * vw, vw, "dw") as ow0:
                        tile(out, oh0, rows, ow0, vw, wb, bias)
                if tail:
                    tile(out, oh0, rows, i64(nfull * vw), tail, wb, bias)

            rfull, rrest = divmod(OH, ROW_TILE)
            if rfull:
                with loop(b, 0, rfull * ROW_TILE, ROW_TILE, "dr") as oh0:
                    row_tiles(oh0, ROW_TILE)
            if rrest:
                row_tiles(i64(rfull * ROW_TILE), rrest)


__all__ = ["ROW_TILE", "depthwise_body", "padded_size"]
