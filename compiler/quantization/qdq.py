"""`fold-qdq`: a pre-quantized (QDQ) model's float ops between Dequantize and Quantize become
quantized ops, as onnxruntime's QDQ transformers turn such groups into QLinear* kernels.

A float node whose float operands are all Dequantize results (activations), DequantizeAxis /
Dequantize of constants (weights and int32 biases, as `onnxruntime.quantization` writes them) or
plain float constants, and whose result's only user is a Quantize (possibly after a Relu or
Clip), is replaced by the quantized op producing that Quantize's result: Conv, FullyConnected
and MatMul (per-channel weights, the model's int32 biases), Add, Mul, the pools, Concat, the data
movers, and Relu/Clip themselves. The rest stays float between its Dequantize and Quantize
nodes, and `quant-opt`'s patterns remove the Quantize(Dequantize(..)) pairs left over.

It runs first in graph-opt (before constant folding would turn the weights' Dequantize nodes
into float constants) and does nothing on a graph without Quantize nodes.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from compiler.graph.ir import Constant, Function, Node, Result, Value
from compiler.graph.ops_quant import QMAX, QMIN
from compiler.passes.manager import GraphPass
from compiler.passes.rewriter import Rewriter, apply_patterns, const_data, graph_patterns, producer
from compiler.quantization.params import QParams, quantize_bias
from compiler.quantization.passes import CLEANUP
from compiler.quantization.quantizer import MOVERS, clamp_for, params_of, qattrs


def _dq(v: Value) -> Value | None:
    """The quantized value a float operand dequantizes, if it is a Dequantize result."""
    src = producer(v)
    if src is not None and src.op == "Dequantize":
        return src.operands[0]
    return None


def _weights(v: Value, axis: int, n: int) -> tuple[np.ndarray, np.ndarray] | None:
    """(int8 data, float32 scales[n]) of a dequantized constant weight whose channels lie
    along `axis`, offsets 0 (looking through one 2-D Transpose, Gemm's transB)."""
    src = producer(v)
    if src is not None and src.op == "Transpose" and tuple(src.attrs["perm"]) == (1, 0):
        inner = _weights(src.operands[0], 1 - axis, n)
        return None if inner is None else (np.ascontiguousarray(inner[0].T), inner[1])
    if src is None:
        return None
    if src.op == "Dequantize":
        c = src.operands[0]
        data = const_data(c)
        if data is None or c.type.offset != 0:
            return None
        return np.asarray(data), np.full(n, c.type.scale, np.float32)
    if src.op == "DequantizeAxis":
        data, scales, offsets = (const_data(x) for x in src.operands)
        if data is None or scales is None or offsets is None or data.dtype != np.int8:
            return None
        if np.any(offsets != 0) or (scales.size > 1 and src.attrs["axis"] % data.ndim != axis):
            return None
        return np.asarray(data), np.broadcast_to(scales, (n,)).astype(np.float32)
    return None


def _bias(v: Value, in_scale: float, w_scales: np.ndarray) -> np.ndarray | None:
    """int32 bias in units of s_in * s_w: the model's own int32 when its scale is exactly that
    (what onnxruntime writes), else the float bias quantized."""
    src = producer(v)
    k = w_scales.size
    if src is not None and src.op == "DequantizeAxis":
        data, scales, offsets = (const_data(x) for x in src.operands)
        if data is not None and scales is not None and offsets is not None:
            want = np.float32(in_scale) * w_scales.astype(np.float32)
            if (
                data.dtype == np.int32
                and data.size == k
                and not np.any(offsets)
                and np.array_equal(np.broadcast_to(scales, (k,)), want)
            ):
                return np.asarray(data, np.int32).reshape(k)
    fdata = const_data(v)
    if fdata is None and src is not None and src.op == "DequantizeAxis":
        fdata = _dequantized(src)  # a bias in other units: its float values, quantized below
    if fdata is None or fdata.size != k:
        return None
    return quantize_bias(fdata.reshape(k), in_scale, w_scales)


def _dequantized(node: Node) -> np.ndarray | None:
    """The float values a DequantizeAxis of constants stands for (its reference kernel)."""
    from compiler.kernels.reference import evaluate

    datas = []
    for x in node.operands:
        d = const_data(x)
        if d is None:
            return None
        datas.append(d)
    return evaluate(node, datas)[0]


def _output(node: Node) -> tuple[Node, tuple[int, int]] | None:
    """The Quantize that consumes the node's result (alone), and the clamp of a Relu/Clip
    between them, in the Quantize's parameters."""
    users = node.result.user_nodes()
    if len(users) != 1 or len(node.result.users) != 1:
        return None
    user = users[0]
    act: tuple[str, tuple[float, ...]] = ("none", ())
    if user.op in ("Relu", "Clip") and len(user.result.users) == 1:
        act = (
            ("relu", ()) if user.op == "Relu" else ("clip", (user.attrs["min"], user.attrs["max"]))
        )
        user = user.result.user_nodes()[0]
    if user.op != "Quantize":
        return None
    out = QParams(user.attrs["scale"], user.attrs["offset"])
    return user, clamp_for(act[0], act[1], out)


def _finish(rw: Rewriter, quant: Node, value: Value) -> bool:
    """`value` replaces the Quantize's result; its producer remembers the ONNX QuantizeLinear
    (`meta["onnx_q"]`), so tools can pair it with onnxruntime's tensor."""
    if isinstance(value, Result) and "onnx_node" in quant.meta:
        value.node.meta["onnx_q"] = quant.meta["onnx_node"]
    rw.replace(quant.result, value)
    return True


def _const(rw: Rewriter, node: Node, tag: str, data: np.ndarray) -> Constant:
    return rw.constant(f"{node.name}_{tag}", np.ascontiguousarray(data))


def fold_conv(node: Node, rw: Rewriter) -> bool:
    x, w, b = node.operands
    qx = _dq(x)
    out = _output(node)
    if qx is None or out is None or node.attrs["activation"] != "none":
        return False
    k = w.type.shape[0]
    wq = _weights(w, 0, k)
    if wq is None:
        return False
    bias = _bias(b, qx.type.scale or 0.0, wq[1])
    if bias is None:
        return False
    quant, clamp = out
    attrs = {key: node.attrs[key] for key in ("strides", "pads", "dilations", "group")}
    attrs.update(qattrs(params_of(quant.result.type), clamp))
    operands = [
        qx,
        _const(rw, node, "i8", wq[0]),
        _const(rw, node, "i32", bias),
        _const(rw, node, "scales", wq[1]),
    ]
    return _finish(rw, quant, rw.create("QConv", operands, attrs, name=f"{node.name}_q").result)


def _fc(
    rw: Rewriter,
    node: Node,
    qx: Value,
    w: Value,
    bias: Value | None,
    out: tuple[Node, tuple[int, int]],
) -> bool:
    kk, n = w.type.shape
    wq = _weights(w, 1, n)
    if wq is None:
        return False
    if bias is None:
        b = np.zeros(n, np.int32)
    else:
        bq = _bias(bias, qx.type.scale or 0.0, wq[1])
        if bq is None:
            return False
        b = bq
    quant, clamp = out
    rows = qx
    if qx.type.rank != 2:
        shape = (qx.type.numel // kk, kk)
        rows = rw.create("Reshape", [qx], {"shape": shape}, name=f"{node.name}_rows").result
    operands = [rows, _const(rw, node, "i8", wq[0]), _const(rw, node, "i32", b)]
    operands.append(_const(rw, node, "scales", wq[1]))
    attrs = qattrs(params_of(quant.result.type), clamp)
    y = rw.create("QFullyConnected", operands, attrs, name=f"{node.name}_q").result
    if qx.type.rank != 2:
        y = rw.create(
            "Reshape", [y], {"shape": quant.result.type.shape}, name=f"{node.name}_unrows"
        ).result
    return _finish(rw, quant, y)


def fold_fully_connected(node: Node, rw: Rewriter) -> bool:
    x, w, b = node.operands
    qx, out = _dq(x), _output(node)
    if qx is None or out is None or node.attrs["activation"] != "none":
        return False
    return _fc(rw, node, qx, w, b, out)


def fold_matmul(node: Node, rw: Rewriter) -> bool:
    a, b = node.operands
    qa, out = _dq(a), _output(node)
    if qa is None or out is None:
        return False
    if b.type.rank == 2 and _weights(b, 1, b.type.shape[1]) is not None:
        return _fc(rw, node, qa, b, None, out)
    qb = _dq(b)
    if qb is None:
        return False
    quant, clamp = out
    attrs = qattrs(params_of(quant.result.type), clamp)
    return _finish(rw, quant, rw.create("QMatMul", [qa, qb], attrs, name=f"{node.name}_q").result)


def _all_dequantized(node: Node) -> tuple[list[Value], Node, tuple[int, int]] | None:
    """(every operand's int8 source, the output's Quantize, its clamp), or None when an
    operand is not a Dequantize or the output is not quantized."""
    out = _output(node)
    ins = [_dq(v) for v in node.operands]
    if out is None or any(v is None for v in ins):
        return None
    return [v for v in ins if v is not None], *out


def fold_binary(node: Node, rw: Rewriter) -> bool:
    m = _all_dequantized(node)
    if m is None:
        return False
    ops, quant, clamp = m
    attrs = qattrs(params_of(quant.result.type), clamp)
    y = rw.create("Q" + node.op, ops, attrs, name=f"{node.name}_q").result
    return _finish(rw, quant, y)


def fold_pool(node: Node, rw: Rewriter) -> bool:
    qx, out = _dq(node.operands[0]), _output(node)
    if qx is None or out is None:
        return False
    quant, clamp = out
    attrs = qattrs(params_of(quant.result.type), clamp)
    if node.op == "AvgPool":
        y = rw.create("QAvgPool", [qx], {**node.attrs, **attrs}, name=f"{node.name}_q").result
    else:
        x = node.operands[0]
        if node.op == "ReduceMean":
            axes = sorted(a % x.type.rank for a in node.attrs["axes"])
            if x.type.rank < 3 or axes != list(range(2, x.type.rank)):
                return False
        y = rw.create("QGlobalAvgPool", [qx], attrs, name=f"{node.name}_q").result
        if y.type.shape != quant.result.type.shape:
            y = rw.create(
                "Reshape", [y], {"shape": quant.result.type.shape}, name=f"{node.name}_r"
            ).result
    return _finish(rw, quant, y)


def _to(rw: Rewriter, node: Node, y: Value, quant: Node, clamp: tuple[int, int]) -> Value:
    """`y` in the Quantize's parameters (and clamp): a rescale when they differ."""
    want = quant.result.type
    if y.type == want and clamp == (QMIN, QMAX):
        return y
    attrs = qattrs(params_of(want), clamp)
    return rw.create("RescaleQuantized", [y], attrs, name=f"{node.name}_rescale").result


def fold_mover(node: Node, rw: Rewriter) -> bool:
    if len(node.results) != 1:
        return False
    qx, out = _dq(node.operands[0]), _output(node)
    if qx is None or out is None:
        return False
    quant, clamp = out
    attrs = dict(node.attrs)
    if node.op == "Pad":
        p = params_of(qx.type)
        from compiler.kernels.reference_quant import quantize

        attrs["value"] = float(quantize(np.float32(attrs["value"]), p.scale, p.offset))
    y = rw.create(node.op, [qx], attrs, name=f"{node.name}_q").result
    return _finish(rw, quant, _to(rw, node, y, quant, clamp))


def fold_concat(node: Node, rw: Rewriter) -> bool:
    m = _all_dequantized(node)
    if m is None:
        return False
    ins, quant, clamp = m
    aligned = [_to(rw, node, v, quant, (QMIN, QMAX)) for v in ins]
    y = rw.create("Concat", aligned, dict(node.attrs), name=f"{node.name}_q").result
    return _finish(rw, quant, _to(rw, node, y, quant, clamp))


def fold_activation(node: Node, rw: Rewriter) -> bool:
    """Relu / Clip between a Dequantize and a Quantize (not after a foldable op)."""
    qx = _dq(node.operands[0])
    users = node.result.user_nodes()
    if qx is None or len(users) != 1 or users[0].op != "Quantize":
        return False
    quant = users[0]
    p = params_of(quant.result.type)
    if node.op == "Relu":
        clamp = clamp_for("relu", (), p)
    else:
        clamp = clamp_for("clip", (node.attrs["min"], node.attrs["max"]), p)
    y = rw.create("RescaleQuantized", [qx], qattrs(p, clamp), name=f"{node.name}_q").result
    return _finish(rw, quant, y)


PATTERNS: dict[str, list[Any]] = {
    "Conv": [fold_conv],
    "FullyConnected": [fold_fully_connected],
    "MatMul": [fold_matmul],
    "Add": [fold_binary],
    "Mul": [fold_binary],
    "AvgPool": [fold_pool],
    "GlobalAvgPool": [fold_pool],
    "ReduceMean": [fold_pool],
    "Concat": [fold_concat],
    "Relu": [fold_activation],
    "Clip": [fold_activation],
    **{op: [fold_mover] for op in MOVERS},
}
FOLD_QDQ = graph_patterns({**PATTERNS, **CLEANUP.patterns})


class FoldQDQ(GraphPass):
    """fold-qdq: see the module docstring."""

    name = "fold-qdq"

    def run(self, fn: Function) -> bool:
        if not any(n.op == "Quantize" for n in fn.nodes):
            return False
        changed = apply_patterns(fn, FOLD_QDQ)
        if changed:
            fn.module.remove_unused_constants()
        return changed


__all__ = ["FOLD_QDQ", "FoldQDQ"]
