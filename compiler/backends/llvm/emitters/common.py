"""Shared pieces of the LIR emitters: element types, loop nests, math helpers, the kernel context.

An emitter turns one LIR instruction into calls of kernels (LLVM functions taking operand
pointers); kernels are deduplicated by a key built from everything that shapes their code.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from llvmlite import ir

# The basics are shared with the kernels; emitters import them from here.
from compiler.backends.llvm.kernels.common import (  # noqa: F401 - PTR, VOID, entry_alloca
    F32,
    I32,
    I64,
    PTR,
    VOID,
    Activation,
    LaneEpilogue,
    apply_activation,
    entry_alloca,
    gep,
    int_array,
    loop,
    new_kernel,
)
from compiler.backends.llvm.kernels.common import i64 as c64
from compiler.errors import CodegenError
from compiler.graph.types import ElemKind, TensorType
from compiler.lir.instructions import MARKER_KINDS
from compiler.memory.regions import ALIGNMENT, align

F64 = ir.DoubleType()
F16 = ir.HalfType()
I8 = ir.IntType(8)
I16 = ir.IntType(16)


def storage_type(elem: ElemKind) -> ir.Type:
    """LLVM type of an element in memory."""
    return {
        ElemKind.F32: F32,
        ElemKind.F16: F16,
        ElemKind.F64: F64,
        ElemKind.I64: I64,
        ElemKind.I32: I32,
        ElemKind.I16: I16,
        ElemKind.I8: I8,
        ElemKind.U64: I64,
        ElemKind.U32: I32,
        ElemKind.U16: I16,
        ElemKind.U8: I8,
        ElemKind.BOOL: I8,
    }.get(elem) or (I16 if elem == ElemKind.BF16 else I8)  # narrow kinds: their bit patterns


def compute_type(elem: ElemKind) -> ir.Type:
    """LLVM type arithmetic happens in (f16 computes in f32)."""
    return F32 if elem == ElemKind.F16 else storage_type(elem)


def int_of_size(nbytes: int) -> ir.IntType:
    return {1: I8, 2: I16, 4: I32, 8: I64}[nbytes]


def const(ty: ir.Type, v: float | int) -> ir.Constant:
    """``v`` as a constant of ``ty`` (a splat when ``ty`` is a vector type)."""
    if isinstance(ty, ir.VectorType):
        return ir.Constant(ty, [const(ty.element, v).constant] * ty.count)
    if isinstance(ty, ir.IntType):
        return ir.Constant(ty, int(v))
    return ir.Constant(ty, float(v))


def float_libm(b: ir.IRBuilder, name: str, *args: ir.Value) -> ir.Value:
    """The libm function `name` for the arguments' float type: `expf` on float, `exp` on double."""
    return call_libm(b, name if float_elem(args[0].type) == F64 else f"{name}f", *args)


def float_elem(ty: ir.Type) -> ir.Type:
    """The element type of a scalar or vector type."""
    return ty.element if isinstance(ty, ir.VectorType) else ty


def like(x: ir.Value, v: float | int) -> ir.Constant:
    """The constant ``v`` with the type of ``x``: a scalar, or a splat over x's vector, so the
    math builders below serve scalar loops (widened by the loop vectoriser) and vector kernels."""
    return const(x.type, v)


def int_like(x: ir.Value) -> ir.Type:
    """i32, or a vector of i32 as wide as x."""
    ty = x.type
    return ir.VectorType(I32, ty.count) if isinstance(ty, ir.VectorType) else I32


def ilike(x: ir.Value, v: int) -> ir.Constant:
    ty = int_like(x)
    return ir.Constant(ty, [v] * ty.count) if isinstance(ty, ir.VectorType) else ir.Constant(ty, v)


def load_elem(b: ir.IRBuilder, ptr: ir.Value, elem: ElemKind) -> ir.Value:
    v = b.load(ptr, typ=storage_type(elem))
    if elem == ElemKind.F16:
        return b.fpext(v, F32)
    return v


def store_elem(b: ir.IRBuilder, v: ir.Value, ptr: ir.Value, elem: ElemKind) -> None:
    if elem == ElemKind.F16:
        v = b.fptrunc(v, F16)
    b.store(v, ptr)


def byte_gep(b: ir.IRBuilder, base: ir.Value, off: int) -> ir.Value:
    return gep(b, base, off, I8)


