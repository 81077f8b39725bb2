"""ONNX Attention (opsets 23-25) -> graph IR primitives, as the op's own function body
computes it: heads split (3-D inputs), Q and K each scaled by sqrt(scale), the KV cache
concatenated, an additive bias built from attn_mask / is_causal / the sliding window /
nonpad_kv_seqlen, grouped-query heads repeated, MatMul, softcap, Add, Softmax (in
softmax_precision), rows that every key is masked from zeroed, MatMul with V, heads merged.

Masks that are compile-time constants fold into one constant bias; run-time masks and
sequence lengths become Where / Less nodes, so the shapes stay static.
"""

from __future__ import annotations

import math

import numpy as np

from compiler.frontend.converters_math import FLOAT_ONLY, check_elem
from compiler.frontend.converters_tensor import INT_KINDS, reshape
from compiler.frontend.onnx_importer import ONNX_TO_ELEM, NodeContext
from compiler.frontend.registry import converter
from compiler.graph.ir import Constant, Value
from compiler.graph.types import ElemKind


def _split_heads(ctx: NodeContext, v: Value, heads: int, tag: str) -> Value:
    """[B, S, H*D] -> [B, H, S, D]."""
    b, s, hd = v.type.shape
    if hd % heads:
        raise ctx.unsupported(f"{tag} {v.type} does not split into {heads} heads")
    r = reshape(ctx, v, (b, s, heads, hd // heads), f"{tag}_heads")
    return ctx.create("Transpose", [r], {"perm": [0, 2, 1, 3]}, suffix=f"{tag}_bhsd")


def _float_bias(ctx: NodeContext, mask: Value, dtype: np.dtype, tag: str) -> Value:
    """An additive bias from a mask: bool True -> 0, False -> -inf; float masks as they are."""
    if mask.type.elem != ElemKind.BOOL:
        return mask
    zero = ctx.constant(np.array(0, dtype), suffix=f"{tag}_zero")
    ninf = ctx.constant(np.array(-np.inf, dtype), suffix=f"{tag}_ninf")
    return ctx.create("Where", [mask, zero, ninf], suffix=tag)


def _allowed_bias(allowed: np.ndarray, dtype: np.dtype) -> np.ndarray:
    return np.where(allowed, 0, -np.inf).astype(dtype)


@converter("Attention")
def convert_attention(ctx: NodeContext) -> list[Value | None]:
    ctx.check_attrs(
        {
            "is_causal": (0, 1),
            "kv_num_heads": None,
            "q_num_heads": None,
            "qk_matmul_output_mode": (0, 1, 2, 3),
            "scale": None,
            "softcap": None,
            "softmax_precision": None,
            "left_window_size": None,
            "right_window_size": None,
        }
    )
    q, k, v = ctx.inp(0), ctx.inp(1), ctx.inp(2)
    for x in (q, k, v):
        check_elem(ctx, x, FLOAT_ONLY)
    if not q.type.rank == k.type.rank == v.type.rank or q.type.rank not in (3, 4):
        raise ctx.unsupported(f"Q {q.type}, K {k.type}, V {v.type} must all be 3-D or 4-D")
    dtype = q.type.np_dtype
    three_d = q.type.rank == 3
    if three_d:
        if not ctx.has_attr("q_num_heads") or not ctx.has_attr("kv_num_heads"):
            raise ctx.unsupported("3-D inputs need q_num_heads and kv_num_heads")
        q = _split_heads(ctx, q, int(ctx.attr("q_num_heads")), "q")
        k = _split_heads(ctx, k, int(ctx.attr("kv_num_heads")), "k")
        v = _split_heads(ctx, v, int(ctx.attr("kv_num_heads")), "v")
    batch, q_heads, q_len, head = q.type.shape
    kv_heads = k.type.shape[1]
    scale = ctx.attr("scale")
    scale = 1 / math.sqrt(head) if scale is None else float(scale)
    root = ctx.constant(np.array(np.sqrt(scale), dtype), suffix="scale_sqrt")
    qs = ctx.create("Mul", [q, root], suffix="q_scaled")

    past_k = ctx.inp(4) if ctx.has_input(4) else None
    past_v = ctx.inp(5) if ctx.has_input(5) else None
    if (past_k is None) != (past_v is None):
        raise ctx.unsupported("past_key and past_value must be given together")
    if past_k is not None and past_v is not None:
        k = ctx.create("Concat", [past_k, k], {"axis": 2}, suffix="present_key")
        v = ctx.create("Concat", [past_v, v], {"axis": 2}, suffix="present_value")
    present_k, present_v = k, v
    past_len = past_k.type.shape[2] if past_k is not None else 0
    kv_len = k.type.shape[2]
    nonpad = ctx.inp(6) if ctx.has_input(6) else None
    if nonpad is not None:
        check_elem(ctx, nonpad, INT_KINDS, "nonpad_kv_seqlen")
        if past_k is not None:
            raise ctx.unsupported("nonpad_kv_seqlen together with past_key")

    bias = _bias(ctx, dtype, batch, q_len, kv_len, past_len, nonpad)

    if q_heads != kv_heads:
        if q_heads % kv_heads:
            raise ctx.unsupported(f"{q_heads} query heads do not group over {kv_heads}")
        k = _repeat_heads(ctx, k, q_heads // kv_heads, "k")
        v = _repeat_heads(ctx, v, q_heads // kv_heads, "v")
    ks = ctx.create("Mul", [k, root], suffix="k_scaled")
    kt = ctx.create("Transpose", [ks], {"perm": [0, 1, 3, 2]}, suffix="k_t")
    qk = ctx.create("MatMul", [qs, kt], suffix="qk")
    softcap = float(ctx.attr("softcap", 0.0) or 0.0)
    if softcap > 0:
        cap = ctx.constant(np.array(softcap, dtype), suffix="softcap")
        t = ctx.create("Tanh", [ctx.create("Div", [qk, cap], suffix="qk_div")], suffix="qk_tanh")
        qk = ctx.create("Mul", [t, cap], suffix="qk_capped")
    logits = qk if bias is None else ctx.create("Add", [qk, bias], suffix="qk_bias")
    mode = int(ctx.attr("qk_matmul_output_mode", 0))
    probs = _softmax(ctx, logits, dtype)
    if bias is not None:
        probs = _zero_masked_rows(ctx, probs, bias, dtype)
    y = ctx.create("MatMul", [probs, v], suffix="y_heads")
    if three_d:
        y = ctx.create("Transpose", [y], {"perm": [0, 2, 1, 3]}, suffix="y_bshd")
        b_, s_, h_, d_ = y.type.shape
        y = reshape(ctx, y, (b_, s_, h_ * d_), "y")
    qk_out = {0: qk, 1: qk, 2: logits, 3: probs}[mode]
    return [y, present_k, present_v, qk_out]


def _bias(
    ctx: NodeContext,
    dtype: np.dtype,
    batch: int,
    q_len: int,
    kv_len: int,
    past_len: int,
    nonpad: Value | None,
) -> Value | None:
    """The additive attention bias (None when nothing is masked)."""
    mask = ctx.inp(3) if ctx.has_input(3) else None
    if mask is not None:
        if mask.type.elem != ElemKind.BOOL and mask.type.np_dtype != dtype:
            raise ctx.unsupported(f"attn_mask {mask.type} is neither bool nor Q's type")
        short = kv_len - mask.type.shape[-1]
        if short < 0:
            raise ctx.unsupported(f"attn_mask {mask.type} is longer than {kv_len} keys")
        if short:
            pads = [0] * (2 * mask.type.rank)
            pads[2 * mask.type.rank - 1] = short
            fill = 0.0 if mask.type.elem == ElemKind.BOOL else -math.inf
            mask = ctx.create(
                "Pad", [mask], {"pads": pads, "mode": "constant", "value": fill}, suffix="mask_pad"
            )
        bias: Value | None = _float_bias(ctx, mask, dtype, "mask_bias")
    else:
        bias = None
    i = np.arange(q_len)[:, None]
    j = np.arange(kv_len)[None, :]
    frontier: Value | None = None  # per-batch causal offset (external cache)
    if nonpad is not None:
        lens = reshape(ctx, nonpad, (batch, 1, 1, 1), "nonpad_b111")
        frontier = ctx.create(
            "Sub",
            [lens, ctx.constant(np.array(q_len, lens.type.np_dtype), suffix="q_len")],
            suffix="causal_offset",
        )
    # Query i (after `offset` cached keys) may see key j when j <= i + offset (causal),
    # i + offset - j <= left and j - i - offset <= right (the sliding window).
    if int(ctx.attr("is_causal", 0)):
        bias = _add(ctx, bias, _frontier_mask(ctx, j - i, past_len, frontier, dtype, "causal"))
    left = int(ctx.attr("left_window_size", -1))
    right = int(ctx.attr("right_window_size", -1))
    if left >= 0:
        c = left + j - i
        bias = _add(ctx, bias, _frontier_mask(ctx, c, past_len, frontier, dtype, "left", 1))
    if right >= 0:
        c = j - i - right
        bias = _add(ctx, bias, _frontier_mask(ctx, c, past_len, frontier, dtype, "right"))
    if nonpad is not None:
        keys = ctx.constant(
            np.arange(kv_len, dtype=nonpad.type.np_dtype).reshape(1, 1, 1, -1), suffix="key_pos"
        )
        inside = ctx.create("Less", [keys, lens], suffix="key_inside")
        bias = _add(ctx, bias, _float_bias(ctx, inside, dtype, "padding_bias"))
    return bias


def _frontier_mask(
    ctx: NodeContext,
    c: np.ndarray,
    offset: int,
    frontier: Value | None,
    dtype: np.dtype,
    tag: str,
    lower: int = 0,
) -> Value:
    """Bias allowing positions where c <= offset (or offset <= c when `lower`), with the
    offset (cached keys before the query block) per batch when `frontier` gives it."""
    if frontier is None:
        allowed = (offset <= c) if lower else (c <= offset)
        return ctx.constant(_allowed_bias(allowed, dtype), suffix=f"{tag}_bias")
    cc = ctx.constant(c.astype(frontier.type.np_dtype)[None, None], suffix=f"{tag}_limit")
    pair = [frontier, cc] if lower else [cc, frontier]
    outside = ctx.create("Greater", pair, suffix=f"{tag}_outside")
    inside = ctx.create("Not", [outside], suffix=f"{tag}_inside")
    return _float_bias(ctx, inside, dtype, f"{tag}_bias")


def _add(ctx: NodeContext, bias: Value | None, more: Value) -> Value:
    return more if bias is None else ctx.create("Add", [bias, more], suffix="bias_sum")


def _repeat_heads(ctx: NodeContext, x: Value, reps: int, tag: str) -> Value:
    """[B, H, S, D] -> [B, H*reps, S, D], each head repeated in place (h0, h0, h1, h1, ...)."""
    b, h, s, d = x.type.shape
    r = reshape(ctx, x, (b, h, 1, s, d), f"{tag}_grouped")
    t = ctx.create("Broadcast", [r], {"shape": (b, h, reps, s, d)}, suffix=f"{tag}_repeated")
    return reshape(ctx, t, (b, h * reps, s, d), f"{tag}_gqa")


def _softmax(ctx: NodeContext, logits: Value, dtype: np.dtype) -> Value:
    code = ctx.attr("softmax_precision")
    wide = ONNX_TO_ELEM.get(int(code)) if code is not None else None
    if wide is None or wide == logits.type.elem:
        return ctx.create("Softmax", [logits], {"axis": -1}, suffix="probs")
    w = ctx.create("Cast", [logits], {"to": wide.value}, suffix="logits_wide")
    p = ctx.create("Softmax", [w], {"axis": -1}, suffix="probs_wide")
    return ctx.create("Cast", [p], {"to": logits.type.elem.value}, suffix="probs")


def _zero_masked_rows(ctx: NodeContext, probs: Value, bias: Value, dtype: np.dtype) -> Value:
    """Rows whose every key is masked (bias all -inf) attend to nothing: probabilities 0."""
    if isinstance(bias, Constant) and bias.data is not None:
        masked = np.isneginf(bias.data.max(axis=-1, keepdims=True))
        if not masked.any():
            return probs
    rank = bias.type.rank
    top = ctx.create("ReduceMax", [bias], {"axes": [rank - 1], "keepdims": 1}, suffix="bias_max")
    ninf = ctx.constant(np.array(-np.inf, dtype), suffix="row_ninf")
    dead = ctx.create("Equal", [top, ninf], suffix="row_masked")
    zero = ctx.constant(np.array(0, dtype), suffix="row_zero")
    return ctx.create("Where", [dead, zero, probs], suffix="probs_guarded")
