"""int8 x int8 -> int32 matrix products with the host's dot-product instructions, requantized in
the epilogue (the int8 side of kernels/gemm.py).

The register tile holds MR x NV vectors of int32 accumulators. Each step of the reduction loop
loads NV vectors of one operand (the "vector" operand, packed as [step][NR][G]) and broadcasts
G consecutive reduction elements (one 32-bit word) of the other for each of the MR rows, then
does one dot-product instruction per (row, vector):

- `vnni512`: AVX-512 VNNI `vpdpbusd` on 512-bit vectors (16 lanes, G = 4 bytes);
- `vnni256`: AVX-VNNI (or AVX-512 VNNI with VL) `vpdpbusd` on 256-bit vectors;
- `avx2`: `vpmaddwd` on 16-bit pairs (8 lanes, G = 2 words, operands widened when packed);
- `generic`: the same pairs in plain IR (sign-extend, multiply, add).

`vpdpbusd` multiplies unsigned by signed bytes, so activations are stored offset by 128
(x ^ 0x80 as unsigned) and weights stay signed; the 128 (plus the activation's zero point) times
each output channel's weight sum is folded into the int32 bias at compile time. The widened
paths use the same convention, so every ISA computes the same integers: the reference's.

The epilogue adds the bias, converts to float32, multiplies by the per-channel multiplier,
clamps, rounds half to even and stores int8 (kernels/quant.py), as the reference does.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from llvmlite import ir

import compiler.backends.llvm.target as target
from compiler.backends.llvm.kernels.common import (
    F32,
    I32,
    I64,
    PTR,
    VOID,
    gep,
    i64,
    intrinsic,
    loop,
    loop_blocks,
    masked_load_call,
    masked_store_call,
)
from compiler.backends.llvm.kernels.quant import I8, round_to_q

I16 = ir.IntType(16)


@dataclass(frozen=True)
class QGemmConfig:
    """One int8 kernel flavour (module docstring): lanes, group, operand width, tile."""

    isa: str
    vw: int  # int32 lanes per vector
    group: int  # reduction elements per dot-product step
    wide: bool  # operands are packed as int16 (the vpmaddwd paths)
    mr: int  # rows of the register tile
    nv: int  # vectors per row of the register tile

    @property
    def nr(self) -> int:
        return self.vw * self.nv

    @property
    def pty(self) -> ir.IntType:
        return I16 if self.wide else I8

    @property
    def np_pty(self) -> np.dtype:
        return np.dtype(np.int16 if self.wide else np.int8)

    @property
    def esize(self) -> int:
        return 2 if self.wide else 1

    def gvec(self) -> ir.VectorType:
        """The type of one loaded operand vector: vw lanes x group elements."""
        return ir.VectorType(self.pty, self.vw * self.group)


def qgemm_config(
    isa: str | None = None, *, mr: int | None = None, nv: int | None = None
) -> QGemmConfig:
    isa = isa or target.int8_isa()
    base = {
        "vnni512": QGemmConfig("vnni512", 16, 4, False, 8, 3),
        "vnni256": QGemmConfig("vnni256", 8, 4, False, 4, 3),
        "avx2": QGemmConfig("avx2", 8, 2, True, 4, 3),
        "generic": QGemmConfig("generic", 4, 2, True, 4, 2),
    }
    try:
        cfg = base[isa]
    except KeyError:
        raise ValueError(f"unknown int8 isa {isa!r}") from None
    if mr is not None or nv is not None:
        cfg = QGemmConfig(cfg.isa, cfg.vw, cfg.group, cfg.wide, mr or cfg.mr, nv or cfg.nv)
    return cfg


# -- compile-time packing ------------------------------------------------------------------------------


def unsigned_pad(zero_point: int, cfg: QGemmConfig) -> int:
    """The stored form of an activation's zero point (what padding holds): x + 128."""
    return (zero_point + 128) & 0xFF if not cfg.wide else zero_point + 128


