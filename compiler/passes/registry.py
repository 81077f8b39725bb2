"""Every pass by name, graph and low-level: the one explicit registry (no import-time
registration). The CLI's `--stop-after` / `--disable-pass`, the per-pass memory report and the
tests look passes up here; the default orders are in `pipelines.py` and
`compiler.lir.pipeline`.
"""

from __future__ import annotations

import re

from compiler.errors import CompilerError
from compiler.lir.passes.accumulate import SumPostOp
from compiler.lir.passes.buffer_sharing import BufferSharing
from compiler.lir.passes.concat import ZeroCopyConcat
from compiler.lir.passes.copy_elim import CopyElimination
from compiler.lir.passes.dead_store import DeadStoreElimination
from compiler.lir.passes.lifetimes import DeadAllocElimination, HoistDealloc, SinkAlloc
from compiler.lir.passes.peephole import Peephole
from compiler.lir.passes.weights import MakeWeightsConst
from compiler.passes.arithmetic import ArithmeticSimplification
from compiler.passes.batchnorm_folding import BatchNormFolding
from compiler.passes.channel_split import ChannelSplit
from compiler.passes.concat_slice import ConcatSliceCleanup
from compiler.passes.constant_folding import ConstantFolding
from compiler.passes.cse import CommonSubexpressionElimination
from compiler.passes.dce import DeadCodeElimination
from compiler.passes.fusion import ActivationFusion
from compiler.passes.lowering import Lower
from compiler.passes.manager import Pass
from compiler.passes.pad_merge import PadMerging
from compiler.passes.reshape import ReshapeMerging
from compiler.passes.transpose_sinking import TransposeSinking

#: Every pass, graph passes first; names are unique across both IRs.
PASSES: tuple[type[Pass], ...] = (
    # graph IR
    ConstantFolding,
    DeadCodeElimination,
    CommonSubexpressionElimination,
    TransposeSinking,
    ReshapeMerging,
    ArithmeticSimplification,
    ConcatSliceCleanup,
    BatchNormFolding,
    PadMerging,
    ActivationFusion,
    Lower,
    ChannelSplit,
    # low-level IR
    Peephole,
    DeadStoreElimination,
    CopyElimination,
    ZeroCopyConcat,
    SumPostOp,
    BufferSharing,
    DeadAllocElimination,
    HoistDealloc,
    SinkAlloc,
    MakeWeightsConst,
)

_KEBAB = re.compile(r"[a-z][a-z0-9]*(-[a-z0-9]+)*")


def _by_name(passes: tuple[type[Pass], ...]) -> dict[str, type[Pass]]:
    out: dict[str, type[Pass]] = {}
    for cls in passes:
        assert _KEBAB.fullmatch(cls.name), f"{cls.__name__}: pass name {cls.name!r}"
        assert cls.ir_kind in ("graph", "lir"), f"{cls.__name__}: ir_kind {cls.ir_kind!r}"
        assert cls.name not in out, f"two passes are called {cls.name!r}"
        out[cls.name] = cls
    return out


_REGISTRY = _by_name(PASSES)


def registered_passes(ir_kind: str | None = None) -> dict[str, type[Pass]]:
    """Pass classes by name, of one IR ("graph" or "lir") or of both."""
    return {n: c for n, c in _REGISTRY.items() if ir_kind is None or c.ir_kind == ir_kind}


def get_pass(name: str, ir_kind: str | None = None) -> type[Pass]:
    """The pass class called `name`; CompilerError listing the known names if there is none."""
    known = registered_passes(ir_kind)
    try:
        return known[name]
    except KeyError:
        what = {"graph": "graph pass", "lir": "low-level pass"}.get(ir_kind or "", "pass")
        names = ", ".join(sorted(known))
        raise CompilerError(f"unknown {what} '{name}' (known passes: {names})") from None


__all__ = ["PASSES", "get_pass", "registered_passes"]
