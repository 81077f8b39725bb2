"""The ``winograd`` conv strategy: 3x3, stride 1, dilation 1, group 1 convs as Winograd's
F(2x2, 3x3) (Lavin & Gray, "Fast Algorithms for Convolutional Neural Networks", 2015).

Each 2x2 block of output pixels (a *tile*) is computed from the 4x4 input patch that covers
it: with the filter transformed once, at compile time, into ``U = G g G^T`` (4x4 per output
and input channel) and each patch into ``V = B^T d B`` (4x4 per input channel and tile), the
tile is ``Y = A^T [sum_c U[k, c] * V[c, p]] A``, elementwise products in the 4x4 domain. The
channel sum of each of the 16 positions ``xi`` is a GEMM, ``M[xi] = U[xi] @ V[xi]`` (K x C
times C x P, P tiles), which is where the work is: 16 * K * C * P multiply-adds for the
conv's 4 * P * K * C * 9 / 4 = 9 * K * C * P (2.25 times fewer).

The kernel runs in three phases per image, each spread over the thread pool in chunks fixed
by the shape (the results do not depend on the threads):

1. *input transform*, by channels: each channel is copied into the thread's zero-padded plane
   (so no tap is ever bounds-tested), then its patches, a tile row at a time with the tiles on
   the vector lanes, go through ``B^T d B`` into ``V[xi][c][p]``;
2. *16 GEMMs*, by ``xi``: the project's conv GEMM (``emit_gemm_body``, the conv tile, ``U``
   as constant MR-row panels, ``V[xi]``'s rows read in place as B) into ``M[xi][k][p]``;
3. *output transform*, by output channels: ``A^T m A`` on a tile row of vectors, plus the
   bias, the two output columns of each tile interleaved by a shuffle into whole output rows,
   stored through the ``Epilogue`` (the sum post-op and the fused activation).

Accuracy: the transforms add and subtract up to four values (``B``, ``A``) and ``G`` has
halves, so every output is a sum of 16 products whose terms are larger than the result; in
float32 the error is a few times that of a direct sum (see the tests' tolerance).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from llvmlite import ir

from compiler.backends.llvm.kernels.common import (
    UNROLL_FLOATS,
    F32,
    Epilogue,
    Int,
    add,
    broadcast,
    entry_alloca,
    gep,
    i64,
    load_vec,
    loop,
    mul,
    smax,
    smin,
    store_vec,
    vector_runs,
)
from compiler.backends.llvm.kernels.direct import direct_body
from compiler.backends.llvm.kernels.gemm import (
    GemmConfig,
    GemmOperands,
    conv_gemm_config,
    emit_gemm_body,
    pack_a_constant,
    panel_a,
)
from compiler.backends.llvm.kernels.parallel import (
    ELEMENT_WORK,
    parallel_loop,
    scratch,
    shared_scratch,
    thread_scratch,
    work_chunks,
)
from compiler.backends.llvm.kernels.window import ConvPtrs, ConvShape

I32 = ir.IntType(32)

#: F(2x2, 3x3)'s filter transform G (4x3); B^T and A^T are the adds in the kernel below.
G = np.array([[1.0, 0.0, 0.0], [0.5, 0.5, 0.5], [0.5, -0.5, 0.5], [0.0, 0.0, 1.0]])


def applies(s: ConvShape) -> bool:
    """What F(2x2, 3x3) computes: a 3x3 window, stride 1, dilation 1, one group (any pads)."""
    return (
        s.group == 1 and s.R == 3 and s.S == 3 and s.stride == (1, 1) and s.dilation == (1, 1)
    )


#: Whether the table chooses it by itself (False: only when forced; an A/B switch for
#: benchmarks/bench_switch_ab.py).
CHOOSE = True


def prefers(s: ConvShape) -> bool:
    """Where it beat the GEMM rows alone (benchmarks/README.md, issue 15 session 8): a tile
    grid that fills a vector of the host's lanes at least once (the tiles are the GEMMs' N, on
    the lanes: a 4x4 image's 4 tiles used a quarter of AVX-512's and ran 1.7x slower than
    pixel rows, a 7x7 image's 16 fill them and ran 0.75x), and enough channels for the GEMMs
    to outweigh the transforms (8 -> 8 channels: even; 8 -> 16 and 16 -> 16: 0.8-0.9x)."""
    th, tw = tiles(s)
    return CHOOSE and th * tw >= conv_gemm_config().vw and s.C >= 8 and s.K >= 16


def tiles(s: ConvShape) -> tuple[int, int]:
    """Tile rows and tile columns: 2x2 output pixels per tile, the last ones cropped."""
    return -(-s.OH // 2), -(-s.OW // 2)


def _g(a0: np.ndarray, a1: np.ndarray, a2: np.ndarray) -> list[np.ndarray]:
    """G applied to three values: its rows as adds (the halves are exact)."""
    return [a0, (a0 + a1 + a2) * 0.5, (a0 - a1 + a2) * 0.5, a2]


def transform_filter(w: np.ndarray) -> np.ndarray:
    """[K, C, 3, 3] -> U[4, 4, K, C] = G g G^T, in float64 rounded once to float32, element by
    element (ResNet-50's 13 filters in 0.05 s; an einsum over the six indices took ~1 s for
    one 512 x 512 filter, and a BLAS GEMM's threads spun on the loaded machine)."""
    w = np.asarray(w, dtype=np.float64)
    out = np.empty((4, 4) + w.shape[:2], np.float32)
    for j, t in enumerate(_g(w[..., 0], w[..., 1], w[..., 2])):  # columns: t[k, c, r]
        for i, v in enumerate(_g(t[..., 0], t[..., 1], t[..., 2])):  # then rows
            out[i, j] = v
    return out


def pack(w: np.ndarray, s: ConvShape, cfg: GemmConfig) -> np.ndarray:
    """The 16 transformed filters U[xi] (K x C), each as the GEMM's MR-row A panels
    [ceil(K/MR)][C][MR] (``pack_a_constant``'s layout), the last panel's rows past K zero."""
    mr, K, C = cfg.mr, s.K, s.C
    u = transform_filter(w).reshape(16, K, C)
    full, tail = divmod(K, mr)
    out = np.zeros((16, full + (1 if tail else 0), C, mr), np.float32)
    out[:, :full] = u[:, : full * mr].reshape(16, full, mr, C).transpose(0, 1, 3, 2)
    if tail:
        out[:, full, :, :tail] = u[:, full * mr :].transpose(0, 2, 1)
    return out.ravel()


#: The most floats of V and M (the transformed input and the GEMMs' output) one block of tile
#: rows may take; bigger images go in several blocks of tile rows (see ``Geometry``).
BLOCK_FLOATS = 1 << 21


@dataclass(frozen=True)
class Geometry:
    """The tile grid (``th`` x ``tw`` tiles) in ``blocks`` blocks of ``bt`` tile rows (the last
    may run past the grid: its extra tiles read zeros and store nothing), and the padded plane
    (``hp`` x ``wp``) the input transform reads: every patch row of every block (2 * blocks *
    bt + 2 >= H + pt + pb) and, per row, the whole vectors a tile-row run loads (2 * vw + 2
    floats from column 2 * tw0, tw0 < tw rounded up to vw)."""

    th: int
    tw: int
    bt: int
    blocks: int
    hp: int
    wp: int

    @property
    def pb(self) -> int:
        """Tiles per block: the GEMMs' N."""
        return self.bt * self.tw


def geometry(s: ConvShape, vw: int) -> Geometry:
    th, tw = tiles(s)
    per_row = 16 * (s.C + s.K) * tw  # floats of V and M per tile row
    blocks = -(-th // max(1, BLOCK_FLOATS // per_row))
    bt = -(-th // blocks)  # the blocks evened out
    twv = -(-tw // vw) * vw
    return Geometry(th, tw, bt, blocks, 2 * blocks * bt + 2, 2 * twv + 2)


def _zeroed_plane(module: ir.Module, s: ConvShape, hp: int, wp: int) -> ir.GlobalVariable:
    """A scratch plane whose border stays zero: only the image's pixels are ever written, at
    the same places by every kernel of this geometry (which is why they may share it)."""
    pt, pl = s.pad[0], s.pad[1]
    name = f"glowviz.scratch.wino.pad.{s.H}x{s.W}.{pt}.{pl}.{hp}x{wp}"
    g = module.globals.get(name)
    if isinstance(g, ir.GlobalVariable):
        return g
    return scratch(module, name, hp * wp)


def _runs(b: ir.IRBuilder, n: int, vw: int, body: Callable[[Int, int], None], name: str) -> None:
    """``body(t0, valid)`` over a tile row in runs of ``vw`` tiles: unrolled for the usual
    rows (``vector_runs``), else a loop over every run but the last, which is emitted on its
    own with a constant ``t0`` (so a run with a variable ``t0`` never holds the last tile)."""
    if n <= UNROLL_FLOATS:
        vector_runs(b, n, vw, body, name)
        return
    last = (n - 1) // vw * vw
    with loop(b, 0, last, vw, name) as t0:
        body(t0, vw)
    body(last, n - last)


def _interleave(b: ir.IRBuilder, x: ir.Value, y: ir.Value, vw: int) -> ir.Value:
    """(x0, y0, x1, y1, ...): a tile row's two output columns as one run of the output row."""
    idx = [v for i in range(vw) for v in (i, vw + i)]
    return b.shuffle_vector(x, y, ir.Constant(ir.VectorType(I32, 2 * vw), idx))


def _halves(b: ir.IRBuilder, wide: ir.Value, vw: int) -> tuple[ir.Value, ir.Value]:
    """The even and the odd lanes of a 2 * vw vector."""
    undef = ir.Constant(wide.type, ir.Undefined)
    out = []
    for q in (0, 1):
        idx = ir.Constant(ir.VectorType(I32, vw), [2 * i + q for i in range(vw)])
        out.append(b.shuffle_vector(wide, undef, idx))
    return out[0], out[1]


def _bt(b: ir.IRBuilder, d: list[ir.Value]) -> list[ir.Value]:
    """B^T applied to four values: (d0 - d2, d1 + d2, d2 - d1, d1 - d3)."""
    return [b.fsub(d[0], d[2]), b.fadd(d[1], d[2]), b.fsub(d[2], d[1]), b.fsub(d[1], d[3])]


def _at(b: ir.IRBuilder, m: list[ir.Value]) -> list[ir.Value]:
    """A^T applied to four values: (m0 + m1 + m2, m1 - m2 - m3)."""
    return [b.fadd(b.fadd(m[0], m[1]), m[2]), b.fsub(b.fsub(m[1], m[2]), m[3])]


def _copy_rows(
    b: ir.IRBuilder,
    src: ir.Value,
    dst: ir.Value,
    s: ConvShape,
    wp: int,
    lo: ir.Value,
    hi: ir.Value,
    vw: int,
) -> None:
    """Image rows [lo, hi) of one channel plane at ``src`` into the padded plane at ``dst``
    (rows ``wp`` floats apart, the image at (pt, pl)), in vectors with a masked tail."""
    pt, pl = s.pad[0], s.pad[1]
    with loop(b, lo, hi, 1, "wh") as h:
        row = gep(b, src, b.mul(h, i64(s.W)))
        out = gep(b, dst, b.add(b.mul(h, i64(wp)), i64(pt * wp + pl)))

        def run(j0: Int, valid: int) -> None:
            store_vec(b, load_vec(b, gep(b, row, j0), vw, valid), gep(b, out, j0), vw, valid)

        vector_runs(b, s.W, vw, run, "ww")


#: g from U, per axis: G's first and last rows are g0 and g2, its middle rows' difference is
#: g1, so each filter tap is a signed sum of one, two or four entries of U: (U index, sign).
_UNDO_G = (((0, 1),), ((1, 1), (2, -1)), ((3, 1),))


def _nonfinite_in(b: ir.IRBuilder, x: ir.Value, n: int, vw: int) -> ir.Value:
    """i1: does any of the ``n`` floats at ``x`` hold an infinity or a NaN? A test of the
    exponent bits, so no fast-math flag can fold it away."""
    ivec = ir.VectorType(I32, vw)
    exp = ir.Constant(ivec, [0x7F800000] * vw)
    acc = entry_alloca(b, ivec)
    b.store(ir.Constant(ivec, [0] * vw), acc)

    def run(j0: Int, valid: int) -> None:
        bits = b.bitcast(load_vec(b, gep(b, x, j0), vw, valid), ivec)
        hit = b.zext(b.icmp_unsigned("==", b.and_(bits, exp), exp), ivec)
        b.store(b.or_(b.load(acc, typ=ivec), hit), acc)

    vector_runs(b, n, vw, run, "wnf")
    lanes = b.load(acc, typ=ivec)
    hits = b.extract_element(lanes, ir.Constant(I32, 0))
    for lane in range(1, vw):
        hits = b.or_(hits, b.extract_element(lanes, ir.Constant(I32, lane)))
    return b.icmp_unsigned("!=", hits, ir.Constant(I32, 0))


def _recover_filter(
    b: ir.IRBuilder, s: ConvShape, cfg: GemmConfig, u: ir.Value, g: ir.Value
) -> None:
    """The filter g [K][C][3][3] at ``g`` from the packed U panels at ``u`` (``pack``'s layout;
    each tap within a few float32 roundings of the model's), for the direct fallback."""
    K, C, mr = s.K, s.C, cfg.mr
    gw = -(-K // mr) * mr * C
    with loop(b, 0, K, 1, "wgk") as k, loop(b, 0, C, 1, "wgc") as c:
        kp, kr = b.udiv(k, i64(mr)), b.urem(k, i64(mr))
        base = b.add(b.mul(kp, i64(mr * C)), b.add(b.mul(c, i64(mr)), kr))
        dst = gep(b, g, b.mul(b.add(b.mul(k, i64(C)), c), i64(9)))
        for r in range(3):
            for t in range(3):
                tap: ir.Value | None = None
                for i, si in _UNDO_G[r]:
                    for j, sj in _UNDO_G[t]:
                        v = b.load(gep(b, u, b.add(base, i64((i * 4 + j) * gw))), typ=F32)
                        if tap is None:
                            tap = v
                        else:
                            tap = b.fadd(tap, v) if si * sj > 0 else b.fsub(tap, v)
                assert tap is not None
                b.store(tap, gep(b, dst, r * 3 + t))


def winograd_body(
    b: ir.IRBuilder, s: ConvShape, cfg: GemmConfig, p: ConvPtrs, ep: Epilogue
) -> None:
    """The three phases of the module docstring, for each image and block of tile rows."""
    module = b.module
    C, H, W, K, OH, OW = s.C, s.H, s.W, s.K, s.OH, s.OW
    vw = cfg.vw
    g = geometry(s, vw)
    TW, bt, hp, wp, P = g.tw, g.bt, g.hp, g.wp, g.pb
    pt = s.pad[0]
    plane = _zeroed_plane(module, s, hp, wp)
    # Written in full before they are read (every lane of V and M the GEMM or the output
    # transform reads): shared by every Winograd conv of one size.
    vbuf = shared_scratch(module, "wino.v", 16 * C * P)
    mbuf = shared_scratch(module, "wino.m", 16 * K * P)
    gw = -(-K // cfg.mr) * cfg.mr * C  # floats of packed U per xi

    # -- 1. input transform, by channels ------------------------------------------------------
    cgroups = work_chunks(C * (2 * bt + 2) * wp * ELEMENT_WORK, C)
    cper = -(-C // cgroups)

    def in_chunk(bb: ir.IRBuilder, i: ir.Value, tid: ir.Value, vals: list[ir.Value]) -> None:
        xn, tb = vals[0], vals[1]
        pl_ = thread_scratch(bb, plane, tid)
        # The image rows the block's patches read (the plane's other rows are never read;
        # its padding rows are never written).
        lo = smax(bb, bb.sub(bb.mul(tb, i64(2)), i64(pt)), 0)
        hi = smin(bb, bb.sub(bb.mul(bb.add(tb, i64(bt)), i64(2)), i64(pt - 2)), H)
        c0 = bb.mul(i, i64(cper))
        with loop(bb, c0, smin(bb, bb.add(c0, i64(cper)), C), 1, "wc") as c:
            _copy_rows(bb, gep(bb, xn, bb.mul(c, i64(H * W))), pl_, s, wp, lo, hi, vw)
            vc = gep(bb, vbuf, bb.mul(c, i64(P)))
            with loop(bb, 0, bt, 1, "wth") as th:
                prow = gep(bb, pl_, bb.mul(bb.add(tb, th), i64(2 * wp)))
                vrow = gep(bb, vc, bb.mul(th, i64(TW)))

                def run(t0: Int, valid: int, prow=prow, vrow=vrow) -> None:
                    rows = []
                    for r in range(4):
                        src = gep(bb, prow, add(bb, r * wp, mul(bb, t0, 2)))
                        x0, x1 = _halves(bb, load_vec(bb, src, 2 * vw), vw)
                        x2, x3 = _halves(bb, load_vec(bb, gep(bb, src, 2), 2 * vw), vw)
                        rows.append(_bt(bb, [x0, x1, x2, x3]))  # B^T over the columns
                    for j in range(4):
                        col = _bt(bb, [rows[r][j] for r in range(4)])  # then over the rows
                        for r in range(4):
                            dst = gep(bb, vrow, add(bb, t0, (r * 4 + j) * C * P))
                            store_vec(bb, col[r], dst, vw, valid)

                _runs(bb, TW, vw, run, "wtw")

    # -- 2. the 16 GEMMs, by xi ---------------------------------------------------------------
    xgroups = work_chunks(16 * K * P * C, 16)
    xper = -(-16 // xgroups)

    def gemm_chunk(bb: ir.IRBuilder, i: ir.Value, tid: ir.Value, vals: list[ir.Value]) -> None:
        w = vals[0]
        x0 = bb.mul(i, i64(xper))
        with loop(bb, x0, smin(bb, bb.add(x0, i64(xper)), 16), 1, "wxi") as xi:
            vx = gep(bb, vbuf, bb.mul(xi, i64(C * P)))

            def b_addr(b2: ir.IRBuilder, jp: Int, k: Int, vx: ir.Value = vx) -> ir.Value:
                return gep(b2, vx, add(b2, mul(b2, k, P), mul(b2, jp, cfg.nr)))

            ops = GemmOperands(
                a_addr=panel_a(gep(bb, w, bb.mul(xi, i64(gw))), C, cfg.mr),
                b_addr=b_addr,
                c_base=gep(bb, mbuf, bb.mul(xi, i64(K * P))),
                c_stride=P,
                b_exact=True,
                a_packed=True,
            )
            emit_gemm_body(bb, cfg, K, P, C, ops)

    # -- 3. output transform, by output channels ----------------------------------------------
    kgroups = work_chunks(K * 2 * bt * OW * ELEMENT_WORK, K)
    kper = -(-K // kgroups)
    has_bias = p.bias is not None
    # Whether every tile row of every block has both its output rows.
    whole = g.blocks * bt * 2 == OH

    def out_chunk(bb: ir.IRBuilder, i: ir.Value, tid: ir.Value, vals: list[ir.Value]) -> None:
        on, tb = vals[0], vals[1]
        k0 = bb.mul(i, i64(kper))
        with loop(bb, k0, smin(bb, bb.add(k0, i64(kper)), K), 1, "wk") as k:
            bias = None
            if has_bias:
                bias = broadcast(bb, bb.load(gep(bb, vals[2], k), typ=F32), vw)
            mk = gep(bb, mbuf, bb.mul(k, i64(P)))
            ok = gep(bb, on, bb.mul(k, i64(OH * OW)))
            with loop(bb, 0, bt, 1, "wot") as th:
                mrow = gep(bb, mk, bb.mul(th, i64(TW)))
                oh0 = bb.mul(bb.add(tb, th), i64(2))  # the tile row's first output row
                orow = gep(bb, ok, bb.mul(oh0, i64(OW)))

                def run(t0: Int, valid: int, mrow=mrow, orow=orow, oh0=oh0) -> None:
                    m = [
                        load_vec(bb, gep(bb, mrow, add(bb, t0, xi * K * P)), vw, valid)
                        for xi in range(16)
                    ]
                    cols = [_at(bb, [m[r * 4 + j] for r in range(4)]) for j in range(4)]
                    # A run from a loop is never the last (``_runs``): all its columns exist.
                    width = min(2 * valid, OW - 2 * t0) if isinstance(t0, int) else 2 * vw
                    for r in range(2):
                        y = _at(bb, [cols[j][r] for j in range(4)])
                        if bias is not None:
                            y = [bb.fadd(v, bias) for v in y]
                        v = _interleave(bb, y[0], y[1], vw)
                        dst = gep(bb, orow, add(bb, r * OW, mul(bb, t0, 2)))
                        if whole:
                            ep.store(bb, v, dst, 2 * vw, width)
                        else:  # output rows past the image (a cropped or a padding tile row)
                            inside = bb.icmp_signed("<", bb.add(oh0, i64(r)), i64(OH))
                            with bb.if_then(inside):
                                ep.store(bb, v, dst, 2 * vw, width)

                _runs(bb, TW, vw, run, "wor")

    # The transforms only ever combine values an output's window holds, so a non-finite input
    # reaches the outputs a direct sum reaches, but an infinity meets itself with both signs on
    # the way (inf - inf): NaN where a direct sum gives +-inf. An input holding an infinity or
    # a NaN runs the direct loop nest instead, on the filter recovered from U; the test is one
    # pass of exponent checks over the input (~1% of the conv's time).
    gbuf = shared_scratch(module, "wino.g", K * C * 9)
    with b.if_else(_nonfinite_in(b, p.x, s.N * C * H * W, vw)) as (nonfinite, finite):
        with nonfinite:
            _recover_filter(b, s, cfg, p.w, gbuf)
            direct_body(b, s, cfg, p._replace(w=gbuf), ep)
        with finite:
            with loop(b, 0, s.N, 1, "n") as n, loop(b, 0, g.blocks * bt, bt, "wb") as tb:
                xn = gep(b, p.x, b.mul(n, i64(C * H * W)))
                parallel_loop(b, cgroups, [xn, tb], in_chunk, "wino_in")
                parallel_loop(b, xgroups, [p.w], gemm_chunk, "wino_gemm")
                on = gep(b, p.out, b.mul(n, i64(K * OH * OW)))
                captures = [on, tb] + ([p.bias] if has_bias else [])
                parallel_loop(b, kgroups, captures, out_chunk, "wino_out")


__all__ = [
    "BLOCK_FLOATS",
    "CHOOSE",
    "Geometry",
    "applies",
    "geometry",
    "pack",
    "prefers",
    "tiles",
    "transform_filter",
    "winograd_body",
]
