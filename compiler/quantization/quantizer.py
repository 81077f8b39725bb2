"""Rewriting float nodes into quantized ones (Glow's `quantizeFunction`), one node at a time.

For each node the schema allows (`QuantizeOptions.ops`, not kept in float, and run by the
backend in its quantized form), a builder creates the quantized node from quantized operands
and puts a Dequantize after it for the float users. Quantized operands come from the producer's
quantized form (looking through its Dequantize), from a Quantize of the profiled float value,
or, for a constant, from quantizing its data. The Quantize(Dequantize(..)) pairs this leaves
between neighbours are removed by `quant-opt` (compiler/quantization/passes.py).

Every change goes through the Rewriter inside `rw.at(node, rule)`, so the quantized nodes'
provenance is the float node they replace.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from compiler.errors import QuantizationError
from compiler.graph.activations import NONE
from compiler.graph.ir import Constant, Node, Result, Value
from compiler.graph.ops_quant import (
    QMAX,
    QMIN,
    QUANTIZED_OPS,
    REQUANTIZING,
    SOFTMAX_BITS,
    is_quantized,
)
from compiler.graph.types import ElemKind, TensorType
from compiler.kernels.reference_quant import quantize
from compiler.passes.rewriter import Rewriter, const_data
from compiler.quantization.gptq import NOISE_FACTOR, gptq_grouped, weights_key
from compiler.quantization.options import QuantizeOptions
from compiler.quantization.params import (
    QParams,
    calibrate,
    choose_params,
    clip_bias,
    quantize_bias,
    quantize_weights,
)
from compiler.quantization.profile import Profile, TensorProfile

if TYPE_CHECKING:  # the backend comes from the pipeline (lowering's policy)
    from compiler.backends.contract import Backend

I8, I32, F32 = ElemKind.I8, ElemKind.I32, ElemKind.F32


def clamp_for(act: str, act_args: tuple[float, ...], p: QParams) -> tuple[int, int]:
    """The integer clamp [qmin, qmax] of a fused Relu / Clip in the output's parameters."""
    if act == NONE:
        return QMIN, QMAX
    if act == "relu":
        return max(QMIN, p.offset), QMAX
    if act == "clip":
        lo, hi = act_args
        qlo = QMIN if lo == -math.inf else int(quantize(np.float32(lo), p.scale, p.offset))
        qhi = QMAX if hi == math.inf else int(quantize(np.float32(hi), p.scale, p.offset))
        return qlo, max(qlo, qhi)
    raise ValueError(act)


def qattrs(p: QParams, clamp: tuple[int, int] = (QMIN, QMAX)) -> dict[str, Any]:
    return {"scale": p.scale, "offset": p.offset, "qmin": clamp[0], "qmax": clamp[1]}


def params_of(t: TensorType) -> QParams:
    assert t.scale is not None and t.offset is not None
    return QParams(t.scale, t.offset)


#: Ops through which a value reaches a Softmax increasing and otherwise unchanged in order:
#: the attention scores' scaling (Div / Mul by a positive scalar) and additive or selected
#: (Where, a causal mask) mask.
_TO_SOFTMAX = frozenset({"Reshape", "Transpose", "Div", "Mul", "Add", "Sub", "Broadcast", "Where"})


def feeds_softmax(v: Value, depth: int = 4) -> bool:
    """`v` is a Softmax's input, directly or through an increasing map (`_TO_SOFTMAX`: the
    scaled and masked attention scores). Its range then keeps the profiled maximum
    (params.calibrate's `keep_max`): each row's largest values decide the probabilities, and
    a clipped maximum scales them by e^(clipped amount). On BERT-tiny, `mse` clipping the
    second layer's scores alone took the output from 41.6 to 24.7 dB on held-out inputs."""
    for u in v.user_nodes():
        if u.op == "Softmax":
            return True
        if depth <= 0 or u.op not in _TO_SOFTMAX or len(u.results) != 1:
            continue
        if u.op == "Where" and u.operands[0] is v:
            continue  # the condition
        if u.op in ("Div", "Mul", "Sub"):
            if u.operands[0] is not v:
                continue  # c / x, c - x: decreasing
            c = const_data(u.operands[1])
            if c is None or c.size != 1 or (u.op != "Sub" and not float(c.reshape(())) > 0):
                continue
        if feeds_softmax(u.result, depth - 1):
            return True
    return False


