"""ONNX normalisations added with real exports -> graph IR: GroupNormalization and
RMSNormalization become the GroupNorm and RMSNorm ops (their lowerings reuse LayerNorm's
primitives); statistics accumulate as stash_type says (float32 or wider: we use double).
"""

from __future__ import annotations

import numpy as np

from compiler.frontend.converters_math import FLOAT_ONLY, check_elem, same_elem, same_kind_operands
from compiler.frontend.converters_tensor import norm_axis
from compiler.frontend.onnx_importer import NodeContext
from compiler.frontend.registry import converter
from compiler.graph.ir import Value


@converter("GroupNormalization")
def convert_group_norm(ctx: NodeContext) -> list[Value | None]:
    ctx.check_attrs({"epsilon": None, "num_groups": None, "stash_type": (1,)})
    x, scale, bias = ctx.inp(0), ctx.inp(1), ctx.inp(2)
    check_elem(ctx, x, FLOAT_ONLY)
    same_elem(ctx, x, scale)
    same_elem(ctx, x, bias)
    if not ctx.has_attr("num_groups"):
        raise ctx.unsupported("attribute 'num_groups' is required")
    g = int(ctx.attr("num_groups"))
    if x.type.rank < 3:
        raise ctx.unsupported(f"input {x.type} has no spatial dims")
    c = x.type.shape[1]
    if g <= 0 or c % g:
        raise ctx.unsupported(f"{g} groups do not divide {c} channels")
    if ctx.opset < 21 and scale.type.shape == (g,) and g != c:
        # Opset 18 scales and shifts per group: repeat each over its group's channels.
        reps = np.full((g,), c // g)
        scale = _per_channel(ctx, scale, reps, "scale")
        bias = _per_channel(ctx, bias, reps, "bias")
    if scale.type.shape != (c,) or bias.type.shape != (c,):
        raise ctx.unsupported(f"scale {scale.type} / bias {bias.type} do not match {c} channels")
    eps = float(x.type.np_dtype.type(ctx.attr("epsilon", 1e-5)))
    return [ctx.create("GroupNorm", [x, scale, bias], {"num_groups": g, "epsilon": eps})]


def _per_channel(ctx: NodeContext, v: Value, reps: np.ndarray, what: str) -> Value:
    g = v.type.shape[0]
    b = ctx.create("Reshape", [v], {"shape": (g, 1)}, suffix=f"{what}_col")
    t = ctx.create("Tile", [b], {"repeats": (1, int(reps[0]))}, suffix=f"{what}_tiled")
    return ctx.create("Reshape", [t], {"shape": (g * int(reps[0]),)}, suffix=f"{what}_c")


@converter("RMSNormalization")
def convert_rms_norm(ctx: NodeContext) -> list[Value | None]:
    ctx.check_attrs({"axis": None, "epsilon": None, "stash_type": (1,)})
    x, scale = same_kind_operands(ctx, FLOAT_ONLY)
    axis = norm_axis(ctx, int(ctx.attr("axis", -1)), x.type.rank)
    eps = float(x.type.np_dtype.type(ctx.attr("epsilon", 1e-5)))
    return [ctx.create("RMSNorm", [x, scale], {"axis": axis, "epsilon": eps})]
