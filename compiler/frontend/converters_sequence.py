"""ONNX sequence ops resolved at import: a sequence is a Python list of graph values.

SequenceConstruct / SequenceEmpty / SequenceInsert / SequenceErase / SplitToSequence build the
list, SequenceAt / SequenceLength / ConcatFromSequence read it. Positions and split sizes must
be compile-time values (constants, or inputs the backend specializes on), so the graph the
compiler sees is static: a sequence leaves only the Slices and Concats that make or use it.
Sequence-typed graph inputs and outputs are refused.
"""

from __future__ import annotations

import numpy as np

from compiler.frontend.converters_math import ANY, check_elem
from compiler.frontend.converters_tensor import const_ints, norm_axis, reshape
from compiler.frontend.onnx_importer import NodeContext
from compiler.frontend.registry import converter
from compiler.graph.ir import Value


def _position(ctx: NodeContext, i: int, length: int, default: int, insert: bool = False) -> int:
    """Input `i` as an index into a sequence of `length`: negative counts from the end (-1 is
    the last element; an insert there goes before it), an insert may also go at `length`."""
    if not ctx.has_input(i):
        return default
    (pos,) = const_ints(ctx, i, "position")
    if not -length <= pos < length + insert:
        raise ctx.unsupported(f"position {pos} is out of range for a sequence of {length}")
    return pos + length if pos < 0 else pos


def _same_kind(ctx: NodeContext, values: list[Value]) -> None:
    for v in values[1:]:
        if v.type.elem != values[0].type.elem:
            raise ctx.unsupported(f"sequence mixes element types {values[0].type} and {v.type}")


@converter("SequenceEmpty")
def convert_sequence_empty(ctx: NodeContext) -> list[Value | None]:
    ctx.check_attrs({"dtype": None})
    ctx.set_sequence(0, [])
    return [None]


@converter("SequenceConstruct")
def convert_sequence_construct(ctx: NodeContext) -> list[Value | None]:
    ctx.check_attrs({})
    values = ctx.inputs()
    for v in values:
        check_elem(ctx, v, ANY)
    _same_kind(ctx, values)
    ctx.set_sequence(0, values)
    return [None]


@converter("SequenceInsert")
def convert_sequence_insert(ctx: NodeContext) -> list[Value | None]:
    ctx.check_attrs({})
    seq, x = ctx.seq(0), ctx.inp(1)
    check_elem(ctx, x, ANY)
    seq.insert(_position(ctx, 2, len(seq), len(seq), insert=True), x)
    _same_kind(ctx, seq)
    ctx.set_sequence(0, seq)
    return [None]


@converter("SequenceErase")
def convert_sequence_erase(ctx: NodeContext) -> list[Value | None]:
    ctx.check_attrs({})
    seq = ctx.seq(0)
    if not seq:
        raise ctx.unsupported("erasing from an empty sequence")
    del seq[_position(ctx, 1, len(seq), len(seq) - 1)]
    ctx.set_sequence(0, seq)
    return [None]


@converter("SequenceAt")
def convert_sequence_at(ctx: NodeContext) -> list[Value | None]:
    ctx.check_attrs({})
    seq = ctx.seq(0)
    if not ctx.has_input(1):
        raise ctx.unsupported("required input 1 (position) is missing")
    return [seq[_position(ctx, 1, len(seq), 0)]]


@converter("SequenceLength")
def convert_sequence_length(ctx: NodeContext) -> list[Value | None]:
    ctx.check_attrs({})
    return [ctx.constant(np.array(len(ctx.seq(0)), np.int64), suffix="length")]


@converter("SplitToSequence")
def convert_split_to_sequence(ctx: NodeContext) -> list[Value | None]:
    ctx.check_attrs({"axis": None, "keepdims": (0, 1)})
    x = ctx.inp(0)
    check_elem(ctx, x, ANY)
    rank = x.type.rank
    axis = norm_axis(ctx, int(ctx.attr("axis", 0)), rank)
    dim = x.type.shape[axis]
    squeeze = False
    if not ctx.has_input(1):
        sizes = [1] * dim
        squeeze = not int(ctx.attr("keepdims", 1))
    else:
        split = ctx.require_const(1, "split")
        if split.ndim == 0:  # equal chunks of this size, the last one smaller
            step = int(split)
            if step <= 0:
                raise ctx.unsupported(f"split size {step} is not positive")
            sizes = [min(step, dim - s) for s in range(0, dim, step)]
        else:
            sizes = const_ints(ctx, 1, "split")
            if sum(sizes) != dim or any(s < 0 for s in sizes):
                raise ctx.unsupported(f"split {sizes} does not add up to dim {axis} ({dim})")
    parts, start = [], 0
    for k, size in enumerate(sizes):
        starts, ends = [0] * rank, list(x.type.shape)
        starts[axis], ends[axis] = start, start + size
        part = ctx.create(
            "Slice", [x], {"starts": starts, "ends": ends, "steps": [1] * rank}, suffix=f"part{k}"
        )
        if squeeze:
            shape = x.type.shape[:axis] + x.type.shape[axis + 1 :]
            part = reshape(ctx, part, shape, f"part{k}_squeezed")
        parts.append(part)
        start += size
    ctx.set_sequence(0, parts)
    return [None]


@converter("ConcatFromSequence")
def convert_concat_from_sequence(ctx: NodeContext) -> list[Value | None]:
    ctx.check_attrs({"axis": None, "new_axis": (0, 1)})
    seq = ctx.seq(0)
    if not seq:
        raise ctx.unsupported("concatenating an empty sequence")
    rank = seq[0].type.rank
    new_axis = int(ctx.attr("new_axis", 0))
    axis = norm_axis(ctx, int(ctx.attr("axis")), rank + new_axis)
    if new_axis:
        seq = [
            reshape(ctx, v, v.type.shape[:axis] + (1,) + v.type.shape[axis:], f"item{k}_axis")
            for k, v in enumerate(seq)
        ]
    if len(seq) == 1:
        return [seq[0]]
    return [ctx.create("Concat", seq, {"axis": axis})]
