"""The int8 arithmetic of compiler/kernels/reference_quant.py in LLVM IR, for scalars and
vectors alike: requantization (float32 multiply, clamp, round half to even), quantize and
dequantize. Nothing here uses fast-math flags or fused multiply-adds, so every result is the
reference's bit for bit.
"""

from __future__ import annotations

from llvmlite import ir

from compiler.backends.llvm.kernels.common import F32, I32, intrinsic

I8 = ir.IntType(8)


def _lanes(ty: ir.Type) -> int:
    return ty.count if isinstance(ty, ir.VectorType) else 0


def _like(elem: ir.Type, n: int) -> ir.Type:
    return ir.VectorType(elem, n) if n else elem


def const_like(v: ir.Value, elem: ir.Type, x: float | int) -> ir.Constant:
    """A constant of `elem` (splat to `v`'s lane count)."""
    n = _lanes(v.type)
    c = ir.Constant(elem, float(x) if isinstance(elem, ir.FloatType) else int(x))
    return ir.Constant(ir.VectorType(elem, n), [c] * n) if n else c


def roundeven(b: ir.IRBuilder, y: ir.Value) -> ir.Value:
    n = _lanes(y.type)
    name = f"llvm.roundeven.v{n}f32" if n else "llvm.roundeven.f32"
    return b.call(intrinsic(b.module, name, ir.FunctionType(y.type, [y.type])), [y])


def round_to_q(b: ir.IRBuilder, y: ir.Value, offset: int, qmin: int, qmax: int) -> ir.Value:
    """float32 (vector) -> int8: clamp to [qmin - z, qmax - z] (NaN -> the lower bound),
    round half to even, add z."""
    lo, hi = const_like(y, F32, qmin - offset), const_like(y, F32, qmax - offset)
    y = b.select(b.fcmp_ordered(">", y, lo), y, lo)
    y = b.select(b.fcmp_ordered("<", y, hi), y, hi)
    n = _lanes(y.type)
    q = b.fptosi(roundeven(b, y), _like(I32, n))
    if offset:
        q = b.add(q, const_like(q, I32, offset))
    return b.trunc(q, _like(I8, n))


def requantize(
    b: ir.IRBuilder, acc: ir.Value, mult: ir.Value, offset: int, qmin: int, qmax: int
) -> ir.Value:
    """int32 accumulators -> int8: round_to_q(float32(acc) * mult)."""
    n = _lanes(acc.type)
    return round_to_q(b, b.fmul(b.sitofp(acc, _like(F32, n)), mult), offset, qmin, qmax)


def centered(b: ir.IRBuilder, q: ir.Value, offset: int) -> ir.Value:
    """int8 -> int32 q - z."""
    n = _lanes(q.type)
    v = b.sext(q, _like(I32, n))
    return b.sub(v, const_like(v, I32, offset)) if offset else v


def dequantize(b: ir.IRBuilder, q: ir.Value, scale: float, offset: int) -> ir.Value:
    n = _lanes(q.type)
    f = b.sitofp(centered(b, q, offset), _like(F32, n))
    return b.fmul(f, const_like(f, F32, scale_f32(scale)))


def quantize(
    b: ir.IRBuilder, x: ir.Value, scale: float, offset: int, qmin: int = -128, qmax: int = 127
) -> ir.Value:
    return round_to_q(b, b.fdiv(x, const_like(x, F32, scale_f32(scale))), offset, qmin, qmax)


def scale_f32(scale: float) -> float:
    """The float32 value of a scale (what the reference computes with)."""
    import numpy as np

    return float(np.float32(scale))


__all__ = [
    "I8",
    "centered",
    "const_like",
    "dequantize",
    "quantize",
    "requantize",
    "round_to_q",
    "roundeven",
    "scale_f32",
]
