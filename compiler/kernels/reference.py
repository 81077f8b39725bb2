"""Reference kernels: the numpy semantics of every graph op, written once.

Constant folding, the graph interpreter and the low-level arena interpreter all call these.
`KERNELS[op](inputs, attrs) -> results`; the quantized ops' kernels, which also read their
operands' and results' types (scale and offset), are `TYPED_KERNELS`; `run_kernel(op, ...)`
calls either kind and `has_kernel(op)` asks both. `evaluate(node, inputs)` also casts the results to the
node's inferred types and checks their shapes. Results may share memory with inputs (Reshape is
a view): callers must not write into them.

Semantic choices (see docs in the report / tests): float32 tensors are computed in float32 (as
onnxruntime does), float64 in float64, float16 in float32 rounded once per op (ops that
sum many terms, trait "wide-accumulator", and unary math; numpy's binary ops round once already) except where onnxruntime accumulates in double (LayerNorm) or where float64
costs nothing and is more exact (Erf, Gelu, Resize coefficients); integer Div truncates toward
zero; integer Pow with negative exponents goes through float64 and truncates.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from compiler.errors import ExecutionError
from compiler.graph.activations import NONE, get_activation
from compiler.graph.ops import WIDE_ACCUMULATOR, all_ops
from compiler.graph.types import ElemKind, TensorType
from compiler.kernels.reference_extra import EXTRA_KERNELS
from compiler.kernels.reference_nn import NN_KERNELS, erf
from compiler.kernels.reference_quant import PLAIN_KERNELS, QUANT_KERNELS, TypedKernel

Kernel = Callable[[list[np.ndarray], dict[str, Any]], list[np.ndarray]]

KERNELS: dict[str, Kernel] = {}


def kernel(*names: str) -> Callable[[Kernel], Kernel]:
    def deco(fn: Kernel) -> Kernel:
        for n in names:
            assert n not in KERNELS, n
            KERNELS[n] = fn
        return fn

    return deco


def _unary(name: str, fn: Callable[..., np.ndarray]) -> None:
    def k(ins: list[np.ndarray], attrs: dict[str, Any]) -> list[np.ndarray]:
        return [np.asarray(fn(ins[0], **attrs))]

    KERNELS[name] = k


def _float_math(fn: Callable[[np.ndarray], np.ndarray]) -> Callable[..., np.ndarray]:
    """Float-only math: integer inputs go through float64 (then are cast back by evaluate)."""

    def k(x: np.ndarray) -> np.ndarray:
        if x.dtype.kind != "f":
            return fn(x.astype(np.float64))
        return fn(x)

    return k


def _sigmoid(x: np.ndarray) -> np.ndarray:
    # Stable for large |x|: exp never overflows. Narrower floats go through float64, so the
    # result is their correctly rounded sigmoid but for double rounding (in float32, exp, the
    # add and the division each rounded: up to 3 ulp off).
    xw = x if x.dtype == np.float64 else x.astype(np.float64)
    e = np.exp(-np.abs(xw))
    return np.where(xw >= 0, 1 / (1 + e), e / (1 + e)).astype(x.dtype, copy=False)


def _gelu(x: np.ndarray, approximate: str = "none") -> np.ndarray:
    x64 = x.astype(np.float64)
    if approximate == "none":
        y = 0.5 * x64 * (1.0 + erf(x64 / math.sqrt(2.0)))
    elif approximate == "tanh":
        y = 0.5 * x64 * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x64 + 0.044715 * x64**3)))
    else:
        raise ExecutionError(f"Gelu: unknown approximate '{approximate}' (none or tanh)")
    return y.astype(x.dtype)


_bmax, _bmin = max, min


def _clip(x: np.ndarray, min: float = -math.inf, max: float = math.inf) -> np.ndarray:
    # A NaN bound is no bound (onnxruntime's std::max/std::min keep x; so does the LLVM code).
    lo = -math.inf if math.isnan(min) else min
    hi = math.inf if math.isnan(max) else max
    if x.dtype.kind in "iu":
        info = np.iinfo(x.dtype)
        lo = info.min if lo == -math.inf else int(math.ceil(lo))
        hi = info.max if hi == math.inf else int(math.floor(hi))
        lo, hi = _bmax(lo, info.min), _bmin(hi, info.max)
        return np.minimum(np.maximum(x, x.dtype.type(lo)), x.dtype.type(hi))
    # min then max, so min > max gives max everywhere (as onnxruntime does)
    return np.minimum(np.maximum(x, x.dtype.type(lo)), x.dtype.type(hi))


def _hard_swish(x: np.ndarray) -> np.ndarray:
    t = x.dtype.type
    return x * np.clip(x * t(1.0 / 6.0) + t(0.5), t(0), t(1))


def _sign(x: np.ndarray) -> np.ndarray:
    return np.sign(x)


def _not(x: np.ndarray) -> np.ndarray:
    return np.logical_not(x)


_unary("Relu", lambda x: np.maximum(x, x.dtype.type(0)))
_unary("Sigmoid", _float_math(_sigmoid))
_unary("Tanh", _float_math(np.tanh))
_unary("Exp", _float_math(np.exp))
_unary("Log", _float_math(np.log))
_unary("Sqrt", _float_math(np.sqrt))
_unary("Abs", np.abs)
_unary("Neg", np.negative)
_unary("Reciprocal", _float_math(np.reciprocal))
_unary(
    "Erf",
    lambda x: erf(x.astype(np.float64)).astype(x.dtype if x.dtype.kind == "f" else np.float64),
)
_unary("Floor", lambda x: np.floor(x) if x.dtype.kind == "f" else x)
_unary("Ceil", lambda x: np.ceil(x) if x.dtype.kind == "f" else x)
_unary("Not", _not)
_unary("Softplus", _float_math(lambda x: np.logaddexp(x.dtype.type(0), x)))
_unary("HardSwish", _float_math(_hard_swish))
_unary("Sign", _sign)
_unary("LeakyRelu", lambda x, alpha: np.where(x >= 0, x, x * x.dtype.type(alpha)))
_unary("Elu", lambda x, alpha: np.where(x > 0, x, x.dtype.type(alpha) * np.expm1(np.minimum(x, 0))))
_unary(
    "Selu",
    lambda x, alpha, gamma: (
        x.dtype.type(gamma) * np.where(x > 0, x, x.dtype.type(alpha) * np.expm1(np.minimum(x, 0)))
    ),
)
_unary(
    "HardSigmoid",
    lambda x, alpha, beta: np.clip(
        x * x.dtype.type(alpha) + x.dtype.type(beta), x.dtype.type(0), x.dtype.type(1)
    ),
)
_unary("Gelu", _gelu)
_unary("Clip", _clip)


# -- binary -----------------------------------------------------------------------------------


def _binary(name: str, fn: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> None:
    def k(ins: list[np.ndarray], attrs: dict[str, Any]) -> list[np.ndarray]:
        return [np.asarray(fn(ins[0], ins[1]))]

    KERNELS[name] = k


def _div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if a.dtype.kind in "iu" and b.dtype.kind in "iu":
        if np.any(b == 0):
            raise ExecutionError("integer division by zero")
        # INT_MIN // -1 wraps to INT_MIN (numpy's answer; onnxruntime dies of SIGFPE there)
        with np.errstate(over="ignore"):
            q = np.floor_divide(a, b)
        # floor -> truncation toward zero (C and onnxruntime semantics)
        fix = (np.remainder(a, b) != 0) & ((a < 0) != (b < 0))
        return q + fix.astype(q.dtype)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.divide(a, b)


def _pow(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if a.dtype.kind in "iu":
        if b.dtype.kind in "iu" and not np.any(b < 0):
            return np.power(a, b)
        r = np.power(a.astype(np.float64), b.astype(np.float64))
        return np.trunc(r).astype(a.dtype)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        return np.power(a, b.astype(a.dtype, copy=False))


def _prelu(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.where(a < 0, a * b, a)


def _arith(
    fn: Callable[[np.ndarray, np.ndarray], np.ndarray],
) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    def k(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        with np.errstate(over="ignore", invalid="ignore"):
            return fn(a, b)

    return k


_binary("Add", _arith(np.add))
_binary("Sub", _arith(np.subtract))
_binary("Mul", _arith(np.multiply))
_binary("Div", _div)
_binary("Pow", _pow)
_binary("Max", np.maximum)
_binary("Min", np.minimum)
_binary("PRelu", _prelu)
_binary("Equal", np.equal)
_binary("Less", np.less)
_binary("Greater", np.greater)
_binary("And", np.logical_and)
_binary("Or", np.logical_or)


@kernel("Where")
def _where(ins: list[np.ndarray], attrs: dict[str, Any]) -> list[np.ndarray]:
    c, x, y = ins
    return [np.where(c.astype(bool, copy=False), x, y)]


@kernel("Cast")
def _cast(ins: list[np.ndarray], attrs: dict[str, Any]) -> list[np.ndarray]:
    (x,) = ins
    to = ElemKind.parse(attrs["to"]).np_dtype
    if to == np.bool_:
        return [x != 0]
    if x.dtype.kind == "f" and to.kind in "iu":
        # float -> int truncates toward zero; NaN/inf and out-of-range are undefined in ONNX
        with np.errstate(invalid="ignore"):
            return [np.trunc(x).astype(to)]
    with np.errstate(over="ignore"):  # too large for the type: inf (or NaN), as IEEE casts give
        return [x.astype(to)]


# -- tensor ops -------------------------------------------------------------------------------


@kernel("Concat")
def _concat(ins: list[np.ndarray], attrs: dict[str, Any]) -> list[np.ndarray]:
    return [np.concatenate(ins, axis=attrs["axis"])]


@kernel("Split")
def _split(ins: list[np.ndarray], attrs: dict[str, Any]) -> list[np.ndarray]:
    (x,) = ins
    ax = attrs["axis"] % x.ndim
    bounds = np.cumsum(attrs["splits"])[:-1]
    return list(np.split(x, bounds, axis=ax))


@kernel("Slice")
def _slice(ins: list[np.ndarray], attrs: dict[str, Any]) -> list[np.ndarray]:
    (x,) = ins
    idx = []
    for d, s, e, st in zip(x.shape, attrs["starts"], attrs["ends"], attrs["steps"]):
        # starts/ends are clamped range bounds: a negative end with a negative step means
        # "through index 0", which Python slices spell as None.
        if st < 0 and e < 0:
            e = None
        if not (0 <= s <= d or (st < 0 and s == d - 1)):
            idx.append(slice(0, 0))
        else:
            idx.append(slice(s, e, st))
    return [x[tuple(idx)]]


@kernel("Reshape")
def _reshape(ins: list[np.ndarray], attrs: dict[str, Any]) -> list[np.ndarray]:
    return [ins[0].reshape(attrs["shape"])]


@kernel("Transpose")
def _transpose(ins: list[np.ndarray], attrs: dict[str, Any]) -> list[np.ndarray]:
    return [np.ascontiguousarray(np.transpose(ins[0], attrs["perm"]))]


@kernel("Broadcast")
def _broadcast(ins: list[np.ndarray], attrs: dict[str, Any]) -> list[np.ndarray]:
    (x,) = ins
    shape = np.broadcast_shapes(x.shape, tuple(attrs["shape"]))
    return [np.ascontiguousarray(np.broadcast_to(x, shape))]


@kernel("Tile")
def _tile(ins: list[np.ndarray], attrs: dict[str, Any]) -> list[np.ndarray]:
    return [np.tile(ins[0], attrs["repeats"])]


@kernel("Gather")
def _gather(ins: list[np.ndarray], attrs: dict[str, Any]) -> list[np.ndarray]:
    data, idx = ins
    ax = attrs["axis"] % data.ndim
    n = data.shape[ax]
    if idx.size and (idx.min() < -n or idx.max() >= n):
        raise ExecutionError(f"Gather: index out of range [{-n}, {n - 1}] on axis {ax}")
    return [np.take(data, idx.astype(np.int64), axis=ax)]


@kernel("Pad")
def _pad(ins: list[np.ndarray], attrs: dict[str, Any]) -> list[np.ndarray]:
    (x,) = ins
    r = x.ndim
    p = attrs["pads"]
    begins, ends = p[:r], p[r:]
    # Negative pads crop.
    crop = tuple(slice(max(-b, 0), d - max(-e, 0)) for b, e, d in zip(begins, ends, x.shape))
    x = x[crop]
    width = [(max(b, 0), max(e, 0)) for b, e in zip(begins, ends)]
    mode = attrs["mode"]
    if mode == "constant":
        return [np.pad(x, width, mode="constant", constant_values=x.dtype.type(attrs["value"]))]
    if mode == "edge":
        return [np.pad(x, width, mode="edge")]
    if mode == "reflect":
        return [np.pad(x, width, mode="reflect")]
    if mode == "wrap":
        return [np.pad(x, width, mode="wrap")]
    raise ExecutionError(f"Pad: unknown mode '{mode}' (constant, edge, reflect, wrap)")


# -- linear algebra ---------------------------------------------------------------------------


def _matmul32(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a @ b. When finite float32 operands give a non-finite product, a partial sum overflowed,
    and where it lands (inf, -inf or, with two BLAS lanes overflowing opposite ways, NaN)
    depends on the summation order: the product is redone in float64 and rounded once, so
    it is the nearest float32 to the exact sum (what onnxruntime gives: -inf for a row of
    1e38 weights whose exact dot product is -3.6e38, where BLAS gave NaN)."""
    y = np.matmul(a, b)
    if (
        y.dtype == np.float32
        and not np.isfinite(y).all()
        and np.isfinite(a).all()
        and np.isfinite(b).all()
    ):
        y = np.matmul(a.astype(np.float64), b.astype(np.float64)).astype(np.float32)
    return y


