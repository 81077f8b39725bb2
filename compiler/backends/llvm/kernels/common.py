"""Small llvmlite helpers shared by the kernel emitters: types, loops, vector intrinsics."""

from __future__ import annotations

import math
import struct
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cache
from typing import TypeAlias

from llvmlite import ir

F32 = ir.FloatType()
I1 = ir.IntType(1)
I32 = ir.IntType(32)
I64 = ir.IntType(64)
PTR = ir.PointerType()
VOID = ir.VoidType()

Int: TypeAlias = int | ir.Value  # an index known at compile time, or computed at run time


def vec(n: int) -> ir.VectorType:
    return ir.VectorType(F32, n)


def i64(v: Int) -> ir.Value:
    return v if isinstance(v, ir.Value) else ir.Constant(I64, int(v))


def f32(v: float) -> ir.Constant:
    return ir.Constant(F32, float(v))


def splat(v: float, n: int) -> ir.Constant:
    return _splat(struct.pack("<d", float(v)), n)


@cache
def _splat(bits: bytes, n: int) -> ir.Constant:
    """One shared constant per (value, lanes): keyed by the value's bits, so -0.0 and 0.0
    (and NaN payloads) stay apart. llvmlite formats every lane of every new vector constant
    (hex floats): fresh ones per use were a tenth of ResNet-50's IR generation."""
    return ir.Constant(vec(n), [struct.unpack("<d", bits)[0]] * n)


def int_array(ety: ir.IntType, values: Sequence[int]) -> ir.Constant:
    """An integer array constant, formatted once: llvmlite builds one Constant object per
    element of a list initializer (a padded-shift conv's row table of C*R*S entries: 0.2 s
    of ResNet-50's IR generation)."""
    text = ", ".join(f"{ety} {int(v)}" for v in values)
    return ir.FormattedConstant(ir.ArrayType(ety, len(values)), f"[{text}]")


def intrinsic(module: ir.Module, name: str, fnty: ir.FunctionType) -> ir.Function:
    fn = module.globals.get(name)
    if fn is None:
        fn = ir.Function(module, fnty, name)
    return fn


def new_kernel(
    module: ir.Module,
    name: str,
    nargs: int,
    noalias: Sequence[bool] | None = None,
    scalars: int = 0,
) -> tuple[ir.Function, ir.IRBuilder]:
    """The kernel shell every kernel is built in: ``void name(ptr noalias, ..., i64, ...)``
    (``nargs`` base pointers already offset, then ``scalars`` i64 shape arguments; ``noalias[i]``
    False drops the attribute from pointer i), its entry block.
    """
    if name in module.globals:
        raise ValueError(f"kernel {name!r} already defined in the module")
    fn = ir.Function(module, ir.FunctionType(VOID, [PTR] * nargs + [I64] * scalars), name)
    for i, a in enumerate(fn.args[:nargs]):
        if noalias is None or noalias[i]:
            a.add_attribute("noalias")
    fn.attributes.add("nounwind")
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    return fn, b


#: The attribute that marks a hand-tiled kernel (see ``hand_tiled``).
HAND_TILED = "optsize"


def hand_tiled(fn: ir.Function) -> None:
    """Mark ``fn`` as tiled and vectorised by hand (register tiles, explicit vectors): O3's loop
    unroller and vectoriser have nothing to add to such code, yet runtime-unrolling its loops
    (packing, tails, tile loops) took ~40% of the LLVM time of a ResNet-50 and doubled its
    object code. ``optsize`` turns that unrolling off for this function only; the element-wise
    kernels, written as scalar loops, still get widened and unrolled. Measured equal at run
    time on ResNet-50, Inception, DenseNet, the mobile nets and GPT-2; the matmul GEMM is not
    marked (its run-time packing of B gains from the unroller: Whisper's encoder ran 6% slower
    with it marked)."""
    fn.attributes.add(HAND_TILED)


def entry_alloca(b: ir.IRBuilder, ty: ir.Type) -> ir.Value:
    """An alloca in the function's entry block (promotable to a register; never grows the stack)."""
    entry = b.function.entry_basic_block
    with b.goto_block(entry):
        if entry.instructions:
            b.position_before(entry.instructions[0])
        return b.alloca(ty)


def folded(v: Int) -> Int:
    """An integer constant as the ``int`` it is (so ``add``/``mul`` fold it), else ``v``: for
    values that are run-time in a shared GEMM chunk and constants everywhere else."""
    if isinstance(v, ir.Constant) and isinstance(v.type, ir.IntType):
        return int(v.constant)
    return v


