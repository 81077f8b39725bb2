"""Strongly typed values of the graph IR: element kind, static shape, quantization parameters.

Every value in both IRs carries a `TensorType`. Types are frozen and hashable; their text form
(`f32<1x3x224x224>`, `i64<>`, `i8<4x4:0.5,-3>`) is what the printers write and the parsers read.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass

import ml_dtypes
import numpy as np


class ElemKind(enum.Enum):
    """Element kinds; the value is the short name used in IR text."""

    F32 = "f32"
    F16 = "f16"
    F64 = "f64"
    I64 = "i64"
    I32 = "i32"
    I16 = "i16"
    I8 = "i8"
    U64 = "u64"
    U32 = "u32"
    U16 = "u16"
    U8 = "u8"
    BOOL = "bool"
    # Narrow storage kinds (ml_dtypes' numpy types, one element per byte, bfloat16 two): only
    # Cast and the quantization ops read or write them; everything else refuses them.
    BF16 = "bf16"
    F8E4M3FN = "f8e4m3fn"
    F8E4M3FNUZ = "f8e4m3fnuz"
    F8E5M2 = "f8e5m2"
    F8E5M2FNUZ = "f8e5m2fnuz"
    F4E2M1 = "f4e2m1"
    I4 = "i4"
    U4 = "u4"
    I2 = "i2"
    U2 = "u2"

    @property
    def np_dtype(self) -> np.dtype:
        return np.dtype(_NP[self])

    @property
    def itemsize(self) -> int:
        return self.np_dtype.itemsize

    @property
    def is_float(self) -> bool:
        return self in _FLOATS

    @property
    def is_int(self) -> bool:
        """A signed or unsigned integer kind (not bool)."""
        return self in _SIGNED or self in _UNSIGNED

    @property
    def is_narrow(self) -> bool:
        """A narrow storage kind (bfloat16, float8/float4, 4- and 2-bit integers)."""
        return self in _NARROW

    @property
    def is_unsigned(self) -> bool:
        """Compares and divides without sign: the unsigned integers, and bool."""
        return self in _UNSIGNED or self is ElemKind.BOOL

    @classmethod
    def from_numpy(cls, dtype: np.dtype | type) -> ElemKind:
        dt = np.dtype(dtype)
        for kind, name in _NP.items():
            if np.dtype(name) == dt:
                return kind
        raise KeyError(f"no element kind for numpy dtype {dt}")

    @classmethod
    def parse(cls, text: str) -> ElemKind:
        return cls(text)


_NP: dict[ElemKind, str | type] = {
    ElemKind.F32: "float32",
    ElemKind.F16: "float16",
    ElemKind.F64: "float64",
    ElemKind.I64: "int64",
    ElemKind.I32: "int32",
    ElemKind.I16: "int16",
    ElemKind.I8: "int8",
    ElemKind.U64: "uint64",
    ElemKind.U32: "uint32",
    ElemKind.U16: "uint16",
    ElemKind.U8: "uint8",
    ElemKind.BOOL: "bool",
    ElemKind.BF16: ml_dtypes.bfloat16,
    ElemKind.F8E4M3FN: ml_dtypes.float8_e4m3fn,
    ElemKind.F8E4M3FNUZ: ml_dtypes.float8_e4m3fnuz,
    ElemKind.F8E5M2: ml_dtypes.float8_e5m2,
    ElemKind.F8E5M2FNUZ: ml_dtypes.float8_e5m2fnuz,
    ElemKind.F4E2M1: ml_dtypes.float4_e2m1fn,
    ElemKind.I4: ml_dtypes.int4,
    ElemKind.U4: ml_dtypes.uint4,
    ElemKind.I2: ml_dtypes.int2,
    ElemKind.U2: ml_dtypes.uint2,
}
_FLOATS = frozenset({ElemKind.F32, ElemKind.F16, ElemKind.F64})
_SIGNED = frozenset({ElemKind.I64, ElemKind.I32, ElemKind.I16, ElemKind.I8})
_UNSIGNED = frozenset({ElemKind.U64, ElemKind.U32, ElemKind.U16, ElemKind.U8})
#: Element kinds by family, for the converters' and emitters' type checks.
FLOAT_KINDS = tuple(k for k in ElemKind if k in _FLOATS)
INT_KINDS = tuple(k for k in ElemKind if k in _SIGNED or k in _UNSIGNED)
NUMERIC_KINDS = FLOAT_KINDS + INT_KINDS
#: The narrow storage kinds: values of these types are converted (Cast, QuantizeLinear /
#: DequantizeLinear), never computed on.
NARROW_KINDS = tuple(
    k
    for k in ElemKind
    if not (k in _FLOATS or k in _SIGNED or k in _UNSIGNED or k is ElemKind.BOOL)
)
_NARROW = frozenset(NARROW_KINDS)
#: The float8 kinds (ONNX's Cast and QuantizeLinear saturate into their range by default).
FLOAT8_KINDS = (ElemKind.F8E4M3FN, ElemKind.F8E4M3FNUZ, ElemKind.F8E5M2, ElemKind.F8E5M2FNUZ)
#: Every kind ops compute on (the narrow storage kinds are not among them).
ALL_KINDS = NUMERIC_KINDS + (ElemKind.BOOL,)


@dataclass(frozen=True)
class TensorType:
    """A tensor type: element kind, static shape and (for quantized kinds) scale/offset."""

    elem: ElemKind
    shape: tuple[int, ...]
    scale: float | None = None
    offset: int | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "shape", tuple(int(d) for d in self.shape))

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    @property
    def size_bytes(self) -> int:
        return self.numel * self.elem.itemsize

    @property
    def np_dtype(self) -> np.dtype:
        return self.elem.np_dtype

    def with_shape(self, shape: tuple[int, ...] | list[int]) -> TensorType:
        return TensorType(self.elem, tuple(shape), self.scale, self.offset)

    def with_elem(self, elem: ElemKind) -> TensorType:
        return TensorType(elem, self.shape)

    def strides(self) -> tuple[int, ...]:
        """Row-major strides in elements."""
        out, acc = [], 1
        for d in reversed(self.shape):
            out.append(acc)
            acc *= d
        return tuple(reversed(out))

    def __str__(self) -> str:
        dims = "x".join(str(d) for d in self.shape)
        q = f":{self.scale!r},{self.offset}" if self.scale is not None else ""
        return f"{self.elem.value}<{dims}{q}>"

    @classmethod
    def parse(cls, text: str) -> TensorType:
        text = text.strip()
        lt = text.index("<")
        if not text.endswith(">"):
            raise ValueError(f"bad type '{text}'")
        elem = ElemKind.parse(text[:lt])
        body = text[lt + 1 : -1]
        scale = offset = None
        if ":" in body:
            body, q = body.split(":", 1)
            s, o = q.split(",")
            scale, offset = float(s), int(o)
        shape = tuple(int(d) for d in body.split("x")) if body else ()
        return cls(elem, shape, scale, offset)

    @classmethod
    def of(cls, array: np.ndarray) -> TensorType:
        return cls(ElemKind.from_numpy(array.dtype), tuple(array.shape))


def f32(*shape: int) -> TensorType:
    return TensorType(ElemKind.F32, shape)


def i64(*shape: int) -> TensorType:
    return TensorType(ElemKind.I64, shape)


def broadcast_shapes(*shapes: tuple[int, ...]) -> tuple[int, ...]:
    """Multidirectional (numpy/ONNX) broadcasting; raises ValueError if incompatible."""
    rank = max((len(s) for s in shapes), default=0)
    out = []
    for i in range(rank):
        dim = 1
        for s in shapes:
            j = i - (rank - len(s))
            if j < 0:
                continue
            d = s[j]
            if d == 1:
                continue
            if dim not in (1, d):
                raise ValueError(f"shapes {' and '.join(map(str, shapes))} do not broadcast")
            dim = d
        out.append(dim)
    return tuple(out)
