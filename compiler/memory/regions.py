"""Memory regions and alignment (pipeline step 10): how every compiled program's memory is laid out.

A program addresses three regions, each from its own base pointer starting at offset 0:
`constant` (constant weights), `mutable` (mutable weights: the inputs and outputs) and
`activations` (the buffers the allocator places). Every buffer offset and region size is a
multiple of `ALIGNMENT`. The memory planner, the arena interpreter and the LLVM code generator
all take these from here; `REGIONS` is also the order of the base pointers generated code takes.
"""

from __future__ import annotations

#: Bytes: one cache line, and the widest vector (AVX-512) loads without splitting.
ALIGNMENT = 64

CONSTANT_REGION = "constant"
MUTABLE_REGION = "mutable"
ACTIVATION_REGION = "activations"
REGIONS = (CONSTANT_REGION, MUTABLE_REGION, ACTIVATION_REGION)
#: The regions holding weights (the declare section), in declaration order.
WEIGHT_REGIONS = (CONSTANT_REGION, MUTABLE_REGION)


def align(n: int, alignment: int = ALIGNMENT) -> int:
    """`n` rounded up to a multiple of `alignment`."""
    return (n + alignment - 1) // alignment * alignment


__all__ = [
    "ACTIVATION_REGION",
    "ALIGNMENT",
    "CONSTANT_REGION",
    "MUTABLE_REGION",
    "REGIONS",
    "WEIGHT_REGIONS",
    "align",
]