def add(b: ir.IRBuilder, x: Int, y: Int) -> Int:
    if isinstance(x, int) and isinstance(y, int):
        return x + y
    if isinstance(y, int) and y == 0:
        return x
    if isinstance(x, int) and x == 0:
        return y
    return b.add(i64(x), i64(y))


def mul(b: ir.IRBuilder, x: Int, c: Int) -> Int:
    if not isinstance(c, int):  # a run-time factor (a shape argument of a shared kernel)
        return c if isinstance(x, int) and x == 1 else (0 if x == 0 else b.mul(i64(x), c))
    if isinstance(x, int):
        return x * c
    if c == 1:
        return x
    if c == 0:
        return 0
    return b.mul(x, i64(c))


def gep(b: ir.IRBuilder, base: ir.Value, idx: Int, ety: ir.Type = F32) -> ir.Value:
    if isinstance(idx, int) and idx == 0:
        return base
    return b.gep(base, [i64(idx)], inbounds=True, source_etype=ety)


def smin(b: ir.IRBuilder, x: ir.Value, y: Int) -> ir.Value:
    y = i64(y)
    return b.select(b.icmp_signed("<", x, y), x, y)


def smax(b: ir.IRBuilder, x: ir.Value, y: Int) -> ir.Value:
    y = i64(y)
    return b.select(b.icmp_signed(">", x, y), x, y)


def in_range(b: ir.IRBuilder, x: ir.Value, hi: Int) -> ir.Value:
    """``0 <= x < hi`` (signed), e.g. whether a padded coordinate falls inside the input."""
    return b.and_(b.icmp_signed(">=", x, i64(0)), b.icmp_signed("<", x, i64(hi)))


def clamp(b: ir.IRBuilder, x: ir.Value, lo: Int, hi: Int) -> ir.Value:
    """``min(max(x, lo), hi)`` (signed)."""
    return smin(b, smax(b, x, lo), hi)


def loop_blocks(b: ir.IRBuilder, name: str) -> tuple[ir.Block, ir.Block, ir.Block, ir.Block]:
    """The blocks of a loop, ``name.hdr``, ``name.body`` and ``name.end``, after a branch from
    the current block to the header; returns (the block before the loop, header, body, end)
    with the builder in the header, where the caller puts its phis and its exit test."""
    pre = b.block
    header = b.append_basic_block(f"{name}.hdr")
    body = b.append_basic_block(f"{name}.body")
    end = b.append_basic_block(f"{name}.end")
    b.branch(header)
    b.position_at_end(header)
    return pre, header, body, end


@contextmanager
def loop(
    b: ir.IRBuilder, start: Int, stop: Int, step: Int = 1, name: str = "i"
) -> Iterator[ir.Value]:
    """``for (iv = start; iv < stop; iv += step)``; the body is emitted inside the ``with``."""
    pre, header, body, end = loop_blocks(b, name)
    iv = b.phi(I64, name)
    iv.add_incoming(i64(start), pre)
    b.cbranch(b.icmp_signed("<", iv, i64(stop)), body, end)
    b.position_at_end(body)
    yield iv
    nxt = b.add(iv, i64(step), name=f"{name}.next", flags=("nsw",))
    iv.add_incoming(nxt, b.block)
    b.branch(header)
    b.position_at_end(end)


#: The longest row (in floats) ``vector_runs`` still unrolls: 448-pixel rows and every narrower
#: one, whatever the vector width, keep the code they always had.
UNROLL_FLOATS = 512


def vector_runs(
    b: ir.IRBuilder, n: int, step: int, body: Callable[[Int, int], None], name: str = "vr"
) -> None:
    """``body(j0, valid)`` for ``j0`` in ``range(0, n, step)``, ``valid = min(step, n - j0)``:
    unrolled up to ``UNROLL_FLOATS`` (every conv row of the usual models: the code is what it
    always was), else a loop over the full runs and one tail. Unrolled, a 100,000-pixel row
    was 6,250 vector copies per kernel and O3 ran for minutes."""
    if n <= UNROLL_FLOATS:
        for j0 in range(0, n, step):
            body(j0, min(step, n - j0))
        return
    full = n // step * step
    with loop(b, 0, full, step, name) as j0:
        body(j0, step)
    if full < n:
        body(full, n - full)


def broadcast(b: ir.IRBuilder, x: ir.Value, n: int) -> ir.Value:
    undef, zeros = _broadcast_constants(n)
    v = b.insert_element(undef, x, ir.Constant(I32, 0))
    return b.shuffle_vector(v, undef, zeros)