def pack_vector_operand(w: np.ndarray, cfg: QGemmConfig) -> np.ndarray:
    """Signed weights W[K, N] -> panels [ceil(N/NR)][ceil(K/G)][NR][G] (zero padded)."""
    k, n = w.shape
    kg, nb = math.ceil(k / cfg.group), math.ceil(n / cfg.nr)
    padded = np.zeros((kg * cfg.group, nb * cfg.nr), cfg.np_pty)
    padded[:k, :n] = w
    out = padded.reshape(kg, cfg.group, nb, cfg.nr).transpose(2, 0, 3, 1)
    return np.ascontiguousarray(out)


def pack_broadcast_operand(w: np.ndarray, cfg: QGemmConfig, steps: int) -> np.ndarray:
    """Signed weights W[M, steps * G] (reduction already in step order) -> [ceil(M/MR)][steps]
    [MR][G] (zero padded), the rows a conv tile broadcasts."""
    m = w.shape[0]
    mb = math.ceil(m / cfg.mr)
    padded = np.zeros((mb * cfg.mr, steps * cfg.group), cfg.np_pty)
    padded[:m, : w.shape[1]] = w
    out = padded.reshape(mb, cfg.mr, steps, cfg.group).transpose(0, 2, 1, 3)
    return np.ascontiguousarray(out)


def compensated_bias(bias: np.ndarray, weight_sums: np.ndarray, zero_point: int) -> np.ndarray:
    """bias - (128 + z) * sum(w): the activations are stored as x + 128 (module docstring)."""
    out = bias.astype(np.int64) - (128 + int(zero_point)) * weight_sums.astype(np.int64)
    return out.astype(np.int32)  # wraps like the int32 accumulators


# -- IR pieces -----------------------------------------------------------------------------------------------


def dot(b: ir.IRBuilder, cfg: QGemmConfig, acc: ir.Value, u: ir.Value, s: ir.Value) -> ir.Value:
    """acc + the dot products of `u` (unsigned operand) and `s` (signed), G elements per lane."""
    vty = acc.type
    if cfg.isa in ("vnni512", "vnni256"):
        bits = 512 if cfg.isa == "vnni512" else 256
        name = f"llvm.x86.avx512.vpdpbusd.{bits}"
        fn = intrinsic(b.module, name, ir.FunctionType(vty, [vty, u.type, s.type]))
        return b.call(fn, [acc, u, s])
    if cfg.isa == "avx2":
        fn = intrinsic(b.module, "llvm.x86.avx2.pmadd.wd", ir.FunctionType(vty, [u.type, u.type]))
        return b.add(acc, b.call(fn, [u, s]))
    n = cfg.vw * cfg.group
    wide = ir.VectorType(I32, n)
    p = b.mul(b.sext(u, wide), b.sext(s, wide))
    undef = ir.Constant(wide, ir.Undefined)
    idx = ir.VectorType(I32, cfg.vw)
    even = b.shuffle_vector(p, undef, ir.Constant(idx, list(range(0, n, 2))))
    odd = b.shuffle_vector(p, undef, ir.Constant(idx, list(range(1, n, 2))))
    return b.add(acc, b.add(even, odd))


def splat_group(b: ir.IRBuilder, cfg: QGemmConfig, word: ir.Value) -> ir.Value:
    """One 32-bit group broadcast to every lane, as an operand vector."""
    vty = ir.VectorType(I32, cfg.vw)
    v = b.insert_element(ir.Constant(vty, ir.Undefined), word, ir.Constant(I32, 0))
    v = b.shuffle_vector(v, ir.Constant(vty, ir.Undefined), ir.Constant(vty, [0] * cfg.vw))
    return b.bitcast(v, cfg.gvec())


Addr = Callable[[ir.IRBuilder, ir.Value, int], ir.Value]


