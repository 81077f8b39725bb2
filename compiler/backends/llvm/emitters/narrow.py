"""Casts to and from the narrow storage kinds (bfloat16, float8, float4, 4- and 2-bit integers)
in LLVM, matching ml_dtypes' conversions (which define the reference kernels' results).

A narrow value is its bit pattern (an i16 for bfloat16, an i8 code otherwise; a 4- or 2-bit
integer is its low bits). Decoding is a shift for bfloat16 and a table of the 256 codes'
float values otherwise. Encoding a float into bfloat16 rounds to nearest even on the bits;
into float8/float4 it looks the magnitude up among the rounding boundaries of the type (the
midpoints between neighbouring values, with the code a tie takes, and the overflow threshold),
all computed with ml_dtypes at compile time, so rounding, ties, subnormals, overflow to
inf/NaN and the types without negative zero are the reference's by construction. Integer kinds
wrap like ml_dtypes' (truncate toward zero, keep the low bits). Used by `convert` (Cast).
"""

from __future__ import annotations

import functools

import numpy as np
from llvmlite import ir

from compiler.backends.llvm.emitters.common import (
    F32,
    F64,
    I8,
    I16,
    I32,
    I64,
    call_intr,
    round_to_odd_f32,
)
from compiler.graph.types import ElemKind

#: Bits of the narrow integer kinds (stored in the low bits of a byte).
_INT_BITS = {ElemKind.I4: 4, ElemKind.U4: 4, ElemKind.I2: 2, ElemKind.U2: 2}


def _codes(kind: ElemKind) -> np.ndarray:
    """Every code of a one-byte narrow kind, as an array of that kind."""
    return np.arange(256, dtype=np.uint8).view(kind.np_dtype)


def _global(b: ir.IRBuilder, name: str, ty: ir.Type, values: list) -> ir.GlobalVariable:
    """A constant table in the kernel's module (one per module and name)."""
    module = b.module
    if name in module.globals:
        gv = module.globals[name]
        assert isinstance(gv, ir.GlobalVariable)
        return gv
    arr = ir.ArrayType(ty, len(values))
    gv = ir.GlobalVariable(module, arr, name)
    gv.global_constant = True
    gv.linkage = "internal"
    gv.initializer = ir.Constant(arr, [ir.Constant(ty, v) for v in values])
    return gv


def _load(b: ir.IRBuilder, table: ir.GlobalVariable, ty: ir.Type, index: ir.Value) -> ir.Value:
    return b.load(b.gep(table, [ir.Constant(I32, 0), index], inbounds=True), typ=ty)


def decode(b: ir.IRBuilder, x: ir.Value, kind: ElemKind) -> ir.Value:
    """A narrow value -> its float32 value (exact: every narrow kind's values are floats)."""
    if kind == ElemKind.BF16:
        return b.bitcast(b.shl(b.zext(x, I32), ir.Constant(I32, 16)), F32)
    values = [float(v) for v in _codes(kind).astype(np.float32)]
    table = _global(b, f"narrow.{kind.value}.values", F32, values)
    return _load(b, table, F32, b.zext(x, I32))


@functools.cache
def _boundaries(kind: ElemKind) -> tuple[list[float], list[int], list[int], list[int], list[int]]:
    """For a float8/float4 kind: the sorted rounding boundaries of a magnitude (midpoints of
    neighbouring non-negative finite values, then the overflow threshold), the code of each
    interval between them for a positive and a negative value, and the code a value exactly
    on each boundary takes (positive, negative). All from ml_dtypes' own conversion."""
    dt = kind.np_dtype
    codes = _codes(kind)
    vals = codes.astype(np.float64)
    ok = np.isfinite(vals) & (vals >= 0) & ~np.signbit(vals)
    mags = np.unique(vals[ok])  # 0 .. max, ascending
    step = mags[-1] - mags[-2]  # the top binade's spacing: the next value would be max + step
    bounds = list((mags[:-1] + mags[1:]) / 2) + [float(mags[-1] + step / 2)]

    def code(v: float) -> int:
        return int(np.array(v, np.float64).astype(dt).view(np.uint8))

    inside = list(mags) + [float(mags[-1] + step)]  # a value in each interval
    pos = [code(v) for v in inside]
    neg = [code(-v) for v in inside]
    tie_pos = [code(m) for m in bounds]
    tie_neg = [code(-m) for m in bounds]
    return bounds, pos, neg, tie_pos, tie_neg


