"""ONNX indexing, scan, mask and summation ops -> graph IR: GatherElements, GatherND,
ScatterND, ScatterElements (and the deprecated Scatter), TopK, CumSum, Trilu, Einsum.

TopK becomes ArgTopK (the indices) and GatherElements of them (the values). Shape-like operands
(TopK's K, CumSum's axis, Trilu's k) must be compile-time constants; indices may be run-time
values (the kernels check their range).
"""

from __future__ import annotations

import numpy as np

from compiler.errors import ShapeError
from compiler.frontend.converters_math import ANY, NUMERIC, check_elem
from compiler.frontend.converters_tensor import INT_KINDS, const_ints, norm_axis
from compiler.frontend.onnx_importer import NodeContext
from compiler.frontend.registry import converter
from compiler.graph.ir import Constant, Value
from compiler.graph.ops_extra import SCATTER_REDUCTIONS, parse_einsum
from compiler.graph.types import ElemKind


def _const_scalar(ctx: NodeContext, i: int, what: str) -> int:
    vals = const_ints(ctx, i, what)
    if len(vals) != 1:
        raise ctx.unsupported(f"'{what}' must hold one value, got {vals}")
    return vals[0]


def _check_const_indices(ctx: NodeContext, idx: Value, n: int | np.ndarray) -> None:
    """Refuse constant indices out of range at import (run-time ones are checked by kernels)."""
    if isinstance(idx, Constant) and idx.data is not None and idx.data.size:
        arr = idx.data
        if np.any(arr < -np.asarray(n)) or np.any(arr >= np.asarray(n)):
            raise ctx.unsupported("indices out of range")


def _data_and_indices(ctx: NodeContext) -> tuple[Value, Value]:
    """Operands 0 (data, any kind) and 1 (indices, i64 or i32) of a gather or scatter."""
    data, idx = ctx.inp(0), ctx.inp(1)
    check_elem(ctx, data, ANY)
    check_elem(ctx, idx, INT_KINDS, "indices")
    return data, idx


@converter("GatherElements")
def convert_gather_elements(ctx: NodeContext) -> list[Value | None]:
    ctx.check_attrs({"axis": None})
    data, idx = _data_and_indices(ctx)
    axis = norm_axis(ctx, int(ctx.attr("axis", 0)), data.type.rank)
    if idx.type.rank != data.type.rank:
        raise ctx.unsupported(f"indices {idx.type} and data {data.type} differ in rank")
    _check_const_indices(ctx, idx, data.type.shape[axis])
    return [ctx.create("GatherElements", [data, idx], {"axis": axis})]


@converter("GatherND")
def convert_gather_nd(ctx: NodeContext) -> list[Value | None]:
    ctx.check_attrs({"batch_dims": None})
    data, idx = _data_and_indices(ctx)
    b = int(ctx.attr("batch_dims", 0))
    q = idx.type.shape[-1] if idx.type.rank else 0
    _check_const_indices(ctx, idx, np.asarray(data.type.shape[b : b + q]))
    return [ctx.create("GatherND", [data, idx], {"batch_dims": b})]


def _reduction(ctx: NodeContext, data: Value) -> str:
    red = ctx.attr("reduction", "none")
    if red not in SCATTER_REDUCTIONS:
        raise ctx.unsupported(f"reduction '{red}' (supported: {', '.join(SCATTER_REDUCTIONS)})")
    if red != "none" and data.type.elem == ElemKind.BOOL:
        raise ctx.unsupported(f"reduction '{red}' of bool data")
    return red


@converter("ScatterND")
def convert_scatter_nd(ctx: NodeContext) -> list[Value | None]:
    ctx.check_attrs({"reduction": None})
    data, idx = _data_and_indices(ctx)
    upd, red = ctx.inp(2), _reduction(ctx, data)
    q = idx.type.shape[-1] if idx.type.rank else 0
    _check_const_indices(ctx, idx, np.asarray(data.type.shape[:q]))
    return [ctx.create("ScatterND", [data, idx, upd], {"reduction": red})]