@cache
def _broadcast_constants(n: int) -> tuple[ir.Constant, ir.Constant]:
    return ir.Constant(vec(n), ir.Undefined), ir.Constant(ir.VectorType(I32, n), [0] * n)


def fma(b: ir.IRBuilder, x: ir.Value, y: ir.Value, z: ir.Value) -> ir.Value:
    # fmuladd, not fma: one FMA instruction where the CPU has it, a multiply and an add where
    # it has not (llvm.fma would become a call of libm's fmaf per lane, e.g. on x86-64-v2).
    ty = x.type
    suffix = f"v{ty.count}f32" if isinstance(ty, ir.VectorType) else "f32"
    name = f"llvm.fmuladd.{suffix}"
    return b.call(intrinsic(b.module, name, ir.FunctionType(ty, [ty, ty, ty])), [x, y, z])


@cache
def _mask(n: int, valid: int) -> ir.Constant:
    return ir.Constant(ir.VectorType(I1, n), [1 if i < valid else 0 for i in range(n)])


@cache
def _lane_indices(n: int) -> tuple[ir.Constant, ir.Constant]:
    """(0, 1, ..., n-1) and undef, as i64 vectors: one shared constant each (llvmlite formats
    a constant's every lane once per instance)."""
    lanes = ir.VectorType(I64, n)
    return ir.Constant(lanes, list(range(n))), ir.Constant(lanes, ir.Undefined)


def lane_mask(b: ir.IRBuilder, n: int, valid: Int) -> ir.Value:
    """The first ``valid`` of ``n`` lanes: a constant, or for a run-time count (a shared GEMM
    chunk's tail panel) a compare of the lane numbers with it (LLVM hoists it out of loops;
    AVX-512 keeps it in a mask register)."""
    if isinstance(valid, int):
        return _mask(n, valid)
    indices, undef = _lane_indices(n)
    count = b.insert_element(undef, valid, ir.Constant(I32, 0))
    count = b.shuffle_vector(count, undef, _broadcast_constants(n)[1])
    return b.icmp_signed("<", indices, count)


def _lanes(ty: ir.VectorType) -> str:
    """The intrinsics' name of a vector type: ``v8f32``, ``v16i8``..."""
    e = ty.element
    return f"v{ty.count}i{e.width}" if isinstance(e, ir.IntType) else f"v{ty.count}f32"


def masked_load_call(
    b: ir.IRBuilder, ptr: ir.Value, ty: ir.VectorType, valid: Int, fill: ir.Value, align: int
) -> ir.Value:
    """``llvm.masked.load``: the first ``valid`` lanes of a ``ty`` vector at ``ptr``, the
    others ``fill`` (a vector) and never read."""
    fnty = ir.FunctionType(ty, [PTR, I32, ir.VectorType(I1, ty.count), ty])
    fn = intrinsic(b.module, f"llvm.masked.load.{_lanes(ty)}.p0", fnty)
    return b.call(fn, [ptr, ir.Constant(I32, align), lane_mask(b, ty.count, valid), fill])


def masked_store_call(b: ir.IRBuilder, v: ir.Value, ptr: ir.Value, valid: Int, align: int) -> None:
    """``llvm.masked.store``: the first ``valid`` lanes of vector ``v`` to ``ptr``."""
    n = v.type.count
    fnty = ir.FunctionType(VOID, [v.type, PTR, I32, ir.VectorType(I1, n)])
    fn = intrinsic(b.module, f"llvm.masked.store.{_lanes(v.type)}.p0", fnty)
    b.call(fn, [v, ptr, ir.Constant(I32, align), lane_mask(b, n, valid)])


def load_vec(
    b: ir.IRBuilder, ptr: ir.Value, n: int, valid: Int | None = None, align: int = 4
) -> ir.Value:
    """Vector load of ``n`` floats; only the first ``valid`` lanes are read (others are 0).
    ``valid`` may be a run-time count (0 < valid <= n)."""
    if isinstance(valid, ir.Value):
        return masked_load_call(b, ptr, vec(n), valid, splat(0.0, n), 4)
    if valid is None or valid >= n:
        return b.load(ptr, typ=vec(n), align=align)
    if valid == 1:
        return b.insert_element(splat(0.0, n), b.load(ptr, typ=F32, align=4), ir.Constant(I32, 0))
    return masked_load_call(b, ptr, vec(n), valid, splat(0.0, n), 4)