def micro_kernel(
    b: ir.IRBuilder,
    cfg: QGemmConfig,
    steps: int,
    bcast_addr: Addr,
    vec_addr: Addr,
    nrows: int,
    nvec: int,
    vector_is_unsigned: bool,
    prefetch_bcast: int = 0,
    init: list[ir.Value] | None = None,
) -> list[list[ir.Value]]:
    """The reduction loop of one register tile; returns the accumulators [row][vector].

    `bcast_addr(b, t, row)` / `vec_addr(b, t, v)`: addresses of step t's broadcast word and
    vectors. `vector_is_unsigned`: the vectors are the activations (convolutions), else the
    broadcast words are (matrix products). `prefetch_bcast`: bytes ahead of each step's
    broadcast words to prefetch (packed constant weights read in one stream). `init`: each
    row's starting accumulator (a vector; zero when None).
    """
    vty = ir.VectorType(I32, cfg.vw)
    zero = ir.Constant(vty, [0] * cfg.vw)
    pre, header, body, end = loop_blocks(b, "qk")
    t = b.phi(I64, "t")
    t.add_incoming(i64(0), pre)
    accs = []
    for m in range(nrows):
        row = []
        for v in range(nvec):
            p = b.phi(vty, f"acc{m}_{v}")
            p.add_incoming(init[m] if init is not None else zero, pre)
            row.append(p)
        accs.append(row)
    b.cbranch(b.icmp_signed("<", t, i64(steps)), body, end)
    b.position_at_end(body)
    if prefetch_bcast:
        fnty = ir.FunctionType(VOID, [PTR, I32, I32, I32])
        fn = intrinsic(b.module, "llvm.prefetch.p0", fnty)
        # Not inbounds: the last steps prefetch past the weights (prefetches never fault).
        ahead = b.gep(bcast_addr(b, t, 0), [i64(prefetch_bcast)], source_etype=I8)
        b.call(fn, [ahead, ir.Constant(I32, 0), ir.Constant(I32, 3), ir.Constant(I32, 1)])
    vecs = [b.load(vec_addr(b, t, v), typ=cfg.gvec(), align=1) for v in range(nvec)]
    for m in range(nrows):
        word = splat_group(b, cfg, b.load(bcast_addr(b, t, m), typ=I32, align=1))
        for v in range(nvec):
            u, s = (vecs[v], word) if vector_is_unsigned else (word, vecs[v])
            accs[m][v].add_incoming(dot(b, cfg, accs[m][v], u, s), body)
    t.add_incoming(b.add(t, i64(1)), body)
    b.branch(header)
    b.position_at_end(end)
    return accs


def masked_store_i8(b: ir.IRBuilder, v: ir.Value, ptr: ir.Value, valid: int) -> None:
    """Store the first `valid` lanes of an int8 vector."""
    n = v.type.count
    if valid >= n:
        b.store(v, ptr, align=1)
        return
    if valid == 1:
        # A plain byte store: LLVM 22 merged the one-lane masked stores of a tile's rows
        # into 4-byte stores (writing 3 bytes past each row; a 7x7 conv's last pixel).
        b.store(b.extract_element(v, ir.Constant(I32, 0)), ptr, align=1)
        return
    masked_store_call(b, v, ptr, valid, 1)


def scaled_vec(b: ir.IRBuilder, acc: ir.Value, bias: ir.Value, mult: ir.Value) -> ir.Value:
    """float32(acc + bias) * mult: the requantization before its rounding."""
    return b.fmul(b.sitofp(b.add(acc, bias), ir.VectorType(F32, acc.type.count)), mult)


def requant_vec(
    b: ir.IRBuilder, acc: ir.Value, bias: ir.Value, mult: ir.Value, q: tuple[int, int, int]
) -> ir.Value:
    """(acc + bias) -> int8 vector with float32 multipliers `mult` (kernels/quant.py)."""
    return round_to_q(b, scaled_vec(b, acc, bias, mult), *q)


def plus_sum(b: ir.IRBuilder, y: ir.Value, r: ir.Value, sum_q: tuple[int, float]) -> ir.Value:
    """y + float32(r - z_r) * m_r: the sum post-op's term (reference_quant.py), `r` the int8
    value accumulated into, `sum_q` its (offset, multiplier); no fused multiply-add."""
    z_r, m_r = sum_q
    n = _count(y)
    i32, f32 = (ir.VectorType(I32, n), ir.VectorType(F32, n)) if n else (I32, F32)
    zc = ir.Constant(i32, [ir.Constant(I32, z_r)] * n) if n else ir.Constant(I32, z_r)
    mc = ir.Constant(f32, [ir.Constant(F32, m_r)] * n) if n else ir.Constant(F32, m_r)
    return b.fadd(y, b.fmul(b.sitofp(b.sub(b.sext(r, i32), zc), f32), mc))


