"""Direct convolutions over a zero-padded copy of the input, vectorised along output columns
(rows of strategies in kernels/conv.py): with the padding materialised no tap needs a bounds
test; stride-2 columns come from one double-width load and a shuffle (depthwise: from the
padded copy split into its two column phases, so every tap is one plain load); bias and the
fused activation (or epilogue) run on the accumulators before the (masked) store.

- ``depthwise-direct`` (one input channel per group): per channel, a padded copy, then register
  tiles of RB output rows x one column vector; each loaded input vector feeds every output row
  of the tile it reaches (R = 5, 4 rows: 8 rows x 5 taps loaded for 100 multiply-adds).
- ``direct-vector`` (group 1; few input channels, e.g. stems): a padded copy of the image, then
  tiles of KB output channels x one column vector; each loaded input vector feeds KB
  multiply-adds with the filter packed as [K/KB][C][R][S][KB] (broadcast from consecutive
  floats).
- ``direct`` (any shape, run-time filters too): ``direct_body``, the plain scalar loop nest
  over the ONNX filter layout with a bounds test per tap; also what a ``winograd`` conv falls
  back to when its input holds an infinity or a NaN.
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir

from compiler.backends.llvm.kernels.common import (
    F32,
    Epilogue,
    activate_span,
    apply_activation,
    broadcast,
    entry_alloca,
    fma,
    gep,
    i64,
    is_light,
    loop,
    mul,
    smin,
    splat,
    store_vec,
    vector_runs,
)
from compiler.backends.llvm.kernels.gemm import GemmConfig, pack_a_constant
from compiler.backends.llvm.kernels.parallel import (
    parallel_loop,
    scratch,
    thread_scratch,
    work_chunks,
)
from compiler.backends.llvm.kernels.rows import masked_load, masked_store, vector_loop
from compiler.backends.llvm.kernels.window import ConvPtrs, ConvShape, window_taps

#: Output rows per register tile (each holds one vector of columns).
ROW_TILE = 4


def strided_vector(
    b: ir.IRBuilder, ptr: ir.Value, vw: int, stride: int, valid: int | None = None
) -> ir.Value:
    """``vw`` floats at ``ptr[0], ptr[stride], ...`` (the padded buffer has slack behind).

    Strides above 2 load lane by lane, only the first ``valid`` lanes (the rest zero): a tail
    vector's unused lanes would otherwise read up to ``(vw - 1) * stride`` floats past the
    row, and the buffer's slack would have to grow with the stride (275 GB at 2**31)."""
    if stride == 1:
        return b.load(ptr, typ=ir.VectorType(F32, vw), align=4)
    if stride == 2:
        wide = b.load(ptr, typ=ir.VectorType(F32, 2 * vw), align=4)
        idx = ir.Constant(ir.VectorType(ir.IntType(32), vw), [2 * i for i in range(vw)])
        return b.shuffle_vector(wide, ir.Constant(wide.type, ir.Undefined), idx)
    v = splat(0.0, vw)
    for i in range(vw if valid is None else valid):
        v = b.insert_element(
            v, b.load(gep(b, ptr, i * stride), typ=F32), ir.Constant(ir.IntType(32), i)
        )
    return v


def copy_padded(
    b: ir.IRBuilder, src: ir.Value, dst: ir.Value, s: ConvShape, vw: int, pitch: int = 0
) -> None:
    """One H x W channel plane at ``src`` into the interior of the padded plane at ``dst``
    (``padded_size``; rows ``pitch`` floats apart when given), a row at a time in vectors with
    a masked tail."""
    wp = pitch or padded_size(s, vw)[1]
    pt, pl = s.pad[0], s.pad[1]
    with loop(b, 0, s.H, 1, "ph") as h:
        row = gep(b, src, b.mul(h, i64(s.W)))
        out = gep(b, dst, b.add(b.mul(h, i64(wp)), i64(pt * wp + pl)))
        vector_runs(
            b,
            s.W,
            vw,
            lambda j0, valid: masked_store(
                b, masked_load(b, gep(b, row, j0), vw, valid), gep(b, out, j0), vw, valid
            ),
            "pw",
        )


