"""Low-level IR optimisations (pipeline step 9), one module per pass family."""

from __future__ import annotations

from compiler.lir.passes import buffer_sharing, copy_elim, dead_store, lifetimes, peephole, weights
from compiler.lir.passes.base import (
    LIRPass,
    get_lir_pass,
    register_lir_pass,
    registered_lir_passes,
)

__all__ = [
    "LIRPass",
    "buffer_sharing",
    "copy_elim",
    "dead_store",
    "get_lir_pass",
    "lifetimes",
    "peephole",
    "register_lir_pass",
    "registered_lir_passes",
    "weights",
]