def _count(v: ir.Value) -> int:
    return v.type.count if isinstance(v.type, ir.VectorType) else 0


def masked_load(b: ir.IRBuilder, ptr: ir.Value, ty: ir.VectorType, valid: int) -> ir.Value:
    """The first `valid` lanes of a vector at `ptr` (the others zero), reading no further."""
    n = ty.count
    if valid >= n:
        return b.load(ptr, typ=ty, align=1)
    return masked_load_call(b, ptr, ty, valid, ir.Constant(ty, None), 1)


def masked_store_f32(b: ir.IRBuilder, v: ir.Value, ptr: ir.Value, valid: int) -> None:
    """Store the first `valid` lanes of a float32 vector."""
    n = v.type.count
    if valid >= n:
        b.store(v, ptr, align=4)
        return
    masked_store_call(b, v, ptr, valid, 4)


def splat(b: ir.IRBuilder, x: ir.Value, n: int) -> ir.Value:
    vty = ir.VectorType(x.type, n)
    v = b.insert_element(ir.Constant(vty, ir.Undefined), x, ir.Constant(I32, 0))
    return b.shuffle_vector(
        v, ir.Constant(vty, ir.Undefined), ir.Constant(ir.VectorType(I32, n), [0] * n)
    )


# -- fully connected: C[M, N] = A[M, K] @ W[K, N] ------------------------------------------------------------


@dataclass(frozen=True)
class QFCPlan:
    """A quantized fully-connected layer's compile-time data for the kernel."""

    cfg: QGemmConfig
    M: int
    N: int
    K: int
    weights: np.ndarray  # pack_vector_operand
    bias: np.ndarray  # int32[NB * NR], compensated
    mult: np.ndarray  # float32[NB * NR]
    zero_point: int  # of A
    out: tuple[int, int, int]  # offset, qmin, qmax

    @property
    def steps(self) -> int:
        return math.ceil(self.K / self.cfg.group)


def plan_qfc(
    w: np.ndarray,
    bias: np.ndarray,
    mult: np.ndarray,
    zero_point: int,
    M: int,
    out: tuple[int, int, int],
    cfg: QGemmConfig | None = None,
) -> QFCPlan:
    cfg = cfg or qgemm_config()
    K, N = w.shape
    nb = math.ceil(N / cfg.nr)
    b = np.zeros(nb * cfg.nr, np.int32)
    b[:N] = compensated_bias(bias, w.astype(np.int64).sum(axis=0), zero_point)
    m = np.zeros(nb * cfg.nr, np.float32)
    m[:N] = mult
    return QFCPlan(cfg, M, N, K, pack_vector_operand(w, cfg), b, m, zero_point, out)


def build_qfc(b: ir.IRBuilder, fn: ir.Function, p: QFCPlan, scratch_a: ir.Value) -> None:
    """Body of `void f(ptr x, ptr packed_w, ptr out, ptr bias, ptr mult)`."""
    cfg = p.cfg
    px, pw, po, pbias, pmult = fn.args
    steps, G, vw, nr = p.steps, cfg.group, cfg.vw, cfg.nr
    mb_full, m_tail = divmod(p.M, cfg.mr)
    _pack_rows(b, cfg, px, scratch_a, p.M, p.K, steps)
    row_bytes = steps * 4

    def tile(m0: ir.Value, nrows: int, n_blk: ir.Value, nvec: int, last_valid: int) -> None:
        wbase = gep(b, pw, b.mul(n_blk, i64(steps * nr * G * cfg.esize)), I8)

        def bcast_addr(bb: ir.IRBuilder, t: ir.Value, m: int) -> ir.Value:
            row = bb.add(m0, i64(m))
            return gep(bb, scratch_a, bb.add(bb.mul(row, i64(row_bytes)), bb.mul(t, i64(4))), I8)

        def vec_addr(bb: ir.IRBuilder, t: ir.Value, v: int) -> ir.Value:
            off = bb.add(bb.mul(t, i64(nr * G * cfg.esize)), i64(v * vw * G * cfg.esize))
            return gep(bb, wbase, off, I8)

        accs = micro_kernel(b, cfg, steps, bcast_addr, vec_addr, nrows, nvec, False)
        col0 = b.mul(n_blk, i64(nr))
        for v in range(nvec):
            col = b.add(col0, i64(v * vw))
            bias_v = b.load(gep(b, pbias, col, I32), typ=ir.VectorType(I32, vw), align=4)
            mult_v = b.load(gep(b, pmult, col, F32), typ=ir.VectorType(F32, vw), align=4)
            for m in range(nrows):
                q = requant_vec(b, accs[m][v], bias_v, mult_v, p.out)
                dst = gep(b, po, b.add(b.mul(b.add(m0, i64(m)), i64(p.N)), col), I8)
                masked_store_i8(b, q, dst, vw if v < nvec - 1 else last_valid)

    def rows(n_blk: ir.Value, nvec: int, last_valid: int) -> None:
        if mb_full:
            with loop(b, 0, mb_full * cfg.mr, cfg.mr, "mb") as m0:
                tile(m0, cfg.mr, n_blk, nvec, last_valid)
        if m_tail:
            tile(i64(mb_full * cfg.mr), m_tail, n_blk, nvec, last_valid)

    nb_full, n_tail = divmod(p.N, nr)
    if nb_full:
        with loop(b, 0, nb_full, 1, "nb") as n_blk:
            rows(n_blk, cfg.nv, vw)
    if n_tail:
        nvec = math.ceil(n_tail / vw)
        rows(i64(nb_full), nvec, n_tail - (nvec - 1) * vw)