@kernel("MatMul")
def _matmul(ins: list[np.ndarray], attrs: dict[str, Any]) -> list[np.ndarray]:
    return [_matmul32(ins[0], ins[1])]


@kernel("FullyConnected")
def _fully_connected(ins: list[np.ndarray], attrs: dict[str, Any]) -> list[np.ndarray]:
    x, w, b = ins
    y = _matmul32(x, w)
    y += b
    return [y]


# -- reductions and softmax -------------------------------------------------------------------


def _axes(x: np.ndarray, attrs: dict[str, Any]) -> tuple[int, ...]:
    return tuple(sorted({a % max(x.ndim, 1) for a in attrs["axes"]}))


def _reduce(name: str, fn: Callable[..., np.ndarray]) -> None:
    def k(ins: list[np.ndarray], attrs: dict[str, Any]) -> list[np.ndarray]:
        (x,) = ins
        return [np.asarray(fn(x, axis=_axes(x, attrs), keepdims=bool(attrs["keepdims"])))]

    KERNELS[name] = k


def _mean(x: np.ndarray, axis: tuple[int, ...], keepdims: bool) -> np.ndarray:
    if x.dtype.kind in "iu":
        s = np.sum(x, axis=axis, keepdims=keepdims)
        n = math.prod(x.shape[a] for a in axis)
        return _div(s, np.asarray(n, s.dtype))
    return np.mean(x, axis=axis, keepdims=keepdims)


