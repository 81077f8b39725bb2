"""The default graph pass pipelines the lead's `compiler/pipeline.py` runs: graph optimisations
before lowering, the lowering pass for a backend policy, and the same optimisations again after.
"""

from __future__ import annotations

from compiler.passes.arithmetic import ArithmeticSimplification
from compiler.passes.batchnorm_folding import BatchNormFolding
from compiler.passes.channel_split import ChannelSplit
from compiler.passes.concat_slice import ConcatSliceCleanup
from compiler.passes.constant_folding import ConstantFolding
from compiler.passes.cse import CommonSubexpressionElimination
from compiler.passes.dce import DeadCodeElimination
from compiler.passes.fusion import ActivationFusion
from compiler.passes.lowering import Lower, LoweringPolicy
from compiler.passes.manager import GraphPass
from compiler.passes.pad_merge import PadMerging
from compiler.passes.reshape import ReshapeMerging
from compiler.passes.transpose_sinking import TransposeSinking


def graph_opt_passes() -> list[GraphPass]:
    """The default order: fold and clean first, then the structural rewrites, then fusions
    (BatchNorm and pads into Conv before activations, since a fused activation blocks them),
    then a final fold and sweep."""
    return [
        ConstantFolding(),
        DeadCodeElimination(),
        CommonSubexpressionElimination(),
        TransposeSinking(),
        ReshapeMerging(),
        ArithmeticSimplification(),
        ConcatSliceCleanup(),
        BatchNormFolding(),
        PadMerging(),
        ActivationFusion(),
        ConstantFolding(),
        DeadCodeElimination(),
    ]


def lowering_pass(policy: str | LoweringPolicy = "cpu") -> GraphPass:
    """The `lower` pass for a backend policy: "cpu" (default) or "lower-all"."""
    return Lower(policy)


def post_lowering_passes() -> list[GraphPass]:
    """Optimisations after lowering (the same list; lowering exposes new opportunities), then
    channel splitting, which measures the graph as the scheduler will see it."""
    return [*graph_opt_passes(), ChannelSplit()]
