"""Activation fusion: an activation op (the ops of the table in compiler/graph/activations.py:
Relu, Clip, LeakyRelu, Sigmoid, Tanh) after a Conv or FullyConnected (whose activation is still
"none" and whose result has one use) becomes the producer's fused `activation` / `act_args`
attributes, `act_args` being the op's attributes the table names. The fused node is new and
named `<producer>_<activation>` (conv_3 + relu_3 -> conv_3_relu), with both nodes as its origin.

Backends that cannot run a fused activation get it split off again by `lower`, which records the
backend's set in `module.meta["fused_activations"]` so that the optimisations after lowering only
fuse what the backend runs.
"""

from __future__ import annotations

from functools import partial

from compiler.graph.activations import BY_OP, NONE
from compiler.graph.ir import Function, Node
from compiler.passes.manager import GraphPass
from compiler.passes.rewriter import Rewriter, apply_patterns, producer, single_use

FUSIBLE_PRODUCERS = ("Conv", "FullyConnected")


def fuse_activation(node: Node, rw: Rewriter, allowed: frozenset[str] | None = None) -> bool:
    act = BY_OP[node.op]
    if allowed is not None and act.name not in allowed:
        return False
    src = producer(node.operands[0])
    if (
        src is None
        or src.op not in FUSIBLE_PRODUCERS
        or src.attrs["activation"] != NONE
        or not single_use(src.result)
    ):
        return False
    attrs = dict(src.attrs, activation=act.name, act_args=act.args_of(node.attrs))
    name = f"{src.name}_{act.name}"
    fused = rw.create(src.op, src.operands, attrs, name=name, origin=[src, node])
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
        return apply_patterns(fn, {op: [pattern] for op in BY_OP})