_reduce("ReduceMean", _mean)
_reduce("ReduceSum", np.sum)
_reduce("ReduceMax", np.max)
_reduce("ReduceMin", np.min)
_reduce("ReduceProd", np.prod)


def _arg(name: str, fn: Callable[..., np.ndarray]) -> None:
    def k(ins: list[np.ndarray], attrs: dict[str, Any]) -> list[np.ndarray]:
        (x,) = ins
        ax = attrs["axis"] % max(x.ndim, 1)
        if attrs["select_last_index"]:
            flipped = np.flip(x, axis=ax)
            idx = x.shape[ax] - 1 - fn(flipped, axis=ax)
        else:
            idx = fn(x, axis=ax)
        idx = idx.astype(np.int64)
        if attrs["keepdims"]:
            idx = np.expand_dims(idx, ax)
        return [idx]

    KERNELS[name] = k


_arg("ArgMax", np.argmax)
_arg("ArgMin", np.argmin)


@kernel("Softmax")
def _softmax(ins: list[np.ndarray], attrs: dict[str, Any]) -> list[np.ndarray]:
    (x,) = ins
    ax = attrs["axis"]
    e = np.exp(x - np.max(x, axis=ax, keepdims=True))
    e /= np.sum(e, axis=ax, keepdims=True)
    return [e]


