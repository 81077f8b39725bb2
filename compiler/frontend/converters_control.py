"""ONNX control flow -> graph IR, for graphs that are static once shapes and shape-like inputs
are known: an If whose condition is a compile-time value imports the branch it takes; Loop
(with a compile-time trip count, and a condition that folds to a constant every iteration)
and Scan (over a static sequence length) are unrolled, their body imported once per
iteration (onnx_importer.Importer.inline_graph). Each unrolled iteration shows in the graph,
schedule and memory views like any other nodes.
"""

from __future__ import annotations

import numpy as np
import onnx

from compiler.frontend.converters_tensor import reshape
from compiler.frontend.onnx_importer import NodeContext
from compiler.frontend.registry import converter
from compiler.graph.ir import Constant, Value

#: Iterations beyond which unrolling is refused (the graph would grow past what is useful).
MAX_UNROLL = 4096


def _graph(ctx: NodeContext, key: str) -> onnx.GraphProto:
    return next(a.g for a in ctx.node.attribute if a.name == key)


def _tensor_outputs(ctx: NodeContext, graph: onnx.GraphProto, what: str) -> None:
    for o in graph.output:
        if o.type.WhichOneof("value") not in (None, "tensor_type"):
            raise ctx.unsupported(f"{what} output '{o.name}' is not a tensor (sequence/optional)")


def _stack(ctx: NodeContext, steps: list[Value], axis: int, tag: str) -> Value:
    """The per-iteration values stacked along a new `axis`."""
    parts = []
    for i, v in enumerate(steps):
        shape = list(v.type.shape)
        shape.insert(axis, 1)
        parts.append(reshape(ctx, v, tuple(shape), f"{tag}_{i}"))
    return parts[0] if len(parts) == 1 else ctx.create("Concat", parts, {"axis": axis}, suffix=tag)


@converter("If")
def convert_if(ctx: NodeContext) -> list[Value | None]:
    ctx.check_attrs({"then_branch": None, "else_branch": None})
    cond = ctx.require_const(0, "cond").reshape(-1)
    if cond.size != 1:
        raise ctx.unsupported("the condition must hold one value")
    key = "then_branch" if bool(cond[0]) else "else_branch"
    branch = _graph(ctx, key)
    _tensor_outputs(ctx, branch, key)
    outs = ctx.imp.inline_graph(branch, ctx)
    if len(outs) != ctx.num_outputs:
        raise ctx.unsupported(f"{key} has {len(outs)} outputs, the If {ctx.num_outputs}")
    return list(outs)


@converter("Loop")
def convert_loop(ctx: NodeContext) -> list[Value | None]:
    ctx.check_attrs({"body": None})
    body = _graph(ctx, "body")
    _tensor_outputs(ctx, body, "body")
    trips = ctx.require_const(0, "M").reshape(-1) if ctx.has_input(0) else None
    if trips is None:
        raise ctx.unsupported("a Loop without a trip count (M) cannot be unrolled")
    m = int(trips[0])
    if m > MAX_UNROLL:
        raise ctx.unsupported(f"trip count {m} is past the unrolling limit {MAX_UNROLL}")
    keep = bool(ctx.require_const(1, "cond").reshape(-1)[0]) if ctx.has_input(1) else True
    carried = [ctx.inp(i) for i in range(2, ctx.num_inputs)]
    n_carried = len(carried)
    names = [i.name for i in body.input]
    scans: list[list[Value]] = [[] for _ in range(len(body.output) - 1 - n_carried)]
    it = 0
    while keep and it < m:
        bind = dict(zip(names[2:], carried))
        bind[names[0]] = ctx.constant(np.array(it, np.int64), suffix=f"iter{it}")
        bind[names[1]] = ctx.constant(np.array(True), suffix=f"cond{it}")
        outs = ctx.imp.inline_graph(body, ctx, bind, tag=f".iter{it}")
        cond = outs[0]
        if not isinstance(cond, Constant):
            raise ctx.unsupported(
                f"the loop condition of iteration {it} depends on run-time values"
            )
        keep = bool(np.asarray(cond.data).reshape(-1)[0])
        carried = outs[1 : 1 + n_carried]
        for acc, v in zip(scans, outs[1 + n_carried :]):
            acc.append(v)
        it += 1
    results: list[Value | None] = list(carried)
    for j, acc in enumerate(scans):
        if not acc:
            raise ctx.unsupported("a scan output of a Loop that runs no iteration")
        results.append(_stack(ctx, acc, 0, f"scan{j}"))
    return results


@converter("Scan")
def convert_scan(ctx: NodeContext) -> list[Value | None]:
    ctx.check_attrs(
        {
            "body": None,
            "num_scan_inputs": None,
            "scan_input_axes": None,
            "scan_input_directions": None,
            "scan_output_axes": None,
            "scan_output_directions": None,
        }
    )
    if ctx.opset < 9:
        raise ctx.unsupported("Scan before opset 9 (with sequence_lens)")
    body = _graph(ctx, "body")
    _tensor_outputs(ctx, body, "body")
    n_scan = int(ctx.attr("num_scan_inputs"))
    ins = ctx.inputs()
    n_state = len(ins) - n_scan
    states, xs = ins[:n_state], ins[n_state:]
    in_axes = list(ctx.attr("scan_input_axes", [0] * n_scan))
    in_dirs = list(ctx.attr("scan_input_directions", [0] * n_scan))
    n_out = len(body.output) - n_state
    out_axes = list(ctx.attr("scan_output_axes", [0] * n_out))
    out_dirs = list(ctx.attr("scan_output_directions", [0] * n_out))
    axes = [a % x.type.rank for a, x in zip(in_axes, xs)]
    lengths = {x.type.shape[a] for x, a in zip(xs, axes)}
    if len(lengths) != 1:
        raise ctx.unsupported(f"scan inputs have different sequence lengths {sorted(lengths)}")
    steps = lengths.pop()
    if steps > MAX_UNROLL:
        raise ctx.unsupported(f"sequence length {steps} is past the unrolling limit {MAX_UNROLL}")
    names = [i.name for i in body.input]
    collected: list[list[Value]] = [[] for _ in range(n_out)]
    for t in range(steps):
        bind = dict(zip(names[:n_state], states))
        for j, (x, a, d) in enumerate(zip(xs, axes, in_dirs)):
            pos = steps - 1 - t if d else t
            rank = x.type.rank
            starts = [pos if k == a else 0 for k in range(rank)]
            ends = [pos + 1 if k == a else x.type.shape[k] for k in range(rank)]
            piece = ctx.create(
                "Slice",
                [x],
                {"starts": starts, "ends": ends, "steps": [1] * rank},
                suffix=f"in{j}_t{t}",
            )
            shape = tuple(s for k, s in enumerate(x.type.shape) if k != a)
            bind[names[n_state + j]] = reshape(ctx, piece, shape, f"in{j}_t{t}_slice")
        outs = ctx.imp.inline_graph(body, ctx, bind, tag=f".t{t}")
        states = outs[:n_state]
        for acc, v in zip(collected, outs[n_state:]):
            acc.append(v)
    results: list[Value | None] = list(states)
    for j, (acc, a, d) in enumerate(zip(collected, out_axes, out_dirs)):
        if not acc:
            raise ctx.unsupported("a scan output of a Scan over an empty sequence")
        order = acc[::-1] if d else acc
        results.append(_stack(ctx, order, a % (acc[0].type.rank + 1), f"out{j}"))
    return results
