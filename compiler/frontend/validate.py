"""Import-time validation (pipeline stage 1): what the ONNX checker lets through, refused clearly.

Runs between loading and converting. `validate_model` checks every tensor stored in the model
(initializer data length against its dims and type, typed fields, external-data segments, dims
within limits) and the graph inputs' dims; `validate_node` runs before each node's converter,
when its operands' types are known, and checks attribute ranges (kernel sizes, strides and
dilations >= 1, pads >= 0, a group dividing the channels, axes and perms within the rank)
and each operand's element type against the op's ONNX schema (a Conv with a bool bias).
Every refusal is an `InvalidModelError` naming the node, the attribute and the value.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import onnx
from onnx import TensorProto

from compiler.errors import InvalidModelError
from compiler.limits import MAX_DIM

if TYPE_CHECKING:
    from compiler.frontend.onnx_importer import NodeContext

#: Bits per element of each ONNX data type (4-bit types pack two per byte).
_BITS: dict[int, int] = {
    TensorProto.FLOAT: 32,
    TensorProto.UINT8: 8,
    TensorProto.INT8: 8,
    TensorProto.UINT16: 16,
    TensorProto.INT16: 16,
    TensorProto.INT32: 32,
    TensorProto.INT64: 64,
    TensorProto.BOOL: 8,
    TensorProto.FLOAT16: 16,
    TensorProto.DOUBLE: 64,
    TensorProto.UINT32: 32,
    TensorProto.UINT64: 64,
    TensorProto.COMPLEX64: 64,
    TensorProto.COMPLEX128: 128,
    TensorProto.BFLOAT16: 16,
}
for _name, _bits in (
    ("FLOAT8E4M3FN", 8),
    ("FLOAT8E4M3FNUZ", 8),
    ("FLOAT8E5M2", 8),
    ("FLOAT8E5M2FNUZ", 8),
    ("UINT4", 4),
    ("INT4", 4),
    ("FLOAT4E2M1", 4),
    ("FLOAT8E8M0", 8),
    ("UINT2", 2),
    ("INT2", 2),
):
    if hasattr(TensorProto, _name):
        _BITS[getattr(TensorProto, _name)] = _bits

#: Which typed field holds a tensor's values when it has no raw_data, and values per element.
_FIELD: dict[int, tuple[str, int]] = {
    TensorProto.FLOAT: ("float_data", 1),
    TensorProto.COMPLEX64: ("float_data", 2),
    TensorProto.DOUBLE: ("double_data", 1),
    TensorProto.COMPLEX128: ("double_data", 2),
    TensorProto.INT64: ("int64_data", 1),
    TensorProto.UINT32: ("uint64_data", 1),
    TensorProto.UINT64: ("uint64_data", 1),
    TensorProto.STRING: ("string_data", 1),
}
_TYPED_FIELDS = (
    "float_data",
    "double_data",
    "int32_data",
    "int64_data",
    "uint64_data",
    "string_data",
)


def _dtype_name(t: int) -> str:
    try:
        return TensorProto.DataType.Name(t).lower()
    except ValueError:
        return f"type {t}"


def _expected_bytes(numel: int, data_type: int) -> int | None:
    bits = _BITS.get(data_type)
    return None if bits is None else (numel * bits + 7) // 8


# -- tensors -----------------------------------------------------------------------------------


def check_tensor(t: onnx.TensorProto, what: str, *, model: str | None = None) -> None:
    """Refuse a stored tensor whose data does not match its dims and data type."""

    def bad(msg: str) -> InvalidModelError:
        return InvalidModelError(f"{what}: {msg}", model=model)

    dims = list(t.dims)
    for i, d in enumerate(dims):
        if d < 0:
            raise bad(f"dim {i} is {d}; dims must not be negative")
        if d > MAX_DIM:
            raise bad(f"dim {i} is {d}, above the largest supported dim {MAX_DIM}")
    numel = math.prod(dims)
    if t.data_type == TensorProto.UNDEFINED:
        raise bad("has no data type")
    if t.data_location == TensorProto.EXTERNAL:
        _check_external_entries(t, bad)
        return
    present = [f for f in _TYPED_FIELDS if len(getattr(t, f))]
    # Each read of ``t.raw_data`` copies the bytes out of the protobuf (0.27 s for VGG-19's
    # 411 MB classifier): read once.
    raw = t.raw_data if t.HasField("raw_data") else b""
    if raw:
        if present:
            raise bad(f"holds both raw_data and {present[0]}; which one is the data?")
        want = _expected_bytes(numel, t.data_type)
        if want is not None and len(raw) != want:
            raise bad(
                f"raw_data holds {len(raw)} bytes, but {_shape(dims)} "
                f"{_dtype_name(t.data_type)} needs {want}"
            )
        if t.data_type == TensorProto.STRING:
            raise bad("string tensors cannot be stored as raw_data")
        return
    field, per = _FIELD.get(t.data_type, ("int32_data", 1))
    # 4-bit (and 2-bit) types pack several elements into each int32_data value's low byte
    bits = _BITS.get(t.data_type, 8)
    want_vals = (numel * bits + 7) // 8 if bits < 8 else numel * per
    others = [f for f in present if f != field]
    if others:
        raise bad(f"{_dtype_name(t.data_type)} data stored in {others[0]} (expected {field})")
    have = len(getattr(t, field))
    if have != want_vals and not (numel == 0 and have == 0):
        if have == 0:
            raise bad(f"holds no data for its {_shape(dims)} elements")
        raise bad(f"{field} holds {have} values, but {_shape(dims)} needs {want_vals}")


def _shape(dims: list[int]) -> str:
    return "shape [" + ", ".join(map(str, dims)) + "]" if dims else "a scalar"


def _check_external_entries(t: onnx.TensorProto, bad: Any) -> dict[str, str]:
    entries = {e.key: e.value for e in t.external_data}
    loc = entries.get("location", "")
    if not loc:
        raise bad("stores its data externally but names no file (external_data has no location)")
    p = Path(loc)
    if p.is_absolute() or ".." in p.parts:
        raise bad(
            f"external data location '{loc}' is outside the model's folder; only relative "
            "paths below it are read"
        )
    for key in ("offset", "length"):
        if key in entries:
            try:
                v = int(entries[key])
            except ValueError:
                raise bad(f"external data {key} '{entries[key]}' is not an integer") from None
            if v < 0:
                raise bad(f"external data {key} is {v}")
    return entries


def check_external_data(
    model: onnx.ModelProto, base_dir: str | os.PathLike, *, model_name: str | None = None
) -> None:
    """Before any external file is read: every segment is a regular file below `base_dir`,
    inside that file, and exactly as long as its tensor's data."""
    base = Path(base_dir).resolve()
    for t in model.graph.initializer:
        if t.data_location != TensorProto.EXTERNAL:
            continue
        what = f"initializer '{t.name}'"

        def bad(msg: str, what: str = what) -> InvalidModelError:
            return InvalidModelError(f"{what}: {msg}", model=model_name)

        entries = _check_external_entries(t, bad)
        path = (base / entries["location"]).resolve()
        if base not in path.parents:
            raise bad(f"external data location '{entries['location']}' leaves the model's folder")
        if not path.is_file():
            raise bad(f"external data file '{entries['location']}' does not exist or is not a file")
        size = path.stat().st_size
        offset = int(entries.get("offset", 0))
        want = _expected_bytes(math.prod(t.dims), t.data_type)
        length = int(entries["length"]) if "length" in entries else size - offset
        if offset + length > size:
            raise bad(
                f"external data segment {offset}..{offset + length} runs past the end of "
                f"'{entries['location']}' ({size} bytes)"
            )
        if want is not None and length != want:
            raise bad(
                f"external data segment holds {length} bytes, but {_shape(list(t.dims))} "
                f"{_dtype_name(t.data_type)} needs {want}"
            )