@kernel("LogSoftmax")
def _log_softmax(ins: list[np.ndarray], attrs: dict[str, Any]) -> list[np.ndarray]:
    (x,) = ins
    ax = attrs["axis"]
    s = x - np.max(x, axis=ax, keepdims=True)
    return [s - np.log(np.sum(np.exp(s), axis=ax, keepdims=True))]


@kernel("Save")
def _save(ins: list[np.ndarray], attrs: dict[str, Any]) -> list[np.ndarray]:
    """Save has no results: the interpreter binds its first operand to the output placeholder."""
    return []


# Convolution, pooling, normalisation and resize live in reference_nn; the ops of
# compiler/graph/ops_extra.py in reference_extra.
for _name, _fn in (NN_KERNELS | EXTRA_KERNELS).items():
    assert _name not in KERNELS, _name
    KERNELS[_name] = _fn


#: The quantized ops' kernels read their operands' scales and offsets: `run_kernel` passes types.
TYPED_KERNELS: dict[str, TypedKernel] = dict(QUANT_KERNELS)
assert not set(TYPED_KERNELS) & set(KERNELS)
for _name, _plain in PLAIN_KERNELS.items():
    assert _name not in KERNELS, _name
    KERNELS[_name] = _plain


def has_kernel(op: str) -> bool:
    """Whether `op` has a reference kernel (plain or typed)."""
    return op in KERNELS or op in TYPED_KERNELS


