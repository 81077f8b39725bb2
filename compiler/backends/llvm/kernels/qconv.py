"""int8 convolution (NCHW) as one implicit GEMM per image and group, on kernels/qgemm.py's
register tile: output channels are the tile's rows (their filter words broadcast), output pixels
its vector lanes.

The input is packed once per call into *planes*: the zero-point-padded image, split into its
stride phases (plane (ph, pw) holds padded pixels (i * sh + ph, j * sw + pw)), with G channels
interleaved per pixel and stored unsigned (x + 128). In a plane every filter tap is a constant
shift of the flattened pixel index, so the GEMM's "B panel" for a tap is just the plane at an
offset: no im2col. Outputs are computed on the plane's grid (width Wq >= OW); when Wq > OW the
extra columns land in a scratch buffer and the valid rows are copied out (otherwise the tile
stores straight into the output). Padding holds the zero point, whose products the compensated
bias removes with the rest (qgemm.py).

Depthwise convolutions (one input channel per output channel) have no reduction to pack; they
run on float32 planes of (x - z): every product and sum is an integer below 2**24, so the float
arithmetic is exact and the result is the reference's. Channel by channel: its planes are
written, its outputs computed on the plane grid and copied out, in one channel's worth of
scratch that stays in cache.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from llvmlite import ir

from compiler.backends.llvm.kernels.common import F32, I32, I64, PTR, gep, i64, intrinsic, loop
from compiler.backends.llvm.kernels.qgemm import (
    QGemmConfig,
    compensated_bias,
    masked_load,
    masked_store_f32,
    masked_store_i8,
    micro_kernel,
    pack_broadcast_operand,
    plus_sum,
    qgemm_config,
    requant_vec,
    scaled_vec,
    scratch_bytes,
    splat,
    to_unsigned,
    unsigned_pad,
)
from compiler.backends.llvm.kernels.quant import I8, round_to_q
from compiler.backends.llvm.kernels.window import ConvDims


@dataclass(frozen=True)
class Geometry(ConvDims):
    """Where each tap reads in the stride-phase planes (module docstring)."""

    OH: int
    OW: int

    @property
    def depthwise(self) -> bool:
        return self.Cg == 1 and self.Kg == 1

    def tap_planes(self) -> list[tuple[int, int]]:
        """(plane index, shift in plane pixels) of each tap, (r, s) row-major."""
        sh, sw = self.stride
        dh, dw = self.dilation
        planes = self.planes()
        out = []
        for r in range(self.R):
            for s in range(self.S):
                ph, pw = (r * dh) % sh, (s * dw) % sw
                out.append((planes.index((ph, pw)), ((r * dh) // sh) * self.Wq + (s * dw) // sw))
        return out

    def planes(self) -> list[tuple[int, int]]:
        sh, sw = self.stride
        dh, dw = self.dilation
        used = {((r * dh) % sh, (s * dw) % sw) for r in range(self.R) for s in range(self.S)}
        return sorted(used)

    @property
    def Hq(self) -> int:
        sh, dh = self.stride[0], self.dilation[0]
        return self.OH + ((self.R - 1) * dh) // sh

    @property
    def Wq(self) -> int:
        sw, dw = self.stride[1], self.dilation[1]
        return self.OW + ((self.S - 1) * dw) // sw

    @property
    def Q(self) -> int:
        """Output positions on the plane grid (OH rows of Wq)."""
        return self.OH * self.Wq

    @property
    def direct(self) -> bool:
        """The plane grid is the output grid: tiles store straight into the output."""
        return self.Wq == self.OW

    def plane_size(self, nr: int) -> int:
        """Pixels per plane, with room for the last tile's lanes past the grid."""
        return self.Hq * self.Wq + self.Wq + nr