def check_input_dims(
    name: str, dims: list[int] | tuple[int, ...], *, model: str | None = None
) -> None:
    """Concrete dims of a graph input: not negative and within MAX_DIM. A dim of 0 is legal
    ONNX (an empty tensor; the node tests' empty-set reductions use it) and compiles."""
    for i, d in enumerate(dims):
        if d < 0:
            raise InvalidModelError(
                f"input '{name}' dim {i} is {d}: dims must not be negative",
                model=model,
                hint="give the size with --input-shape if the dim is symbolic",
            )
        if d > MAX_DIM:
            raise InvalidModelError(
                f"input '{name}' dim {i} is {d}, above the largest supported dim {MAX_DIM}",
                model=model,
            )


def validate_model(model: onnx.ModelProto, source: str | None = None) -> None:
    """Model-level checks: stored tensors and declared input dims."""
    g = model.graph
    if g.sparse_initializer:
        raise InvalidModelError(
            f"sparse initializer '{g.sparse_initializer[0].values.name}' is not supported",
            model=source,
        )
    seen: set[str] = set()
    for t in g.initializer:
        if t.name in seen:
            raise InvalidModelError(f"initializer '{t.name}' is defined twice", model=source)
        seen.add(t.name)
        check_tensor(t, f"initializer '{t.name}'", model=source)
    for n in g.node:
        for a in n.attribute:
            if a.type == onnx.AttributeProto.TENSOR:
                check_tensor(
                    a.t,
                    f"node '{n.name or n.op_type}' ({n.op_type}) attribute '{a.name}'",
                    model=source,
                )
    for vi in g.input:
        if vi.name in seen or not vi.type.HasField("tensor_type"):
            continue
        for i, d in enumerate(vi.type.tensor_type.shape.dim):
            # a negative dim reads as symbolic (the importer asks for --input-shape)
            if d.HasField("dim_value") and d.dim_value > MAX_DIM:
                check_input_dims(vi.name, [1] * i + [d.dim_value], model=source)