class Quantizer:
    """The state of one quantize run over a function (see the module docstring)."""

    def __init__(
        self, rw: Rewriter, options: QuantizeOptions, profile: Profile, backend: Backend
    ) -> None:
        self.rw, self.options, self.profile, self.backend = rw, options, profile, backend
        self._params: dict[str, QParams | None] = {}
        self._quantized: dict[int, Value] = {}
        #: Float node name -> what became of it ("quantized" or why it stayed float).
        self.decisions: dict[str, str] = {}
        #: Layers whose weights GPTQ rounded: their output error on the calibration inputs,
        #: mean included (the Hessian is not centred), is already minimised, so bias
        #: correction leaves their weights' share out and corrects the input's clipping only.
        self.gptq_rounded: set[str] = set()
        #: Values one int8 grid cannot hold (mixed_range_values): name -> why.
        self.mixed: dict[str, str] = {}

    @property
    def module(self) -> Any:
        return self.rw.module

    # -- parameters and operands -----------------------------------------------------------------
    def params(self, v: Value) -> QParams | None:
        """Scale and offset for a float value, from its profile (None: never profiled)."""
        if v.name not in self._params:
            joined = self.concat_of(v)
            if joined is not None and (p := self.params(joined)) is not None:
                # Computed straight into the Concat's parameters: no rescale (a second
                # rounding) between the producer and the int8 Concat.
                self._params[v.name] = p
                return p
            tp = self.profile.tensors.get(v.name)
            if tp is None or tp.empty:
                self._params[v.name] = None
            else:
                method = self.options.tensor_calibration.get(v.name, self.options.calibration)
                lo, hi = calibrate(
                    tp,
                    method,
                    self.options.schema,
                    self.options.percentile,
                    keep_max=feeds_softmax(v),
                )
                self._params[v.name] = choose_params(lo, hi, self.options.schema)
        return self._params[v.name]

    def concat_of(self, v: Value) -> Value | None:
        """The result of the Concat that is `v`'s only user, when the options quantize it."""
        users = v.user_nodes()
        if len(users) != 1 or users[0].op != "Concat" or "Concat" not in self.options.ops:
            return None
        if users[0].name in self.options.keep_float or users[0].result.name in self.mixed:
            return None
        return users[0].result

    def float_profile(self, v: Value) -> TensorProfile | None:
        """The profile of the float value `v` stands for: its own, or, for the Dequantize of
        a quantized producer, that of the float value the producer computes."""
        name = v.name
        if isinstance(v, Result) and v.node.op == "Dequantize":
            src = v.node.operands[0]
            if isinstance(src, Result):
                name = src.node.meta.get("quantizes", {}).get(src.index, name)
        return self.profile.tensors.get(name)

    def bias_correction(
        self, x: Value, qx: Value, w: np.ndarray, wd: np.ndarray, axis: str, taps: np.ndarray
    ) -> np.ndarray | None:
        """The mean error per output channel that quantizing weights `w` (to `wd`, dequantized)
        and input `x` (to `qx`) adds (Nagel et al.'s analytic bias correction): E[wd Q(x)] -
        E[w x] with E[x] the profiled channel means along `axis` and E[Q(x) - x] the clipping
        bias of x's quantization. `w` and `wd` are [out, in, taps], `taps` the share of
        outputs each tap reads inside the input (padding reads exact zeros)."""
        if not self.options.bias_correction or not is_quantized(qx.type):
            return None
        tp = self.float_profile(x)
        mean = tp.channel_means(axis) if tp is not None else None
        if tp is None or mean is None:
            return None
        groups = mean.size // w.shape[1]
        if groups * w.shape[1] != mean.size or w.shape[0] % groups:
            return None
        delta = clip_bias(tp, params_of(qx.type))
        m = mean.reshape(groups, 1, w.shape[1], 1)
        per = w.shape[0] // groups
        wg = w.astype(np.float64).reshape(groups, per, w.shape[1], -1) * taps
        dg = wd.astype(np.float64).reshape(groups, per, w.shape[1], -1) * taps
        corr = (dg * (m + delta) - wg * m).sum(axis=(2, 3))
        return corr.reshape(w.shape[0])

    def gptq_weights(
        self, node: Node, w: np.ndarray, axis: int, scales: np.ndarray, qx: Value | None = None
    ) -> np.ndarray | None:
        """GPTQ's int8 weights for `node` (w's output channels along `axis`, on `scales`), or
        None when the profile has no Hessian for it (a layer wider than gptq.MAX_COLUMNS):
        then it is rounded to nearest. `qx`, the quantized input, adds its rounding noise
        (step^2 / 12 per value that is not an exact zero) to the Hessian. Memoised on the
        profile's Hessian."""
        hs = self.profile.load_hessians()
        if hs is None:
            raise QuantizationError(
                "weight rounding 'gptq' needs the layers' Hessians, and this profile has none",
                hint="profile with Hessians (`glowviz profile --hessians`, "
                "profile_model(..., hessians=True))",
            )
        lh = hs.get(node.name)
        w2 = w.reshape(w.shape[0], -1) if axis == 0 else np.asarray(w).T
        if lh is None or lh.h.shape[1] != w2.shape[1] or w2.shape[0] % lh.h.shape[0]:
            self.decisions[node.name] = "quantized (weights rounded to nearest: no Hessian)"
            return None
        noise = 0.0
        if qx is not None and is_quantized(qx.type) and qx.type.scale:
            tp = self.float_profile(node.operands[0])
            live = 1.0 - tp.zeros / tp.count if tp is not None and tp.count else 1.0
            noise = NOISE_FACTOR * lh.rows * live * float(qx.type.scale) ** 2 / 12.0
        key = weights_key(w2, scales, noise)
        got = lh.memo.get(key)
        if got is None:
            got = gptq_grouped(w2, lh.h, scales, noise=noise)
            lh.memo[key] = got
        return got.reshape(w.shape) if axis == 0 else np.ascontiguousarray(got.T)

    def qvalue(self, v: Value, *, create: bool = True) -> Value | None:
        """The quantized form of float value `v`: the producer's own (through a Dequantize),
        an int8 constant for constant data, or a new Quantize of the profiled value."""
        if is_quantized(v.type):
            return v
        if v.type.elem != F32:
            return None
        if isinstance(v, Result) and v.node.op == "Dequantize":
            return v.node.operands[0]
        if id(v) in self._quantized:
            return self._quantized[id(v)]
        data = const_data(v)
        if data is not None:
            if data.size == 0 or not np.all(np.isfinite(data)):
                return None
            p = choose_params(float(data.min()), float(data.max()), self.options.schema)
            qdata = quantize(data, p.scale, p.offset)
            t = TensorType(I8, v.type.shape, p.scale, p.offset)
            out: Value = self.module.add_constant(f"{v.name}_q", qdata, t)
        else:
            p2 = self.params(v)
            if p2 is None or not create:
                return None
            out = self.rw.create(
                "Quantize", [v], {"scale": p2.scale, "offset": p2.offset}, name=f"{v.name}_quant"
            ).result
        self._quantized[id(v)] = out
        return out

    def has_quantized(self, v: Value) -> bool:
        """`v` already exists in quantized form (so data movement on it can stay int8)."""
        return is_quantized(v.type) or (isinstance(v, Result) and v.node.op == "Dequantize")

    def runs_int8(self, op: str) -> bool:
        """The backend runs `op` on quantized operands (the quantized ops' other operands,
        weights, biases and scales, are part of what their kernels take)."""
        if op in QUANTIZED_OPS:
            return self.backend.runs(op, [])
        return self.backend.runs(op, [I8, I8])

    # -- building --------------------------------------------------------------------------------
    def constant(self, name: str, data: np.ndarray) -> Constant:
        return self.rw.constant(name, np.ascontiguousarray(data))

    def create(self, node: Node, op: str, operands: list[Value], attrs: dict[str, Any]) -> Node:
        return self.rw.create(op, operands, attrs, name=f"{node.name}_q")

    def finish(self, old: Value, qresult: Value, tag: str = "") -> None:
        """Float users of `old` read the quantized result through a Dequantize; the quantized
        producer records which float value it computes (`meta["quantizes"]`, by result index),
        which the SQNR report pairs up."""
        if isinstance(qresult, Result):
            qresult.node.meta.setdefault("quantizes", {})[qresult.index] = old.name
        dq = self.rw.create("Dequantize", [qresult], name=f"{old.name}_dq{tag}")
        self.rw.replace(old, dq.result)