def geometry(x_shape: tuple[int, ...], w_shape: tuple[int, ...], out_shape, attrs) -> Geometry:
    N, C, H, W = x_shape
    K, _, R, S = w_shape
    return Geometry(
        N,
        C,
        H,
        W,
        K,
        R,
        S,
        tuple(attrs["strides"]),
        tuple(attrs["pads"]),
        tuple(attrs["dilations"]),
        int(attrs["group"]),
        out_shape[2],
        out_shape[3],
    )


def _pack_planes(
    b: ir.IRBuilder,
    g: Geometry,
    x: ir.Value,
    dst: ir.Value,
    cgroups: int,
    group: int,
    esize: int,
    store: Any,
    pad_word: ir.Constant,
    plane_size: int,
    channels: int,
) -> None:
    """Write the stride-phase planes of one image-group (module docstring). `store(b, v, ptr)`
    stores input value v (int8) converted; `pad_word` fills a whole padded pixel group;
    channel indices past `channels` read the last channel (their filter taps are zero)."""
    sh, sw = g.stride
    pt, pl = g.pad[0], g.pad[1]
    H, W, Wq = g.H, g.W, g.Wq
    pix = group * esize  # bytes per packed pixel
    for pidx, (ph, pw) in enumerate(g.planes()):
        jlo = min(g.Wq, max(0, -(-(pl - pw) // sw)))
        jhi = max(jlo, min(g.Wq, (W - 1 + pl - pw) // sw + 1))
        with loop(b, 0, cgroups, 1, "pc") as c4, loop(b, 0, g.Hq, 1, "pi") as i:
            base = b.add(
                b.mul(b.add(b.mul(i64(pidx), i64(cgroups)), c4), i64(plane_size)), b.mul(i, i64(Wq))
            )
            drow = gep(b, dst, b.mul(base, i64(pix)), I8)
            ih = b.sub(b.add(b.mul(i, i64(sh)), i64(ph)), i64(pt))
            ok = b.and_(b.icmp_signed(">=", ih, i64(0)), b.icmp_signed("<", ih, i64(H)))

            def fill(j0: int, j1: int, drow: ir.Value = drow) -> None:
                if j1 > j0:
                    with loop(b, j0, j1, 1, "pj") as j:
                        b.store(pad_word, gep(b, drow, b.mul(j, i64(pix)), I8), align=1)

            with b.if_else(ok) as (inside, outside):
                with inside:
                    fill(0, jlo)
                    rows = []
                    for e in range(group):
                        c = b.add(b.mul(c4, i64(group)), i64(e))
                        c = b.select(b.icmp_signed("<", c, i64(channels)), c, i64(channels - 1))
                        rows.append(gep(b, x, b.add(b.mul(c, i64(H * W)), b.mul(ih, i64(W))), I8))
                    if jhi > jlo:
                        with loop(b, jlo, jhi, 1, "pj") as j:
                            iw = b.sub(b.add(b.mul(j, i64(sw)), i64(pw)), i64(pl))
                            for e, row in enumerate(rows):
                                v = b.load(gep(b, row, iw, I8), typ=I8)
                                off = b.add(b.mul(j, i64(pix)), i64(e * esize))
                                store(b, v, gep(b, drow, off, I8))
                    fill(jhi, Wq)
                with outside:
                    fill(0, Wq)


# -- the GEMM path -------------------------------------------------------------------------------------------

#: How far ahead of each reduction step the tile prefetches its packed filter words (one
#: sequential stream per block of output channels). The 7x7 stage's filters (1-2.4 MB a layer
#: in ResNet-50) come from memory, and the hardware streams restart at every 4 KB page: one
#: page ahead made ResNet-50's int8 model 12.2 -> 10.6 ms (2 or 8 KB: the same within 0.5%),
#: as packed fp32 weights (gemm.PREFETCH_B_BYTES).
PREFETCH_W_BYTES = 4096


@dataclass(frozen=True)
class QConvPlan:
    cfg: QGemmConfig
    g: Geometry
    weights: np.ndarray  # per group: pack_broadcast_operand, concatenated
    bias: np.ndarray  # int32[K], compensated
    mult: np.ndarray  # float32[K]
    zero_point: int
    out: tuple[int, int, int]
    #: the sum post-op: (offset, float32 multiplier s_r / s_out) of the int8 value the
    #: output buffer holds, added before the rounding (reference_quant.py); None: a store
    sum_q: tuple[int, float] | None = None

    @property
    def cgroups(self) -> int:
        return math.ceil(self.g.Cg / self.cfg.group)

    @property
    def steps(self) -> int:
        return self.g.R * self.g.S * self.cgroups

    @property
    def kblocks(self) -> int:
        return math.ceil(self.g.Kg / self.cfg.mr)

    def step_offsets(self) -> np.ndarray:
        """Byte offset in the packed planes of each reduction step (tap, channel group)."""
        cfg, g = self.cfg, self.g
        qs = g.plane_size(cfg.nr)
        pix = cfg.group * cfg.esize
        out = []
        for plane, shift in g.tap_planes():
            for c4 in range(self.cgroups):
                out.append(((plane * self.cgroups + c4) * qs + shift) * pix)
        return np.asarray(out, np.int64)

    def pack_bytes(self) -> int:
        g, cfg = self.g, self.cfg
        return len(g.planes()) * self.cgroups * g.plane_size(cfg.nr) * cfg.group * cfg.esize


def plan_qconv(
    g: Geometry,
    w: np.ndarray,
    bias: np.ndarray,
    mult: np.ndarray,
    zero_point: int,
    out: tuple[int, int, int],
    cfg: QGemmConfig | None = None,
    sum_q: tuple[int, float] | None = None,
) -> QConvPlan:
    cfg = cfg or qgemm_config()
    G = cfg.group
    cg4 = math.ceil(g.Cg / G)
    packs = []
    for gi in range(g.group):
        wg = w[gi * g.Kg : (gi + 1) * g.Kg].astype(np.int64)  # [Kg, Cg, R, S]
        wt = np.zeros((g.Kg, g.R * g.S, cg4 * G), np.int64)
        wt[:, :, : g.Cg] = wg.transpose(0, 2, 3, 1).reshape(g.Kg, g.R * g.S, g.Cg)
        packs.append(pack_broadcast_operand(wt.reshape(g.Kg, -1), cfg, g.R * g.S * cg4).ravel())
    sums = w.astype(np.int64).reshape(g.K, -1).sum(axis=1)
    b = compensated_bias(bias, sums, zero_point)
    return QConvPlan(
        cfg, g, np.concatenate(packs), b, mult.astype(np.float32), zero_point, out, sum_q
    )


def build_qconv(b: ir.IRBuilder, fn: ir.Function, p: QConvPlan, module: ir.Module) -> None:
    """Body of `void f(ptr x, ptr packed_w, ptr out, ptr bias, ptr mult)`."""
    cfg, g = p.cfg, p.g
    px, pw, po, pbias, pmult = fn.args
    xp = scratch_bytes(module, "qconv.planes", p.pack_bytes())
    # With the sum post-op and a plane grid wider than the output, the grid holds the float32
    # values before rounding, and the compaction adds the sum and rounds.
    ysize = 4 if p.sum_q is not None and not g.direct else 1
    y = po if g.direct else scratch_bytes(module, f"qconv.y{ysize}", g.Kg * g.Q * ysize)
    offs_tab = _i64_table(module, p.step_offsets(), "qconv.steps")
    pad = unsigned_pad(p.zero_point, cfg)
    G, esize, vw, nr, mr = cfg.group, cfg.esize, cfg.vw, cfg.nr, cfg.mr
    pad_word = ir.Constant(
        ir.IntType(8 * G * esize),
        int.from_bytes(bytes([pad & 0xFF, (pad >> 8) & 0xFF][:esize] * G), "little"),
    )
    wblock = p.steps * mr * G * esize  # bytes of one block of MR filter rows
    wgroup = p.kblocks * wblock

    def store(bb: ir.IRBuilder, v: ir.Value, ptr: ir.Value) -> None:
        bb.store(to_unsigned(bb, cfg, v), ptr, align=1)

    qfull, qtail = divmod(g.Q, nr)
    kfull, ktail = divmod(g.Kg, mr)

    with loop(b, 0, g.N, 1, "n") as n, loop(b, 0, g.group, 1, "g") as gi:
        ximg = gep(
            b, px, b.mul(b.add(b.mul(n, i64(g.C)), b.mul(gi, i64(g.Cg))), i64(g.H * g.W)), I8
        )
        _pack_planes(b, g, ximg, xp, p.cgroups, G, esize, store, pad_word, g.plane_size(nr), g.Cg)
        kbase = b.mul(gi, i64(g.Kg))  # first output channel of the group
        obase = gep(b, po, b.mul(b.add(b.mul(n, i64(g.K)), kbase), i64(g.OH * g.OW)), I8)
        ybase = obase if g.direct else y
        wg = gep(b, pw, b.mul(gi, i64(wgroup)), I8)

        def tile(kb: ir.Value, nrows: int, q0: ir.Value, nvec: int, last_valid: int) -> None:
            wtile = gep(b, wg, b.mul(kb, i64(wblock)), I8)

            def bcast_addr(bb: ir.IRBuilder, t: ir.Value, m: int) -> ir.Value:
                return gep(
                    bb, wtile, bb.add(bb.mul(t, i64(mr * G * esize)), i64(m * G * esize)), I8
                )

            def vec_addr(bb: ir.IRBuilder, t: ir.Value, v: int) -> ir.Value:
                off = bb.load(gep(bb, offs_tab, t, I64), typ=I64)
                pos = bb.mul(bb.add(q0, i64(v * vw)), i64(G * esize))
                return gep(bb, xp, bb.add(off, pos), I8)

            # The sums start from each row's bias: the epilogue has no add (int32 sums wrap,
            # so the order does not matter).
            biases = []
            for m in range(nrows):
                kg = b.add(kbase, b.add(b.mul(kb, i64(mr)), i64(m)))
                biases.append(splat(b, b.load(gep(b, pbias, kg, I32), typ=I32), vw))
            accs = micro_kernel(
                b, cfg, p.steps, bcast_addr, vec_addr, nrows, nvec, True, PREFETCH_W_BYTES, biases
            )
            bias = ir.Constant(ir.VectorType(I32, vw), [0] * vw)
            for m in range(nrows):
                k = b.add(b.mul(kb, i64(mr)), i64(m))
                kg = b.add(kbase, k)
                mult = splat(b, b.load(gep(b, pmult, kg, F32), typ=F32), vw)
                row = gep(b, ybase, b.mul(k, i64(g.Q)), I8 if ysize == 1 else F32)
                for v in range(nvec):
                    valid = vw if v < nvec - 1 else last_valid
                    dst = gep(b, row, b.add(q0, i64(v * vw)), I8 if ysize == 1 else F32)
                    if p.sum_q is None:
                        qv = requant_vec(b, accs[m][v], bias, mult, p.out)
                    elif not g.direct:  # rounded in the compaction, with the sum
                        masked_store_f32(b, scaled_vec(b, accs[m][v], bias, mult), dst, valid)
                        continue
                    else:  # the output holds the value accumulated into
                        rv = masked_load(b, dst, ir.VectorType(I8, vw), valid)
                        yv = plus_sum(b, scaled_vec(b, accs[m][v], bias, mult), rv, p.sum_q)
                        qv = round_to_q(b, yv, *p.out)
                    masked_store_i8(b, qv, dst, valid)

        def kblocks(kb0: int, kb1: int, nrows: int) -> None:
            if kb1 <= kb0:
                return
            with loop(b, kb0, kb1, 1, "kb") as kb:
                if qfull:
                    with loop(b, 0, qfull * nr, nr, "qb") as q0:
                        tile(kb, nrows, q0, cfg.nv, vw)
                if qtail:
                    nvec = math.ceil(qtail / vw)
                    tile(kb, nrows, i64(qfull * nr), nvec, qtail - (nvec - 1) * vw)

        kblocks(0, kfull, mr)
        kblocks(kfull, kfull + (1 if ktail else 0), ktail)
        if not g.direct and p.sum_q is not None:
            _compact_sum(b, g, y, obase, g.Kg, p.sum_q, p.out)
        elif not g.direct:
            _compact(b, g, y, obase, g.Kg)


def _compact(b: ir.IRBuilder, g: Geometry, y: ir.Value, out: ir.Value, channels: int) -> None:
    """Copy the OW valid columns of each plane-grid row into the output."""
    with loop(b, 0, channels, 1, "ck") as k, loop(b, 0, g.OH, 1, "ch") as oh:
        src = gep(b, y, b.add(b.mul(k, i64(g.Q)), b.mul(oh, i64(g.Wq))), I8)
        dst = gep(b, out, b.add(b.mul(k, i64(g.OH * g.OW)), b.mul(oh, i64(g.OW))), I8)
        with loop(b, 0, g.OW, 1, "cw") as ow:
            b.store(b.load(gep(b, src, ow, I8), typ=I8), gep(b, dst, ow, I8))


def _compact_sum(
    b: ir.IRBuilder,
    g: Geometry,
    y: ir.Value,
    out: ir.Value,
    channels: int,
    sum_q: tuple[int, float],
    q: tuple[int, int, int],
) -> None:
    """The sum post-op's compaction: each valid float32 grid value plus the int8 value the
    output holds, rounded into the output."""
    with loop(b, 0, channels, 1, "ck") as k, loop(b, 0, g.OH, 1, "ch") as oh:
        src = gep(b, y, b.add(b.mul(k, i64(g.Q)), b.mul(oh, i64(g.Wq))), F32)
        dst = gep(b, out, b.add(b.mul(k, i64(g.OH * g.OW)), b.mul(oh, i64(g.OW))), I8)
        with loop(b, 0, g.OW, 1, "cw") as ow:
            at = gep(b, dst, ow, I8)
            yv = plus_sum(b, b.load(gep(b, src, ow, F32), typ=F32), b.load(at, typ=I8), sum_q)
            b.store(round_to_q(b, yv, *q), at)


def _i64_table(module: ir.Module, data: np.ndarray, name: str) -> ir.GlobalVariable:
    aty = ir.ArrayType(I64, max(1, data.size))
    gv = ir.GlobalVariable(module, aty, module.get_unique_name(name))
    gv.initializer = ir.Constant(aty, [ir.Constant(I64, int(v)) for v in data.tolist()] or [0])
    gv.global_constant = True
    gv.linkage = "private"
    gv.type = PTR
    return gv


# -- depthwise ------------------------------------------------------------------------------------------------


def exact_float_bias(w: np.ndarray, bias: np.ndarray) -> bool:
    """A depthwise conv's sums, started from the bias, are integers below 2**24 in magnitude
    for any int8 input (|x - z| <= 255): float32 holds every partial sum exactly."""
    taps = np.abs(w.astype(np.int64)).reshape(w.shape[0], -1).sum(axis=1)
    return bool(np.all(np.abs(bias.astype(np.int64)) + 255 * taps < 1 << 24))


def build_qdepthwise(
    b: ir.IRBuilder,
    fn: ir.Function,
    g: Geometry,
    zero_point: int,
    out: tuple[int, int, int],
    vw: int,
    nv: int,
    module: ir.Module,
    float_bias: bool = False,
) -> None:
    """Body of `void f(ptr x, ptr wf32, ptr out, ptr bias_i32, ptr mult)` for a depthwise conv:
    float32 planes of x - z, then per channel vectors of output pixels (module docstring).

    `float_bias`: every channel's |bias| + 255 sum |w| is below 2**24 (`exact_float_bias`), so
    the sums may start from the bias in float32 and stay exact integers: float32(acc + bias)
    without the two conversions and the integer add."""
    px, pw, po, pbias, pmult = fn.args
    nr = vw * nv
    qs = g.plane_size(nr)
    nplanes = len(g.planes())
    # One channel's planes (4 bytes a value), written just before the channel is computed:
    # packing every channel first wrote 4x the input (1.7 MB for 32x112x112) and read it back
    # from beyond L2 for the taps.
    planes = scratch_bytes(module, "qdw.planes", nplanes * qs * 4)
    y = po if g.direct else scratch_bytes(module, "qdw.y", g.Q)  # one channel's grid
    taps = g.tap_planes()
    fty = ir.VectorType(F32, vw)
    fmuladd = intrinsic(module, f"llvm.fmuladd.v{vw}f32", ir.FunctionType(fty, [fty] * 3))

    def store(bb: ir.IRBuilder, v: ir.Value, ptr: ir.Value) -> None:
        f = bb.sitofp(bb.sub(bb.sext(v, I32), ir.Constant(I32, zero_point)), F32)
        bb.store(f, ptr, align=4)

    zero = ir.Constant(ir.IntType(32), 0)  # float +0.0 bits
    qfull, qtail = divmod(g.Q, nr)
    with loop(b, 0, g.N, 1, "n") as n:
        ximg = gep(b, px, b.mul(n, i64(g.C * g.H * g.W)), I8)
        obase = gep(b, po, b.mul(n, i64(g.K * g.OH * g.OW)), I8)
        with loop(b, 0, g.C, 1, "c") as c:
            xc = gep(b, ximg, b.mul(c, i64(g.H * g.W)), I8)
            _pack_planes(b, g, xc, planes, 1, 1, 4, store, zero, qs, 1)
            wts = [
                splat(
                    b, b.load(gep(b, pw, b.add(b.mul(c, i64(len(taps))), i64(t)), F32), typ=F32), vw
                )
                for t in range(len(taps))
            ]
            bias = splat(b, b.load(gep(b, pbias, c, I32), typ=I32), vw)
            if float_bias:
                bias_f = splat(b, b.sitofp(b.load(gep(b, pbias, c, I32), typ=I32), F32), vw)
            mult = splat(b, b.load(gep(b, pmult, c, F32), typ=F32), vw)
            row = gep(b, obase, b.mul(c, i64(g.Q)), I8) if g.direct else y

            def block(q0: ir.Value, nvec: int, last_valid: int) -> None:
                for v in range(nvec):
                    acc = bias_f if float_bias else ir.Constant(fty, [0.0] * vw)
                    for t, (plane, shift) in enumerate(taps):
                        base = i64(plane * qs + shift + v * vw)
                        xv = b.load(gep(b, planes, b.add(base, q0), F32), typ=fty, align=4)
                        # Products and sums are exact integers below 2**24: fused or not,
                        # the same float32 value, so LLVM may fuse (llvm.fmuladd).
                        acc = b.call(fmuladd, [xv, wts[t], acc])
                    if float_bias:
                        qv = round_to_q(b, b.fmul(acc, mult), *out)
                    else:
                        iacc = b.fptosi(acc, ir.VectorType(I32, vw))
                        qv = requant_vec(b, iacc, bias, mult, out)
                    masked_store_i8(
                        b,
                        qv,
                        gep(b, row, b.add(q0, i64(v * vw)), I8),
                        vw if v < nvec - 1 else last_valid,
                    )

            if qfull:
                with loop(b, 0, qfull * nr, nr, "dq") as q0:
                    block(q0, nv, vw)
            if qtail:
                nvec = math.ceil(qtail / vw)
                block(i64(qfull * nr), nvec, qtail - (nvec - 1) * vw)
            if not g.direct:
                _compact(b, g, y, gep(b, obase, b.mul(c, i64(g.OH * g.OW)), I8), 1)


__all__ = [
    "Geometry",
    "QConvPlan",
    "build_qconv",
    "build_qdepthwise",
    "exact_float_bias",
    "geometry",
    "plan_qconv",
]
