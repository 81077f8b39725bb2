"""Concat / Slice / Split cleanups: single-input Concats removed, nested Concats on the same axis
flattened when the inner one has no other user (otherwise it stays, and flattening would only
copy its inputs twice and keep them alive until the outer Concat: DenseNet's feature maps
nest instead, see the zero-copy-concat low-level pass), empty Concat inputs dropped, whole-tensor Slices removed, a Slice inside one input of a
Concat re-targeted at that input (or replaced by it), Concat of adjacent Slices of one tensor
merged, Splits into one piece removed and Splits with one used piece turned into a Slice.
"""

from __future__ import annotations

from compiler.graph.ir import Node, Value
from compiler.graph.ops import _axis
from compiler.passes.rewriter import PatternPass, Rewriter, graph_patterns, producer, single_use


def _concat_axis(node: Node) -> int:
    return _axis(node.attrs["axis"], node.result.type.rank)


def simplify_concat(node: Node, rw: Rewriter) -> bool:
    axis = _concat_axis(node)
    inputs: list[Value] = []
    origin = [node]
    changed = False
    for v in node.operands:
        src = producer(v)
        if src is not None and src.op == "Concat" and _concat_axis(src) == axis and single_use(v):
            inputs.extend(src.operands)
            origin.append(src)
            changed = True
        elif v.type.shape[axis] == 0 and len(node.operands) > 1:
            changed = True
        else:
            inputs.append(v)
    if not inputs:
        return False
    if len(inputs) == 1 and inputs[0].type == node.result.type:
        rw.replace_node(node, inputs[0])
        return True
    merged = _merge_adjacent_slices(inputs, axis)
    if merged is not None:
        inputs = merged
        changed = True
    if not changed:
        return False
    if len(inputs) == 1 and inputs[0].type == node.result.type:
        rw.replace_node(node, inputs[0])
        return True
    new = rw.create("Concat", inputs, dict(node.attrs), name=node.name, origin=origin)
    rw.replace_node(node, new)
    return True


def _unit_slice_along(node: Node, axis: int) -> tuple[Value, int, int] | None:
    """(source, start, end) if `node` is a step-1 Slice that only cuts along `axis`."""
    if node.op != "Slice":
        return None
    x = node.operands[0]
    starts, ends, steps = node.attrs["starts"], node.attrs["ends"], node.attrs["steps"]
    for d, (size, s, e, st) in enumerate(zip(x.type.shape, starts, ends, steps)):
        if st != 1:
            return None
        if d != axis and (s != 0 or min(e, size) != size):
            return None
    return x, starts[axis], min(ends[axis], x.type.shape[axis])


def _merge_adjacent_slices(inputs: list[Value], axis: int) -> list[Value] | None:
    """Concat(Slice(x, a:b), Slice(x, b:c)) -> the whole x when a..c covers x."""
    pieces = []
    for v in inputs:
        node = producer(v)
        cut = _unit_slice_along(node, axis) if node is not None else None
        if cut is None:
            return None
        pieces.append(cut)
    x = pieces[0][0]
    pos = 0
    for src, s, e in pieces:
        if src is not x or s != pos:
            return None
        pos = e
    if pos != x.type.shape[axis]:
        return None
    return [x]


def remove_whole_slice(node: Node, rw: Rewriter) -> bool:
    x = node.operands[0]
    if any(st != 1 for st in node.attrs["steps"]) or any(s != 0 for s in node.attrs["starts"]):
        return False
    if x.type != node.result.type:
        return False
    rw.replace_node(node, x)
    return True


def slice_of_concat(node: Node, rw: Rewriter) -> bool:
    cat = producer(node.operands[0])
    if cat is None or cat.op != "Concat":
        return False
    axis = _concat_axis(cat)
    start, end, step = (node.attrs[k][axis] for k in ("starts", "ends", "steps"))
    if step <= 0:
        return False
    picked = range(start, min(end, cat.result.type.shape[axis]), step)
    if len(picked) == 0:
        return False
    offset = 0
    for v in cat.operands:
        size = v.type.shape[axis]
        if offset <= picked[0] and picked[-1] < offset + size:
            starts = list(node.attrs["starts"])
            ends = list(node.attrs["ends"])
            starts[axis] = picked[0] - offset
            ends[axis] = picked[-1] - offset + 1
            attrs = dict(node.attrs, starts=starts, ends=ends)
            new = rw.create("Slice", [v], attrs, name=node.name, origin=[node, cat])
            rw.replace_node(node, new)
            return True
        offset += size
    return False


def simplify_split(node: Node, rw: Rewriter) -> bool:
    x = node.operands[0]
    if len(node.results) == 1:
        rw.replace_node(node, [x])
        return True
    used = [r for r in node.results if r.users]
    if len(used) != 1:
        return False
    (r,) = used
    axis = _axis(node.attrs["axis"], x.type.rank)
    start = sum(node.attrs["splits"][: r.index])
    starts = [0] * x.type.rank
    ends = list(x.type.shape)
    starts[axis] = start
    ends[axis] = start + node.attrs["splits"][r.index]
    new = rw.create(
        "Slice",
        [x],
        {"starts": starts, "ends": ends, "steps": [1] * x.type.rank},
        name=f"{node.name}_{r.index}",
    )
    rw.replace(r, new.result)
    if node.function is rw.fn and not node.has_users():
        rw.erase(node)
    return True


PATTERNS = graph_patterns(
    {
        "Concat": [simplify_concat],
        "Slice": [remove_whole_slice, slice_of_concat],
        "Split": [simplify_split],
    }
)


class ConcatSliceCleanup(PatternPass):
    name = "concat-slice-cleanup"
    patterns = PATTERNS
    prune_constants = False