def loop_nest(
    b: ir.IRBuilder, shape: Sequence[int], body: Callable[[list[ir.Value]], None], name: str = "d"
) -> None:
    """Nested loops over `shape` (row-major); `body(ivs)` emits the innermost body."""
    ivs: list[ir.Value] = []

    def rec(d: int) -> None:
        if d == len(shape):
            body(ivs)
            return
        if shape[d] == 1:
            ivs.append(c64(0))
            rec(d + 1)
            ivs.pop()
            return
        with loop(b, 0, shape[d], 1, f"{name}{d}") as iv:
            ivs.append(iv)
            rec(d + 1)
            ivs.pop()

    rec(0)


def linear(
    b: ir.IRBuilder, ivs: Sequence[ir.Value], strides: Sequence[int], base: int = 0
) -> ir.Value:
    """base + sum(iv * stride) as an i64 (constant terms folded)."""
    acc: ir.Value | None = None
    for iv, s in zip(ivs, strides):
        if s == 0 or (isinstance(iv, ir.Constant) and iv.constant == 0):
            continue
        term = iv if s == 1 else b.mul(iv, c64(s), flags=("nsw",))
        acc = term if acc is None else b.add(acc, term, flags=("nsw",))
    if acc is None:
        return c64(base)
    return b.add(acc, c64(base), flags=("nsw",)) if base else acc


def contiguous_strides(shape: Sequence[int]) -> tuple[int, ...]:
    out = [1] * len(shape)
    for i in range(len(shape) - 2, -1, -1):
        out[i] = out[i + 1] * shape[i + 1]
    return tuple(out)


def broadcast_strides(src: Sequence[int], dst: Sequence[int]) -> tuple[int, ...]:
    """Element strides reading a contiguous `src` broadcast to `dst` (0 on broadcast dims)."""
    r = len(dst)
    src = (1,) * (r - len(src)) + tuple(src)
    cs = contiguous_strides(src)
    return tuple(0 if (s == 1 and d != 1) else st for s, d, st in zip(src, dst, cs))


def collapse(
    shape: Sequence[int], strides_list: Sequence[Sequence[int]]
) -> tuple[list[int], list[list[int]]]:
    """Merge adjacent dims that every operand walks contiguously; drop size-1 dims."""
    dims = [(n, [s[i] for s in strides_list]) for i, n in enumerate(shape) if n != 1]
    if not dims:
        return [1], [[0] for _ in strides_list]
    out_shape = [dims[0][0]]
    out_strides = [list(dims[0][1])]
    for n, st in dims[1:]:
        prev = out_strides[-1]
        if all(p == s * n for p, s in zip(prev, st)):
            out_shape[-1] *= n
            out_strides[-1] = list(st)
        else:
            out_shape.append(n)
            out_strides.append(list(st))
    return out_shape, [[s[d] for s in out_strides] for d in range(len(strides_list))]


# -- math ---------------------------------------------------------------------------------------


def intrinsic(module: ir.Module, name: str, ret: ir.Type, args: Sequence[ir.Type]) -> ir.Function:
    fn = module.globals.get(name)
    if fn is None:
        fn = ir.Function(module, ir.FunctionType(ret, list(args)), name)
    return fn


def call_intr(b: ir.IRBuilder, base: str, x: ir.Value, *more: ir.Value) -> ir.Value:
    """llvm.<base>.f32/f64 (or .vNf32/.vNf64) on x's type."""
    suffix = "f64" if float_elem(x.type) == F64 else "f32"
    if isinstance(x.type, ir.VectorType):
        suffix = f"v{x.type.count}{suffix}"
    fn = intrinsic(b.module, f"llvm.{base}.{suffix}", x.type, [x.type] * (1 + len(more)))
    return b.call(fn, [x, *more])


def mul_add(b: ir.IRBuilder, x: ir.Value, y: ir.Value, z: ir.Value) -> ir.Value:
    """x * y + z as ``llvm.fmuladd``: one fused instruction where the target has FMA (one
    rounding), a multiply and an add elsewhere; the same on every run of one host."""
    return call_intr(b, "fmuladd", x, y, z)