def _to_f64(b: ir.IRBuilder, x: ir.Value, src: ElemKind) -> ir.Value:
    if src.is_float:
        return x if x.type == F64 else b.fpext(x, F64)
    return b.uitofp(x, F64) if src.is_unsigned else b.sitofp(x, F64)


def encode(b: ir.IRBuilder, x: ir.Value, src: ElemKind, dst: ElemKind) -> ir.Value:
    """A float or integer (in its compute type) -> the narrow code of `dst`."""
    if dst in _INT_BITS:
        mask = (1 << _INT_BITS[dst]) - 1
        if src.is_float:
            wide = b.fptoui(x, I64) if src.is_unsigned else b.fptosi(x, I64)
        elif x.type.width < 64:
            wide = b.zext(x, I64) if src.is_unsigned else b.sext(x, I64)
        else:
            wide = x
        return b.trunc(b.and_(wide, ir.Constant(I64, mask)), I8)
    if dst == ElemKind.BF16:
        return _encode_bf16(b, x, src)
    return _encode_by_table(b, _to_f64(b, x, src), dst)


def _encode_bf16(b: ir.IRBuilder, x: ir.Value, src: ElemKind) -> ir.Value:
    if not src.is_float:
        x = _to_f64(b, x, src)
    if x.type == F64:
        # Round to odd into float32 first: rounding that to bfloat16 is then exact rounding.
        x = round_to_odd_f32(b, x)
    bits = b.bitcast(x, I32)
    lsb = b.and_(b.lshr(bits, ir.Constant(I32, 16)), ir.Constant(I32, 1))
    rounded = b.lshr(b.add(b.add(bits, ir.Constant(I32, 0x7FFF)), lsb), ir.Constant(I32, 16))
    quiet = b.or_(b.lshr(bits, ir.Constant(I32, 16)), ir.Constant(I32, 0x40))
    nan = b.fcmp_unordered("uno", x, x)
    return b.trunc(b.select(nan, quiet, rounded), I16)


def _encode_by_table(b: ir.IRBuilder, x: ir.Value, dst: ElemKind) -> ir.Value:
    bounds, pos, neg, tie_pos, tie_neg = _boundaries(dst)
    name = f"narrow.{dst.value}"
    t_bounds = _global(b, f"{name}.bounds", F64, bounds)
    t_codes = {
        key: _global(b, f"{name}.{key}", I8, vals)
        for key, vals in (("pos", pos), ("neg", neg), ("tie_pos", tie_pos), ("tie_neg", tie_neg))
    }
    a = call_intr(b, "fabs", x)
    # Binary search: idx = how many boundaries lie strictly below |x| (inf: all of them).
    n = len(bounds)
    idx: ir.Value = ir.Constant(I32, 0)
    step = 1 << (n.bit_length() - 1)
    while step:
        probe = b.add(idx, ir.Constant(I32, step - 1))
        in_range = b.icmp_signed("<", probe, ir.Constant(I32, n))
        safe = b.select(in_range, probe, ir.Constant(I32, 0))
        below = b.fcmp_ordered("<", _load(b, t_bounds, F64, safe), a)
        idx = b.select(b.and_(in_range, below), b.add(idx, ir.Constant(I32, step)), idx)
        step >>= 1
    negative = b.icmp_signed("<", b.bitcast(x, I64), ir.Constant(I64, 0))
    on_bound_idx = b.select(b.icmp_signed("<", idx, ir.Constant(I32, n)), idx, ir.Constant(I32, 0))
    tie = b.and_(
        b.icmp_signed("<", idx, ir.Constant(I32, n)),
        b.fcmp_ordered("==", _load(b, t_bounds, F64, on_bound_idx), a),
    )
    pos_code = b.select(
        tie, _load(b, t_codes["tie_pos"], I8, on_bound_idx), _load(b, t_codes["pos"], I8, idx)
    )
    neg_code = b.select(
        tie, _load(b, t_codes["tie_neg"], I8, on_bound_idx), _load(b, t_codes["neg"], I8, idx)
    )
    code = b.select(negative, neg_code, pos_code)

    def nan_code(v: float) -> ir.Constant:
        return ir.Constant(I8, int(np.array(v).astype(dst.np_dtype).view(np.uint8)))

    nan = b.select(negative, nan_code(-np.nan), nan_code(np.nan))  # the sign is kept if it can be
    return b.select(b.fcmp_unordered("uno", x, x), nan, code)


__all__ = ["decode", "encode"]
