"""Graph passes: importing this package registers every built-in pass with the pass manager."""

from compiler.passes import (  # noqa: F401  (imported for registration)
    arithmetic,
    batchnorm_folding,
    concat_slice,
    constant_folding,
    cse,
    dce,
    fusion,
    lowering,
    pad_merge,
    reshape,
    transpose_sinking,
)
from compiler.passes.manager import GraphPass, get_pass, register_pass, registered_passes
from compiler.passes.pipelines import graph_opt_passes, lowering_pass, post_lowering_passes

__all__ = [
    "GraphPass",
    "get_pass",
    "graph_opt_passes",
    "lowering_pass",
    "post_lowering_passes",
    "register_pass",
    "registered_passes",
]