def copy_phases(
    b: ir.IRBuilder,
    src: ir.Value,
    dst: ir.Value,
    s: ConvShape,
    vw: int,
    wq: int,
    plane: int,
    quarters: bool = False,
) -> None:
    """One H x W channel plane at ``src`` into the interior of the padded plane split into its
    two column phases (``dst``: even padded columns, ``dst + plane``: odd ones, rows of ``wq``):
    a stride-2 conv's taps then read contiguous vectors instead of a double-width load and a
    shuffle per tap. Each 2 * vw input floats are split by two shuffles. With ``quarters`` the
    padded rows are split by parity too: four planes of ``plane`` floats, (row parity, column
    parity) at (2 * rp + cp) * plane, padded row ph at row ph // 2 of its plane."""
    pt, pl = s.pad[0], s.pad[1]
    idx = [
        ir.Constant(ir.VectorType(ir.IntType(32), vw), [2 * i + q for i in range(vw)])
        for q in (0, 1)
    ]
    with loop(b, 0, s.H, 1, "ph") as h:
        row = gep(b, src, b.mul(h, i64(s.W)))
        if quarters:
            ph = b.add(h, i64(pt))
            rp = b.and_(ph, i64(1))
            prow = b.add(b.mul(b.lshr(ph, i64(1)), i64(wq)), b.mul(rp, i64(2 * plane)))
        else:
            prow = b.mul(b.add(h, i64(pt)), i64(wq))
        for w0 in range(0, s.W, 2 * vw):
            n = min(2 * vw, s.W - w0)
            wide = masked_load(b, gep(b, row, w0), 2 * vw, n)
            for q in (0, 1):  # input columns w0 + q, w0 + q + 2, ...
                count = (n - q + 1) // 2
                if count <= 0:
                    continue
                col = pl + w0 + q
                at = b.add(prow, i64((col % 2) * plane + col // 2))
                half = b.shuffle_vector(wide, ir.Constant(wide.type, ir.Undefined), idx[q])
                masked_store(b, half, gep(b, dst, at), vw, count)


def padded_size(s: ConvShape, vw: int) -> tuple[int, int, int]:
    """(Hp, Wp, floats): the padded channel's rows, row length and buffer size with slack for
    the last vector's over-read: a stride-1 vector reads vw floats, a wide stride-2 load 2 * vw
    (larger strides read only their valid lanes, see ``strided_vector``), and a tap column sits
    at most (S - 1) * dw inside the row (which that dilated filter's width already bounds)."""
    pt, pl, pb, pr = s.pad
    hp, wp = s.H + pt + pb, s.W + pl + pr
    return hp, wp, hp * wp + 2 * vw * min(s.stride[1], 2) + (s.S - 1) * s.dilation[1] + 1


def depthwise_body(
    b: ir.IRBuilder, s: ConvShape, cfg: GemmConfig, p: ConvPtrs, ep: Epilogue
) -> None:
    """out[n, c*mult + m] = bias + sum_rt w[c*mult + m, r, t] * x[n, c] shifted by (r, t)."""
    vw = cfg.vw
    mult = s.Kg
    H, W, OH, OW, R, S = s.H, s.W, s.OH, s.OW, s.R, s.S
    (sh, sw), (dh, dw) = s.stride, s.dilation
    hp, wp, size = padded_size(s, vw)
    # Stride-2 columns: the padded plane split into its two column phases of wq columns
    # (5x5/2 on 144x56x56 ran ~1.9x faster, 3x3/2 0.83-0.95x the time: PHASE_TAPS).
    phases = sw == 2 and R * S > PHASE_TAPS
    wq = (wp + 1) // 2
    plane = hp * wq
    if phases:
        size = 2 * plane + 2 * vw + (S - 1) * dw + 1
    nfull, tail = divmod(OW, vw)
    zero = ir.Constant(F32, 0.0)
    has_bias = p.bias is not None

    flat = flat_vectors(s, vw) if not ep.accumulate else None
    fp = flat_pitch(s)  # its padded rows (the buffer is sized for the full ones)
    # Stride 2: a flat run over the four (row, column) parity planes of the padded plane, rows
    # of wq (``flat_quarter_vectors``).
    quarters = False
    if flat is None and not ep.accumulate and phases:
        flat = flat_quarter_vectors(s, vw)
        quarters = flat is not None
    hq = (hp + 1) // 2
    if quarters:
        plane = hq * wq
        fp = wq
        size = 4 * plane + 2 * vw + S + wq + 1
    # The padding is zero from the start: only the interior is ever written.
    xpad_g = scratch(b.module, f"{b.function.name}.xpad", size)
    # A heavy activation (sigmoid, an element-wise chain) runs on each finished output plane
    # in one contiguous pass when the tiles' registers are short (beside 25 broadcast weights
    # of a 5x5 filter it spilled: a 5x5 depthwise conv on 1152x7x7 took 2.2x longer with a
    # SiLU than without) or the plane is small (its row tiles waste lanes, the pass has none
    # and the plane is still in L1). EfficientNet-B0, in-model: 5x5 7x7 0.103 -> 0.090 ms,
    # 5x5 14x14 0.114 -> 0.085; 3x3 on 112x112 and stride 2 stay on the registers.
    # A flat plane of up to two flat tiles (7x7 on AVX-512) instead keeps all its accumulators
    # and runs the activation on them after its last tap (the tap weights dead by then) before
    # the masked stores: the pass re-read vectors that straddle those stores. 1152x7x7 with a
    # SiLU, alone: 5x5 0.147 -> 0.123 ms, 3x3 0.091 -> 0.079.
    defer = (
        FLAT_ACT_IN_REGISTERS
        and not is_light(ep.activation)
        and flat is not None
        and flat <= 2 * FLAT_TILE
    )
    heavy = (
        not is_light(ep.activation)
        and (R * S > 9 or (s.stride == (1, 1) and OH * OW <= PLANE_PASS_MAX))
        and not defer
    )
    tile_ep = Epilogue(None, ep.accumulate) if heavy else ep

    def channel(b: ir.IRBuilder, xpad: ir.Value, vals: list[ir.Value], n: ir.Value, c) -> None:
        """Input channel c of image n (``vals`` = input, filter, output[, bias]) through the
        padded buffer ``xpad`` into its ``mult`` output channels."""
        x, w, o = vals[:3]

        def flat_tiles(out: ir.Value, wb: list[ir.Value], bias: ir.Value) -> None:
            """The plane as one run of ``flat`` vectors over the padded rows (``flat_vectors``),
            FLAT_TILE accumulators at a time; each vector's lanes that are outputs go to their
            rows by shifted masked stores."""
            assert flat is not None

            def store(done: list[tuple[int, ir.Value]]) -> None:
                for j, a in done:
                    y = apply_activation(b, a, tile_ep.activation)
                    for lo, hi, at in flat_segments(j * vw, vw, fp, OH, OW):
                        store_vec(b, shift_lanes(b, y, lo), gep(b, out, at), vw, hi - lo)

            # Taps that read only zero padding for every output lane of a vector add zeros:
            # left out (the padded plane's padding is zero, the filter finite: see
            # conv.skips_padding).
            skip = [flat_pad_taps(s, j * vw, vw, fp, 2 if quarters else 1) for j in range(flat)]
            done: list[tuple[int, ir.Value]] = []
            for j0 in range(0, flat, FLAT_TILE):
                js = range(j0, min(j0 + FLAT_TILE, flat))
                acc = [bias] * len(js)
                for r in range(R):
                    for t in range(S):
                        for i, j in enumerate(js):
                            if skip[j][r * S + t]:
                                continue
                            if quarters:
                                at = ((r % 2) * 2 + t % 2) * plane + (r // 2) * wq + t // 2
                            else:
                                at = r * dh * fp + t * dw
                            v = strided_vector(b, gep(b, xpad, j * vw + at), vw, 1)
                            acc[i] = fma(b, v, wb[r * S + t], acc[i])
                done += zip(js, acc)
                if not defer:
                    store(done)
                    done = []
            store(done)

        def tile(out, oh0, rows: int, ow0, valid: int, wb, bias) -> None:
            """Output rows oh0 .. oh0+rows-1, columns ow0 .. ow0+valid-1 of plane ``out``."""
            acc = [bias] * rows
            if phases:
                base = gep(b, xpad, b.add(b.mul(b.mul(oh0, i64(sh)), i64(wq)), ow0))
            else:
                base = gep(b, xpad, b.add(b.mul(b.mul(oh0, i64(sh)), i64(wp)), b.mul(ow0, i64(sw))))
            for rin in range((rows - 1) * sh + (R - 1) * dh + 1):
                outs = [(i, (rin - i * sh) // dh) for i in range(rows)]
                outs = [(i, r) for i, r in outs if rin - i * sh >= 0 and (rin - i * sh) % dh == 0]
                outs = [(i, r) for i, r in outs if r < R]
                if not outs:
                    continue
                for t in range(S):
                    if phases:  # padded column 2 * ow + t * dw: phase (t * dw) % 2
                        at = (t * dw) % 2 * plane + rin * wq + (t * dw) // 2
                        v = strided_vector(b, gep(b, base, at), vw, 1)
                    else:
                        v = strided_vector(b, gep(b, base, rin * wp + t * dw), vw, sw, valid)
                    for i, r in outs:
                        acc[i] = fma(b, v, wb[r * S + t], acc[i])
            first = gep(b, out, b.add(b.mul(oh0, i64(OW)), ow0))
            tile_ep.store_rows(b, [[a] for a in acc], first, OW, vw, [valid])

        def row_tiles(out: ir.Value, wb: list[ir.Value], bias: ir.Value) -> None:
            """The plane in tiles of ROW_TILE rows x one column vector."""

            def tiles(oh0: ir.Value, rows: int) -> None:
                if nfull:
                    with loop(b, 0, nfull * vw, vw, "dw") as ow0:
                        tile(out, oh0, rows, ow0, vw, wb, bias)
                if tail:
                    tile(out, oh0, rows, i64(nfull * vw), tail, wb, bias)

            rfull, rrest = divmod(OH, ROW_TILE)
            if rfull:
                with loop(b, 0, rfull * ROW_TILE, ROW_TILE, "dr") as oh0:
                    tiles(oh0, ROW_TILE)
            if rrest:
                tiles(i64(rfull * ROW_TILE), rrest)

        xc = gep(b, x, b.add(mul(b, n, s.C * H * W), mul(b, c, H * W)))
        if phases:
            copy_phases(b, xc, xpad, s, vw, wq, plane, quarters)
        elif flat is not None:
            copy_padded(b, xc, xpad, s, vw, fp)
        else:
            copy_padded(b, xc, xpad, s, vw)
        for m in range(mult):
            k = b.add(b.mul(c, i64(mult)), i64(m)) if mult > 1 else c
            wk = gep(b, w, b.mul(k, i64(R * S)))
            wb = [broadcast(b, b.load(gep(b, wk, i), typ=F32), vw) for i in range(R * S)]
            bv = b.load(gep(b, vals[3], k), typ=F32) if has_bias else zero
            bias = broadcast(b, bv, vw) if has_bias else splat(0.0, vw)
            out = gep(b, o, b.mul(b.add(b.mul(n, i64(s.K)), k), i64(OH * OW)))

            if flat is not None:
                flat_tiles(out, wb, bias)
            else:
                row_tiles(out, wb, bias)
            if heavy:
                activate_span(b, ep.activation, out, OH * OW, vw)

    # Channel groups spread over the pool, each thread through its own padded buffer.
    groups = work_chunks(s.K * OH * OW * R * S, s.C)
    per = -(-s.C // groups)

    def group(bb: ir.IRBuilder, i: ir.Value, tid: ir.Value, vals: list[ir.Value]) -> None:
        c0 = bb.mul(i, i64(per))
        with loop(bb, c0, smin(bb, bb.add(c0, i64(per)), s.C), 1, "dc") as c:
            channel(bb, thread_scratch(bb, xpad_g, tid), vals[1:], vals[0], c)

    with loop(b, 0, s.N, 1, "dn") as n:
        args = [n, p.x, p.w, p.out] + ([p.bias] if has_bias else [])
        parallel_loop(b, groups, args, group, "chans")


#: Stride-2 depthwise filters with more taps than this read the padded plane split into its
#: column phases (3x3 included: alone, 96x112x112 0.93x, 144x56x56 0.85x, 192x28x28 0.83x,
#: 576x14x14 0.95x of the wide loads and shuffles; EfficientNet-B0 0.997x).
PHASE_TAPS = 4
#: Output planes up to this many floats (16 KB) take a heavy activation in a pass of their own.
PLANE_PASS_MAX = 4096
#: Flat planes of up to two flat tiles run a heavy activation on their accumulators after
#: the last tap instead of in a pass over the stored plane (``depthwise_body``).
FLAT_ACT_IN_REGISTERS = True
#: Accumulators of a flat depthwise tile.
FLAT_TILE = 4
#: Flat runs up to this many vectors per plane (each is unrolled with its stores).
FLAT_MAX = 16


def flat_vectors(s: ConvShape, vw: int) -> int | None:
    """Vectors covering a stride-1 depthwise plane as one flat run over the padded rows, when
    that takes fewer than the row tiles' one-vector-per-row (small planes such as 7x7: with
    the padded row length Wp (``flat_pitch``), output (oh, ow) is the flat position
    oh * Wp + ow, and tap (r, t) reads the padded plane at that position + r * dh * Wp +
    t * dw; the Wp - OW positions between rows are computed and not stored). None: the row
    tiles."""
    if s.stride != (1, 1):
        return None
    wp = flat_pitch(s)
    n = -(-((s.OH - 1) * wp + s.OW) // vw)
    rows = s.OH * -(-s.OW // vw)
    return n if n < rows and n <= FLAT_MAX else None


def flat_quarter_vectors(s: ConvShape, vw: int) -> int | None:
    """Vectors covering a stride-2 depthwise plane (dilation 1) as one flat run over the four
    parity planes of the padded plane (``copy_phases(quarters=True)``): output (oh, ow) is the
    flat position oh * Wq + ow of each, tap (r, t) reads plane (r % 2, t % 2) at that position
    + (r // 2) * Wq + t // 2. Only where it takes fewer vectors than the row tiles and at most
    two flat tiles (a 7x7 output: 4 vectors of 16 instead of 7 one-row tiles). None: the row
    tiles."""
    if not FLAT_QUARTERS or s.stride != (2, 2) or s.dilation != (1, 1):
        return None
    wq = (s.W + s.pad[1] + s.pad[3] + 1) // 2
    n = -(-((s.OH - 1) * wq + s.OW) // vw)
    rows = s.OH * -(-s.OW // vw)
    return n if n < rows and n <= 2 * FLAT_TILE else None


#: Stride-2 depthwise planes with small outputs run as a flat run over four parity planes.
FLAT_QUARTERS = True

#: Flat runs' padded rows share their padding columns: a row is W + max(left, right) floats,
#: a tap left of the image reading the previous row's right padding (as the padded-shift GEMM's
#: rows do). A 5x5 filter on 7x7 then runs 4 vectors (61 positions) instead of 5 (73).
SHARED_PAD_FLAT = True


def flat_pitch(s: ConvShape) -> int:
    """The padded row length of a flat run (``flat_vectors``, ``SHARED_PAD_FLAT``)."""
    if SHARED_PAD_FLAT:
        return s.W + max(s.pad[1], s.pad[3])
    return s.W + s.pad[1] + s.pad[3]


def flat_segments(q: int, vw: int, wp: int, OH: int, OW: int) -> list[tuple[int, int, int]]:
    """(first lane, end lane, output index of the first lane) of each output row the flat
    positions q .. q+vw-1 reach (see ``flat_vectors``)."""
    out = []
    for oh in range(q // wp, min(OH - 1, (q + vw - 1) // wp) + 1):
        lo, hi = max(oh * wp, q), min(oh * wp + OW, q + vw)
        if lo < hi:
            out.append((lo - q, hi - q, oh * OW + lo - oh * wp))
    return out


#: Flat runs leave out the taps that read only padding for all of a vector's output lanes
#: (``flat_pad_taps``): a 5x5 filter on 7x7, 10 of its 100 vector taps.
FLAT_SKIP_PAD_TAPS = True


def flat_pad_taps(s: ConvShape, q: int, vw: int, fp: int, stride: int) -> list[bool]:
    """For each tap (r, t), row-major: does it read only padding at every output lane of the
    flat positions q .. q+vw-1 (``flat_segments``; rows of ``fp``, at ``stride`` 1 or 2 with
    the parity planes)? Those taps add zero products and can be left out."""
    R, S = s.R, s.S
    if not FLAT_SKIP_PAD_TAPS:
        return [False] * (R * S)
    (dh, dw), pt, pl = s.dilation, s.pad[0], s.pad[1]
    outs = [
        (at // s.OW, at % s.OW + k)
        for lo, hi, at in flat_segments(q, vw, fp, s.OH, s.OW)
        for k in range(hi - lo)
    ]
    skip = []
    for r in range(R):
        for t in range(S):
            inside = any(
                0 <= oh * stride + r * dh - pt < s.H and 0 <= ow * stride + t * dw - pl < s.W
                for oh, ow in outs
            )
            skip.append(bool(outs) and not inside)
    return skip


def shift_lanes(b: ir.IRBuilder, v: ir.Value, lo: int) -> ir.Value:
    """Lanes lo.. of ``v`` moved down to lane 0 (the rest undefined)."""
    if lo == 0:
        return v
    n = v.type.count
    idx = ir.Constant(ir.VectorType(ir.IntType(32), n), [min(lo + i, n) for i in range(n)])
    return b.shuffle_vector(v, ir.Constant(v.type, ir.Undefined), idx)


def direct_tile(cfg: GemmConfig, s: ConvShape) -> tuple[int, int]:
    """(KB output channels, NV column vectors) per ``direct-vector`` tile, 16 accumulators on
    32-register ISAs. With at most UNROLL_TAPS taps (C*R*S) 8 x 2 halves the broadcasts per
    FMA (measured with every tap unrolled, ``UNROLL_WHOLE``); with more, running
    over channels, 16 x 1 halves the input loads and shuffles instead (measured on the stems:
    3x3/2 on 3 channels 93 -> 120 GFLOP/s with 8 x 2; 7x7/2 161 with 16 x 1, 96 with 8 x 2)."""
    if cfg.vw < 16:
        return (8 if cfg.vw == 8 else 4), 1
    return (8, 2) if s.C * s.R * s.S <= UNROLL_TAPS else (16, 1)


#: Taps (C*R*S) up to which ``direct_tile`` picks 8 x 2 tiles (and ``UNROLL_WHOLE`` unrolls).
UNROLL_TAPS = 64
#: Whether such tiles unroll every tap of every channel. They did, and LLVM hoisted the tile's
#: KB x C*R*S weight broadcasts out of the row loop into as many spilled vectors, so each FMA
#: reloaded a whole vector from the stack (LeNet's 1->6 5x5 stem: 150 of them). A loop over
#: the channels (and filter rows) loads the broadcasts where they are used, the same sums in
#: the same order: LeNet's stem 3.5 -> 2.8 us, 3x3/2 stems on 224x224 with 32 and 16 output
#: channels 294 -> 271 and 163 -> 143 us, 3->32 3x3 on 64x64 -5%, 1->8 3x3 on 32x32 even
#: (single convs, AVX-512, issue 15 session 9).
UNROLL_WHOLE = False
#: Filters with more taps than this loop over their rows as well as their channels (a 7x7
#: stem's 49 taps x 16 channels unrolled were ~10% of ResNet-50's LLVM time).
ROW_LOOP_TAPS = 16


def pack_direct(w: np.ndarray, s: ConvShape, cfg: GemmConfig) -> np.ndarray:
    """[K, C, R, S] -> [ceil(K/KB)][C][R][S][KB], output channels past K zero: the GEMM's A
    panels of the filter as a K x CRS matrix."""
    kb, _ = direct_tile(cfg, s)
    return pack_a_constant(np.asarray(w, np.float32).reshape(s.K, -1), kb).ravel()


def direct_vector_body(
    b: ir.IRBuilder, s: ConvShape, cfg: GemmConfig, p: ConvPtrs, ep: Epilogue
) -> None:
    """out[n, k, oh, ow..] = bias[k] + sum_crt w[k, c, r, t] x_pad[c, oh*sh + r*dh, ...] for
    tiles of KB channels x NV column vectors (group 1): each input vector feeds KB FMAs, each
    broadcast weight NV."""
    vw = cfg.vw
    kb_full, nv = direct_tile(cfg, s)
    C, H, W, K, R, S, OH, OW = s.C, s.H, s.W, s.K, s.R, s.S, s.OH, s.OW
    (sh, sw), (dh, dw) = s.stride, s.dilation
    hp, wp, slack = padded_size(s, vw * nv)
    plane = hp * wp
    xpad = scratch(b.module, f"{b.function.name}.xpad", (C - 1) * plane + slack)
    crs = C * R * S
    zero = splat(0.0, vw)

    # Column tiles: full NV-vector tiles, then single vectors, the last one masked.
    wide, rest = divmod(OW, nv * vw)
    singles = [min(vw, rest - v) for v in range(0, rest, vw)]
    has_bias = p.bias is not None

    def block(b: ir.IRBuilder, vals: list[ir.Value], n: ir.Value, k0: ir.Value, kb: int) -> None:
        """Output channels k0 .. k0+kb-1 of image n (``vals`` = filter, output[, bias])."""
        w, o = vals[:2]

        def tile(wblk, kbias, outs, oh, ow0, valid: list[int]) -> None:
            """Channels ``outs`` x len(valid) column vectors from column ow0."""
            kb, nvec = len(outs), len(valid)
            row0 = gep(b, xpad, b.add(b.mul(b.mul(oh, i64(sh)), i64(wp)), b.mul(ow0, i64(sw))))

            def taps(
                c: ir.Value | int, acc: list[ir.Value], row: ir.Value | None = None
            ) -> list[ir.Value]:
                """Channel c's taps, of every filter row or of filter row ``row`` alone."""
                xc = gep(b, row0, mul(b, c, plane))
                wc = gep(b, wblk, mul(b, c, R * S * kb_full))
                for r in range(R) if row is None else [row]:
                    xr = gep(b, xc, mul(b, r, dh * wp))
                    wr = gep(b, wc, mul(b, r, S * kb_full))
                    for t in range(S):
                        xs = [
                            strided_vector(b, gep(b, xr, t * dw + v * vw * sw), vw, sw, valid[v])
                            for v in range(nvec)
                        ]
                        wt = gep(b, wr, t * kb_full)
                        for j in range(kb):
                            wj = broadcast(b, b.load(gep(b, wt, j), typ=F32), vw)
                            for v in range(nvec):
                                acc[j * nvec + v] = fma(b, xs[v], wj, acc[j * nvec + v])
                return acc

            acc = [kbias[j] for j in range(kb) for _ in range(nvec)]
            if crs <= UNROLL_TAPS and UNROLL_WHOLE:
                for c in range(C):
                    acc = taps(c, acc)
            elif R * S <= ROW_LOOP_TAPS:
                acc = vector_loop(b, C, 1, acc, lambda c, _v, a: taps(c, a), "dvc")
            else:
                # A loop over the filter rows too: the same sums in the same order.
                def rows(c: ir.Value, _v: int, a: list[ir.Value]) -> list[ir.Value]:
                    return vector_loop(b, R, 1, a, lambda r, _w, a2: taps(c, a2, r), "dvr")

                acc = vector_loop(b, C, 1, acc, rows, "dvc")
            # outs[j] = outs[0] + j * OH * OW: one tile of kb rows of nvec vectors.
            first = gep(b, outs[0], b.add(b.mul(oh, i64(OW)), ow0))
            tile_rows = [acc[j * nvec : (j + 1) * nvec] for j in range(kb)]
            ep.store_rows(b, tile_rows, first, OH * OW, vw, valid)

        wblk = gep(b, w, b.mul(b.udiv(k0, i64(kb_full)), i64(crs * kb_full)))
        kbias, outs = [], []
        for j in range(kb):
            k = b.add(k0, i64(j))
            bv = b.load(gep(b, vals[2], k), typ=F32) if has_bias else None
            kbias.append(broadcast(b, bv, vw) if bv is not None else zero)
            outs.append(gep(b, o, b.mul(b.add(b.mul(n, i64(K)), k), i64(OH * OW))))
        with loop(b, 0, OH, 1, "dvh") as oh:
            if wide:
                with loop(b, 0, wide * nv * vw, nv * vw, "dvw") as ow0:
                    tile(wblk, kbias, outs, oh, ow0, [vw] * nv)
            for v, valid in enumerate(singles):
                tile(wblk, kbias, outs, oh, i64(wide * nv * vw + v * vw), [valid])

    # Channel blocks spread over the pool; they all read the one padded image.
    nkb, ktail = divmod(K, kb_full)

    def chunk(bb: ir.IRBuilder, i: ir.Value, tid: ir.Value, vals: list[ir.Value]) -> None:
        n = vals[0]
        if not ktail:
            block(bb, vals[1:], n, bb.mul(i, i64(kb_full)), kb_full)
        elif not nkb:
            block(bb, vals[1:], n, i64(0), ktail)
        else:
            with bb.if_else(bb.icmp_signed("<", i, i64(nkb))) as (full, last):
                with full:
                    block(bb, vals[1:], n, bb.mul(i, i64(kb_full)), kb_full)
                with last:
                    block(bb, vals[1:], n, i64(nkb * kb_full), ktail)

    nblocks = nkb + (1 if ktail else 0)
    chunks = nblocks if work_chunks(K * OH * OW * crs, nblocks) > 1 else 1
    with loop(b, 0, s.N, 1, "dvn") as n:
        xn = gep(b, p.x, mul(b, n, C * H * W))
        with loop(b, 0, C, 1, "dvp") as c:
            src = gep(b, xn, b.mul(c, i64(H * W)))
            copy_padded(b, src, gep(b, xpad, b.mul(c, i64(plane))), s, vw * nv)
        args = [n, p.w, p.out] + ([p.bias] if has_bias else [])
        if chunks > 1:
            parallel_loop(b, nblocks, args, chunk, "kblocks")
        else:
            with loop(b, 0, nblocks, 1, "dvk") as i:
                chunk(b, i, i64(0), args)


def direct_body(b: ir.IRBuilder, s: ConvShape, cfg: GemmConfig, p: ConvPtrs, ep: Epilogue) -> None:
    """The plain loop nest over the ONNX filter layout."""
    C, H, W, K, R, S, OH, OW = s.C, s.H, s.W, s.K, s.R, s.S, s.OH, s.OW
    Cg, Kg = s.Cg, s.Kg
    rows, cols = s.rows, s.cols
    zero = ir.Constant(F32, 0.0)
    acc_slot = entry_alloca(b, F32)
    with loop(b, 0, s.N, 1, "n") as n, loop(b, 0, K, 1, "k") as k:
        gi = b.udiv(k, i64(Kg))
        bv = b.load(gep(b, p.bias, k), typ=F32) if p.bias is not None else zero
        with loop(b, 0, OH, 1, "oh") as oh, loop(b, 0, OW, 1, "ow") as ow:
            b.store(bv, acc_slot)
            with loop(b, 0, Cg, 1, "c") as c:
                cin = b.add(b.mul(gi, i64(Cg)), c)
                xbase = b.mul(b.add(b.mul(n, i64(C)), cin), i64(H * W))
                wbase = b.mul(b.add(b.mul(k, i64(Cg)), c), i64(R * S))
                for tap, okh, okw, ih, iw in window_taps(b, rows, cols, oh, ow):
                    idx = b.add(xbase, b.add(b.mul(ih, i64(W)), iw))
                    xv = b.load(gep(b, p.x, idx), typ=F32)
                    wv = b.load(gep(b, p.w, b.add(wbase, i64(tap))), typ=F32)
                    # A padded tap adds nothing (not 0 * w: NaN for an infinite w).
                    acc = b.load(acc_slot, typ=F32)
                    summed = b.fadd(acc, b.fmul(xv, wv))
                    b.store(b.select(b.and_(okh, okw), summed, acc), acc_slot)
            o = b.add(
                b.mul(b.add(b.mul(n, i64(K)), k), i64(OH * OW)), b.add(b.mul(oh, i64(OW)), ow)
            )
            ep.store(b, b.load(acc_slot, typ=F32), gep(b, p.out, o))


__all__ = [
    "ROW_TILE",
    "direct_body",
    "direct_tile",
    "copy_padded",
    "depthwise_body",
    "direct_vector_body",
    "pack_direct",
    "padded_size",
]