#: libm functions the generated code may call (resolved at JIT time, see jit_symbols).
LIBM = (
    "expf",
    "roundevenf",
    "roundeven",
    "fmodf",
    "fmod",
    "sinf",
    "sin",
    "cosf",
    "cos",
    "tanf",
    "tan",
    "asinf",
    "asin",
    "acosf",
    "acos",
    "atanf",
    "atan",
    "sinhf",
    "sinh",
    "coshf",
    "cosh",
    "asinhf",
    "asinh",
    "acoshf",
    "acosh",
    "atanhf",
    "atanh",
    "logf",
    "tanhf",
    "expm1f",
    "log1pf",
    "powf",
    "erf",
    "tanh",
    "exp",
    "log",
    "pow",
    "erff",
    "log1p",
)


def call_libm(b: ir.IRBuilder, name: str, *args: ir.Value) -> ir.Value:
    """Call the scalar libm function `name`; on vectors (an epilogue's lanes) lane by lane."""
    ty = args[0].type
    if isinstance(ty, ir.VectorType):
        out = ir.Constant(ty, ir.Undefined)
        for i in range(ty.count):
            lane = ir.Constant(I32, i)
            v = call_libm(b, name, *(b.extract_element(a, lane) for a in args))
            out = b.insert_element(out, v, lane)
        return out
    fn = intrinsic(b.module, name, ty, [a.type for a in args])
    return b.call(fn, list(args))


#: The module global generated code sets instead of trapping (integer division or modulo by
#: zero), read and cleared by the executors after each call: ONNX Runtime reports the same cases
#: as errors. The codes and what the executors say for them:
STATUS_GLOBAL = "glowviz_status"
STATUS_DIV_BY_ZERO = 1
STATUS_MOD_BY_ZERO = 2
STATUS_MESSAGES = {
    STATUS_DIV_BY_ZERO: "integer division by zero",
    STATUS_MOD_BY_ZERO: "integer modulo by zero",
}


def set_status(b: ir.IRBuilder, code: int) -> None:
    """Record `code` in the module's status global (created on first use)."""
    mod = b.module
    gv = mod.globals.get(STATUS_GLOBAL)
    if gv is None:
        gv = ir.GlobalVariable(mod, I32, STATUS_GLOBAL)
        gv.initializer = ir.Constant(I32, 0)
        gv.align = 4
    b.store(ir.Constant(I32, code), gv)


def divisor_or_one(b: ir.IRBuilder, d: ir.Value, code: int) -> ir.Value:
    """Integer divisor `d`, or 1 where it is 0 after recording `code` in the status: LLVM's
    division by zero is undefined (a SIGFPE on x86), the executor raises the status instead."""
    zero = b.icmp_unsigned("==", d, const(d.type, 0))
    with b.if_then(zero, likely=False):
        set_status(b, code)
    return b.select(zero, const(d.type, 1), d)


