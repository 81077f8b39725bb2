"""Activation fusion: Relu / Clip / LeakyRelu / Sigmoid / Tanh after a Conv or FullyConnected
(whose activation is still "none" and whose result has one use) becomes the producer's fused
`activation` / `act_args` attributes. The fused node is new and named `<producer>_<activation>`
(conv_3 + relu_3 -> conv_3_relu), with both nodes as its origin.

`act_args` conventions: relu (), clip (min, max), leaky_relu (alpha,), sigmoid (), tanh ().
Backends that cannot run a fused activation get it split off again by `lower`, which records the
backend's set in `module.meta["fused_activations"]` so that the optimisations after lowering only
fuse what the backend runs.
"""

from __future__ import annotations

from functools import partial

from compiler.graph.ir import Function, Node
from compiler.passes.manager import GraphPass
from compiler.passes.rewriter import Rewriter, apply_patterns, producer, single_use

FUSIBLE_PRODUCERS = ("Conv", "FullyConnected")

#: op -> (activation name, function of the node's attrs giving act_args)
ACTIVATIONS = {
    "Relu": ("relu", lambda a: ()),
    "Clip": ("clip", lambda a: (a["min"], a["max"])),
    "LeakyRelu": ("leaky_relu", lambda a: (a["alpha"],)),
    "Sigmoid": ("sigmoid", lambda a: ()),
    "Tanh": ("tanh", lambda a: ()),
}


def fuse_activation(node: Node, rw: Rewriter, allowed: frozenset[str] | None = None) -> bool:
    act, args = ACTIVATIONS[node.op]
    if allowed is not None and act not in allowed:
        return False
    src = producer(node.operands[0])
    if (
        src is None
        or src.op not in FUSIBLE_PRODUCERS
        or src.attrs["activation"] != "none"
        or not single_use(src.result)
    ):
        return False
    attrs = dict(src.attrs, activation=act, act_args=args(node.attrs))
    fused = rw.create(src.op, src.operands, attrs, name=f"{src.name}_{act}", origin=[src, node])
    rw.replace_node(node, fused)
    return True


class ActivationFusion(GraphPass):
    name = "activation-fusion"

    def __init__(self, activations: frozenset[str] | None = None) -> None:
        #: Activations to fuse; None: all, or the backend's set once `lower` has run.
        self.activations = activations

    def run(self, fn: Function) -> bool:
        allowed = self.activations
        if allowed is None:
            allowed = fn.module.meta.get("fused_activations")
        pattern = partial(fuse_activation, allowed=allowed)
        return apply_patterns(fn, {op: [pattern] for op in ACTIVATIONS})
