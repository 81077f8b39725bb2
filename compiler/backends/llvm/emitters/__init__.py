"""The LLVM emitter table: instruction kind -> emitter, one module per instruction family."""

from __future__ import annotations

from compiler.backends.llvm.emitters import (  # noqa: F401 - the families register on import
    conv,
    elementwise,
    indexing,
    matmul,
    pool,
    qgemm,
    quant,
    reduce,
    scalar_extra,
    tensor,
)
from compiler.backends.llvm.emitters.common import (
    ACCUMULATING,
    EMITTERS,
    NO_CODE,
    accepts,
    register,
)
from compiler.backends.llvm.emitters.elementwise import SCALAR, emit_elementwise

for _kind in SCALAR:
    EMITTERS.setdefault(_kind, emit_elementwise)

__all__ = ["ACCUMULATING", "EMITTERS", "NO_CODE", "accepts", "register"]