def store_vec(
    b: ir.IRBuilder, v: ir.Value, ptr: ir.Value, n: int, valid: Int | None = None, align: int = 4
) -> None:
    if isinstance(valid, ir.Value):
        masked_store_call(b, v, ptr, valid, 4)
        return
    if valid is None or valid >= n:
        b.store(v, ptr, align=align)
        return
    if valid == 1:
        b.store(b.extract_element(v, ir.Constant(I32, 0)), ptr, align=4)
        return
    masked_store_call(b, v, ptr, valid, 4)


@dataclass(frozen=True)
class LaneEpilogue:
    """A lane-wise function the kernels apply to their results before storing them, where
    they apply a fused activation: the hook the code generator uses to run a chain of
    element-wise instructions that follows a conv or GEMM in its epilogue (one pass over the
    result instead of two or three). ``key`` names it for kernel deduplication; ``build(b, v)``
    emits it on a float or a float vector."""

    key: tuple
    build: Callable[[ir.IRBuilder, ir.Value], ir.Value] = field(compare=False, hash=False)

    def __call__(self, b: ir.IRBuilder, v: ir.Value) -> ir.Value:
        return self.build(b, v)


Activation = None | str | tuple | LaneEpilogue


@dataclass(frozen=True)
class Epilogue:
    """What a kernel does to each result on its way to memory: the fused activation, applied
    to the sum with what the destination holds when it accumulates (the sum post-op)."""

    activation: Activation = None
    accumulate: bool = False

    def store(
        self, b: ir.IRBuilder, v: ir.Value, ptr: ir.Value, n: int = 0, valid: Int | None = None
    ) -> None:
        """Store ``v`` (``n`` lanes, 0 for a scalar) at ``ptr`` through the epilogue."""
        if self.accumulate:
            old = load_vec(b, ptr, n, valid) if n else b.load(ptr, typ=F32)
            v = b.fadd(old, v)
        v = apply_activation(b, v, self.activation)
        if n:
            store_vec(b, v, ptr, n, valid)
        else:
            b.store(v, ptr)

    def store_rows(
        self,
        b: ir.IRBuilder,
        vals: Sequence[Sequence[ir.Value]],
        base: ir.Value,
        stride: Int,
        n: int,
        valid: Sequence[Int],
    ) -> None:
        """Store a register tile: ``vals[r][v]`` (``n`` lanes, ``valid[v]`` of them real) at
        ``base + r * stride + v * n``, through the epilogue.

        A light activation runs on the registers. A heavy one (an element-wise chain, sigmoid,
        tanh...) runs afterwards, row by row: applied to every register of a big tile at once
        it keeps the whole tile and the polynomials' temporaries live together, and the tile
        spills (an 8x32 GEMM tile with a fused SiLU ran slower than the conv and a separate
        SiLU loop). The tile goes to a stack tile in L1 and each row is read there, activated
        and stored once (``SCRATCH_TILE``; else stored, then activated in place). Small tiles
        keep it in registers."""
        light = is_light(self.activation) or sum(map(len, vals)) <= IN_REGISTERS
        if not light and SCRATCH_TILE:
            self._store_rows_via_scratch(b, vals, base, stride, n, valid)
            return
        for r, row in enumerate(vals):
            for v, x in enumerate(row):
                ptr = gep(b, base, add(b, mul(b, stride, r), v * n))
                if light:
                    self.store(b, x, ptr, n, valid[v])
                else:
                    Epilogue(None, self.accumulate).store(b, x, ptr, n, valid[v])
        if not light:
            activate_rows(b, self.activation, base, stride, len(vals), n, valid)

    def _store_rows_via_scratch(
        self,
        b: ir.IRBuilder,
        vals: Sequence[Sequence[ir.Value]],
        base: ir.Value,
        stride: Int,
        n: int,
        valid: Sequence[Int],
    ) -> None:
        """``store_rows`` with a heavy activation: the tile to a stack tile (L1), then a loop
        over its rows reads it there, activates and stores each row once (``SCRATCH_TILE``)."""
        rows, nvec = len(vals), len(valid)
        tile = entry_alloca(b, ir.ArrayType(F32, rows * nvec * n))
        tile.align = 64
        tile.type = PTR  # opaque, as kernels' scratch globals: vector accesses need no casts
        for r, row in enumerate(vals):
            for v, x in enumerate(row):
                b.store(x, gep(b, tile, (r * nvec + v) * n), align=64)
        with loop(b, 0, rows, 1, "act") as r:
            src = gep(b, tile, b.mul(r, i64(nvec * n)))
            dst = gep(b, base, mul(b, r, stride))
            for v in range(nvec):
                x = b.load(gep(b, src, v * n), typ=vec(n), align=64)
                self.store(b, x, gep(b, dst, v * n), n, valid[v])


