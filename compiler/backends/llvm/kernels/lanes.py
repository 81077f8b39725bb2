"""``direct-lanes``: a direct convolution with the output channels in the vector lanes (a row
of the strategy table in kernels/conv.py), for small images with few output channels.

A register tile holds P output pixels (RB whole output rows, or a run of one row's columns),
one accumulator vector per pixel whose lanes are vw output channels. Per (input channel,
filter row), a run-time loop, the S taps' vectors of packed weights ([K/vw][C][R][S][vw], built
at compile time) are loaded, then every input float the tile reads in that filter row is
broadcast once and fed to each (pixel, tap) that uses it: P*S multiply-adds per S weight
vectors. The input is read in place, or from a zero-padded copy when the conv is padded; only
single floats are read from it, so any stride or dilation costs the same and nothing past a
row is touched. No im2col buffer, no GEMM packing at run time.

The bias is one vector load per channel block. The finished tile is transposed in registers
(vw x vw blocks, log2(vw) rounds of two-source shuffles) into one vector of consecutive output
pixels per channel, which goes through the ``Epilogue`` (fused activation, sum post-op) like
every other row's stores. A tile of whole output rows (or of one row's columns) is contiguous
in every output channel plane, so the transposed vectors are plain (masked at the end) stores.

Where it wins (``prefers``): few output channels filling the lanes, few pixels, a filter of
many taps per output (LeNet's 5x5 convs: 6->16 channels on 14x14, measured against every
other row), where the pixel-vector rows waste lanes on short output rows or spend their time
in im2col and transposes.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from llvmlite import ir

from compiler.backends.llvm.kernels.common import (
    F32,
    Epilogue,
    broadcast,
    fma,
    gep,
    i64,
    load_vec,
    loop,
    mul,
    splat,
    transpose_square,
)
from compiler.backends.llvm.kernels.direct import copy_padded
from compiler.backends.llvm.kernels.gemm import (
    VECTOR_REGISTERS,
    GemmConfig,
    conv_gemm_config,
    pack_a_constant,
)
from compiler.backends.llvm.kernels.parallel import parallel_range, scratch
from compiler.backends.llvm.kernels.rows import vector_loop
from compiler.backends.llvm.kernels.window import ConvPtrs, ConvShape



#: Whether the table chooses the row by itself (False: only when forced; the A/B switch of
#: benchmarks/bench_switch_ab.py).
CHOOSE = True
#: Output pixels up to which the row is chosen (16x16; larger planes measured only once).
MAX_PIXELS = 256
#: Input bytes (padded) up to which the row is chosen: the image stays in a 32 KB L1 (the
#: smallest of current x86 cores) while every channel block's tiles read it again.
MAX_INPUT_BYTES = 32 * 1024


def prefers(s: ConvShape) -> bool:
    """Where it beat the table's other rows, single convs timed alone on Zen 4 with the
    AVX-512 and the AVX2 kernels (benchmarks/README.md, issue 15 session 9): small output
    planes (up to MAX_PIXELS) of an image that fits in L1 (MAX_INPUT_BYTES: ResNet-50's
    stride-2 3x3 convs on 256x28x28 and 512x14x14 ran 0.82x and 0.99x alone, but the model
    1.03x, in-process A/B), a filter of more than one tap, output channels that fill at
    least 3/4 of the kernel's lanes, and 8 lanes or more (4-channel outputs on 4-lane
    vectors ran 1.6x slower than padded-shift-gemm: half the FMA rate). Stride-1 convs over
    more than 64 input pixels, where padded-shift-gemm runs at ~100 GFLOP/s, only with every
    lane filled (24 channels on 32 lanes of 5x5 16x16 ran 1.15x slower; 16 on 16 1.4x faster).
    Won: 0.55-0.85x the time of padded-shift-gemm, pixel-rows-gemm or implicit-gemm on 3x3
    and 5x5 convs of 7x7 to 14x14 outputs, stride 1 and 2, 6 to 512 channels (LeNet's 6->16
    5x5: 6.6 -> 4.6 us); ties with direct-vector on LeNet's 1->6 stem."""
    if not CHOOSE or s.group != 1 or s.R * s.S == 1 or s.npix > MAX_PIXELS:
        return False
    hp, wp = s.H + s.pad[0] + s.pad[2], s.W + s.pad[1] + s.pad[3]
    if 4 * s.C * hp * wp > MAX_INPUT_BYTES:
        return False
    vw = lanes(s, conv_gemm_config())
    used = -(-s.K // vw) * vw
    if vw < 8 or 4 * s.K < 3 * used:
        return False
    return s.stride != (1, 1) or s.H * s.W <= 64 or s.K == used


def lanes(s: ConvShape, cfg: GemmConfig) -> int:
    """The vector width of the kernel: the ISA's, or half of it (down to 4) as long as the
    output channels still fill it: 6 channels run on 8-lane vectors of an AVX-512 host, which
    (Zen 4 and the AVX-512 Intel cores alike) issue at least as many 8-lane FMAs per cycle as
    16-lane ones: the same useful multiply-adds per FMA, at up to twice the rate."""
    vw = cfg.vw
    while vw > 4 and s.K <= vw // 2:
        vw //= 2
    return vw


def tile_pixels(cfg: GemmConfig) -> int:
    """Accumulators of a tile: the vector registers less the weight vector, a broadcast and a
    few for addresses (AVX-512: 24 of 32; AVX2: 12 of 16)."""
    return VECTOR_REGISTERS[cfg.isa] * 3 // 4


def tile_shape(s: ConvShape, cfg: GemmConfig) -> tuple[int, int]:
    """(RB rows, TW columns) of a tile: whole rows when a row fits the accumulators (as many
    rows as fit), else one row's columns in equal runs."""
    p = tile_pixels(cfg)
    if s.OW <= p:
        return max(1, min(s.OH, p // s.OW)), s.OW
    runs = -(-s.OW // p)
    return 1, -(-s.OW // runs)


def pack_lanes(w: np.ndarray, s: ConvShape, cfg: GemmConfig) -> np.ndarray:
    """[K, C, R, S] -> [ceil(K/vw)][C][R][S][vw] (vw: ``lanes``), output channels past K
    zero: the GEMM's A panels of the filter as a K x CRS matrix."""
    return pack_a_constant(np.asarray(w, np.float32).reshape(s.K, -1), lanes(s, cfg)).ravel()


def transpose(b: ir.IRBuilder, rows: list[ir.Value], vw: int) -> list[ir.Value]:
    """The vw x vw transpose of ``rows`` (vw vectors of vw lanes; missing rows are undefined):
    result[l] holds lane l of every row (``transpose_square``)."""
    undef = ir.Constant(ir.VectorType(F32, vw), ir.Undefined)
    return transpose_square(b, list(rows) + [undef] * (vw - len(rows)))


def lanes_body(b: ir.IRBuilder, s: ConvShape, cfg: GemmConfig, p: ConvPtrs, ep: Epilogue) -> None:
    """out[n, k, oh, ow] = bias[k] + sum_crt w[k, c, r, t] * x_pad[n, c, oh*sh + r*dh,
    ow*sw + t*dw], vw channels x P pixels per tile (group 1)."""
    vw = lanes(s, cfg)
    C, H, W, K, R, S, OH, OW = s.C, s.H, s.W, s.K, s.R, s.S, s.OH, s.OW
    (sh, sw), (dh, dw) = s.stride, s.dilation
    padded = any(s.pad)
    hp, wp = (H + s.pad[0] + s.pad[2], W + s.pad[1] + s.pad[3]) if padded else (H, W)
    plane = hp * wp
    xpad = scratch(b.module, f"{b.function.name}.xpad", C * plane) if padded else None
    rb, tw = tile_shape(s, cfg)
    crs = C * R * S
    nkb, ktail = divmod(K, vw)
    col_runs = [(c0, min(tw, OW - c0)) for c0 in range(0, OW, tw)]
    rfull, rrest = divmod(OH, rb)
    has_bias = p.bias is not None
    opix = OH * OW

    def tile(
        b: ir.IRBuilder,
        src: ir.Value,
        wk: ir.Value,
        bias: ir.Value,
        o: ir.Value,
        k0: ir.Value,
        kvalid: int,
        oh0: ir.Value,
        rows: int,
        ow0: int,
        cols: int,
    ) -> None:
        """Output rows oh0 .. oh0+rows-1, columns ow0 .. ow0+cols-1 of channels k0 .. k0+kvalid-1
        (``src``: the (padded) image, ``wk``: the channel block's packed filter)."""
        base = gep(b, src, b.add(b.mul(oh0, i64(sh * wp)), i64(ow0 * sw)))

        def filter_row(c: ir.Value, r: ir.Value, acc: list[ir.Value]) -> list[ir.Value]:
            """Filter row r of channel c: its S weight vectors, then each input float the tile
            reads, broadcast once and fed to every (pixel, tap) that reads it, so a broadcast
            lives for one burst of FMAs (unrolled over the rows, LLVM merged the repeated
            loads into long-lived registers and the tile spilled)."""
            xr = gep(b, base, b.add(mul(b, c, plane), mul(b, r, dh * wp)))
            wr = gep(b, wk, b.add(mul(b, c, R * S * vw), mul(b, r, S * vw)))
            wv = [
                b.load(gep(b, wr, t * vw), typ=ir.VectorType(F32, vw), align=4) for t in range(S)
            ]
            for i in range(rows):
                # input column u feeds output column j through tap t when u = j*sw + t*dw
                uses: dict[int, list[tuple[int, int]]] = {}
                for j in range(cols):
                    for t in range(S):
                        uses.setdefault(j * sw + t * dw, []).append((j, t))
                for u in sorted(uses):
                    xv = b.load(gep(b, xr, i * sh * wp + u), typ=F32)
                    bx = broadcast(b, xv, vw)
                    for j, t in uses[u]:
                        q = i * cols + j
                        acc[q] = fma(b, bx, wv[t], acc[q])
            return acc

        acc = [bias] * (rows * cols)
        acc = vector_loop(
            b,
            C,
            1,
            acc,
            lambda c, _v, a: vector_loop(b, R, 1, a, lambda r, _w, a2: filter_row(c, r, a2), "lr"),
            "lc",
        )
        first = gep(b, o, b.add(b.mul(k0, i64(opix)), b.add(b.mul(oh0, i64(OW)), i64(ow0))))
        for q0 in range(0, rows * cols, vw):
            m = min(vw, rows * cols - q0)
            t = transpose(b, acc[q0 : q0 + m], vw)
            ep.store_rows(b, [[t[k]] for k in range(kvalid)], gep(b, first, q0), opix, vw, [m])

    nrt = rfull + (1 if rrest else 0)  # row tiles
    nblocks = nkb + (1 if ktail else 0)  # channel blocks

    def split(
        b: ir.IRBuilder, idx: ir.Value, full: int, rest: int, body: Callable[[bool], None]
    ) -> None:
        """``body(False)`` where ``idx`` < ``full`` (a full-size item), ``body(True)`` for the
        remainder of ``rest`` (each only where it exists)."""
        if not rest:
            body(False)
        elif not full:
            body(True)
        else:
            with b.if_else(b.icmp_signed("<", idx, i64(full))) as (yes, no):
                with yes:
                    body(False)
                with no:
                    body(True)

    def item(b: ir.IRBuilder, i: ir.Value, tid: ir.Value, vals: list[ir.Value]) -> None:
        """Row tile i % nrt of channel block i // nrt (blocks outer: consecutive items share
        their packed filter block)."""
        n, src, w, o = vals[:4]
        o = gep(b, o, mul(b, n, K * opix))
        kb = b.udiv(i, i64(nrt))
        rt = b.urem(i, i64(nrt))
        oh0 = b.mul(rt, i64(rb))
        k0 = b.mul(kb, i64(vw))
        wk = gep(b, w, b.mul(k0, i64(crs)))

        def block(last_block: bool) -> None:
            kvalid = ktail if last_block else vw
            if has_bias:
                bias = load_vec(b, gep(b, vals[4], k0), vw, kvalid)
            else:
                bias = splat(0.0, vw)

            def rows(last_rows: bool) -> None:
                count = rrest if last_rows else rb
                for ow0, cols in col_runs:
                    tile(b, src, wk, bias, o, k0, kvalid, oh0, count, ow0, cols)

            split(b, rt, rfull, rrest, rows)

        split(b, kb, nkb, ktail, block)

    with loop(b, 0, s.N, 1, "ln") as n:
        xn = gep(b, p.x, mul(b, n, C * H * W))
        if xpad is not None:
            with loop(b, 0, C, 1, "lp") as c:
                src = gep(b, xn, b.mul(c, i64(H * W)))
                copy_padded(b, src, gep(b, xpad, b.mul(c, i64(plane))), s, vw, wp)
            image: ir.Value = xpad
        else:
            image = xn
        args = [n, image, p.w, p.out] + ([p.bias] if has_bias else [])
        work = K * opix * crs
        parallel_range(b, nrt * nblocks, work, args, item, "ltiles")


__all__ = [
    "CHOOSE",
    "MAX_INPUT_BYTES",
    "MAX_PIXELS",
    "lanes",
    "lanes_body",
    "pack_lanes",
    "prefers",
    "tile_shape",
    "transpose",
]
