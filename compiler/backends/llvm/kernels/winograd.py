"""The ``winograd`` and ``winograd-4x4`` conv strategies: 3x3, stride 1, dilation 1, group 1
convs as Winograd's F(2x2, 3x3) and F(4x4, 3x3) (Lavin & Gray, "Fast Algorithms for
Convolutional Neural Networks", 2015), one code for both (``Variant``: m, n = m + 2).

Each m x m block of output pixels (a *tile*) is computed from the n x n input patch that covers
it: with the filter transformed once, at compile time, into ``U = G g G^T`` (n x n per output
and input channel) and each patch into ``V = B^T d B`` (n x n per input channel and tile), the
tile is ``Y = A^T [sum_c U[k, c] * V[c, p]] A``, elementwise products in the n x n domain. The
channel sum of each of the n*n positions ``xi`` is a GEMM, ``M[xi] = U[xi] @ V[xi]`` (K x C
times C x P, P tiles), which is where the work is: n*n / (m*m) multiply-adds per output and
channel pair, 4 for F(2x2) and 2.25 for F(4x4), against a direct conv's 9.

The kernel runs in three phases per image and block of tile rows, each spread over the thread
pool in chunks fixed by the shape (the results do not depend on the threads):

1. *input transform*, by channels: the block's rows of each channel are copied into the
   thread's zero-bordered plane (so no tap is ever bounds-tested), then its patches, a tile
   row at a time with the tiles on the vector lanes (columns m apart: lanes picked out of
   m-vector-wide loads by shuffles), go through ``B^T d B`` into ``V[xi][c][p]``;
2. *n*n GEMMs*, by ``xi``: the project's conv GEMM (``emit_gemm_body``, the conv tile, ``U``
   as constant MR-row panels, ``V[xi]``'s rows read in place as B) into ``M[xi][k][p]``;
3. *output transform*, by output channels: ``A^T m A`` on a tile row of vectors, plus the
   bias, the m output columns of each tile interleaved by shuffles into whole output rows,
   stored through the ``Epilogue`` (the sum post-op and the fused activation).

Blocks of tile rows keep V and M under ``BLOCK_FLOATS``. Accuracy: the transforms add and
subtract inputs and taps (F(4x4)'s with coefficients up to 8), so outputs are sums of terms
larger than themselves, but each GEMM sums only C products: measured against float64, F(2x2)'s
error is about half a direct GEMM's and F(4x4)'s 5-8x it (tests/backends/llvm/test_winograd.py).
A non-finite value spreads within a tile (inf - inf): the table never gives these rows a
non-finite constant filter (``ConvStrategy.finite_filter``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from llvmlite import ir

from compiler.backends.llvm.kernels.common import (
    I32,
    I64,
    UNROLL_FLOATS,
    F32,
    Epilogue,
    Int,
    add,
    broadcast,
    entry_alloca,
    gep,
    hand_tiled,
    i64,
    in_range,
    load_vec,
    loop,
    mul,
    smax,
    smin,
    splat,
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



@dataclass(frozen=True)
class Variant:
    """F(m x m, 3 x 3): tiles of ``m`` x ``m`` outputs from ``n`` x ``n`` patches, n = m + 2,
    through ``bt`` (B^T, n x n), ``g`` (G, n x 3) and ``at`` (A^T, m x n)."""

    m: int
    bt: tuple[tuple[float, ...], ...]
    g: tuple[tuple[float, ...], ...]
    at: tuple[tuple[float, ...], ...]

    @property
    def n(self) -> int:
        return self.m + 2


#: F(2x2, 3x3), interpolation points 0, 1, -1, infinity: every coefficient 0, +-1 or 1/2.
F2 = Variant(
    2,
    ((1, 0, -1, 0), (0, 1, 1, 0), (0, -1, 1, 0), (0, 1, 0, -1)),
    ((1, 0, 0), (0.5, 0.5, 0.5), (0.5, -0.5, 0.5), (0, 0, 1)),
    ((1, 1, 1, 0), (0, 1, -1, -1)),
)
#: F(4x4, 3x3), points 0, 1, -1, 2, -2, infinity (Lavin & Gray's): 36 multiplies per tile and
#: channel pair for 16 outputs (2.25 an output, against F(2x2)'s 4 and a direct conv's 9), but
#: coefficients up to 8 in A^T and 5 in B^T, so about 10x F(2x2)'s rounding error.
F4 = Variant(
    4,
    (
        (4, 0, -5, 0, 1, 0),
        (0, -4, -4, 1, 1, 0),
        (0, 4, -4, -1, 1, 0),
        (0, -2, -1, 2, 1, 0),
        (0, 2, -1, -2, 1, 0),
        (0, 4, 0, -5, 0, 1),
    ),
    (
        (1 / 4, 0, 0),
        (-1 / 6, -1 / 6, -1 / 6),
        (-1 / 6, 1 / 6, -1 / 6),
        (1 / 24, 1 / 12, 1 / 6),
        (1 / 24, -1 / 12, 1 / 6),
        (0, 0, 1),
    ),
    ((1, 1, 1, 1, 1, 0), (0, 1, -1, 2, -2, 0), (0, 1, 1, 4, 4, 0), (0, 1, -1, 8, -8, 1)),
)
#: F(2x2)'s G as an array (the tests' reference).
G = np.array(F2.g)


def applies(s: ConvShape) -> bool:
    """What F(m x m, 3x3) computes: a 3x3 window, stride 1, dilation 1, one group (any pads)."""
    return (
        s.group == 1 and s.R == 3 and s.S == 3 and s.stride == (1, 1) and s.dilation == (1, 1)
    )


#: Whether the table chooses them by itself (False: only when forced; A/B switches for
#: benchmarks/bench_switch_ab.py). F(4x4) is off by default: ResNet-50 ran 0.94x F(2x2)'s
#: time with it, but its cold compile took ~0.3 s more (its filters are 36/9 of the ONNX
#: weights, 131 MB for ResNet-50's 3x3 convs against F(2x2)'s 58 MB, and bigger kernels),
#: against a budget of 0.1 s (benchmarks/README.md, issue 15 session 8).
CHOOSE = True
CHOOSE_F4 = False


def _fills_a_vector(s: ConvShape, v: Variant) -> bool:
    """The tile grid fills at least one vector of the host's lanes, and its last vector
    mostly: P tiles in ceil(P / vw) vectors use at least 3/4 of their lanes."""
    th, tw = tiles(s, v)
    vw = conv_gemm_config().vw
    p = th * tw
    return p >= vw and 4 * p >= 3 * -(-p // vw) * vw and s.C >= 8 and s.K >= 16


def prefers(s: ConvShape) -> bool:
    """F(2x2) where it beat the GEMM rows alone (benchmarks/README.md, issue 15 session 8):
    tiles that fill the host's vectors (the tiles are the GEMMs' N, on the lanes; AVX-512: a
    4x4 image's 4 tiles used a quarter of a vector and ran 1.7x slower than pixel rows, a
    7x7 image's 16 fill one and ran 0.75x; AVX2: a 5x5 image's 9 tiles in two vectors ran
    1.3x slower, a 7x7's 16 even to 0.9x), and enough channels for the GEMMs to outweigh the
    transforms (8 -> 8 channels: even; 8 -> 16 and 16 -> 16: 0.8-0.9x)."""
    return CHOOSE and _fills_a_vector(s, F2)


def prefers_f4(s: ConvShape) -> bool:
    """With ``CHOOSE_F4``: F(4x4) wherever its tile grid fills a vector (it beat F(2x2) on
    every such ResNet plane, 0.42-0.50x onnxruntime's time against 0.60-0.78x)."""
    return CHOOSE and CHOOSE_F4 and _fills_a_vector(s, F4)


def tiles(s: ConvShape, v: Variant = F2) -> tuple[int, int]:
    """Tile rows and tile columns: m x m output pixels per tile, the last ones cropped."""
    return -(-s.OH // v.m), -(-s.OW // v.m)


def _lin(
    coefs: tuple[float, ...],
    xs: list[Any],
    add_: Callable[[Any, Any], Any],
    sub_: Callable[[Any, Any], Any],
    scale_: Callable[[Any, float], Any],
) -> Any:
    """sum_j coefs[j] * xs[j], skipping zeros, +-1 as adds and subtracts, in order of j."""
    acc = None
    for c, x in zip(coefs, xs):
        if c == 0:
            continue
        if acc is None:
            acc = x if c == 1 else scale_(x, c)
        elif c == 1:
            acc = add_(acc, x)
        elif c == -1:
            acc = sub_(acc, x)
        else:
            acc = add_(acc, scale_(x, c))
    return acc


def _transform_taps(taps: np.ndarray, v: Variant, out: np.ndarray) -> None:
    """out[i * n + j] = (G g G^T)[i, j] for every filter g laid out as ``taps[r * 3 + s]``
    (float32 arrays of any one shape: the filter's taps in whatever order the caller wants its
    result in), element by element: G over each tap row, then over the rows."""

    def lin(coefs: tuple[float, ...], xs: list[np.ndarray]) -> np.ndarray:
        return _lin(coefs, xs, np.add, np.subtract, lambda x, c: x * np.float32(c))

    n = v.n
    for j, gj in enumerate(v.g):
        cols = [lin(gj, [taps[r * 3], taps[r * 3 + 1], taps[r * 3 + 2]]) for r in range(3)]
        for i, gi in enumerate(v.g):
            out[i * n + j] = lin(gi, cols)


def transform_filter(w: np.ndarray, v: Variant = F2) -> np.ndarray:
    """[K, C, 3, 3] -> U[n, n, K, C] = G g G^T, in float32 (``pack``'s arithmetic)."""
    k, c = w.shape[:2]
    taps = np.ascontiguousarray(np.asarray(w, np.float32).reshape(k, c, 9).transpose(2, 0, 1))
    out = np.empty((v.n * v.n, k, c), np.float32)
    _transform_taps(taps, v, out)
    return out.reshape(v.n, v.n, k, c)


def pack(w: np.ndarray, s: ConvShape, cfg: GemmConfig, v: Variant = F2) -> np.ndarray:
    """The n*n transformed filters U[xi] (K x C), each as the GEMM's MR-row A panels
    [ceil(K/MR)][C][MR] (``pack_a_constant``'s layout; the last panel's rows past K zero).
    The filter's taps are put in that order first (9 * K * C floats), so the transform writes
    its n*n times bigger result once, in place, in float32: ResNet-50's 13 filters in 0.03 s
    (F(2x2)) and 0.06 s (F(4x4)); the first version's float64 einsum over the six indices took
    ~1 s for one 512 x 512 filter, a BLAS GEMM's threads spun on the loaded machine, and a
    float64 transform followed by a packing copy took 0.14 / 0.29 s."""
    mr, K, C = cfg.mr, s.K, s.C
    panels = -(-K // mr)
    wp = np.zeros((panels * mr, C, 9), np.float32)
    wp[:K] = np.asarray(w, np.float32).reshape(K, C, 9)
    taps = np.ascontiguousarray(wp.reshape(panels, mr, C, 9).transpose(3, 0, 2, 1))
    out = np.empty((v.n * v.n, panels, C, mr), np.float32)
    _transform_taps(taps, v, out)
    return out.ravel()


#: The most floats of V and M (the transformed input and the GEMMs' output) one block of tile
#: rows may take; bigger images go in several blocks of tile rows (see ``Geometry``).
BLOCK_FLOATS = 1 << 21


@dataclass(frozen=True)
class Geometry:
    """The tile grid (``th`` x ``tw`` tiles) in ``blocks`` blocks of ``bt`` tile rows (the last
    may run past the grid: its extra tiles read zeros and store nothing), and the padded plane
    (``hp`` x ``wp``) the input transform reads: every patch row of every block (m * blocks *
    bt + 2 >= H + pt + pb) and, per row, the whole vectors a tile-row run loads (m * vw
    floats from each of columns m * tw0 + m * q, tw0 < tw rounded up to vw, q < ceil(n / m))."""

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


def _loads(v: Variant) -> int:
    """Vectors of m * vw floats a patch row's columns come from (n columns, m apart)."""
    return -(-v.n // v.m)


def geometry(s: ConvShape, vw: int, v: Variant = F2) -> Geometry:
    th, tw = tiles(s, v)
    per_row = v.n * v.n * (s.C + s.K) * tw  # floats of V and M per tile row
    blocks = -(-th // max(1, BLOCK_FLOATS // per_row))
    bt = -(-th // blocks)  # the blocks evened out
    twv = -(-tw // vw) * vw
    return Geometry(th, tw, bt, blocks, v.m * blocks * bt + 2, v.m * (twv + _loads(v) - 1))


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


def _interleave(b: ir.IRBuilder, ys: list[ir.Value], vw: int) -> ir.Value:
    """(y0[0], y1[0], .., y0[1], y1[1], ..): a tile row's m output columns as one run of the
    output row (the vectors concatenated pairwise, then one shuffle picks the lanes)."""
    m = len(ys)
    parts, width = list(ys), vw
    while len(parts) > 1:  # m is 2 or 4: pairs of equal width
        cat = ir.Constant(ir.VectorType(I32, 2 * width), list(range(2 * width)))
        parts = [b.shuffle_vector(x, y, cat) for x, y in zip(parts[::2], parts[1::2])]
        width *= 2
    idx = [j * vw + i for i in range(vw) for j in range(m)]
    whole = parts[0]
    undef = ir.Constant(whole.type, ir.Undefined)
    return b.shuffle_vector(whole, undef, ir.Constant(ir.VectorType(I32, m * vw), idx))


def _phase(b: ir.IRBuilder, wide: ir.Value, m: int, q: int, vw: int) -> ir.Value:
    """Lanes q, q + m, q + 2m, ... of an m * vw vector."""
    undef = ir.Constant(wide.type, ir.Undefined)
    idx = ir.Constant(ir.VectorType(I32, vw), [m * i + q for i in range(vw)])
    return b.shuffle_vector(wide, undef, idx)


def _apply(
    b: ir.IRBuilder, mat: tuple[tuple[float, ...], ...], xs: list[ir.Value], vw: int
) -> list[ir.Value]:
    """The rows of ``mat`` applied to the vectors ``xs`` (adds, subtracts, constant scales)."""
    return [
        _lin(row, xs, b.fadd, b.fsub, lambda x, c: b.fmul(x, splat(c, vw))) for row in mat
    ]


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


#: g from U, per axis, for each variant: each filter tap is a scaled sum of one or two of
#: U's rows per axis, (U index, factor). F(2x2): G's first and last rows are g0 and g2, its
#: middle rows' difference is g1. F(4x4): its first row is g0 / 4, its last g2, and its second
#: and third rows differ by g1 / 3.
_UNDO_G = {
    2: (((0, 1.0),), ((1, 1.0), (2, -1.0)), ((3, 1.0),)),
    4: (((0, 4.0),), ((2, 3.0), (1, -3.0)), ((5, 1.0),)),
}


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
    b: ir.IRBuilder,
    s: ConvShape | None,
    cfg: GemmConfig,
    u: ir.Value,
    g: ir.Value,
    v: Variant = F2,
    dims: tuple[Int, Int] | None = None,
) -> None:
    """The filter g [K][C][3][3] at ``g`` from the packed U panels at ``u`` (``pack``'s layout;
    each tap within a few float32 roundings of the model's), for the direct fallback. ``dims``:
    (K, C) as run-time values (the shared fallback), else the shape's."""
    assert dims is not None or s is not None
    K, C = dims if dims is not None else (s.K, s.C)  # type: ignore[union-attr]
    mr, n = cfg.mr, v.n
    # -(-K // mr) * mr * C floats of packed U per xi
    gw = mul(b, mul(b, C, mr), _ceil_div(b, K, mr))
    undo = _UNDO_G[v.m]
    with loop(b, 0, K, 1, "wgk") as k, loop(b, 0, C, 1, "wgc") as c:
        kp, kr = b.udiv(k, i64(mr)), b.urem(k, i64(mr))
        base = b.add(b.mul(kp, i64(mul(b, C, mr))), b.add(b.mul(c, i64(mr)), kr))
        dst = gep(b, g, b.mul(b.add(b.mul(k, i64(C)), c), i64(9)))
        for r in range(3):
            for t in range(3):
                tap: ir.Value | None = None
                for i, fi in undo[r]:
                    for j, fj in undo[t]:
                        at = i64(mul(b, gw, (i * n + j)))
                        x = b.load(gep(b, u, b.add(base, at)), typ=F32)
                        f = fi * fj
                        if abs(f) != 1:
                            x = b.fmul(x, ir.Constant(F32, abs(f)))
                        if tap is None:
                            tap = x if f > 0 else b.fneg(x)
                        else:
                            tap = b.fadd(tap, x) if f > 0 else b.fsub(tap, x)
                assert tap is not None
                b.store(tap, gep(b, dst, r * 3 + t))


def _ceil_div(b: ir.IRBuilder, x: Int, d: int) -> Int:
    if isinstance(x, int):
        return -(-x // d)
    return b.udiv(b.add(x, i64(d - 1)), i64(d))


#: The non-finite fallback (the filter recovered from U, then the direct loop nest) is one
#: function per module, epilogue and variant, taking the conv's geometry as arguments, instead
#: of a loop nest pasted into every Winograd kernel with its shape as constants (A/B switch).
#: That path runs only for an input holding an infinity or a NaN, yet LLVM optimised and
#: compiled a copy per conv shape: ~0.1 s of ResNet-50's ~1.45 s of O3 + machine code for its
#: four. The sums are the same, in the same order (bias, then channels, then the taps
#: row-major; a tap outside the input adds nothing), so the results are bit for bit the same.
SHARED_FALLBACK = True

#: The shared fallback's attributes: never inlined into the kernels, laid out as cold code.
FALLBACK_ATTRS = ("noinline", "cold", "nounwind")

#: The module attribute holding its shared fallbacks, by (epilogue, bias or not, MR, variant).
_FALLBACKS = "_glowviz_wino_fallbacks"


def _fallback(module: ir.Module, cfg: GemmConfig, ep: Epilogue, bias: bool, v: Variant) -> ir.Function:
    """``void (x, u, g, out, [bias,] N, C, H, W, K, OH, OW, pad_top, pad_left)``: recover the
    filter from the packed U at ``u`` into the scratch ``g``, then the direct 3x3, stride-1
    loop nest over it (``direct_body``'s order), for any geometry."""
    built: dict[Any, ir.Function] = module.__dict__.setdefault(_FALLBACKS, {})
    key = (ep, bias, cfg.mr, v.m)
    if key in built:
        return built[key]
    ptrs = 5 if bias else 4
    fty = ir.FunctionType(ir.VoidType(), [ir.PointerType()] * ptrs + [I64] * 9)
    fn = ir.Function(module, fty, module.get_unique_name("wino.nonfinite"))
    fn.linkage = "internal"
    for attr in FALLBACK_ATTRS:
        fn.attributes.add(attr)
    hand_tiled(fn)
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    x, u, g, out = fn.args[:4]
    bp = fn.args[4] if bias else None
    N, C, H, W, K, OH, OW, pt, pl = fn.args[ptrs:]
    _recover_filter(b, None, cfg, u, g, v, dims=(K, C))
    zero = ir.Constant(F32, 0.0)
    acc_slot = entry_alloca(b, F32)
    with loop(b, 0, N, 1, "n") as n_, loop(b, 0, K, 1, "k") as k:
        bv = b.load(gep(b, bp, k), typ=F32) if bp is not None else zero
        with loop(b, 0, OH, 1, "oh") as oh, loop(b, 0, OW, 1, "ow") as ow:
            b.store(bv, acc_slot)
            with loop(b, 0, C, 1, "c") as c:
                xbase = b.mul(b.add(b.mul(n_, C), c), b.mul(H, W))
                wbase = b.mul(b.add(b.mul(k, C), c), i64(9))
                for r in range(3):
                    ih = b.add(oh, b.sub(i64(r), pt))
                    ok_row = in_range(b, ih, H)
                    row = b.select(ok_row, ih, i64(0))
                    for t in range(3):
                        iw = b.add(ow, b.sub(i64(t), pl))
                        ok_col = in_range(b, iw, W)
                        col = b.select(ok_col, iw, i64(0))
                        xv = b.load(gep(b, x, b.add(xbase, b.add(b.mul(row, W), col))), typ=F32)
                        wv = b.load(gep(b, g, b.add(wbase, i64(r * 3 + t))), typ=F32)
                        acc = b.load(acc_slot, typ=F32)
                        summed = b.fadd(acc, b.fmul(xv, wv))
                        b.store(b.select(b.and_(ok_row, ok_col), summed, acc), acc_slot)
            o = b.add(b.mul(b.add(b.mul(n_, K), k), b.mul(OH, OW)), b.add(b.mul(oh, OW), ow))
            ep.store(b, b.load(acc_slot, typ=F32), gep(b, out, o))
    b.ret_void()
    built[key] = fn
    return fn


def winograd_body(
    b: ir.IRBuilder,
    s: ConvShape,
    cfg: GemmConfig,
    p: ConvPtrs,
    ep: Epilogue,
    v: Variant = F2,
) -> None:
    """The three phases of the module docstring, for each image and block of tile rows."""
    module = b.module
    C, H, W, K, OH, OW = s.C, s.H, s.W, s.K, s.OH, s.OW
    m, n = v.m, v.n
    nn = n * n
    vw = cfg.vw
    g = geometry(s, vw, v)
    TW, bt, hp, wp, P = g.tw, g.bt, g.hp, g.wp, g.pb
    pt = s.pad[0]
    plane = _zeroed_plane(module, s, hp, wp)
    # Written in full before they are read (every lane of V and M the GEMM or the output
    # transform reads): shared by every Winograd conv of one size.
    vbuf = shared_scratch(module, "wino.v", nn * C * P)
    mbuf = shared_scratch(module, "wino.m", nn * K * P)
    gw = -(-K // cfg.mr) * cfg.mr * C  # floats of packed U per xi

    # -- 1. input transform, by channels ------------------------------------------------------
    cgroups = work_chunks(C * (m * bt + 2) * wp * ELEMENT_WORK, C)
    cper = -(-C // cgroups)

    def in_chunk(bb: ir.IRBuilder, i: ir.Value, tid: ir.Value, vals: list[ir.Value]) -> None:
        xn, tb = vals[0], vals[1]
        pl_ = thread_scratch(bb, plane, tid)
        # The image rows the block's patches read (the plane's other rows are never read;
        # its padding rows are never written).
        lo = smax(bb, bb.sub(bb.mul(tb, i64(m)), i64(pt)), 0)
        hi = smin(bb, bb.sub(bb.mul(bb.add(tb, i64(bt)), i64(m)), i64(pt - 2)), H)
        c0 = bb.mul(i, i64(cper))
        with loop(bb, c0, smin(bb, bb.add(c0, i64(cper)), C), 1, "wc") as c:
            _copy_rows(bb, gep(bb, xn, bb.mul(c, i64(H * W))), pl_, s, wp, lo, hi, vw)
            vc = gep(bb, vbuf, bb.mul(c, i64(P)))
            with loop(bb, 0, bt, 1, "wth") as th:
                prow = gep(bb, pl_, bb.mul(bb.add(tb, th), i64(m * wp)))
                vrow = gep(bb, vc, bb.mul(th, i64(TW)))

                def run(t0: Int, valid: int, prow: ir.Value = prow, vrow: ir.Value = vrow) -> None:
                    rows = []
                    for r in range(n):
                        src = gep(bb, prow, add(bb, r * wp, mul(bb, t0, m)))
                        wide = [
                            load_vec(bb, gep(bb, src, q * m), m * vw) for q in range(_loads(v))
                        ]
                        xs = [_phase(bb, wide[j // m], m, j % m, vw) for j in range(n)]
                        rows.append(_apply(bb, v.bt, xs, vw))  # B^T over the columns
                    for j in range(n):
                        col = _apply(bb, v.bt, [rows[r][j] for r in range(n)], vw)  # the rows
                        for r in range(n):
                            dst = gep(bb, vrow, add(bb, t0, (r * n + j) * C * P))
                            store_vec(bb, col[r], dst, vw, valid)

                _runs(bb, TW, vw, run, "wtw")

    # -- 2. the n*n GEMMs, by xi --------------------------------------------------------------
    xgroups = work_chunks(nn * K * P * C, nn)
    xper = -(-nn // xgroups)

    def gemm_chunk(bb: ir.IRBuilder, i: ir.Value, tid: ir.Value, vals: list[ir.Value]) -> None:
        w = vals[0]
        x0 = bb.mul(i, i64(xper))
        with loop(bb, x0, smin(bb, bb.add(x0, i64(xper)), nn), 1, "wxi") as xi:
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
    kgroups = work_chunks(K * m * bt * OW * ELEMENT_WORK, K)
    kper = -(-K // kgroups)
    has_bias = p.bias is not None
    # Whether every tile row of every block has all its output rows.
    whole = g.blocks * bt * m == OH

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
                oh0 = bb.mul(bb.add(tb, th), i64(m))  # the tile row's first output row
                orow = gep(bb, ok, bb.mul(oh0, i64(OW)))

                def run(
                    t0: Int,
                    valid: int,
                    mrow: ir.Value = mrow,
                    orow: ir.Value = orow,
                    oh0: ir.Value = oh0,
                ) -> None:
                    mv = [
                        load_vec(bb, gep(bb, mrow, add(bb, t0, xi * K * P)), vw, valid)
                        for xi in range(nn)
                    ]
                    # A^T over the rows of each column, then over the columns of each row.
                    cols = [
                        _apply(bb, v.at, [mv[r * n + j] for r in range(n)], vw) for j in range(n)
                    ]
                    # A run from a loop is never the last (``_runs``): all its columns exist.
                    width = min(m * valid, OW - m * t0) if isinstance(t0, int) else m * vw
                    for r in range(m):
                        y = _apply(bb, v.at, [cols[j][r] for j in range(n)], vw)
                        if bias is not None:
                            y = [bb.fadd(x, bias) for x in y]
                        out = _interleave(bb, y, vw)
                        dst = gep(bb, orow, add(bb, r * OW, mul(bb, t0, m)))
                        if whole:
                            ep.store(bb, out, dst, m * vw, width)
                        else:  # output rows past the image (a cropped or a padding tile row)
                            inside = bb.icmp_signed("<", bb.add(oh0, i64(r)), i64(OH))
                            with bb.if_then(inside):
                                ep.store(bb, out, dst, m * vw, width)

                _runs(bb, TW, vw, run, "wor")

    # The transforms only ever combine values an output's window holds, so a non-finite input
    # reaches the outputs a direct sum reaches, but an infinity meets itself with both signs on
    # the way (inf - inf): NaN where a direct sum gives +-inf. An input holding an infinity or
    # a NaN runs the direct loop nest instead, on the filter recovered from U; the test is one
    # pass of exponent checks over the input (~1% of the conv's time).
    gbuf = shared_scratch(module, "wino.g", K * C * 9)
    with b.if_else(_nonfinite_in(b, p.x, s.N * C * H * W, vw)) as (nonfinite, finite):
        with nonfinite:
            if SHARED_FALLBACK:
                fb = _fallback(module, cfg, ep, p.bias is not None, v)
                ptrs = [p.x, p.w, gbuf, p.out] + ([p.bias] if p.bias is not None else [])
                geo = [s.N, C, H, W, K, OH, OW, s.pad[0], s.pad[1]]
                b.call(fb, ptrs + [i64(d) for d in geo])
            else:
                _recover_filter(b, s, cfg, p.w, gbuf, v)
                direct_body(b, s, cfg, p._replace(w=gbuf), ep)
        with finite:
            with loop(b, 0, s.N, 1, "n") as n_, loop(b, 0, g.blocks * bt, bt, "wb") as tb:
                xn = gep(b, p.x, b.mul(n_, i64(C * H * W)))
                parallel_loop(b, cgroups, [xn, tb], in_chunk, "wino_in")
                parallel_loop(b, xgroups, [p.w], gemm_chunk, "wino_gemm")
                on = gep(b, p.out, b.mul(n_, i64(K * OH * OW)))
                captures = [on, tb] + ([p.bias] if has_bias else [])
                parallel_loop(b, kgroups, captures, out_chunk, "wino_out")


__all__ = [
    "BLOCK_FLOATS",
    "CHOOSE",
    "CHOOSE_F4",
    "F2",
    "F4",
    "FALLBACK_ATTRS",
    "SHARED_FALLBACK",
    "Variant",
    "Geometry",
    "applies",
    "geometry",
    "pack",
    "prefers",
    "prefers_f4",
    "tiles",
    "transform_filter",
    "winograd_body",
]