#: A heavy epilogue of a big tile goes through a stack tile in L1 (``store_rows``): storing the
#: tile to the output and activating it there in place re-read lines whose store misses were
#: still pending on outputs larger than L2. A 3x3/2 stem on 3x224x224 with SiLU (direct-vector)
#: alone 0.95x; the GEMM's tiles: ``gemm.SCRATCH_EPILOGUE``.
SCRATCH_TILE = True

#: Tiles of up to this many vectors run even a heavy activation on their registers (a
#: depthwise tile's 4 rows: storing and reloading them cost more than it saved).
IN_REGISTERS = 4


def is_light(act: Activation) -> bool:
    """Whether an activation costs a compare-select or two (None, relu, clip): the kernels
    apply those on the registers of a whole tile."""
    return act is None or act == "relu" or (isinstance(act, tuple) and act[0] == "clip")


def activate_rows(
    b: ir.IRBuilder,
    act: Activation,
    base: ir.Value,
    stride: Int,
    rows: int,
    n: int,
    valid: Sequence[Int],
) -> None:
    """Apply ``act`` in place to ``rows`` x ``len(valid)`` vectors at ``base + r * stride +
    v * n``, one row per loop iteration (see ``Epilogue.store_rows``)."""
    with loop(b, 0, rows, 1, "act") as r:
        row = gep(b, base, b.mul(r, i64(stride)))
        for v, nv in enumerate(valid):
            p = gep(b, row, v * n)
            store_vec(b, apply_activation(b, load_vec(b, p, n, nv), act), p, n, nv)


def activate_span(b: ir.IRBuilder, act: Activation, base: ir.Value, count: int, n: int) -> None:
    """Apply ``act`` in place to ``count`` contiguous floats at ``base``, ``n`` lanes at a time
    (the last vector masked)."""
    full, rest = divmod(count, n)
    if full:
        activate_rows(b, act, base, n, full, n, [n])
    if rest:
        activate_rows(b, act, gep(b, base, full * n), 0, 1, n, [rest])


def apply_activation(b: ir.IRBuilder, v: ir.Value, act: Activation) -> ir.Value:
    """``None``, ``'relu'`` or ``('clip', lo, hi)`` on a float or float vector, or a
    ``LaneEpilogue``.

    The one float IR of Relu and Clip: the element-wise emitters use it too. numpy semantics
    (a NaN stays NaN, as in the reference kernels); each compare-select is one max/min.
    """
    if act is None:
        return v
    if isinstance(act, LaneEpilogue):
        return act(b, v)
    n = v.type.count if isinstance(v.type, ir.VectorType) else 0

    def const(x: float) -> ir.Constant:
        return splat(x, n) if n else f32(x)

    if act == "relu":
        return b.select(b.fcmp_ordered("<", v, const(0.0)), const(0.0), v)
    if isinstance(act, tuple) and act[0] == "clip":
        lo, hi = float(act[1]), float(act[2])
        if lo != -math.inf:
            v = b.select(b.fcmp_ordered("<", v, const(lo)), const(lo), v)
        if hi != math.inf:
            v = b.select(b.fcmp_ordered(">", v, const(hi)), const(hi), v)
        return v
    raise ValueError(f"unsupported fused activation {act!r}")


def transpose_square(b: ir.IRBuilder, rows: list[ir.Value]) -> list[ir.Value]:
    """The n x n transpose of ``rows`` (n vectors of n lanes, n a power of two): at each
    distance d = n/2, n/4, .., 1, rows i and i + d swap their off-diagonal halves of d-lane
    blocks (two two-source shuffles a pair, n log2 n shuffles in all)."""
    n = len(rows)
    assert n & (n - 1) == 0 and all(r.type.count == n for r in rows)
    out = list(rows)
    i32 = ir.IntType(32)
    d = n // 2
    while d:
        lo = ir.Constant(ir.VectorType(i32, n), [j if j & d == 0 else n + j - d for j in range(n)])
        hi = ir.Constant(ir.VectorType(i32, n), [j + d if j & d == 0 else n + j for j in range(n)])
        for i in range(n):
            if i & d == 0:
                a, c = out[i], out[i + d]
                out[i], out[i + d] = b.shuffle_vector(a, c, lo), b.shuffle_vector(a, c, hi)
        d //= 2
    return out