def _pack_rows(
    b: ir.IRBuilder, cfg: QGemmConfig, src: ir.Value, dst: ir.Value, rows: int, k: int, steps: int
) -> None:
    """A[rows, k] int8 -> [rows][steps][G] stored unsigned (x + 128), reduction padded."""
    kp = steps * cfg.group
    with loop(b, 0, rows, 1, "pr") as r:
        srow = gep(b, src, b.mul(r, i64(k)), I8)
        drow = gep(b, dst, b.mul(r, i64(kp * cfg.esize)), I8)
        with loop(b, 0, k, 1, "pk") as j:
            x = b.load(gep(b, srow, j, I8), typ=I8)
            b.store(to_unsigned(b, cfg, x), gep(b, drow, j, cfg.pty))
        for j in range(k, kp):
            b.store(ir.Constant(cfg.pty, 128 if cfg.wide else -128), gep(b, drow, j, cfg.pty))


def to_unsigned(b: ir.IRBuilder, cfg: QGemmConfig, x: ir.Value) -> ir.Value:
    """int8 (vector) x -> its stored form x + 128 (a byte x ^ 0x80, or a widened int16)."""
    n = x.type.count if isinstance(x.type, ir.VectorType) else 0
    if cfg.wide:
        ty = ir.VectorType(I16, n) if n else I16
        c = ir.Constant(ty, [128] * n) if n else ir.Constant(I16, 128)
        return b.add(b.sext(x, ty), c)
    c = ir.Constant(x.type, [-128] * n) if n else ir.Constant(I8, -128)
    return b.xor(x, c)


def qfc_scratch_bytes(p: QFCPlan) -> int:
    return p.M * p.steps * 4


def scratch_bytes(module: ir.Module, name: str, nbytes: int) -> ir.GlobalVariable:
    """A zero-initialised, 64-byte aligned byte buffer (the kernels are not reentrant)."""
    from compiler.memory.regions import ALIGNMENT

    ty = ir.ArrayType(I8, max(1, nbytes))
    g = ir.GlobalVariable(module, ty, module.get_unique_name(name))
    g.initializer = ir.Constant(ty, None)
    g.align = ALIGNMENT
    g.linkage = "internal"
    g.type = PTR  # opaque pointer, so any access needs no cast (as kernels/common.scratch)
    return g


__all__ = [
    "QGemmConfig",
    "build_qfc",
    "compensated_bias",
    "dot",
    "masked_load",
    "masked_store_f32",
    "micro_kernel",
    "pack_broadcast_operand",
    "pack_vector_operand",
    "plan_qfc",
    "plus_sum",
    "qgemm_config",
    "requant_vec",
    "scaled_vec",
    "scratch_bytes",
    "to_unsigned",
    "unsigned_pad",
]
