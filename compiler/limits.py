"""Resource limits of one compile: how much memory a model may plan and fold, in bytes.

`CompileOptions.max_memory` bounds the planned arena (and any single tensor, checked right after
import so no pass or kernel ever allocates an impossible shape); `CompileOptions.fold_limit`
bounds what import-time folding and the constant-folding pass may materialise (larger results
stay nodes). `parse_size("8GiB")` reads the sizes users type (`--max-memory 8GiB`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np

from compiler.errors import CompilerError, ExecutionError, ResourceLimitError

KIB, MIB, GIB, TIB = 1 << 10, 1 << 20, 1 << 30, 1 << 40

#: Default limit on the planned arena (all three regions) and on any single tensor.
DEFAULT_MAX_MEMORY = 8 * GIB
#: Default limit on one tensor materialised at compile time (import folding, constant folding).
DEFAULT_FOLD_LIMIT = 256 * MIB
#: Largest single dim the compiler accepts anywhere (kernels index with 64-bit integers, but a
#: dim past 2^31 is always a corrupt or hostile model at the sizes a CPU arena can hold).
MAX_DIM = (1 << 31) - 1

_UNITS = {
    "": 1,
    "b": 1,
    "k": KIB,
    "kb": 1000,
    "kib": KIB,
    "m": MIB,
    "mb": 1000**2,
    "mib": MIB,
    "g": GIB,
    "gb": 1000**3,
    "gib": GIB,
    "t": TIB,
    "tb": 1000**4,
    "tib": TIB,
}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*([a-z]*)\s*$", re.I)


def parse_size(text: str | int) -> int:
    """Bytes in a size such as `8GiB`, `512 MiB`, `1.5G`, `4096` (binary units for K/M/G/T and
    KiB/MiB/..., decimal for KB/MB/...). Raises CompilerError on anything else or on 0."""
    if isinstance(text, int):
        value = text
    else:
        m = _SIZE.match(text)
        unit = m.group(2).lower() if m else None
        if m is None or unit not in _UNITS:
            raise CompilerError(
                f"cannot read the size '{text}'", hint="write it like 8GiB, 512MiB, 1.5G or 4096"
            )
        value = int(float(m.group(1)) * _UNITS[unit])
    if value <= 0:
        raise CompilerError(f"a size limit must be positive, got '{text}'")
    return value


def format_size(n: float) -> str:
    """`8.0 GiB`, `300.0 MiB`, `512 B`: the form refusal messages use."""
    if not math.isfinite(n):
        return str(n)
    for unit, size in (("TiB", TIB), ("GiB", GIB), ("MiB", MIB), ("KiB", KIB)):
        if abs(n) >= size:
            return f"{n / size:.1f} {unit}"
    return f"{int(n)} B"


def check_memory(what: str, nbytes: int, limit: int) -> None:
    """Refuse `what` (a plan, a tensor) when it needs more than `limit` bytes (max_memory)."""
    if nbytes > limit:
        need, have = format_size(nbytes), format_size(limit)
        if need == have:  # 8.0 GiB above 8.0 GiB: say by how much
            need = f"{need} ({nbytes - limit} B more than the limit)"
        raise ResourceLimitError(
            f"{what} needs {need}, above the memory limit of {have}",
            hint="raise it with --max-memory SIZE or CompileOptions.max_memory if the machine "
            "has the memory",
        )


def check_fold(what: str, nbytes: int, limit: int) -> None:
    """Refuse materialising `what` at compile time above `limit` bytes (fold_limit)."""
    if nbytes > limit:
        raise ResourceLimitError(
            f"{what} would be computed at compile time: {format_size(nbytes)}, above the "
            f"constant-folding limit of {format_size(limit)}",
            hint="raise it with CompileOptions.fold_limit",
        )


@contextmanager
def out_of_memory_is_an_error(what: str) -> Iterator[None]:
    """Run time allocations (the arena, copies of outputs) that a plan under max_memory still
    cannot get on this machine (a ulimit, other processes): numpy's MemoryError becomes one
    ExecutionError saying what was being allocated."""
    try:
        yield
    except MemoryError:
        raise ExecutionError(f"out of memory {what}") from None


def ensure_headroom(what: str, nbytes: int) -> None:
    """Refuse `what` unless `nbytes` of address space can still be had. For work that cannot
    fail cleanly (LLVM aborts the process when its own allocations fail): a reservation that
    touches no page, released at once."""
    try:
        probe = np.empty(nbytes, np.uint8)
    except MemoryError:
        raise ResourceLimitError(
            f"{what} needs about {format_size(nbytes)} of memory, which this process cannot get",
            hint="free memory, raise the process's limit (ulimit -v), or plan a smaller model",
        ) from None
    del probe


__all__ = [
    "DEFAULT_FOLD_LIMIT",
    "DEFAULT_MAX_MEMORY",
    "GIB",
    "KIB",
    "MAX_DIM",
    "MIB",
    "TIB",
    "check_fold",
    "check_memory",
    "ensure_headroom",
    "format_size",
    "out_of_memory_is_an_error",
    "parse_size",
]