@converter("ScatterElements", "Scatter")
def convert_scatter_elements(ctx: NodeContext) -> list[Value | None]:
    ctx.check_attrs({"axis": None, "reduction": None})
    data, idx = _data_and_indices(ctx)
    upd, red = ctx.inp(2), _reduction(ctx, data)
    axis = norm_axis(ctx, int(ctx.attr("axis", 0)), data.type.rank)
    _check_const_indices(ctx, idx, data.type.shape[axis])
    return [ctx.create("ScatterElements", [data, idx, upd], {"axis": axis, "reduction": red})]


@converter("TopK")
def convert_top_k(ctx: NodeContext) -> list[Value | None]:
    x = ctx.inp(0)
    check_elem(ctx, x, NUMERIC)
    if ctx.opset < 10:
        ctx.check_attrs({"axis": None, "k": None})
        k = int(ctx.attr("k"))
    else:
        ctx.check_attrs({"axis": None, "largest": (0, 1), "sorted": (0, 1)})
        k = _const_scalar(ctx, 1, "K")
    axis = norm_axis(ctx, int(ctx.attr("axis", -1)), x.type.rank)
    if not 0 <= k <= x.type.shape[axis]:
        raise ctx.unsupported(f"K = {k} is not in [0, {x.type.shape[axis]}]")
    attrs = {
        "k": k,
        "axis": axis,
        "largest": int(ctx.attr("largest", 1)),
        "sorted": int(ctx.attr("sorted", 1)),
    }
    idx = ctx.create("ArgTopK", [x], attrs, suffix="indices")
    values = ctx.create("GatherElements", [x, idx], {"axis": axis}, suffix="values")
    return [values, idx]


@converter("CumSum", "CumProd")
def convert_cumsum(ctx: NodeContext) -> list[Value | None]:
    ctx.check_attrs({"exclusive": (0, 1), "reverse": (0, 1)})
    x = ctx.inp(0)
    check_elem(ctx, x, NUMERIC)
    if x.type.rank == 0:
        raise ctx.unsupported("scalar input")
    axis = norm_axis(ctx, _const_scalar(ctx, 1, "axis"), x.type.rank)
    attrs = {
        "axis": axis,
        "exclusive": int(ctx.attr("exclusive", 0)),
        "reverse": int(ctx.attr("reverse", 0)),
    }
    return [ctx.create(ctx.op_type, [x], attrs)]


@converter("Trilu")
def convert_trilu(ctx: NodeContext) -> list[Value | None]:
    ctx.check_attrs({"upper": (0, 1)})
    x = ctx.inp(0)
    check_elem(ctx, x, ANY)
    if x.type.rank < 2:
        raise ctx.unsupported(f"input {x.type} has rank < 2")
    k = _const_scalar(ctx, 1, "k") if ctx.has_input(1) else 0
    return [ctx.create("Trilu", [x], {"k": k, "upper": int(ctx.attr("upper", 1))})]


@converter("Einsum")
def convert_einsum(ctx: NodeContext) -> list[Value | None]:
    ctx.check_attrs({"equation": None})
    xs = ctx.inputs()
    if not xs:
        raise ctx.unsupported("no inputs")
    for x in xs:
        check_elem(ctx, x, NUMERIC)
        if x.type.elem != xs[0].type.elem:
            raise ctx.unsupported(f"inputs have different element types {xs[0].type}, {x.type}")
    equation = str(ctx.attr("equation", ""))
    try:
        subs, _ = parse_einsum(equation, [x.type.rank for x in xs])
    except ShapeError as e:
        raise ctx.unsupported(f"equation '{equation}': {e.message}") from None
    for s, x in zip(subs, xs):
        for c in set(s):
            sizes = {x.type.shape[i] for i, d in enumerate(s) if d == c}
            if len(sizes) > 1:
                raise ctx.unsupported(f"equation '{equation}': '{c}' has sizes {sorted(sizes)}")
    return [ctx.create("Einsum", xs, {"equation": equation})]
