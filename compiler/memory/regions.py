"""Memory regions and alignment (pipeline step 10): how every compiled program's memory is laid out.

A program addresses three regions, each from its own base pointer starting at offset 0:
`constant` (constant weights), `mutable` (mutable weights: the inputs and outputs) and
`activations` (the buffers the allocator places). Every buffer offset and region size is a
multiple of `ALIGNMENT`. The memory planner, the arena interpreter and the LLVM code generator
all take these from here; `REGIONS` is also the order of the base pointers generated code takes.
"""

from __future__ import annotations

from typing import Protocol

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


class ArenaLayout(Protocol):
    """What a backend reads of a memory plan: the planner's `MemoryPlan`, or the arena
    interpreter's no-reuse `NaivePlan` when a compile result has none."""

    alignment: int
    region_sizes: dict[str, int]

    def offset_of(self, name: str) -> tuple[str, int]:
        """(region, byte offset) of a weight or activation buffer."""
        ...


__all__ = [
    "ACTIVATION_REGION",
    "ALIGNMENT",
    "ArenaLayout",
    "CONSTANT_REGION",
    "MUTABLE_REGION",
    "REGIONS",
    "WEIGHT_REGIONS",
    "align",
]
