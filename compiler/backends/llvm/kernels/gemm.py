"""Register-blocked, cache-blocked float32 GEMM emitter (C = A @ B + epilogue).

Layout: B is read from NR-wide column panels ``[ceil(N/NR)][K][NR]`` (zero padded), either
pre-packed at compile time (``pack_b_constant``, the weight case) or packed at run time, one KC
block at a time, into a module-level scratch buffer. A is read in place (any constant strides,
or the MR-row panel layout used for conv weights). The micro-kernel keeps an MR x NR tile of C in
vector registers (8x32 on AVX-512, 8x48 in the conv kernels: ``conv_gemm_config``; 6x16 on
AVX2, 6x8 on SSE) and issues one FMA per (row, vector) per k; loops: K blocks (KC) > M blocks
(MC) > B panels > MR tiles.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, replace

import numpy as np
from llvmlite import ir

import compiler.backends.llvm.target as target
from compiler.backends.llvm.kernels.common import (
    F32,
    I32,
    Activation,
    Int,
    activate_rows,
    add,
    apply_activation,
    Epilogue,
    broadcast,
    fma,
    folded,
    gep,
    i64,
    intrinsic,
    is_light,
    load_vec,
    loop,
    loop_blocks,
    mul,
    new_kernel,
    smin,
    splat,
    store_vec,
    vec,
)
from compiler.backends.llvm.kernels.parallel import parallel_loop, scratch, scratch_ptr, work_chunks
from compiler.backends.llvm.kernels.rows import vector_loop


@dataclass(frozen=True)
class GemmConfig:
    isa: str
    vw: int  # float32 lanes per vector
    mr: int  # rows of the register tile
    nv: int  # vectors per row of the register tile
    kc: int  # K block (B micro-panel KC x NR stays in L1)
    mc: int  # M block (A block MC x KC stays in L2)

    @property
    def nr(self) -> int:
        return self.vw * self.nv


def gemm_config(isa: str | None = None) -> GemmConfig:
    isa = isa or target.default_isa()
    if isa == "avx512":
        return GemmConfig(isa, 16, 8, 2, 256, 128)
    if isa == "avx2":
        return GemmConfig(isa, 8, 6, 2, 256, 96)
    if isa == "generic":
        return GemmConfig(isa, 4, 6, 2, 256, 96)
    raise ValueError(f"unknown isa {isa!r}")


#: Vector registers of each ISA (AVX-512 has 32 zmm, AVX2 and SSE 16).
VECTOR_REGISTERS = {"avx512": 32, "avx2": 16, "generic": 16}


def conv_gemm_config(isa: str | None = None) -> GemmConfig:
    """The GEMM tile of the conv kernels: ``gemm_config``'s, widened to as many vectors per row
    as the ISA's registers hold beside the B vectors and a broadcast (AVX-512: 8 x 3 vectors,
    24 accumulators + 3 + 1 of 32 registers). The conv GEMMs' N (pixels, or output channels
    for pixel rows) is hundreds wide, so the wider panel costs little in tails; measured on
    ResNet-50's 23 distinct convs alone, 8x3 against 8x2: 2.5-4% less time in total (8x3 also
    beat 12x2, 6x4, 9x3, 7x3 and 10x2). The matmul GEMM keeps 8x2: attention's N = 64 heads
    would leave a one-vector tail panel."""
    cfg = gemm_config(isa)
    regs = VECTOR_REGISTERS[cfg.isa]
    nv = cfg.nv
    while cfg.mr * (nv + 1) + (nv + 1) + 1 <= regs - 4:
        nv += 1
    return replace(cfg, nv=nv)


#: MatMul / FullyConnected GEMMs whose N fills whole panels of the conv kernels' wider tile
#: (``conv_gemm_config``: 8 x 3 vectors with AVX-512's 32 registers; the same 8 x 2 elsewhere)
#: use it: fewer loads per FMA. Small other N keep ``gemm_config``'s tile (N = 64 attention
#: heads would leave a one-vector tail panel with three vectors a row).
MATMUL_WIDE_TILE = True


#: ... or N at least this many wide panels (the narrower tail panel is then a small part).
MATMUL_WIDE_MIN_PANELS = 4


def matmul_config(n: int, isa: str | None = None) -> GemmConfig:
    """The register tile of a matmul GEMM with ``n`` output columns (``MATMUL_WIDE_TILE``)."""
    cfg = gemm_config(isa)
    if MATMUL_WIDE_TILE:
        wide = conv_gemm_config(isa)
        if wide.nv > cfg.nv and (n % wide.nr == 0 or n >= MATMUL_WIDE_MIN_PANELS * wide.nr):
            return wide
    return cfg


def pack_b_constant(
    b: np.ndarray,
    *,
    transpose_b: bool = False,
    isa: str | None = None,
    cfg: GemmConfig | None = None,
) -> np.ndarray:
    """Pack a constant B[K, N] (or B[N, K] with ``transpose_b``) into ``[ceil(N/NR)][K][NR]``.

    The result is a contiguous float32 array; put it in the constant-weights region and pass its
    address as ``base_b`` of a kernel emitted with ``b_packed=True`` and the same ``isa`` (or
    the kernel's own ``cfg``: its NR).
    """
    cfg = cfg or gemm_config(isa)
    bm = np.asarray(b, dtype=np.float32)
    if transpose_b:
        bm = bm.T
    k, n = bm.shape
    nr = cfg.nr
    npf, tail = divmod(n, nr)
    out = np.zeros((npf + (1 if tail else 0), k, nr), dtype=np.float32)
    # Straight into the panels (a zero-padded copy of B first touched twice the memory).
    out[:npf] = bm[:, : npf * nr].reshape(k, npf, nr).transpose(1, 0, 2)
    if tail:
        out[npf, :, :tail] = bm[:, npf * nr :]
    return out


# A operand: (builder, i0 tile-start row, r row-in-tile, k) -> address of A[i0 + r, k].
AAddr = Callable[[ir.IRBuilder, Int, int, Int], ir.Value]
# B operand: (builder, panel, k) -> address of the NR floats of packed B for that panel and k.
BAddr = Callable[[ir.IRBuilder, Int, Int], ir.Value]
# B packer: (builder, pc, kc) packs rows [pc, pc + kc) of B into the panel buffer.
BPack = Callable[[ir.IRBuilder, ir.Value, ir.Value], None]


def strided_a(base: ir.Value, stride_m: Int, stride_k: Int = 1) -> AAddr:
    def addr(b: ir.IRBuilder, i0: Int, r: int, k: Int) -> ir.Value:
        row = add(b, mul(b, i0, stride_m), mul(b, r, stride_m))
        return gep(b, base, add(b, row, mul(b, k, stride_k)))

    return addr


def panel_a(base: ir.Value, K: Int, mr: int) -> AAddr:
    """A pre-packed as MR-row panels ``[ceil(M/MR)][K][MR]`` (see ``pack_a_constant``)."""

    def addr(b: ir.IRBuilder, i0: Int, r: int, k: Int) -> ir.Value:
        return gep(b, base, add(b, add(b, mul(b, i0, K), mul(b, k, mr)), r))

    return addr


def pack_a_constant(a: np.ndarray, mr: int) -> np.ndarray:
    m, k = a.shape
    full, tail = divmod(m, mr)
    out = np.zeros((full + (1 if tail else 0), k, mr), dtype=np.float32)
    out[:full] = a[: full * mr].reshape(full, mr, k).transpose(0, 2, 1)
    if tail:
        out[full, :, :tail] = a[full * mr :].T
    return out


@dataclass
class GemmOperands:
    """Everything the GEMM body needs besides the shape; see ``emit_gemm_body``."""

    a_addr: AAddr
    b_addr: BAddr
    c_base: ir.Value
    c_stride: Int
    b_pack: BPack | None = None
    bias_row: ir.Value | None = None  # float[N], added to every row
    bias_col: ir.Value | None = None  # float[M], added to every column
    #: ``bias_row`` is added to the finished sum (after the last K block) instead of starting
    #: it: a MatMul + Add fused into one kernel gives the bits of the two run apart.
    bias_after: bool = False
    #: float[M, N] laid out as C (its row stride): added to each finished sum after the bias
    #: (a residual Add after a MatMul, run in the GEMM).
    addend: ir.Value | None = None
    accumulate: bool = False
    activation: Activation = None
    #: B is read in place (not from zero-padded panels): the last panel's lanes past N must
    #: not be loaded.
    b_exact: bool = False
    #: A is constant packed weights (``panel_a``): prefetched ahead like packed B.
    a_packed: bool = False
    #: K as a run-time value (a shared kernel's shape argument) standing for the ``K`` the body
    #: was emitted with: at most one K block when that K is, more than one otherwise.
    k_run: ir.Value | None = None
    #: An i1 value: ReLU after the last K block when it is true (a shared chunk's activation,
    #: None or ReLU, taken at run time; ``activation`` is then None).
    relu_if: ir.Value | None = None
    #: Packed constant B of at most SMALL_B_BYTES: tiles of few accumulators prefetch it as
    #: near as the others (PREFETCH_B_BYTES), not PREFETCH_FEW_BYTES ahead.
    b_small: bool = False


def _cond(b: ir.IRBuilder, c: bool | ir.Value, x: ir.Value, y: ir.Value) -> ir.Value:
    if isinstance(c, bool):
        return x if c else y
    return b.select(c, x, y)


def _micro_kernel(
    b: ir.IRBuilder,
    cfg: GemmConfig,
    ops: GemmOperands,
    i0: Int,
    jp: Int,
    mr: int,
    valid: Sequence[Int],
    pc: Int,
    kend: Int,
    first: bool | ir.Value,
    last: bool | ir.Value,
) -> None:
    """C[i0:i0+mr, jp*NR : jp*NR+ncols] (+)= A[i0.., pc:kend] @ Bpanel[jp][pc:kend] + epilogue,
    ``valid[v]`` the columns of vector v (``_lanes``; the last may be a run-time count)."""
    vw = cfg.vw
    nvec = len(valid)
    col0 = mul(b, jp, cfg.nr)
    c_rows = [
        gep(b, ops.c_base, add(b, mul(b, add(b, i0, r), ops.c_stride), col0)) for r in range(mr)
    ]
    zero = splat(0.0, vw)
    if ops.accumulate and PREFETCH_C_NEXT:
        # The accumulators start from C, so the tile's first FMAs wait for its loads: a short
        # k loop (ResNet's 64-channel 1x1 convs adding into the residual) stalls on each
        # tile's C rows from L3. Fetch the next row tile's lines (same panel) one tile ahead.
        nxt = mul(b, mr, ops.c_stride)
        for r in range(mr):
            for v in range(nvec):
                prefetch(b, gep(b, c_rows[r], add(b, nxt, v * vw)))

    bias_r = (
        [load_vec(b, gep(b, ops.bias_row, add(b, col0, v * vw)), vw, valid[v]) for v in range(nvec)]
        if ops.bias_row is not None
        else None
    )
    init: list[list[ir.Value]] = []
    # A run-time first K block (several blocks, or a shared chunk's loop): C is read only
    # after it, behind a branch (a select read C, not yet written, on the first block too).
    branch = BRANCH_FIRST and isinstance(first, ir.Value) and not ops.accumulate
    for r in range(mr):
        row = []
        bias_c = None
        if ops.bias_col is not None:
            bias_c = broadcast(b, b.load(gep(b, ops.bias_col, add(b, i0, r)), typ=F32), vw)
        for v in range(nvec):
            cptr = gep(b, c_rows[r], v * vw)
            bias = zero
            if bias_r is not None and not ops.bias_after:
                bias = bias_r[v]
            if bias_c is not None:
                bias = b.fadd(bias, bias_c) if bias is not zero else bias_c
            if first is False or ops.accumulate:
                old = load_vec(b, cptr, vw, valid[v])
                val = b.fadd(old, _cond(b, first, bias, zero)) if bias is not zero else old
            else:
                val = bias
                if first is not True and not branch:
                    val = _cond(b, first, bias, load_vec(b, cptr, vw, valid[v]))
            row.append(val)
        init.append(row)
    if branch:
        assert isinstance(first, ir.Value)
        entry = b.block
        with b.if_then(b.not_(first)):
            loaded = [
                [load_vec(b, gep(b, c_rows[r], v * vw), vw, valid[v]) for v in range(nvec)]
                for r in range(mr)
            ]
            later = b.block
        for r in range(mr):
            for v in range(nvec):
                phi = b.phi(init[r][v].type, f"c{r}_{v}")
                phi.add_incoming(init[r][v], entry)
                phi.add_incoming(loaded[r][v], later)
                init[r][v] = phi

    # With few accumulators (a tail tile of 1-3 rows, a GEMV) the FMAs of one chain wait for
    # each other: run several sets of partial sums over interleaved k and add them at the end.
    sets = max(1, min(4, -(-INDEPENDENT_CHAINS // (mr * nvec))))
    # Packed constant B (the weights): prefetched; B packed at run time is in cache already.
    few = sets > 1
    ahead_bytes = PREFETCH_FEW_BYTES if few and not ops.b_small else PREFETCH_B_BYTES
    ahead = ahead_bytes // (4 * cfg.nr) if ops.b_pack is None and not ops.b_exact else 0
    ahead_a = PREFETCH_A_BYTES // (4 * mr) if ops.a_packed and PREFETCH_A_BYTES else 0
    if sets == 1:
        _, (accs,) = _k_loop(
            b, ops, i0, jp, mr, valid, vw, pc, kend, [init], prefetch_rows=ahead, prefetch_a=ahead_a
        )
    else:
        zeros = [[zero] * nvec for _ in range(mr)]
        init_sets = [init] + [zeros] * (sets - 1)
        k, parts = _k_loop(
            b,
            ops,
            i0,
            jp,
            mr,
            valid,
            vw,
            pc,
            kend,
            init_sets,
            prefetch_rows=ahead,
            prefetch_a=ahead_a,
            prefetch_every=True,
        )
        _, (rest,) = _k_loop(b, ops, i0, jp, mr, valid, vw, k, kend, [parts[0]], step=1)
        parts[0] = rest
        while len(parts) > 1:  # pairwise: ((s0 + s1) + (s2 + s3))
            parts = [
                [[b.fadd(x, y) for x, y in zip(rx, ry)] for rx, ry in zip(px, py)]
                for px, py in zip(parts[::2], parts[1::2])
            ] + ([parts[-1]] if len(parts) % 2 else [])
        accs = parts[0]

    act = ops.activation if last is not False else None
    late_bias = bias_r if ops.bias_after and last is not False else None
    addend = ops.addend if last is not False else None
    if late_bias is not None or addend is not None:
        # The row bias, then the addend (a residual Add), go on the finished sum, before any
        # activation, light or heavy.
        done = []
        for r, row in enumerate(accs):
            outs = []
            for v, out in enumerate(row):
                if late_bias is not None:
                    out = _cond(b, last, b.fadd(out, late_bias[v]), out)
                if addend is not None:
                    at = add(b, mul(b, add(b, i0, r), ops.c_stride), add(b, col0, v * vw))
                    extra = load_vec(b, gep(b, addend, at), vw, valid[v])
                    out = _cond(b, last, b.fadd(extra, out), out)
                outs.append(out)
            done.append(outs)
        accs = done
    light = is_light(act)
    if not light and SCRATCH_EPILOGUE:
        _store_heavy(b, accs, c_rows, ops, act, vw, valid, last)
        return
    relu_if = None
    if ops.relu_if is not None and last is not False:
        relu_if = ops.relu_if if last is True else b.and_(last, ops.relu_if)
    for r in range(mr):
        for v in range(nvec):
            out = accs[r][v]
            if act is not None and light:
                out = _cond(b, last, apply_activation(b, out, act), out)
            if relu_if is not None:
                out = b.select(relu_if, apply_activation(b, out, "relu"), out)
            store_vec(b, out, gep(b, c_rows[r], v * vw), vw, valid[v])
    if not light:
        # After the K block that completes the tile, on the stored tile (Epilogue.store_rows).
        _when(b, last, lambda: activate_rows(b, act, c_rows[0], ops.c_stride, mr, vw, valid))


#: Bytes of B (K block x NR panels) per block of panels in the tile loops: within a block,
#: each row tile sweeps the block's panels, instead of each panel sweeping every row tile
#: (0: the latter). With a short K (1x1 convs of 16-40 input channels on big images) the
#: output is most of the traffic, and a panel sweeping 96 row tiles wrote 96 rows 50 KB
#: apart 192 bytes at a time; a row tile over a block writes 8 rows in runs of the block.
#: 96 KB (an L2's share on any current x86 core) against 32 KB: 1x1 convs alone 0.94-0.99x
#: (ResNet's 64 -> 256 on 56x56 0.944x), EfficientNet-B0 and ResNet-50 0.995x; 256 KB the
#: same as 96.
PANEL_BLOCK_BYTES = 98304


def sub(b: ir.IRBuilder, x: Int, y: Int) -> Int:
    if isinstance(x, int) and isinstance(y, int):
        return x - y
    return b.sub(i64(x), i64(y))


def _div(b: ir.IRBuilder, x: int, y: Int) -> Int:
    if isinstance(y, int):
        return x // max(1, y)
    return b.udiv(i64(x), smax1(b, y))


def smax1(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    return b.select(b.icmp_signed("<", x, i64(1)), i64(1), x)


def _max1(b: ir.IRBuilder, x: Int) -> Int:
    return max(1, x) if isinstance(x, int) else smax1(b, x)

#: A heavy epilogue goes through ``Epilogue.store_rows`` (a scratch tile in L1, see
#: ``SCRATCH_TILE``) instead of storing the tile and activating C in place, which re-read each
#: line just stored: on an output larger than L2 its store miss was still pending. 1x1 convs
#: with SiLU alone (A/B in one process, same bits): 16 -> 96 on 112x112 1.72 -> 1.35 ms,
#: 24 -> 144 on 56x56 0.56 -> 0.49, 40 -> 240 on 28x28 0.97x, 14x14 0.99x; EfficientNet-B0
#: 0.989x.
SCRATCH_EPILOGUE = True


def _store_heavy(
    b: ir.IRBuilder,
    accs: Sequence[Sequence[ir.Value]],
    c_rows: Sequence[ir.Value],
    ops: GemmOperands,
    act: Activation,
    vw: int,
    valid: Sequence[Int],
    last: bool | ir.Value,
) -> None:
    """Store the tile ``accs`` to ``c_rows``, through the heavy ``act`` after the last K
    block (``SCRATCH_EPILOGUE``)."""

    def plain() -> None:
        for r, row in enumerate(accs):
            for v, x in enumerate(row):
                store_vec(b, x, gep(b, c_rows[r], v * vw), vw, valid[v])

    def activated() -> None:
        Epilogue(act).store_rows(b, accs, c_rows[0], ops.c_stride, vw, valid)

    if last is True:
        activated()
    elif last is False:
        plain()
    else:
        with b.if_else(last) as (then, otherwise):
            with then:
                activated()
            with otherwise:
                plain()


#: Accumulating tiles (the sum post-op) prefetch the next row tile's C lines (``_micro_kernel``).
PREFETCH_C_NEXT = True
#: A tile's first K block, when only known at run time, skips reading C behind a branch.
BRANCH_FIRST = True
#: Output rows ahead the accumulating pixel-rows transpose (``conv_gemm._transpose_out``)
#: prefetches the rows it adds to: ResNet-50's 7x7 residual 1x1s read their 400 KB residual
#: one 196-byte row piece at a time. Two-conv model 0.95-0.96 with 8-32 rows (64: no gain),
#: ResNet-50 0.990 / 0.996 (21 runs each).
PREFETCH_TRANSPOSE_ROWS = 32


#: Independent FMA chains a register tile wants (FMA latency x FMA pipes: 4 x 2 on current
#: x86 cores); tiles with fewer accumulators split k into partial sums to get there.
INDEPENDENT_CHAINS = 8


#: How far ahead the k loop prefetches packed constant B (weights): a layer's weights come
#: from L3 or memory and the hardware streams restart at every 4 KB page of a panel block;
#: one page ahead made MNASNet and EfficientNet-B0 ~5% faster (1 KB ahead: ~1%).
PREFETCH_B_BYTES = 4096
PREFETCH_A_BYTES = 4096
#: The same for tiles of few accumulators (GEMVs: a classifier's M = 1), whose k loop waits on
#: memory, not on FMAs: every row of the step prefetched (not only the first), further ahead.
#: VGG-19's 25088x4096 classifier alone 1.31 -> 0.95 of onnxruntime; 4096x4096 1.31 -> 0.90
#: (32 KB ahead: about the same, 64 KB: worse).
PREFETCH_FEW_BYTES = 16384
#: Packed B up to this size is not prefetched that far: a small model's weights stay in L2
#: from one run to the next, and 16 KB ahead made LeNet's 400x120 GEMV (192 KB of weights)
#: 1.45x slower than 4 KB (3.5 vs 2.4 us alone; its 120x84 one 0.87 vs 0.85 us).
SMALL_B_BYTES = 512 * 1024


def _prefetch_b(
    b: ir.IRBuilder, ops: GemmOperands, jp: Int, k: Int, floats: int, rows: int
) -> None:
    """Prefetch (into L1) the ``floats`` of packed B ``rows`` rows after row ``k``: one
    prefetch per 64-byte line (past the end of B it is a no-op, prefetches never fault)."""
    ahead = ops.b_addr(b, jp, add(b, k, rows))
    for off in range(0, floats, 16):
        prefetch(b, gep(b, ahead, off))


def prefetch(b: ir.IRBuilder, ptr: ir.Value) -> None:
    """Prefetch the line at ``ptr`` into L1 for reading."""
    fnty = ir.FunctionType(ir.VoidType(), [ir.PointerType(), I32, I32, I32])
    fn = intrinsic(b.module, "llvm.prefetch.p0", fnty)
    b.call(fn, [ptr, ir.Constant(I32, 0), ir.Constant(I32, 3), ir.Constant(I32, 1)])


def _lanes(ncols: int, vw: int) -> list[int]:
    """The columns of each vector of a tile ``ncols`` wide."""
    return [min(vw, ncols - v * vw) for v in range(math.ceil(ncols / vw))]


def _k_loop(
    b: ir.IRBuilder,
    ops: GemmOperands,
    i0: Int,
    jp: Int,
    mr: int,
    valid: Sequence[Int],
    vw: int,
    k0: Int,
    kend: Int,
    sets: list[list[list[ir.Value]]],
    step: int | None = None,
    prefetch_rows: int = 0,
    prefetch_a: int = 0,
    prefetch_every: bool = False,
) -> tuple[ir.Value, list[list[list[ir.Value]]]]:
    """``for (k = k0; k + step <= kend; k += step)`` set u of accumulators += A[:, k + u] x
    B[k + u] (``step`` defaults to the number of sets), the accumulators as phis so they live
    in registers; B prefetched ``prefetch_rows`` ahead. Returns the k the loop stopped at and
    the final sets."""
    step = step or len(sets)
    nvec = len(valid)
    pre, header, body, end = loop_blocks(b, "uk")
    k = b.phi(i64(0).type, "k")
    k.add_incoming(i64(k0), pre)
    phis = []
    for init in sets:
        rows = []
        for r in range(mr):
            row = []
            for v in range(nvec):
                p = b.phi(init[r][v].type, f"acc{r}_{v}")
                p.add_incoming(init[r][v], pre)
                row.append(p)
            rows.append(row)
        phis.append(rows)
    limit = kend - (step - 1) if isinstance(kend, int) else b.sub(kend, i64(step - 1))
    b.cbranch(b.icmp_signed("<", k, i64(limit)), body, end)
    b.position_at_end(body)
    for u, accs in enumerate(phis):
        kk = add(b, k, u)
        bptr = ops.b_addr(b, jp, kk)
        if prefetch_rows and (u == 0 or prefetch_every):
            _prefetch_b(b, ops, jp, kk, vw * nvec, prefetch_rows)
        if u == 0 and prefetch_a:
            prefetch(b, ops.a_addr(b, i0, 0, add(b, kk, prefetch_a)))
        if ops.b_exact:
            bvecs = [load_vec(b, gep(b, bptr, v * vw), vw, valid[v]) for v in range(nvec)]
        else:
            bvecs = [b.load(gep(b, bptr, v * vw), typ=vec(vw), align=4) for v in range(nvec)]
        for r in range(mr):
            a = broadcast(b, b.load(ops.a_addr(b, i0, r, kk), typ=F32, align=4), vw)
            for v in range(nvec):
                accs[r][v].add_incoming(fma(b, a, bvecs[v], accs[r][v]), body)
    k.add_incoming(b.add(k, i64(step)), body)
    b.branch(header)
    b.position_at_end(end)
    return k, phis


@dataclass(frozen=True)
class Split:
    """A GEMM spread over ``chunks`` parallel chunks (kernels/parallel.py), each a block of MR
    tiles x NR panels of C. A chunk runs in a task function of its own, where
    ``make(values)`` rebuilds the operands from ``captures`` (the enclosing function's values
    the operands use, in order)."""

    chunks: int
    captures: Sequence[ir.Value]
    make: Callable[[list[ir.Value]], GemmOperands]
    #: Which dimension the chunks cut first: "n" (B's panels: each thread streams its own part
    #: of B, for constant B = weights) or "m" (A's tiles, for A = conv weights).
    prefer: str = "n"
    #: What ``make`` depends on besides the captures (the operands' kind, bias, epilogue):
    #: with it, chunks of one structure are built once (``parallel_loop(task_key=...)``);
    #: None: each GEMM builds its own (``merge_identical_functions`` may still merge them).
    key: Hashable | None = None


def _within(b: ir.IRBuilder, x: Int, lo: Int, hi: Int) -> bool | ir.Value:
    """``lo <= x < hi``: whether a chunk's range [lo, hi) holds tile or panel ``x``."""
    below = _lt(b, x, hi)
    at_or_above = _lt(b, lo, add(b, x, 1))  # lo <= x
    if isinstance(below, bool) or isinstance(at_or_above, bool):
        if below is False or at_or_above is False:
            return False
        return at_or_above if below is True else below
    return b.and_(at_or_above, below)


def _lt(b: ir.IRBuilder, x: Int, y: Int) -> bool | ir.Value:
    if isinstance(x, int) and isinstance(y, int):
        return x < y
    return b.icmp_signed("<", i64(x), i64(y))


def _min(b: ir.IRBuilder, x: Int, y: int) -> Int:
    return min(x, y) if isinstance(x, int) else smin(b, x, y)


def _when(b: ir.IRBuilder, cond: bool | ir.Value, emit: Callable[[], None]) -> None:
    if cond is True:
        emit()
    elif cond is not False:
        with b.if_then(cond):
            emit()


#: Parallel GEMM chunks read their shape (M and N in tiles and panels, the tail panel's width,
#: K, the chunk grid) from the task's context instead of having it pasted in as constants, so
#: the chunks of every GEMM of one structure (the operands' kind, the epilogue, one K block or
#: more, the tail panel's vector count, the tail tile's rows) are one function, which codegen
#: compiles once (``merge_identical_functions``): ResNet-50's 23 conv GEMM chunk functions,
#: 40-60 ms of LLVM each, become 12. The k loop does not depend on the shape.
SHARED_CHUNKS = True
#: Chunks of one structure are built once (``Split.key``), not built and then merged.
KEYED_TASKS = True
#: Shared chunks loop over K blocks for any K (one function for one block or several) and
#: take "ReLU or none" as a run-time flag: ResNet-50's 11 chunk functions become 7.
SHARED_FLAGS = True


@dataclass(frozen=True)
class _Shape:
    """The GEMM's shape as its code sees it: ``int`` where it is a constant of the code, a
    run-time value in a shared chunk; the tails' structure is always static."""

    npf: Int  # full NR panels
    ntail: Int  # columns of the tail panel (0: none)
    mtf: Int  # full MR tiles
    nvt: int  # vectors of the tail panel (0: no tail panel)
    mtail: int  # rows of the tail tile (0: none)
    m_blocks: bool  # the M-block (MC) loop is emitted

    def tail_lanes(self, b: ir.IRBuilder, vw: int) -> list[Int]:
        if isinstance(self.ntail, int):
            return _lanes(self.ntail, vw)
        return [vw] * (self.nvt - 1) + [add(b, self.ntail, -(self.nvt - 1) * vw)]


def emit_gemm_body(
    b: ir.IRBuilder,
    cfg: GemmConfig,
    M: int,
    N: int,
    K: int,
    ops: GemmOperands,
    split: Split | None = None,
) -> None:
    """Emit the blocked loop nest for C[M,N] = A[M,K] @ B[K,N] at the builder's position;
    with ``split``, its (tile, panel) blocks spread over parallel chunks. Each C element sees
    the same K order either way, so the results do not depend on the split or the threads."""
    nr, mr = cfg.nr, cfg.mr
    npf, ntail = divmod(N, nr)
    mtf, mtail = divmod(M, mr)
    npan, ntile = npf + (1 if ntail else 0), mtf + (1 if mtail else 0)
    kc = cfg.kc if K > cfg.kc else K
    mc = max(mr, cfg.mc - cfg.mc % mr)
    nvt = len(_lanes(ntail, cfg.vw))
    static = _Shape(npf, ntail, mtf, nvt, mtail, mtf * mr > mc)

    def region(
        bb, o, sh: _Shape, pc, kend, first, last, t_lo: Int, t_hi: Int, p_lo: Int, p_hi: Int
    ) -> None:
        """C tiles [t_lo, t_hi) x panels [p_lo, p_hi) for the K block [pc, kend)."""

        def micro(i0: Int, jp: Int, rows: int, valid: Sequence[Int]) -> None:
            _micro_kernel(bb, cfg, o, i0, jp, rows, valid, pc, kend, first, last)

        full = [cfg.vw] * cfg.nv
        fp_hi = _min(bb, p_hi, sh.npf)
        # Only the chunk whose panels hold the tail panel runs it: a chunk past the last panel
        # (more chunks than panels) has an empty range, and running the tail there as well
        # raced with its owner (two chunks adding the second K block into one C tile).
        tail_panel = _within(bb, sh.npf, p_lo, p_hi) if sh.nvt else False
        if mtf:
            r_lo = mul(bb, t_lo, mr)
            r_hi = mul(bb, _min(bb, t_hi, sh.mtf), mr)

            def mtile_loops(ic: Int, ie: Int) -> None:
                if npf and PANEL_BLOCK_BYTES:
                    # Blocks of panels whose B fits PANEL_BLOCK_BYTES; in a block, each row
                    # tile sweeps the block's panels (one panel a block when K is large:
                    # over 512 with the 48-wide panels of AVX-512).
                    panel_bytes = mul(bb, sub(bb, kend, pc), 4 * nr)
                    nb = _max1(bb, _div(bb, PANEL_BLOCK_BYTES, panel_bytes))
                    with loop(bb, p_lo, fp_hi, nb, "jb") as jb:
                        jb_hi = smin(bb, bb.add(jb, i64(nb)), fp_hi)
                        with loop(bb, ic, ie, mr, "ir") as i0:
                            with loop(bb, jb, jb_hi, 1, "jp") as jp:
                                micro(i0, jp, mr, full)
                elif npf:
                    with loop(bb, p_lo, fp_hi, 1, "jp") as jp:
                        with loop(bb, ic, ie, mr, "ir") as i0:
                            micro(i0, jp, mr, full)

                def tail() -> None:
                    lanes = sh.tail_lanes(bb, cfg.vw)
                    with loop(bb, ic, ie, mr, "irt") as i0:
                        micro(i0, sh.npf, mr, lanes)

                _when(bb, tail_panel, tail)

            if sh.m_blocks:
                with loop(bb, r_lo, r_hi, mc, "ic") as ic:
                    mtile_loops(ic, smin(bb, bb.add(ic, i64(mc)), r_hi))
            else:
                mtile_loops(r_lo, r_hi)
        if mtail:
            i_tail = mul(bb, sh.mtf, mr)

            def tail_tile() -> None:
                if npf:
                    with loop(bb, p_lo, fp_hi, 1, "jpt") as jp:
                        micro(i_tail, jp, mtail, full)
                _when(
                    bb, tail_panel, lambda: micro(i_tail, sh.npf, mtail, sh.tail_lanes(bb, cfg.vw))
                )

            _when(bb, _within(bb, sh.mtf, t_lo, t_hi), tail_tile)

    def k_blocks(
        bb,
        o,
        body: Callable[[Int, Int, bool | ir.Value, bool | ir.Value], None],
        one_block: bool = kc == K,
    ) -> None:
        """``body(pc, kend, first, last)`` for every K block, packing B first if it must (a
        loop of blocks unless ``one_block``: a shared chunk loops, for any K)."""
        kk = o.k_run if o.k_run is not None else K
        if one_block:
            if o.b_pack is not None:
                o.b_pack(bb, i64(0), i64(kk))
            body(0, kk, True, True)
            return
        with loop(bb, 0, kk, cfg.kc, "pc") as pc:  # (one_block is false whenever K > KC)
            kend = smin(bb, bb.add(pc, i64(cfg.kc)), kk)
            if o.b_pack is not None:
                o.b_pack(bb, pc, bb.sub(kend, pc))
            body(pc, kend, bb.icmp_signed("==", pc, i64(0)), bb.icmp_signed("==", kend, i64(kk)))

    if split is None or split.chunks <= 1:
        k_blocks(
            b, ops, lambda pc, ke, f, la: region(b, ops, static, pc, ke, f, la, 0, ntile, 0, npan)
        )
        return

    # Chunks: groups of the preferred dimension first (each thread streams its own part of the
    # weights, and every chunk its whole part of the other operand), then of the other.
    if split.prefer == "m":
        tg = min(ntile, split.chunks)
        pg = max(1, min(npan, split.chunks // tg))
    else:
        pg = min(npan, split.chunks)
        tg = max(1, min(ntile, split.chunks // pg))
    ps, ts = -(-npan // pg), -(-ntile // tg)
    ncap = len(split.captures)

    def chunk(bb: ir.IRBuilder, i: ir.Value, vals: list[ir.Value], blocks) -> None:
        t = bb.udiv(i, i64(pg))
        p = bb.urem(i, i64(pg))
        t_lo, p_lo = bb.mul(t, i64(ts)), bb.mul(p, i64(ps))
        t_hi = smin(bb, bb.add(t_lo, i64(ts)), ntile)
        p_hi = smin(bb, bb.add(p_lo, i64(ps)), npan)
        blocks(bb, split.make(vals[:ncap]), vals[ncap:], t_lo, t_hi, p_lo, p_hi)

    if ops.b_pack is None and SHARED_CHUNKS:
        # Every chunk runs all K blocks over its own tiles: one parallel region, the shape and
        # the chunk grid passed in (see SHARED_CHUNKS).
        shape = [npf, ntail, mtf, K, pg, ps, ts, ntile, npan]
        # No activation or ReLU: a run-time flag (the chunks of a conv and of its ReLU-less
        # twin are one function); K: any number of blocks (one K or several, one function).
        relu_flag = SHARED_FLAGS and ops.activation in (None, "relu")
        flags = [ir.Constant(ir.IntType(1), ops.activation == "relu")] if relu_flag else []

        def shared(bb: ir.IRBuilder, i: ir.Value, _tid: ir.Value, v: list[ir.Value]) -> None:
            s_npf, s_ntail, s_mtf, s_k, s_pg, s_ps, s_ts, s_ntile, s_npan = v[ncap : ncap + 9]
            sh = _Shape(s_npf, s_ntail, s_mtf, nvt, mtail, True)
            t, p = bb.udiv(i, s_pg), bb.urem(i, s_pg)
            t_lo, p_lo = bb.mul(t, s_ts), bb.mul(p, s_ps)
            t_hi = smin(bb, bb.add(t_lo, s_ts), s_ntile)
            p_hi = smin(bb, bb.add(p_lo, s_ps), s_npan)
            o = split.make(v[:ncap])
            if o.k_run is None:
                o = replace(o, k_run=s_k)
            if relu_flag:
                o = replace(o, activation=None, relu_if=v[ncap + 9])
            k_blocks(
                bb,
                o,
                lambda pc, ke, f, la: region(bb, o, sh, pc, ke, f, la, t_lo, t_hi, p_lo, p_hi),
                one_block=not SHARED_FLAGS and kc == K,
            )

        captures = [*split.captures, *(i64(x) for x in shape), *flags]
        task_key = None
        if split.key is not None and KEYED_TASKS:
            # Everything the chunk's code depends on besides its captures' types.
            switches = (BRANCH_FIRST, PREFETCH_C_NEXT, INDEPENDENT_CHAINS, SHARED_FLAGS) + (
                PREFETCH_B_BYTES,
                PREFETCH_A_BYTES,
                PREFETCH_FEW_BYTES,
            )
            shape_key = (nvt, mtail, npf > 0, mtf > 0, relu_flag, SHARED_FLAGS or kc == K)
            task_key = ("gemm", split.key, cfg, shape_key, switches)
        parallel_loop(
            b, pg * tg, captures, shared, "gemm", pass_constants=True, task_key=task_key
        )
        return

    if ops.b_pack is None:
        # Every chunk runs all K blocks over its own tiles: one parallel region.
        def whole(bb, o, _extra, t_lo, t_hi, p_lo, p_hi):
            k_blocks(
                bb,
                o,
                lambda pc, ke, f, la: region(bb, o, static, pc, ke, f, la, t_lo, t_hi, p_lo, p_hi),
            )

        parallel_loop(
            b, pg * tg, split.captures, lambda bb, i, tid, v: chunk(bb, i, v, whole), "gemm"
        )
        return

    # B is packed into one shared buffer per K block: pack, then the chunks, block by block.
    def per_block(pc: Int, kend: Int, first, last) -> None:
        extra = [i64(pc), i64(kend), _i1(first), _i1(last)]

        def one(bb, o, ex, t_lo, t_hi, p_lo, p_hi):
            region(bb, o, static, ex[0], ex[1], ex[2], ex[3], t_lo, t_hi, p_lo, p_hi)

        parallel_loop(
            b,
            pg * tg,
            [*split.captures, *extra],
            lambda bb, i, tid, v: chunk(bb, i, v, one),
            "gemm",
        )

    k_blocks(b, ops, per_block)


def _i1(v: bool | ir.Value) -> ir.Value:
    return ir.Constant(ir.IntType(1), int(v)) if isinstance(v, bool) else v


def runtime_packed_b(
    module: ir.Module,
    name: str,
    cfg: GemmConfig,
    N: int,
    K: int,
    fill: Callable[[ir.IRBuilder, ir.Value, ir.Value, ir.Value], None],
) -> tuple[BAddr, BPack]:
    """A scratch panel buffer ``[ceil(N/NR)][KC][NR]`` and its address function.

    ``fill(b, buf, pc, kc)`` must write rows [pc, pc+kc) of B into the buffer; lanes past N are
    never written, so they stay zero.
    """
    kc = min(cfg.kc, K)
    npan = math.ceil(N / cfg.nr)
    buf = scratch(module, f"{name}.bpack", npan * kc * cfg.nr)

    def addr(b: ir.IRBuilder, jp: Int, k: Int) -> ir.Value:
        # Rows are local to the current K block: k is global, so subtract pc via modular index.
        local = k if kc == K else b.urem(i64(k), i64(kc))
        return gep(b, scratch_ptr(b, buf), add(b, mul(b, jp, kc * cfg.nr), mul(b, local, cfg.nr)))

    def pack(b: ir.IRBuilder, pc: ir.Value, kcv: ir.Value) -> None:
        fill(b, scratch_ptr(b, buf), pc, kcv)

    return addr, pack


def strided_b_fill(
    cfg: GemmConfig, N: int, K: int, base: ir.Value, b_stride: int, transpose: bool
) -> Callable[[ir.IRBuilder, ir.Value, ir.Value, ir.Value], None]:
    """A ``runtime_packed_b`` filler copying B[K, N] rows ``b_stride`` apart (or, ``transpose``,
    B given as [N, K]) into the NR-wide panels."""
    kc = min(cfg.kc, K)
    nr, vw = cfg.nr, cfg.vw
    npf, ntail = divmod(N, nr)

    def fill(b: ir.IRBuilder, buf: ir.Value, pc: ir.Value, kcv: ir.Value) -> None:
        with loop(b, 0, kcv, 1, "pk") as kk:
            kg = b.add(pc, kk)
            if not transpose:
                src_row = gep(b, base, mul(b, kg, b_stride))
                if npf:
                    with loop(b, 0, npf, 1, "pj") as jp:
                        dst = gep(b, buf, b.add(mul(b, jp, kc * nr), mul(b, kk, nr)))
                        src = gep(b, src_row, mul(b, jp, nr))
                        for v in range(cfg.nv):
                            store_vec(
                                b, load_vec(b, gep(b, src, v * vw), vw), gep(b, dst, v * vw), vw
                            )
                for j in range(ntail):
                    dst = gep(b, buf, add(b, npf * kc * nr + j, mul(b, kk, nr)))
                    b.store(b.load(gep(b, src_row, npf * nr + j), typ=F32), dst)
            else:
                with loop(b, 0, N, 1, "pn") as n:
                    src = gep(b, base, b.add(mul(b, n, b_stride), kg))
                    jp = b.udiv(n, i64(nr))
                    lane = b.urem(n, i64(nr))
                    dst = gep(b, buf, b.add(b.add(mul(b, jp, kc * nr), mul(b, kk, nr)), lane))
                    b.store(b.load(src, typ=F32), dst)

    return fill


#: GEMVs (M = 1) of small packed constant B (``SMALL_B_BYTES``) run ``gemv_body``: the
#: blocked loop nest read A once per panel and K block and split each 2-vector panel's k
#: loop into 4 partial sums to get 8 FMA chains, 3 times the instructions per FMA of
#: reading 4 panels together (LeNet's 400x120 FC, B in L2: see ``gemv_body``).
SMALL_GEMV = True
#: Panels a GEMV reads together: 4 x 2 vectors = 8 independent FMA chains on AVX-512.
GEMV_PANELS = 4


def gemv_body(b: ir.IRBuilder, cfg: GemmConfig, N: int, K: int, ops: GemmOperands) -> None:
    """C[0, :N] (+)= A[0, :K] @ Bpacked + epilogue, GEMV_PANELS packed panels at a time: per k
    one broadcast of A[k] and one FMA per panel vector, reading B straight from the panels
    (zero-padded: full vectors), no K blocks, no partial sums. Each C element adds its k terms
    in order onto the bias (or C, accumulating), like the blocked body's single-set tiles; a
    late bias (``bias_after``) and then the addend go on the finished sum."""
    vw, nr, nv = cfg.vw, cfg.nr, cfg.nv
    npf, ntail = divmod(N, nr)
    zero = splat(0.0, vw)
    act = ops.activation
    light = is_light(act)

    def group(jp0: Int, panels: list[list[int]]) -> None:
        """Panels jp0 .. jp0+len(panels)-1; ``panels[p]``: the valid lanes of each vector."""
        cols = [[add(b, mul(b, add(b, jp0, p), nr), v * vw) for v in range(len(vs))]
                for p, vs in enumerate(panels)]
        init = []
        for p, vs in enumerate(panels):
            for v, valid in enumerate(vs):
                bias = zero
                if ops.bias_row is not None and not ops.bias_after:
                    bias = load_vec(b, gep(b, ops.bias_row, cols[p][v]), vw, valid)
                if ops.accumulate:
                    old = load_vec(b, gep(b, ops.c_base, cols[p][v]), vw, valid)
                    bias = b.fadd(old, bias) if bias is not zero else old
                init.append(bias)

        def step(k: ir.Value, _n: int, acc: list[ir.Value]) -> list[ir.Value]:
            a = broadcast(b, b.load(ops.a_addr(b, 0, 0, k), typ=F32), vw)
            out, i = [], 0
            for p, vs in enumerate(panels):
                row = ops.b_addr(b, add(b, jp0, p), k)
                for v in range(len(vs)):
                    w = b.load(gep(b, row, v * vw), typ=vec(vw), align=4)
                    out.append(fma(b, a, w, acc[i]))
                    i += 1
            return out

        accs = vector_loop(b, K, 1, init, step, "gv")
        i = 0
        for p, vs in enumerate(panels):
            for v, valid in enumerate(vs):
                out = accs[i]
                if ops.bias_row is not None and ops.bias_after:  # on the finished sum
                    out = b.fadd(out, load_vec(b, gep(b, ops.bias_row, cols[p][v]), vw, valid))
                if ops.addend is not None:  # then the residual, as the blocked body adds it
                    extra = load_vec(b, gep(b, ops.addend, cols[p][v]), vw, valid)
                    out = b.fadd(extra, out)
                out = apply_activation(b, out, act) if light else out
                store_vec(b, out, gep(b, ops.c_base, cols[p][v]), vw, valid)
                i += 1
            if not light:
                activate_rows(b, act, gep(b, ops.c_base, cols[p][0]), 0, 1, vw, vs)

    full = [vw] * nv
    groups, rest = divmod(npf, GEMV_PANELS)
    if groups:
        with loop(b, 0, groups * GEMV_PANELS, GEMV_PANELS, "gvp") as jp0:
            group(jp0, [full] * GEMV_PANELS)
    last = [full] * rest + ([_lanes(ntail, vw)] if ntail else [])
    if last:
        group(groups * GEMV_PANELS, last)


def emit_matmul(
    module: ir.Module,
    name: str,
    M: int,
    N: int,
    K: int,
    *,
    a_stride: int,
    b_stride: int,
    c_stride: int,
    transpose_b: bool = False,
    bias: str | None = None,
    accumulate: bool = False,
    activation: Activation = None,
    b_packed: bool = False,
    isa: str | None = None,
    parallel: bool = True,
    bias_after: bool = False,
    cfg: GemmConfig | None = None,
    addend: bool = False,
) -> ir.Function:
    """Emit ``void name(ptr a, ptr b, ptr c [, ptr bias])``: C[M,N] (+)= A[M,K] @ B[K,N].

    Row-major float32, strides in elements. ``transpose_b``: B is given as [N, K] (FC weights).
    ``bias='row'``: a float[N] added to every row; ``'col'``: a float[M] added to every column.
    ``bias_after``: the row bias is added to the finished sum, not used as its start.
    ``addend``: one more argument, a float[M, N] with C's row stride added to the finished sums
    (after the bias); it must not overlap C.
    ``accumulate``: C += A @ B instead of C = A @ B. ``activation``: None, 'relu', ('clip', lo, hi).
    ``b_packed``: B was packed with ``pack_b_constant(B, transpose_b=..., isa=isa)``; strides and
    ``transpose_b`` then only describe the source. Runtime-packed kernels are not reentrant.
    ``parallel``: big GEMMs spread their tiles over the module's thread pool (False for a kernel
    called from inside a parallel chunk).
    """
    if min(M, N, K) <= 0:
        raise ValueError(f"matmul {name}: empty shape {M}x{N}x{K}")
    cfg = cfg or gemm_config(isa)
    fn, b = new_kernel(module, name, 3 + bool(bias) + addend)
    if not b_packed:
        b_addr_rt, b_pack = runtime_packed_b(
            module, name, cfg, N, K, strided_b_fill(cfg, N, K, fn.args[1], b_stride, transpose_b)
        )

    def operands(args: list[ir.Value]) -> GemmOperands:
        """The operands over the kernel's arguments and the strides and K (or a parallel
        chunk's copies of them: values in a shared chunk, ``SHARED_CHUNKS``)."""
        pa, pb, pcv = args[:3]
        a_st, c_st, kv = (folded(v) for v in args[-3:])
        if b_packed:

            def b_addr(bb: ir.IRBuilder, jp: Int, k: Int) -> ir.Value:
                panel = mul(bb, kv, cfg.nr)
                return gep(bb, pb, add(bb, mul(bb, jp, panel), mul(bb, k, cfg.nr)))

        return GemmOperands(
            a_addr=strided_a(pa, a_st),
            b_addr=b_addr if b_packed else b_addr_rt,
            c_base=pcv,
            c_stride=c_st,
            b_pack=None if b_packed else b_pack,
            bias_row=args[3] if bias == "row" else None,
            bias_col=args[3] if bias == "col" else None,
            bias_after=bias_after and bias == "row",
            addend=args[3 + bool(bias)] if addend else None,
            accumulate=accumulate,
            activation=activation,
            b_small=b_small,
        )

    b_small = b_packed and 4 * K * -(-N // cfg.nr) * cfg.nr <= SMALL_B_BYTES
    args = [*fn.args, i64(a_stride), i64(c_stride), i64(K)]
    ops = operands(args)
    cfg_tiles = -(-M // cfg.mr) * -(-N // cfg.nr)
    key = (
        "matmul", b_packed, transpose_b, bias, bias_after, addend, accumulate, activation, b_small
    )
    split = Split(work_chunks(M * N * K, cfg_tiles), args, operands, key=key) if parallel else None
    if bias not in (None, "row", "col"):
        raise ValueError(f"matmul {name}: bias must be None, 'row' or 'col', not {bias!r}")
    # With an addend too: the MatMul's own (stepping) entry runs the GEMV, and the fused
    # GEMM must sum in the same order to give the bits of the instructions stepped apart.
    gemv = SMALL_GEMV and M == 1 and b_small and bias != "col"  # gemv_body: row bias only
    if gemv and (split is None or split.chunks <= 1):
        gemv_body(b, cfg, N, K, ops)
    else:
        emit_gemm_body(b, cfg, M, N, K, ops, split)
    b.ret_void()
    return fn