Builder = Callable[[Quantizer, Node], bool]
BUILDERS: dict[str, Builder] = {}
#: Float op -> the ops its builder may create, which the backend must run on int8.
TARGETS: dict[str, tuple[str, ...]] = {}


def builder(*ops: str, targets: tuple[str, ...] | None = None) -> Callable[[Builder], Builder]:
    """Register a builder for float `ops`; `targets` (default: each op itself, on int8) are
    the ops it creates besides Dequantize / Quantize / Reshape."""

    def deco(fn: Builder) -> Builder:
        for op in ops:
            BUILDERS[op] = fn
            TARGETS[op] = targets if targets is not None else (op,)
        return fn

    return deco


def _weights(
    q: Quantizer,
    w: np.ndarray,
    axis: int,
    n: int,
    node: Node | None = None,
    qx: Value | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """int8 weights and float32[n] scales (per channel along `axis`, or one scale repeated),
    rounded to nearest or, with `weight_rounding="gptq"`, by GPTQ on the same grid."""
    if q.options.per_channel:
        wq, s = quantize_weights(w, axis)
    else:
        wq, s1 = quantize_weights(w, None)
        s = np.repeat(s1, n)
    if q.options.weight_rounding == "gptq" and node is not None:
        g = q.gptq_weights(node, w, axis, s, qx)
        if g is not None:
            wq = g
            q.gptq_rounded.add(node.name)
    return wq, s


def _weighted(q: Quantizer, node: Node) -> tuple[Value, np.ndarray, np.ndarray, Any, str] | None:
    """(quantized input, weights, bias, output params, activation) of a Conv or
    FullyConnected the int8 kernels can run: constant weights and bias, an activation folded
    into the output range (none, relu, clip), a profiled output and a quantized input."""
    x, w, b = node.operands
    wdata, bdata = const_data(w), const_data(b)
    act = node.attrs["activation"]
    out = q.params(node.result)
    if wdata is None or bdata is None or act not in (NONE, "relu", "clip") or out is None:
        return None
    qx = q.qvalue(x)
    return None if qx is None else (qx, wdata, bdata, out, act)


def _tap_shares(node: Node) -> np.ndarray:
    """[R, S]: the share of a Conv's output pixels for which each filter tap reads inside the
    input (not the zero padding)."""
    _, _, h, wd = node.operands[0].type.shape
    _, _, r, s = node.operands[1].type.shape
    _, _, oh, ow = node.result.type.shape
    (sh, sw), (dh, dw) = node.attrs["strides"], node.attrs["dilations"]
    top, left = node.attrs["pads"][:2]

    def share(k: int, n: int, out: int, stride: int, dil: int, pad: int) -> np.ndarray:
        pos = np.arange(out)[:, None] * stride - pad + np.arange(k)[None, :] * dil
        return ((pos >= 0) & (pos < n)).mean(axis=0)

    return np.outer(share(r, h, oh, sh, dh, top), share(s, wd, ow, sw, dw, left))


@builder("Conv", targets=("QConv",))
def quantize_conv(q: Quantizer, node: Node) -> bool:
    if (parts := _weighted(q, node)) is None:
        return False
    qx, wdata, bdata, out, act = parts
    w, b = node.operands[1:]
    k = w.type.shape[0]
    wq, ws = _weights(q, wdata, 0, k, node, qx)
    wd = wq.astype(np.float32) * ws.reshape(-1, 1, 1, 1)
    taps = _tap_shares(node).reshape(1, 1, 1, -1)
    exact = wd if node.name in q.gptq_rounded else wdata
    corr = q.bias_correction(
        node.operands[0],
        qx,
        exact.reshape(k, wdata.shape[1], -1),
        wd.reshape(k, wdata.shape[1], -1),
        "1",
        taps,
    )
    if corr is not None:
        bdata = bdata - corr
    bq = quantize_bias(bdata, qx.type.scale or 1.0, ws)
    consts = [
        q.constant(f"{w.name}_i8", wq),
        q.constant(f"{b.name}_i32", bq),
        q.constant(f"{w.name}_scales", ws),
    ]
    attrs = {key: node.attrs[key] for key in ("strides", "pads", "dilations", "group")}
    attrs.update(qattrs(out, clamp_for(act, node.attrs["act_args"], out)))
    qc = q.create(node, "QConv", [qx, *consts], attrs)
    q.finish(node.result, qc.result)
    return True


def _fc(
    q: Quantizer,
    node: Node,
    qx: Value,
    wdata: np.ndarray,
    bdata: np.ndarray,
    out: QParams,
    clamp: tuple[int, int],
    stem: str,
    x: Value | None = None,
) -> Value:
    n = wdata.shape[1]
    wq, ws = _weights(q, wdata, 1, n, node, qx)
    if x is not None:
        wd = wq.astype(np.float32) * ws.reshape(1, -1)
        exact = wd if node.name in q.gptq_rounded else wdata
        corr = q.bias_correction(x, qx, exact.T[..., None], wd.T[..., None], "-1", np.ones(1))
        if corr is not None:
            bdata = bdata - corr
    bq = quantize_bias(bdata, qx.type.scale or 1.0, ws)
    consts = [
        q.constant(f"{stem}_w_i8", wq),
        q.constant(f"{stem}_b_i32", bq),
        q.constant(f"{stem}_w_scales", ws),
    ]
    return q.create(node, "QFullyConnected", [qx, *consts], qattrs(out, clamp)).result


@builder("FullyConnected", targets=("QFullyConnected",))
def quantize_fully_connected(q: Quantizer, node: Node) -> bool:
    if (parts := _weighted(q, node)) is None:
        return False
    qx, wdata, bdata, out, act = parts
    clamp = clamp_for(act, node.attrs["act_args"], out)
    y = _fc(q, node, qx, wdata, bdata, out, clamp, node.name, node.operands[0])
    q.finish(node.result, y)
    return True


def _bias_add(node: Node) -> tuple[Node, np.ndarray] | None:
    """The Add of a constant row vector that is the MatMul result's only user, and the row."""
    users = node.result.user_nodes()
    if len(users) != 1 or users[0].op != "Add" or len(node.result.users) != 1:
        return None
    add = users[0]
    other = add.operands[1] if add.operands[0] is node.result else add.operands[0]
    data = const_data(other)
    n = node.result.type.shape[-1]
    if data is None or add.result.type != node.result.type or data.size != n:
        return None
    if data.shape[-1:] != (n,):
        return None
    return add, data.reshape(n)


@builder("MatMul", targets=("QFullyConnected", "QMatMul"))
def quantize_matmul(q: Quantizer, node: Node) -> bool:
    a, b = node.operands
    bdata = const_data(b)
    if bdata is not None and bdata.ndim == 2:
        # x @ W (+ row bias): a fully-connected layer on the rows of x, per-column scales.
        fused = _bias_add(node)
        last = fused[0] if fused is not None else node
        out = q.params(last.result)
        qa = q.qvalue(a) if out is not None else None
        if qa is None or out is None:
            return False
        k, n = bdata.shape
        bias = fused[1] if fused is not None else np.zeros(n, np.float32)
        rows = qa
        if a.type.rank != 2:
            rows = q.rw.create(
                "Reshape", [qa], {"shape": (a.type.numel // k, k)}, name=f"{node.name}_rows"
            ).result
        y = _fc(q, node, rows, bdata, bias, out, (QMIN, QMAX), node.name, a)
        if a.type.rank != 2:
            y = q.rw.create(
                "Reshape", [y], {"shape": last.result.type.shape}, name=f"{node.name}_unrows"
            ).result
        q.finish(last.result, y)
        if fused is not None:
            q.decisions[fused[0].name] = f"fused into {node.name}"
        return True
    out = q.params(node.result)
    if out is None:
        return False
    qa, qb = q.qvalue(a), q.qvalue(b)
    if qa is None or qb is None:
        return False
    qm = q.create(node, "QMatMul", [qa, qb], qattrs(out))
    q.finish(node.result, qm.result)
    return True


@builder("Add", targets=("QAdd",))
@builder("Mul", targets=("QMul",))
def quantize_binary(q: Quantizer, node: Node) -> bool:
    out = q.params(node.result)
    if out is None:
        return False
    qa, qb = (q.qvalue(v) for v in node.operands)
    if qa is None or qb is None:
        return False
    qn = q.create(node, "Q" + node.op, [qa, qb], qattrs(out))
    q.finish(node.result, qn.result)
    return True


@builder("Relu", "Clip", targets=("RescaleQuantized",))
def quantize_activation(q: Quantizer, node: Node) -> bool:
    """A Relu / Clip on a quantized value is a rescale to its output range with that clamp."""
    (x,) = node.operands
    out = q.params(node.result)
    if out is None or not q.has_quantized(x):
        return False
    qx = q.qvalue(x)
    assert qx is not None
    if node.op == "Relu":
        clamp = clamp_for("relu", (), out)
    else:
        clamp = clamp_for("clip", (node.attrs["min"], node.attrs["max"]), out)
    qn = q.create(node, "RescaleQuantized", [qx], qattrs(out, clamp))
    q.finish(node.result, qn.result)
    return True


def lookup_ops() -> frozenset[str]:
    """Float ops a QLookup table replaces: element-wise functions of one value (the unary
    math ops; Relu and Clip are rescales), and Div / Sub / Pow by a scalar constant."""
    from compiler.graph.ops import all_ops
    from compiler.kernels.reference import KERNELS

    unary = {
        name
        for name, op in all_ops().items()
        if {"elementwise", "unary"} <= op.traits and len(op.operands) == 1 and name in KERNELS
    }
    return frozenset((unary | {"Div", "Sub", "Pow"}) - {"Relu", "Clip", "Identity"})


def quantize_lookup(q: Quantizer, node: Node) -> bool:
    """An element-wise float function of one quantized value becomes a QLookup: its 256
    results, computed at compile time with the reference kernel, quantized to the profiled
    output range. Exact in both executors (a table read), and no Dequantize / Quantize pair
    around a float op."""
    from compiler.kernels.reference import KERNELS
    from compiler.kernels.reference_quant import lookup_table

    if len(node.results) != 1 or node.result.type.elem != F32:
        return False
    x, *rest = node.operands
    consts = [const_data(v) for v in rest]
    if any(c is None or c.size != 1 for c in consts):
        return False  # a binary op qualifies only with a scalar constant operand
    if node.result.type.shape != x.type.shape:
        return False
    out = q.params(node.result)
    if out is None or not q.has_quantized(x):
        return False
    qx = q.qvalue(x)
    assert qx is not None
    kernel, attrs = KERNELS[node.op], dict(node.attrs)
    scalars = [np.asarray(c, np.float32).reshape(()) for c in consts if c is not None]

    def fn(xs: np.ndarray) -> np.ndarray:
        return kernel([xs, *scalars], attrs)[0]

    table = lookup_table(fn, qx.type, TensorType(I8, (), out.scale, out.offset))
    tc = q.constant(f"{node.name}_table", table)
    qn = q.create(node, "QLookup", [qx, tc], qattrs(out))
    q.finish(node.result, qn.result)
    return True


@builder("Softmax", targets=("QSoftmax",))
def quantize_softmax(q: Quantizer, node: Node) -> bool:
    """Softmax of a quantized value: exp of (row max - q) from a 256-entry int32 table (the
    input's scale), an exact integer sum, one float32 division, quantized. Exact on both
    executors, where a float Softmax differs in its last bits between them."""
    from compiler.kernels.reference_quant import softmax_table

    (x,) = node.operands
    out = q.params(node.result)
    if out is None or not q.has_quantized(x):
        return False
    if x.type.shape[node.attrs["axis"]] << SOFTMAX_BITS >= 1 << 31:
        return False  # the int32 sum would overflow
    qx = q.qvalue(x)
    assert qx is not None
    tc = q.constant(f"{node.name}_table", softmax_table(qx.type))
    qn = q.create(node, "QSoftmax", [qx, tc], {"axis": node.attrs["axis"], **qattrs(out)})
    q.finish(node.result, qn.result)
    return True


#: Element-wise ops a fused table may hold besides the single-op lookups (lookup_ops).
CHAIN_OPS = frozenset({"Add", "Sub", "Mul", "Div", "Pow", "Max", "Min", "Relu", "Clip"})


def find_chains(q: Quantizer, nodes: list[Node]) -> dict[int, tuple[Value, list[Node]]]:
    """Maximal element-wise subgraphs of two or more nodes that compute a function of one
    float value (GELU's Div, Erf, Add, Mul, Mul of x; SiLU's Sigmoid and Mul): by the sink
    node's id, the source value and the nodes in graph order. Their inner results must have
    no user outside the subgraph; constants must be scalars. One table for the whole
    function rounds once where node-by-node quantization rounds after every node."""
    allowed = (lookup_ops() | CHAIN_OPS) & q.options.ops
    pos = {id(n): i for i, n in enumerate(nodes)}
    source: dict[int, Value] = {}
    members: dict[int, list[Node]] = {}
    for n in nodes:
        if n.op not in allowed or n.name in q.options.keep_float or len(n.results) != 1:
            continue
        if n.result.type.elem != F32:
            continue
        leaves: dict[int, Value] = {}
        inner: list[Node] = []
        for v in n.operands:
            if (c := const_data(v)) is not None:
                if c.size != 1:
                    break
                continue
            if isinstance(v, Result) and id(v.node) in source:
                src = source[id(v.node)]
                leaves[id(src)] = src
                inner.extend(members[id(v.node)])
            else:
                leaves[id(v)] = v
        else:
            if len(leaves) != 1:
                continue
            src = next(iter(leaves.values()))
            if src.type.elem != F32 or n.result.type.shape != src.type.shape:
                continue
            source[id(n)] = src
            members[id(n)] = sorted(
                {id(m): m for m in [*inner, n]}.values(), key=lambda m: pos[id(m)]
            )
    chains: dict[int, tuple[Value, list[Node]]] = {}
    for n in nodes:
        chain = members.get(id(n), [])
        if len(chain) < 2:
            continue
        ids = {id(m) for m in chain}
        if any(id(u) in source and n in members[id(u)] for u in n.result.user_nodes()):
            continue  # not maximal: a larger subgraph holds it
        if all(id(u) in ids for m in chain[:-1] for u in m.result.user_nodes()):
            chains[id(n)] = (source[id(n)], chain)
    return chains


def quantize_chain(q: Quantizer, sink: Node, src: Value, chain: list[Node]) -> bool:
    """A `find_chains` subgraph becomes one QLookup: the table runs the subgraph's reference
    kernels, node by node in float32 as the float graph does, on the 256 dequantized inputs."""
    from compiler.kernels.reference import KERNELS
    from compiler.kernels.reference_quant import lookup_table

    # The source as the chain reads it now (an earlier rewrite may have replaced it by the
    # Dequantize of its quantized producer).
    results = {id(m.result) for m in chain}
    src = next(
        v for m in chain for v in m.operands if id(v) not in results and const_data(v) is None
    )
    out = q.params(sink.result)
    if out is None or not q.has_quantized(src) or not q.runs_int8("QLookup"):
        return False
    qx = q.qvalue(src)
    assert qx is not None

    def fn(xs: np.ndarray) -> np.ndarray:
        vals: dict[int, np.ndarray] = {id(src): xs}
        for m in chain:
            args = [
                vals[id(v)] if id(v) in vals else np.asarray(const_data(v), np.float32).reshape(())
                for v in m.operands
            ]
            vals[id(m.result)] = KERNELS[m.op](args, dict(m.attrs))[0]
        return vals[id(sink.result)]

    table = lookup_table(fn, qx.type, TensorType(I8, (), out.scale, out.offset))
    tc = q.constant(f"{sink.name}_table", table)
    qn = q.create(sink, "QLookup", [qx, tc], qattrs(out))
    q.finish(sink.result, qn.result)
    for m in chain[:-1]:
        q.decisions[m.name] = f"fused into the table of {sink.name}"
    return True


for _op in lookup_ops():
    BUILDERS[_op] = quantize_lookup
    TARGETS[_op] = ("QLookup",)


@builder("AvgPool", targets=("QAvgPool",))
def quantize_avgpool(q: Quantizer, node: Node) -> bool:
    out = q.params(node.result)
    qx = q.qvalue(node.operands[0]) if out is not None else None
    if qx is None or out is None:
        return False
    qn = q.create(node, "QAvgPool", [qx], {**node.attrs, **qattrs(out)})
    q.finish(node.result, qn.result)
    return True


def _is_spatial_mean(node: Node) -> bool:
    x = node.operands[0]
    axes = sorted(a % x.type.rank for a in node.attrs["axes"])
    return x.type.rank >= 3 and axes == list(range(2, x.type.rank))


@builder("GlobalAvgPool", "ReduceMean", targets=("QGlobalAvgPool",))
def quantize_global_avgpool(q: Quantizer, node: Node) -> bool:
    if node.op == "ReduceMean" and not _is_spatial_mean(node):
        return False
    out = q.params(node.result)
    qx = q.qvalue(node.operands[0]) if out is not None else None
    if qx is None or out is None:
        return False
    y = q.create(node, "QGlobalAvgPool", [qx], qattrs(out)).result
    if y.type.shape != node.result.type.shape:  # ReduceMean with keepdims=0
        y = q.rw.create(
            "Reshape", [y], {"shape": node.result.type.shape}, name=f"{node.name}_flat"
        ).result
    q.finish(node.result, y)
    return True


#: Ops that only move or select values: on int8 they keep the input's scale and offset.
MOVERS = ("MaxPool", "GlobalMaxPool", "Reshape", "Transpose", "Slice", "Split", "Broadcast", "Pad")


@builder(*MOVERS)
def quantize_mover(q: Quantizer, node: Node) -> bool:
    (x,) = node.operands
    if not q.has_quantized(x):
        return False  # quantizing just to move data would add work, not remove it
    qx = q.qvalue(x)
    assert qx is not None
    attrs = dict(node.attrs)
    if node.op == "Pad":
        p = params_of(qx.type)
        attrs["value"] = float(quantize(np.float32(attrs["value"]), p.scale, p.offset))
    qn = q.create(node, node.op, [qx], attrs)
    for i, (r, qr) in enumerate(zip(node.results, qn.results)):
        q.finish(r, qr, tag=f"{i}" if len(node.results) > 1 else "")
    return True


@builder("Concat", targets=("Concat", "RescaleQuantized"))
def quantize_concat(q: Quantizer, node: Node) -> bool:
    out = q.params(node.result)
    if out is None or not any(q.has_quantized(v) for v in node.operands):
        return False
    ins = [q.qvalue(v) for v in node.operands]
    if any(v is None for v in ins):
        return False
    given = {params_of(v.type) for v in ins if v is not None}
    if len(given) == 1:
        out = given.pop()  # every input already agrees: concatenate exactly, no rescale
    aligned = []
    for i, v in enumerate(ins):
        assert v is not None
        if params_of(v.type) != out:
            v = q.rw.create(
                "RescaleQuantized", [v], qattrs(out), name=f"{node.name}_in{i}_rescale"
            ).result
        aligned.append(v)
    qn = q.create(node, "Concat", aligned, dict(node.attrs))
    q.finish(node.result, qn.result)
    return True


def _span(lo: float, hi: float) -> float:
    """The width of a range widened to hold 0, as every schema's grid is (0 exact)."""
    return max(hi, 0.0) - min(lo, 0.0)


def _range_of(q: Quantizer, v: Value) -> tuple[float, float] | None:
    data = const_data(v)
    if data is not None:
        return (float(data.min()), float(data.max())) if data.size else None
    tp = q.profile.tensors.get(v.name)
    return None if tp is None or tp.empty else (tp.min, tp.max)


def mixed_range_values(q: Quantizer, nodes: list[Node]) -> dict[str, str]:
    """Float values that one int8 scale and offset cannot hold, by name, with the reason.

    A Concat puts its inputs on one grid; when one input's (widened) range spans fewer than
    `min_slice_steps` steps of the result's calibrated grid, that slice keeps at most ~4 bits.
    A ViT's class token (values ~0.03) concatenated with its patch embeddings (+-4: one step
    is ~0.03) is rounded to a step or two, and the head reads that token after LayerNorms
    that scale it back to unit size: ViT-tiny's all-int8 output was at 8.6 dB. Such a Concat
    stays float, and so does an Add / Sub of a constant on its result whose slices still
    differ that much (the position embeddings), recomputed per slice from the constant's
    data; a node reading one of these values stays float too, since its int8 operand would
    be the same one-scale rounding (quantize_node). Its result is quantized again, on its own
    range, for int8 users."""
    need = q.options.min_slice_steps
    if need <= 0 or "Concat" not in q.options.ops:
        return {}
    #: value id -> (axis, [(start, stop)], [(lo, hi)] per slice)
    sliced: dict[int, tuple[int, list[tuple[int, int]], list[tuple[float, float]]]] = {}
    mixed: dict[str, str] = {}
    for node in nodes:
        if len(node.results) != 1 or node.result.type.elem != F32:
            continue
        out = node.result
        if node.op == "Concat":
            axis = int(node.attrs["axis"]) % len(out.type.shape)
            bounds, ranges, start = [], [], 0
            for v in node.operands:
                r = _range_of(q, v)
                if r is None:
                    break
                n = v.type.shape[axis]
                bounds.append((start, start + n))
                ranges.append(r)
                start += n
            else:
                sliced[id(out)] = (axis, bounds, ranges)
        elif node.op in ("Add", "Sub") and any(id(v) in sliced for v in node.operands):
            x, other = node.operands
            if id(x) not in sliced:
                if node.op == "Sub":
                    continue  # c - x: not worth a case of its own
                x, other = other, x
            c = const_data(other)
            if c is None or c.size == 0 or x.type.shape != out.type.shape:
                continue
            axis, bounds, ranges = sliced[id(x)]
            try:
                full = np.broadcast_to(c, out.type.shape)
            except ValueError:
                continue
            new = []
            for (a, b), (lo, hi) in zip(bounds, ranges):
                part = np.take(full, np.arange(a, b), axis=axis)
                clo, chi = float(part.min()), float(part.max())
                new.append((lo + clo, hi + chi) if node.op == "Add" else (lo - chi, hi - clo))
            sliced[id(out)] = (axis, bounds, new)
        else:
            continue
        p = q.params(out)
        if p is None:
            continue
        axis, bounds, ranges = sliced[id(out)]
        steps = [_span(lo, hi) / p.scale for lo, hi in ranges]
        small = min((s, i) for i, s in enumerate(steps) if s > 0) if any(steps) else None
        if small is not None and small[0] < need:
            (a, b), s = bounds[small[1]], small[0]
            mixed[out.name] = (
                f"slice {a}:{b} of axis {axis} spans {s:.1f} steps of one int8 scale "
                f"(the observed range {_span(*_range_of(q, out) or (0.0, 0.0)) / p.scale:.0f}; "
                f"min_slice_steps {need})"
            )
        else:
            del sliced[id(out)]  # one grid holds it: nothing to carry on
    # Parameters chosen above did not know these values stay float (a Concat's input takes
    # the parameters of the Concat it feeds unless that Concat is one of them): choose again.
    q._params.clear()
    return mixed


def quantize_node(q: Quantizer, node: Node) -> bool:
    """Quantize one node if the options, the profile and the backend allow; records why not."""
    fn = BUILDERS.get(node.op)
    if node.op not in q.options.ops or fn is None:
        return False
    if node.name in q.options.keep_float:
        q.decisions[node.name] = "kept in float (asked)"
        return False
    if (r := next((r for r in node.results if r.name in q.mixed), None)) is not None:
        q.decisions[node.name] = f"float: {q.mixed[r.name]}"
        return False
    if (v := next((v for v in node.operands if v.name in q.mixed), None)) is not None:
        q.decisions[node.name] = f"float: reads {v.name}, which one int8 scale cannot hold"
        return False
    missing = [op for op in TARGETS[node.op] if not q.runs_int8(op)]
    if missing:
        q.decisions[node.name] = f"float: the {q.backend.name} backend has no int8 {missing[0]}"
        return False
    if not all(r.type.elem == F32 for r in node.results):
        return False
    done = fn(q, node)
    if done:
        q.decisions.setdefault(node.name, "quantized")
    else:
        q.decisions.setdefault(node.name, "float (no profile, or operands not quantizable)")
    return done


__all__ = [
    "BUILDERS",
    "lookup_ops",
    "mixed_range_values",
    "MOVERS",
    "find_chains",
    "quantize_chain",
    "REQUANTIZING",
    "Quantizer",
    "clamp_for",
    "params_of",
    "qattrs",
    "quantize_node",
]