# -- nodes -------------------------------------------------------------------------------------

#: Ops with a convolution-style window: attribute -> smallest allowed value of each element.
_WINDOW_OPS = {"Conv", "ConvTranspose", "MaxPool", "AveragePool", "LpPool"}
_WINDOW_MIN = {"kernel_shape": 1, "strides": 1, "dilations": 1, "pads": 0, "output_padding": 0}
#: Ops with one `axis` attribute: op -> extra positions past the last dim (Flatten: rank+1).
_AXIS_OPS = {
    "Concat": 0,
    "Softmax": 0,
    "LogSoftmax": 0,
    "Hardmax": 0,
    "Gather": 0,
    "Split": 0,
    "ArgMax": 0,
    "ArgMin": 0,
    "LayerNormalization": 0,
    "Flatten": 1,
}


def _ints_attr(ctx: NodeContext, key: str) -> list[int] | None:
    if not ctx.has_attr(key):
        return None
    v = ctx.attr(key)
    if isinstance(v, int):
        return [v]
    if isinstance(v, list) and all(isinstance(x, int) for x in v):
        return v
    raise ctx_invalid(ctx, f"attribute {key}={v!r} must be integers")


def ctx_invalid(ctx: NodeContext, message: str) -> InvalidModelError:
    return ctx.unsupported(message, kind=InvalidModelError)  # type: ignore[return-value]


def _rank_of(ctx: NodeContext, i: int) -> int | None:
    if not ctx.has_input(i):
        return None
    return ctx.type(i).rank


def _check_window(ctx: NodeContext) -> None:
    rank = _rank_of(ctx, 0)
    nsp = rank - 2 if rank is not None and rank >= 2 else None
    for key, low in _WINDOW_MIN.items():
        vals = _ints_attr(ctx, key)
        if vals is None:
            continue
        for v in vals:
            if v < low:
                raise ctx_invalid(
                    ctx, f"attribute {key}={vals}: every value must be >= {low}, got {v}"
                )
        want = None if nsp is None else (2 * nsp if key == "pads" else nsp)
        if want is not None and nsp in (1, 2, 3) and len(vals) != want:
            raise ctx_invalid(
                ctx,
                f"attribute {key}={vals} has {len(vals)} values; the {nsp}-D input needs {want}",
            )
    if ctx.op_type in ("Conv", "ConvTranspose"):
        group = ctx.attr("group", 1)
        if not isinstance(group, int) or group < 1:
            raise ctx_invalid(ctx, f"attribute group={group!r} must be >= 1")
        if rank is not None and rank >= 2:
            c = ctx.type(0).shape[1]
            if c % group:
                raise ctx_invalid(
                    ctx, f"attribute group={group} does not divide the {c} input channels"
                )
            if ctx.op_type == "Conv" and ctx.has_input(1) and ctx.type(1).rank >= 1:
                m = ctx.type(1).shape[0]
                if m % group:
                    raise ctx_invalid(
                        ctx, f"attribute group={group} does not divide the {m} output channels"
                    )
    if ctx.op_type == "ConvTranspose":
        op = _ints_attr(ctx, "output_padding") or []
        st = _ints_attr(ctx, "strides") or [1] * len(op)
        dl = _ints_attr(ctx, "dilations") or [1] * len(op)
        for p, s, d in zip(op, st, dl):
            if p >= max(s, d):
                raise ctx_invalid(
                    ctx,
                    f"attribute output_padding={op}: {p} is not smaller than its stride {s} "
                    f"or dilation {d}",
                )


def _check_axis(ctx: NodeContext) -> None:
    if not ctx.has_attr("axis") or not ctx.has_input(0):
        return
    axis = ctx.attr("axis")
    rank = ctx.type(0).rank + _AXIS_OPS[ctx.op_type]
    if not isinstance(axis, int):
        raise ctx_invalid(ctx, f"attribute axis={axis!r} must be an integer")
    lo, hi = -rank, max(rank - 1, 0)
    if ctx.op_type == "Flatten":
        lo, hi = -(rank - 1), rank - 1
    if not lo <= axis <= hi:
        raise ctx_invalid(
            ctx, f"attribute axis={axis} is out of range for a rank-{ctx.type(0).rank} input"
        )