def run_kernel(
    op: str,
    inputs: list[np.ndarray],
    attrs: dict[str, Any],
    in_types: Sequence[TensorType],
    out_types: Sequence[TensorType],
) -> list[np.ndarray]:
    """Run `op`'s kernel; typed ones (the quantized ops) also get the operand and result types,
    which carry the quantization parameters. KeyError when `op` has no kernel."""
    typed = TYPED_KERNELS.get(op)
    if typed is not None:
        return typed(inputs, attrs, in_types, out_types)
    return KERNELS[op](inputs, attrs)


# -- fused activations ------------------------------------------------------------------------


def apply_activation(y: np.ndarray, activation: str, act_args: Sequence[float]) -> np.ndarray:
    """A fused `activation` (compiler/graph/activations.py) on `y`: its op's reference kernel."""
    if activation == NONE:
        return y
    act = get_activation(activation)
    return np.asarray(KERNELS[act.op]([y], act.attrs_of(act_args))[0], dtype=y.dtype)


def _with_fused_activation(fn: Kernel) -> Kernel:
    def k(ins: list[np.ndarray], attrs: dict[str, Any]) -> list[np.ndarray]:
        (y,) = fn(ins, attrs)
        return [apply_activation(y, attrs["activation"], attrs["act_args"])]

    return k


# Every op with the fused-activation attributes (Conv, FullyConnected) runs its activation after
# its own kernel, so no kernel applies it by hand.
for _name, _op in all_ops().items():
    if "activation" in _op.attrs:
        KERNELS[_name] = _with_fused_activation(KERNELS[_name])


def _float16_in_float32(fn: Kernel) -> Kernel:
    """float16 operands computed in float32 (callers cast results back to the node's type)."""

    def k(ins: list[np.ndarray], attrs: dict[str, Any]) -> list[np.ndarray]:
        if any(a.dtype == np.float16 for a in ins):
            ins = [a.astype(np.float32) if a.dtype == np.float16 else a for a in ins]
        return fn(ins, attrs)

    return k


# Ops that sum many terms accumulate float16 in float32, as onnxruntime's kernels do (numpy
# would round every partial sum to float16); unary math is rounded once, not per step of its
# formula. (The typed kernels of the quantized ops take integers only.)
for _name, _op in all_ops().items():
    if _op.traits & {WIDE_ACCUMULATOR, "unary"} and _name in KERNELS:
        KERNELS[_name] = _float16_in_float32(KERNELS[_name])


# -- evaluation of one node -------------------------------------------------------------------


def evaluate(node: Any, inputs: list[np.ndarray]) -> list[np.ndarray]:
    """Run `node` (a graph Node) on `inputs`; results cast to the node's types and shape-checked.

    Raises ExecutionError naming the node when the op has no kernel, the kernel fails, or a
    result's shape differs from the inferred type.
    """
    if not has_kernel(node.op):
        raise ExecutionError(f"node '{node.name}': no reference kernel for op {node.op}")
    try:
        with np.errstate(all="ignore"):
            outs = run_kernel(
                node.op,
                list(inputs),
                node.attrs,
                [v.type for v in getattr(node, "operands", ())],
                [r.type for r in node.results],
            )
    except ExecutionError as e:
        raise ExecutionError(f"node '{node.name}' ({node.op}): {e.message}") from None
    except (ValueError, TypeError, IndexError, ArithmeticError, MemoryError) as e:
        raise ExecutionError(
            f"node '{node.name}' ({node.op}): kernel failed: {type(e).__name__}: {e}"
        ) from e
    if len(outs) != len(node.results):
        raise ExecutionError(
            f"node '{node.name}' ({node.op}): kernel returned {len(outs)} "
            f"results, the node has {len(node.results)}"
        )
    res = []
    for i, (arr, r) in enumerate(zip(outs, node.results)):
        t = r.type
        arr = np.asarray(arr)
        if tuple(arr.shape) != t.shape:
            raise ExecutionError(
                f"node '{node.name}' ({node.op}): result {i} has shape "
                f"{list(arr.shape)}, its type is {t}"
            )
        if arr.dtype != t.np_dtype:
            arr = arr.astype(t.np_dtype)
        res.append(arr)
    return res


__all__ = [
    "KERNELS",
    "TYPED_KERNELS",
    "Kernel",
    "apply_activation",
    "evaluate",
    "has_kernel",
    "kernel",
    "run_kernel",
]