def is_nan(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    return b.fcmp_unordered("uno", x, x)


def fselect_lt(b: ir.IRBuilder, x: ir.Value, y: ir.Value) -> ir.Value:
    return b.fcmp_ordered("<", x, y)


#: The float32 exp polynomial's argument range (outside: overflow, or results below the
#: smallest normal float).
EXP_HI, EXP_LO = 88.3762626647949, -87.3365447505531


def fast_exp(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """float32 exp (Cephes polynomial, ~1 ulp) that the loop vectoriser can widen."""
    assert float_elem(x.type) == F32
    hi, lo = EXP_HI, EXP_LO
    xc = b.select(b.fcmp_ordered(">", x, like(x, hi)), like(x, hi), x)
    xc = b.select(b.fcmp_ordered("<", xc, like(x, lo)), like(x, lo), xc)
    y = exp_in_range(b, xc)
    y = b.select(b.fcmp_ordered(">", x, like(x, 88.72283935546875)), like(x, math.inf), y)
    # Below the clamp numpy gives denormals (< 1.2e-38); flush them to 0.
    y = b.select(b.fcmp_ordered("<", x, like(x, lo)), like(x, 0.0), y)
    return b.select(is_nan(b, x), x, y)


def fast_exp_nonpositive(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """``fast_exp`` of an ``x`` known to be <= 0 or NaN (softmax's x - max): the same values
    without the overflow clamp and its infinity select."""
    lo = EXP_LO
    low = b.fcmp_ordered("<", x, like(x, lo))
    y = exp_in_range(b, b.select(low, like(x, lo), x))
    y = b.select(low, like(x, 0.0), y)
    return b.select(is_nan(b, x), x, y)


#: exp's reduction rounds x / ln 2 to an integer by adding this float (1.5 * 2^23, plus the
#: exponent bias): the sum's low mantissa bits are then n + 127, which shifted into the
#: exponent field are 2^n. One FMA and a shift instead of floor, a conversion and an add.
EXP_MAGIC = 12582912.0 + 127.0
#: Whether exp_in_range rounds with EXP_MAGIC (else floor(x / ln 2 + 0.5) and a conversion).
EXP_MAGIC_ROUND = True


def exp_in_range(b: ir.IRBuilder, xc: ir.Value) -> ir.Value:
    """exp of a float32 ``xc`` already within [EXP_LO, EXP_HI]: Cody-Waite reduction by ln 2,
    Cephes' polynomial, the power of two put in the exponent bits."""
    x = xc
    if EXP_MAGIC_ROUND:
        t = mul_add(b, xc, like(x, 1.44269504088896341), like(x, EXP_MAGIC))
        fx = b.fsub(t, like(x, EXP_MAGIC))
        pow2 = b.bitcast(b.shl(b.bitcast(t, int_like(x)), ilike(x, 23)), x.type)
    else:
        fx = call_intr(b, "floor", mul_add(b, xc, like(x, 1.44269504088896341), like(x, 0.5)))
    r = mul_add(b, fx, like(x, -0.693359375), xc)
    r = mul_add(b, fx, like(x, 2.12194440e-4), r)
    z = b.fmul(r, r)
    p = like(x, 1.9875691500e-4)
    for c in (1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2, 1.6666665459e-1, 5.0000001201e-1):
        p = mul_add(b, p, r, like(x, c))
    p = b.fadd(mul_add(b, p, z, r), like(x, 1.0))
    if not EXP_MAGIC_ROUND:
        n = b.fptosi(fx, int_like(x))
        pow2 = b.bitcast(b.shl(b.add(n, ilike(x, 127)), ilike(x, 23)), x.type)
    return b.fmul(p, pow2)


def fast_erf(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """float32 erf as x * P(x^2) / Q(x^2) on [-4, 4] (the rational form Eigen and XLA use);
    vectorisable, a few ulp."""
    xc = b.select(b.fcmp_ordered(">", x, like(x, 4.0)), like(x, 4.0), x)
    xc = b.select(b.fcmp_ordered("<", xc, like(x, -4.0)), like(x, -4.0), xc)
    x2 = b.fmul(xc, xc)
    p = like(x, -2.72614225801306e-10)
    for c in (
        2.77068142495902e-08,
        -2.10102402082508e-06,
        -5.69250639462346e-05,
        -7.34990630326855e-04,
        -2.95459980854025e-03,
        -1.60960333262415e-02,
    ):
        p = mul_add(b, x2, p, like(x, c))
    q = like(x, -1.45660718464996e-05)
    for c in (
        -2.13374055278905e-04,
        -1.68282697438203e-03,
        -7.37332916720468e-03,
        -1.42647390514189e-02,
    ):
        q = mul_add(b, x2, q, like(x, c))
    # x * (P / Q), not (x * P) / Q: x * P underflows into denormals for tiny x.
    return b.select(is_nan(b, x), x, b.fmul(xc, b.fdiv(p, q)))


def _poly(b: ir.IRBuilder, x: ir.Value, coeffs: Sequence[float]) -> ir.Value:
    """Horner's rule: coeffs[0] * x^n + ... + coeffs[n] (float32)."""
    p = like(x, coeffs[0])
    for c in coeffs[1:]:
        p = mul_add(b, p, x, like(x, c))
    return p


#: tanh(x) = x + x^3 P(x^2) on |x| < TANH_SMALL: a least-squares fit in double, then reweighted
#: towards minimax on the relative error (< 1 ulp in float32 there).
TANH_SMALL = 0.625
_TANH_P = (
    -0.0059425930590377846,
    0.02085261873517672,
    -0.05380559793802833,
    0.133322410247257,
    -0.33333312110051017,
)


def fast_tanh(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """float32 tanh the loop vectoriser can widen (libm's tanhf is a scalar call): the odd
    polynomial near 0, 1 - 2 / (exp(2|x|) + 1) with the sign of x beyond; < 2 ulp."""
    ax = call_intr(b, "fabs", x)
    x2 = b.fmul(x, x)
    small = mul_add(b, b.fmul(x, x2), _poly(b, x2, _TANH_P), x)
    e = fast_exp(b, b.fmul(ax, like(x, 2.0)))
    big = b.fsub(like(x, 1.0), b.fdiv(like(x, 2.0), b.fadd(e, like(x, 1.0))))
    big = call_intr(b, "copysign", big, x)
    y = b.select(b.fcmp_ordered("<", ax, like(x, TANH_SMALL)), small, big)
    # tanh(+-0) = +-0 and NaN stays NaN: x itself (the polynomial turns -0 into +0).
    keep = b.or_(is_nan(b, x), b.fcmp_ordered("==", x, like(x, 0.0)))
    return b.select(keep, x, y)


#: Cephes' logf polynomial on the mantissa's distance from 1.
_LOG_P = (
    7.0376836292e-2,
    -1.1514610310e-1,
    1.1676998740e-1,
    -1.2420140846e-1,
    1.4249322787e-1,
    -1.6668057665e-1,
    2.0000714765e-1,
    -2.4999993993e-1,
    3.3333331174e-1,
)


def fast_log(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """float32 natural log the loop vectoriser can widen: exponent and mantissa from the bits
    (denormals scaled up first), the mantissa in [sqrt(1/2), sqrt(2)), Cephes' polynomial;
    ~1 ulp. log(0) = -inf, log(x < 0) = NaN, log(inf) = inf, NaN stays NaN."""
    tiny = b.fcmp_ordered("<", x, like(x, 1.1754943508222875e-38))
    xs = b.select(tiny, b.fmul(x, like(x, 8388608.0)), x)  # * 2^23
    bits = b.bitcast(xs, int_like(x))
    e = b.sub(b.and_(b.lshr(bits, ilike(x, 23)), ilike(x, 0xFF)), ilike(x, 126))
    e = b.select(tiny, b.sub(e, ilike(x, 23)), e)
    m = b.bitcast(
        b.or_(b.and_(bits, ilike(x, 0x807FFFFF)), ilike(x, 0x3F000000)), x.type
    )  # [0.5, 1)
    low = b.fcmp_ordered("<", m, like(x, 0.707106781186547524))
    e = b.select(low, b.sub(e, ilike(x, 1)), e)
    f = b.fsub(b.select(low, b.fadd(m, m), m), like(x, 1.0))
    fe = b.sitofp(e, x.type)
    z = b.fmul(f, f)
    y = b.fmul(b.fmul(_poly(b, f, _LOG_P), f), z)
    y = b.fadd(y, b.fmul(fe, like(x, -2.12194440e-4)))
    y = b.fsub(y, b.fmul(z, like(x, 0.5)))
    r = b.fadd(b.fadd(f, y), b.fmul(fe, like(x, 0.693359375)))
    r = b.select(b.fcmp_ordered("==", x, like(x, 0.0)), like(x, -math.inf), r)
    r = b.select(b.fcmp_ordered("==", x, like(x, math.inf)), x, r)
    r = b.select(b.fcmp_ordered("<", x, like(x, 0.0)), like(x, math.nan), r)
    return b.select(is_nan(b, x), x, r)


# -- kernels ------------------------------------------------------------------------------------


@dataclass
class Arg:
    """One argument of a kernel call: a pointer to an operand value or a constant blob, or an
    i64 shape argument (``scalar``: kernels shared by instructions that differ in it)."""

    value: Any = None  # an LValue (operand) ...
    blob: int | None = None  # ... or the index of a blob appended to the constant region
    offset: int = 0  # extra bytes added to the address
    scalar: int | None = None  # ... or an i64 passed by value (after the pointers)


@dataclass
class Call:
    """A call of kernel `name` with pointer arguments `args` (in kernel parameter order)."""

    name: str
    args: list[Arg]


@dataclass
class Emitted:
    """What an emitter produced for one instruction: kernel calls, in order."""

    calls: list[Call] = field(default_factory=list)
    strategy: str = ""


#: ``(size, dense) -> (owner, zeroed uint8 view of size bytes)``: allocates an extended
#: constant region whose bytes from ``dense`` on are the packed blobs (the LLVM executor's
#: ``constant_region``).
RegionAlloc = Callable[[int, int], tuple[Any, np.ndarray]]


class KernelSink:
    """Collects kernels (deduplicated by key) and constant blobs for one program.

    With ``region`` (an allocator of the extended constant region) each blob is copied at once
    to its place in a region of its own, ``start`` bytes in (after the plan's constants; every
    blob 64-byte aligned, in the order they come, the offsets ``Program.blob_offsets`` always
    had), and ``blobs`` are views of it: the executor takes that region as its constant region
    instead of allocating one and copying every packed weight into it, and the packers' arrays
    are freed as soon as they are placed, so the next packer reuses their memory. Fresh pages
    cost up to ~2.5 ms per MB on first touch on the shared host (benchmarks/README.md, issue 15
    session 9): ResNet-50's 128 MB of packed weights were touched twice. ``capacity`` is the
    first guess at the blobs' bytes; the region grows (a copy) past it."""

    def __init__(
        self,
        module: ir.Module,
        *,
        region: RegionAlloc | None = None,
        start: int = 0,
        capacity: int = 0,
    ) -> None:
        self.module = module
        self.kernels: dict[Any, str] = {}
        self.blobs: list[np.ndarray] = []
        self._blob_keys: dict[Any, int] = {}
        self.kernel_of_name: dict[str, ir.Function] = {}
        self._alloc = region
        self._start = start
        #: The region (owner, bytes) holding the blobs placed so far, and where the next goes.
        self.region: tuple[Any, np.ndarray] | None = None
        self.end = start
        self.blob_offsets: list[int] = []
        self._layout: list[tuple[np.dtype, tuple[int, ...]]] = []
        if region is not None:
            self.region = region(start + max(capacity, 64), start)

    def _place(self, data: np.ndarray) -> None:
        assert self.region is not None and self._alloc is not None
        at, n = self.end, data.nbytes
        owner, mem = self.region
        if align(at + n) > mem.size:  # the region holds ``end``: the program's constant size
            size = max(self._start + 2 * (mem.size - self._start), align(at + n))
            grown = self._alloc(size, self._start)
            grown[1][self._start : at] = mem[self._start : at]
            self.region = grown
            mem = grown[1]
            self.blobs = self._views()  # the earlier views are of the old region
        mem[at : at + n] = data.reshape(-1).view(np.uint8)
        self.blob_offsets.append(at)
        self._layout.append((data.dtype, data.shape))
        self.end = align(at + n)
        self.blobs.append(mem[at : at + n].view(data.dtype).reshape(data.shape))

    def _views(self) -> list[np.ndarray]:
        assert self.region is not None
        mem = self.region[1]
        out = []
        for off, (dtype, shape) in zip(self.blob_offsets, self._layout):
            n = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
            out.append(mem[off : off + n].view(dtype).reshape(shape))
        return out

    def kernel(
        self,
        key: Any,
        nargs: int,
        build: Callable[[ir.Function, ir.IRBuilder], None],
        prefix: str = "k",
        noalias: Sequence[bool] | None = None,
        scalars: int = 0,
    ) -> str:
        """The name of the kernel for `key`, building `void name(ptr x nargs, i64 x scalars)`
        if new."""
        if key in self.kernels:
            return self.kernels[key]
        name = self.module.get_unique_name(prefix)
        fn, b = new_kernel(self.module, name, nargs, noalias, scalars)
        fn.attributes.add("noinline")
        fn.linkage = "internal"
        try:
            build(fn, b)
        except BaseException:
            self.module.globals.pop(name, None)  # a refused kernel leaves nothing behind
            raise
        if not b.block.is_terminated:
            b.ret_void()
        self.kernels[key] = name
        self.kernel_of_name[name] = fn
        return name

    def adopt(self, key: Any, fn: ir.Function) -> str:
        """Register an already built kernel function (from the fast kernel emitters)."""
        fn.attributes.add("noinline")
        fn.linkage = "internal"
        self.kernels[key] = fn.name
        self.kernel_of_name[fn.name] = fn
        return fn.name

    def fresh_name(self, prefix: str) -> str:
        return self.module.get_unique_name(prefix)

    def blob(self, data: np.ndarray, key: Any = None) -> int:
        if key is not None and key in self._blob_keys:
            return self._blob_keys[key]
        if self.region is not None:
            self._place(np.ascontiguousarray(data))
        else:
            self.blobs.append(np.ascontiguousarray(data))
        idx = len(self.blobs) - 1
        if key is not None:
            self._blob_keys[key] = idx
        return idx

    def global_table(self, data: np.ndarray, name_hint: str = "tab") -> ir.GlobalVariable:
        """A private constant global array holding `data` (i64 or f64 or f32)."""
        data = np.ascontiguousarray(data).ravel()
        ety = {
            np.dtype(np.int64): I64,
            np.dtype(np.float64): F64,
            np.dtype(np.float32): F32,
            np.dtype(np.int32): I32,
        }[data.dtype]
        aty = ir.ArrayType(ety, max(1, data.size))
        vals = data.tolist() or [0]
        g = ir.GlobalVariable(self.module, aty, self.module.get_unique_name(name_hint))
        if isinstance(ety, ir.IntType):
            g.initializer = int_array(ety, vals)
        else:
            g.initializer = ir.Constant(aty, [ir.Constant(ety, v) for v in vals])
        g.global_constant = True
        g.linkage = "private"
        g.align = ALIGNMENT
        return g


class EmitContext:
    """What emitters see: the instruction's operand types and constant data, and the sink."""

    def __init__(
        self,
        sink: KernelSink,
        alias: Callable[[Any, Any], bool],
        *,
        conv_strategy: str | None = None,
    ) -> None:
        self.sink = sink
        self._alias = alias
        #: A conv strategy every conv must use (tests, debugging); None: each conv's choice.
        self.conv_strategy = conv_strategy
        self._fused: tuple[Any, LaneEpilogue | None] | None = None
        self._bias: Any = None
        self._addend: Any = None

    def may_alias(self, a: Any, b: Any) -> bool:
        return self._alias(a, b)

    # -- epilogue fusion: the code generator runs an element-wise chain in a kernel's epilogue
    @contextmanager
    def fusing(
        self, result: Any, epilogue: LaneEpilogue | None, bias: Any = None, addend: Any = None
    ) -> Iterator[None]:
        """Within the block, emitters that support it write ``result`` (the chain's last dest)
        instead of their dest, through ``epilogue`` after their own activation; ``bias``: a
        row constant the kernel adds to its finished sums first (``fused_bias``), ``addend`` a
        tensor it adds after that (``fused_addend``)."""
        self._fused = (result, epilogue)
        self._bias = bias
        self._addend = addend
        try:
            yield
        finally:
            self._fused = None
            self._bias = None
            self._addend = None

    def fused_addend(self) -> Any:
        """The residual tensor of the chain being fused (its second step, after the bias)."""
        return self._addend

    def fused_bias(self) -> Any:
        """The row bias of the chain being fused (its first step, a MatMul's bias Add), else
        None; only the matmul emitter takes one (``matmul_row_bias``)."""
        return self._bias

    def result(self, ins: Any) -> Any:
        """The value the instruction's kernel must write: its dest, or the last dest of the
        chain being fused into its epilogue."""
        return self._fused[0] if self._fused else ins.operands[0][0]

    def with_epilogue(self, act: Activation) -> Activation:
        """The kernel's epilogue: the fused activation ``act``, then the fused chain if any."""
        if not self._fused:
            return act
        chain = self._fused[1]
        if chain is None:
            return act
        if act is None:
            return chain
        return LaneEpilogue(
            ("then", act, chain.key), lambda b, v: chain(b, apply_activation(b, v, act))
        )

    def noalias_flags(self, values: Sequence[Any]) -> tuple[bool, ...]:
        """For each operand: True when it overlaps no other operand of the call."""
        out = []
        for i, v in enumerate(values):
            if v is None:
                out.append(True)
                continue
            out.append(
                not any(self._alias(v, w) for j, w in enumerate(values) if j != i and w is not None)
            )
        return tuple(out)

    @staticmethod
    def constant_data(value: Any) -> np.ndarray | None:
        """The data of a constant weight operand (through views), else None."""
        from compiler.lir.ir import WeightVar, view_root

        root, off = view_root(value)
        if isinstance(root, WeightVar) and root.is_constant and root.data is not None:
            if off == 0 and root.type == value.type:
                return np.asarray(root.data)
            flat = np.asarray(root.data).reshape(-1).view(np.uint8)
            t: TensorType = value.type
            return flat[off : off + t.size_bytes].view(t.np_dtype).reshape(t.shape)
        return None


def unsupported(ins: Any, msg: str) -> CodegenError:
    return CodegenError(f"{ins.kind}: {msg}", instruction=ins.name)


Emitter = Callable[[EmitContext, Any], Emitted]

#: kind -> emitter(ctx, instruction) -> Emitted. Filled by the family modules.
EMITTERS: dict[str, Emitter] = {}
#: kind -> the element kinds every operand of its instructions must have (absent: any kind).
ELEMS: dict[str, frozenset[ElemKind]] = {}
F32_ONLY = frozenset({ElemKind.F32})
#: Kinds whose emitter honours an `@inout` (accumulating) destination: the sum post-op.
ACCUMULATING: set[str] = set()

#: Memory markers: no code (views are addresses, allocations are the plan's business).
NO_CODE = MARKER_KINDS


def register(
    *kinds: str, elems: frozenset[ElemKind] | None = None, accumulates: bool = False
) -> Callable[[Emitter], Emitter]:
    """Register an emitter for `kinds`. `elems`: the only element kinds it takes; instructions
    with others raise a CodegenError, and the backend contract lowers such nodes instead.
    `accumulates`: it adds to an `@inout` destination, so the backend contract lets the
    sum-post-op pass make such instructions (only kinds with the accumulate trait can be).

    A kind may get several emitters for disjoint `elems` (a fast float32 kernel and a plain
    loop for other kinds): instructions go to the one whose kinds their operands have."""

    def deco(fn: Emitter) -> Emitter:
        emit = fn if elems is None else _typed(fn, elems)
        for k in kinds:
            if accumulates:  # whichever of a kind's emitters registers first
                ACCUMULATING.add(k)
            if k in ELEMS and elems is not None and not (ELEMS[k] & elems):
                EMITTERS[k] = _by_elems(EMITTERS[k], ELEMS[k], emit)
                ELEMS[k] = ELEMS[k] | elems
                continue
            assert k not in EMITTERS, f"a second emitter for '{k}' must take other elems"
            EMITTERS[k] = emit
            if elems is not None:
                ELEMS[k] = elems
        return fn

    return deco


def _by_elems(first: Emitter, first_elems: frozenset[ElemKind], other: Emitter) -> Emitter:
    def emit(ctx: EmitContext, ins: Any) -> Emitted:
        if all(v.type.elem in first_elems for v, _ in ins.operands):
            return first(ctx, ins)
        return other(ctx, ins)

    return emit


def _typed(fn: Emitter, elems: frozenset[ElemKind]) -> Emitter:
    def emit(ctx: EmitContext, ins: Any) -> Emitted:
        for v, _ in ins.operands:
            if v.type.elem not in elems:
                names = ", ".join(sorted(e.value for e in elems))
                raise unsupported(ins, f"operand %{v.name} is {v.type.elem.value} ({names} only)")
        return fn(ctx, ins)

    return emit


def accepts(kind: str, elems: Iterable[ElemKind]) -> bool:
    """An emitter exists for `kind` and takes operands of these element kinds."""
    return kind in EMITTERS and (kind not in ELEMS or all(e in ELEMS[kind] for e in elems))


def round_to_odd_f32(b: ir.IRBuilder, d: ir.Value) -> ir.Value:
    """double -> float rounded to odd (truncate, then set the last bit if inexact): rounding
    that to float16 gives the correctly rounded double -> float16, without the runtime call
    (`__truncdfhf2`) LLVM emits for a direct fptrunc."""
    f = b.fptrunc(d, F32)
    bits = b.bitcast(f, I32)
    back = b.fpext(f, F64)
    away = b.fcmp_ordered(">", call_intr(b, "fabs", back), call_intr(b, "fabs", d))
    bits = b.select(away, b.sub(bits, ir.Constant(I32, 1)), bits)
    inexact = b.fcmp_unordered("!=", back, d)
    bits = b.select(inexact, b.or_(bits, ir.Constant(I32, 1)), bits)
    return b.bitcast(bits, F32)