def _check_axes(ctx: NodeContext) -> None:
    axes = _ints_attr(ctx, "axes")
    if axes is None or not ctx.has_input(0):
        return
    rank = ctx.type(0).rank + (len(axes) if ctx.op_type == "Unsqueeze" else 0)
    norm = []
    for a in axes:
        if not -rank <= a < max(rank, 1):
            raise ctx_invalid(ctx, f"attribute axes={axes}: {a} is out of range for rank {rank}")
        norm.append(a % max(rank, 1))
    if len(set(norm)) != len(norm):
        raise ctx_invalid(ctx, f"attribute axes={axes} names an axis twice")


def _check_perm(ctx: NodeContext) -> None:
    perm = _ints_attr(ctx, "perm")
    if perm is None or not ctx.has_input(0):
        return
    if sorted(perm) != list(range(ctx.type(0).rank)):
        raise ctx_invalid(
            ctx, f"attribute perm={perm} is not a permutation of a rank-{ctx.type(0).rank} input"
        )


def _check_positive_attr(key: str, low: int) -> Any:
    def check(ctx: NodeContext) -> None:
        v = ctx.attr(key)
        if v is not None and (not isinstance(v, int) or v < low):
            raise ctx_invalid(ctx, f"attribute {key}={v!r} must be >= {low}")

    return check


def _check_int_divisor(ctx: NodeContext) -> None:
    """A constant integer divisor holding 0 (Div, Mod) fails on every input (ONNX Runtime: at
    run time, or when it folds the node); saying so at compile time names the node."""
    d = ctx.const(1)
    if d is None or d.dtype.kind not in "iub" or d.all():
        return
    where = "" if d.ndim == 0 else f" at index {tuple(int(i) for i in np.argwhere(d == 0)[0])}"
    raise ctx_invalid(
        ctx,
        f"integer {'modulo' if ctx.node.op_type == 'Mod' else 'division'} by zero: "
        f"the constant divisor {ctx.node.input[1]!r} is 0{where}",
    )


def _check_operand_types(ctx: NodeContext) -> None:
    """Each tensor operand's element type is one the op's ONNX schema allows for it (a Conv
    with a bool bias: onnxruntime refuses the model, and the importer must not run it)."""
    if ctx.node.domain not in ("", "ai.onnx"):
        return
    try:
        schema = onnx.defs.get_schema(ctx.op_type, ctx.opset, "")
    except onnx.defs.SchemaError:
        return
    formals = list(schema.inputs)
    if not formals:
        return
    variadic = formals[-1].option == onnx.defs.OpSchema.FormalParameterOption.Variadic
    allowed = {c.type_param_str: set(c.allowed_type_strs) for c in schema.type_constraints}
    for i in range(ctx.num_inputs):
        if i >= len(formals) and not variadic:
            return
        formal = formals[min(i, len(formals) - 1)]
        code = ctx.onnx_elem_type(i)
        if code is None:
            continue
        name = _dtype_name(code)
        types = allowed.get(formal.type_str, {formal.type_str})
        if f"tensor({name})" in types or not any(t.startswith("tensor(") for t in types):
            continue
        takes = sorted(t[7:-1] for t in types if t.startswith("tensor("))
        raise ctx_invalid(
            ctx,
            f"input {i} ('{formal.name}', {ctx.node.input[i]!r}) is {name}; "
            f"{ctx.op_type} takes {', '.join(takes)} there",
        )


_RULES: dict[str, list[Any]] = {}
for _op in _WINDOW_OPS:
    _RULES.setdefault(_op, []).append(_check_window)
for _op in _AXIS_OPS:
    _RULES.setdefault(_op, []).append(_check_axis)
for _op in (
    "Squeeze",
    "Unsqueeze",
    "ReduceMean",
    "ReduceSum",
    "ReduceMax",
    "ReduceMin",
    "ReduceProd",
    "ReduceL1",
    "ReduceL2",
    "ReduceLogSum",
    "ReduceLogSumExp",
    "ReduceSumSquare",
    "Slice",
):
    _RULES.setdefault(_op, []).append(_check_axes)
_RULES.setdefault("Transpose", []).append(_check_perm)
for _op in ("Div", "Mod"):
    _RULES.setdefault(_op, []).append(_check_int_divisor)
_RULES.setdefault("LRN", []).append(_check_positive_attr("size", 1))


def validate_node(ctx: NodeContext) -> None:
    """Attribute ranges of one node, with its operands' types known (before its converter)."""
    _check_operand_types(ctx)
    for rule in _RULES.get(ctx.op_type, ()):
        rule(ctx)


__all__ = [
    "check_external_data",
    "check_input_dims",
    "check_tensor",
    "validate_model",
    "validate_node",
]
