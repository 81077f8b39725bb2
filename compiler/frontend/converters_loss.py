"""ONNX losses -> graph IR primitives: NegativeLogLikelihoodLoss picks each target's input
(GatherElements over the class axis), weights it (Gather of the class weights), zeroes the
ignored targets (Where) and reduces; SoftmaxCrossEntropyLoss is the same on LogSoftmax of the
scores (its optional second output).
"""

from __future__ import annotations

import numpy as np

from compiler.frontend.converters_math import FLOAT_ONLY, check_elem, same_elem
from compiler.frontend.converters_tensor import INT_KINDS, reshape
from compiler.frontend.onnx_importer import NodeContext
from compiler.frontend.registry import converter
from compiler.graph.ir import Value


def _nll(ctx: NodeContext, logp: Value, target: Value, weight: Value | None) -> Value:
    """The loss of log-probabilities `logp` [N, C, ...] at integer `target` [N, ...]."""
    check_elem(ctx, target, INT_KINDS, "target")
    shape = logp.type.shape
    if target.type.shape != shape[:1] + shape[2:]:
        raise ctx.unsupported(f"target {target.type} does not match input {logp.type}")
    ignore = ctx.attr("ignore_index")
    valid = None
    safe = target
    if ignore is not None:
        ii = ctx.constant(np.array(int(ignore), target.type.np_dtype), suffix="ignore_index")
        valid = ctx.create(
            "Not", [ctx.create("Equal", [target, ii], suffix="ignored")], suffix="kept"
        )
        zero = ctx.constant(np.array(0, target.type.np_dtype), suffix="class0")
        safe = ctx.create("Where", [valid, target, zero], suffix="target_safe")
    idx = reshape(ctx, safe, shape[:1] + (1,) + shape[2:], "target_c")
    picked = reshape(
        ctx,
        ctx.create("GatherElements", [logp, idx], {"axis": 1}, suffix="picked"),
        target.type.shape,
        "picked_n",
    )
    loss = ctx.create("Neg", [picked], suffix="neg")
    w = None
    if weight is not None:
        same_elem(ctx, logp, weight)
        w = ctx.create("Gather", [weight, safe], {"axis": 0}, suffix="weight_n")
    if valid is not None:
        zero_w = ctx.scalar_like(logp, 0.0, "zero_weight")
        one = ctx.scalar_like(logp, 1.0, "one")
        w = ctx.create("Where", [valid, w if w is not None else one, zero_w], suffix="weight_kept")
    if w is not None:
        loss = ctx.create("Mul", [loss, w], suffix="weighted")
    reduction = ctx.attr("reduction", "mean")
    if reduction == "none":
        return loss
    axes = list(range(loss.type.rank))
    total = ctx.create("ReduceSum", [loss], {"axes": axes, "keepdims": 0}, suffix="sum")
    if reduction == "sum":
        return total
    count: Value
    if w is None:
        count = ctx.scalar_like(logp, float(loss.type.numel), "count")
    else:
        count = ctx.create("ReduceSum", [w], {"axes": axes, "keepdims": 0}, suffix="weight_sum")
    return ctx.create("Div", [total, count], suffix="mean")


_ATTRS = {"ignore_index": None, "reduction": ("mean", "sum", "none")}


def _loss_inputs(ctx: NodeContext, what: str) -> tuple[Value, Value, Value | None]:
    """(scores with a class axis 1, labels, optional class weights) of a loss node."""
    ctx.check_attrs(_ATTRS)
    x = ctx.inp(0)
    check_elem(ctx, x, FLOAT_ONLY)
    if x.type.rank < 2:
        raise ctx.unsupported(f"{what} {x.type} has no class axis")
    return x, ctx.inp(1), ctx.inp(2) if ctx.has_input(2) else None


@converter("NegativeLogLikelihoodLoss")
def convert_nll(ctx: NodeContext) -> list[Value | None]:
    x, labels, weight = _loss_inputs(ctx, "input")
    return [_nll(ctx, x, labels, weight)]


@converter("SoftmaxCrossEntropyLoss")
def convert_softmax_cross_entropy(ctx: NodeContext) -> list[Value | None]:
    scores, labels, weight = _loss_inputs(ctx, "scores")
    logp = ctx.create("LogSoftmax", [scores], {"axis": 1}, suffix="log_prob")
    return [_nll(ctx, logp, labels, weight), logp]
