"""A structured, seeded ONNX mutator: valid models in, the broken models a new user brings out.

Six families of mutation, each a small function that edits a ModelProto in place and returns a
one-line description (or None when it does not apply to this model):

- shape: input/output dims (0, 2^63-1, 1e12, negative, symbolic), ranks;
- dtype: element types of inputs, outputs, initializers and Cast targets;
- attribute: out-of-range ints (0, -1, 2^31...), bad lists, NaN/Inf floats, dropped/unknown ones;
- initializer: raw data too long/short, scalars for matrices, bool data, external-data segments,
  NaN/Inf/negative weights, zero-size tensors;
- graph: deleted/duplicated/reordered nodes, rewired edges, hostile inserted nodes (huge
  ConstantOfShape/Tile/Expand/Pad/Resize, integer division by zero, long chains, huge fan-out);
- bytes: flipped, inserted and truncated bytes of the serialized proto.

`mutate(model_bytes, seed)` is deterministic in its seed.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

Mutator = Callable[[onnx.ModelProto, random.Random], str | None]

#: Marks mutants that take the compiler minutes today (huge graphs): the suite's small run
#: leaves them to the long campaign and to the chain/fan-out regression files.
SLOW = "[slow]"
#: Integer attribute/dim values that break naive code.
HOSTILE_INTS = [0, -1, -2, 1, 2, 3, 7, 1 << 31, (1 << 31) - 1, -(1 << 31), (1 << 63) - 1, 10**12]
HOSTILE_FLOATS = [float("nan"), float("inf"), -float("inf"), 0.0, -1.0, 1e30, 1e-30, -1e-30]
HOSTILE_DIMS = [0, 1, 2, 3, 5, 100000, 10**12, (1 << 63) - 1, (1 << 31), -1, -5]
DTYPES = [
    TensorProto.FLOAT,
    TensorProto.DOUBLE,
    TensorProto.FLOAT16,
    TensorProto.BFLOAT16,
    TensorProto.INT8,
    TensorProto.UINT8,
    TensorProto.INT16,
    TensorProto.INT32,
    TensorProto.INT64,
    TensorProto.BOOL,
    TensorProto.STRING,
    TensorProto.COMPLEX64,
    0,
    77,
]


@dataclass(frozen=True)
class Mutation:
    family: str
    name: str
    fn: Mutator


MUTATIONS: list[Mutation] = []


def mutation(family: str) -> Callable[[Mutator], Mutator]:
    def deco(fn: Mutator) -> Mutator:
        MUTATIONS.append(Mutation(family, fn.__name__.removeprefix("m_"), fn))
        return fn

    return deco


# -- helpers --------------------------------------------------------------------------------------


def _graph_inputs(m: onnx.ModelProto) -> list[onnx.ValueInfoProto]:
    inits = {t.name for t in m.graph.initializer}
    return [vi for vi in m.graph.input if vi.name not in inits]


def _value_names(m: onnx.ModelProto) -> list[str]:
    names = [vi.name for vi in m.graph.input] + [t.name for t in m.graph.initializer]
    for n in m.graph.node:
        names.extend(o for o in n.output if o)
    return names


def _float_inits(m: onnx.ModelProto) -> list[onnx.TensorProto]:
    return [t for t in m.graph.initializer if t.data_type == TensorProto.FLOAT]


def _set_array(t: onnx.TensorProto, a: np.ndarray) -> None:
    new = numpy_helper.from_array(a, t.name)
    t.CopyFrom(new)


def _first_input(m: onnx.ModelProto) -> onnx.ValueInfoProto | None:
    ins = _graph_inputs(m)
    return ins[0] if ins else None


def _fresh(m: onnx.ModelProto, base: str) -> str:
    names = set(_value_names(m)) | {n.name for n in m.graph.node}
    i = 0
    while f"{base}_{i}" in names:
        i += 1
    return f"{base}_{i}"


def _typed_output(m: onnx.ModelProto, value: str, elem: int) -> onnx.ValueInfoProto:
    """A graph-output declaration of `value` the ONNX checker accepts: the inferred type when
    shape inference gets that far, else `elem` with symbolic dims of a guessed rank."""
    try:
        inferred = onnx.shape_inference.infer_shapes(m)
        for vi in list(inferred.graph.value_info) + list(inferred.graph.output):
            tt = vi.type.tensor_type
            if vi.name == value and tt.HasField("shape") and tt.elem_type:
                return vi
    except Exception:  # noqa: BLE001 - broken models do not infer
        pass
    return helper.make_tensor_value_info(value, elem, ["d0", "d1"])


def _redirect_output(m: onnx.ModelProto, value: str, elem: int) -> None:
    """Make `value` the only graph output."""
    out = _typed_output(m, value, elem)
    del m.graph.output[:]
    m.graph.output.append(out)


def _set_attr(n: onnx.NodeProto, key: str, value: object) -> None:
    for a in list(n.attribute):
        if a.name == key:
            n.attribute.remove(a)
    n.attribute.append(helper.make_attribute(key, value))


# -- shape -----------------------------------------------------------------------------------------


@mutation("shape")
def m_input_dim(m: onnx.ModelProto, rng: random.Random) -> str | None:
    vi = _first_input(m)
    if vi is None or not vi.type.tensor_type.shape.dim:
        return None
    dims = vi.type.tensor_type.shape.dim
    i = rng.randrange(len(dims))
    v = rng.choice(HOSTILE_DIMS)
    dims[i].Clear()
    dims[i].dim_value = v
    return f"input {vi.name} dim {i} = {v}"


@mutation("shape")
def m_input_symbolic(m: onnx.ModelProto, rng: random.Random) -> str | None:
    vi = _first_input(m)
    if vi is None or not vi.type.tensor_type.shape.dim:
        return None
    dims = vi.type.tensor_type.shape.dim
    i = rng.randrange(len(dims))
    dims[i].Clear()
    dims[i].dim_param = rng.choice(["N", "batch", "", "?"])
    return f"input {vi.name} dim {i} symbolic"


@mutation("shape")
def m_input_rank(m: onnx.ModelProto, rng: random.Random) -> str | None:
    vi = _first_input(m)
    if vi is None:
        return None
    shape = vi.type.tensor_type.shape
    if rng.random() < 0.5 and shape.dim:
        del shape.dim[rng.randrange(len(shape.dim))]
        return f"input {vi.name} loses a dim"
    if rng.random() < 0.3:
        vi.type.tensor_type.ClearField("shape")
        return f"input {vi.name} has no shape"
    d = shape.dim.add()
    d.dim_value = rng.choice([1, 2, 3])
    return f"input {vi.name} gains a dim"


@mutation("shape")
def m_output_decl(m: onnx.ModelProto, rng: random.Random) -> str | None:
    if not m.graph.output:
        return None
    o = m.graph.output[rng.randrange(len(m.graph.output))]
    tt = o.type.tensor_type
    if rng.random() < 0.5 and tt.shape.dim:
        tt.shape.dim[rng.randrange(len(tt.shape.dim))].dim_value = rng.choice(HOSTILE_DIMS[:6])
        return f"output {o.name} declared with another dim"
    tt.elem_type = rng.choice(DTYPES)
    return f"output {o.name} declared as type {tt.elem_type}"


# -- dtype -----------------------------------------------------------------------------------------


@mutation("dtype")
def m_input_dtype(m: onnx.ModelProto, rng: random.Random) -> str | None:
    vi = _first_input(m)
    if vi is None:
        return None
    vi.type.tensor_type.elem_type = t = rng.choice(DTYPES)
    return f"input {vi.name} elem type {t}"


@mutation("dtype")
def m_initializer_dtype(m: onnx.ModelProto, rng: random.Random) -> str | None:
    if not m.graph.initializer:
        return None
    t = rng.choice(list(m.graph.initializer))
    t.data_type = d = rng.choice(DTYPES)
    return f"initializer {t.name} data_type {d} (data kept)"


@mutation("dtype")
def m_cast_target(m: onnx.ModelProto, rng: random.Random) -> str | None:
    node = helper.make_node("Cast", [], [], to=rng.choice(DTYPES))
    return _insert_unary(m, rng, node, "cast to a random type")


# -- attribute -------------------------------------------------------------------------------------


def _nodes_with_attrs(m: onnx.ModelProto) -> list[onnx.NodeProto]:
    return [n for n in m.graph.node if n.attribute]


@mutation("attribute")
def m_attr_int(m: onnx.ModelProto, rng: random.Random) -> str | None:
    cands = [
        (n, a)
        for n in m.graph.node
        for a in n.attribute
        if a.type in (onnx.AttributeProto.INT, onnx.AttributeProto.INTS)
    ]
    if not cands:
        return None
    n, a = rng.choice(cands)
    v = rng.choice(HOSTILE_INTS)
    if a.type == onnx.AttributeProto.INT:
        a.i = v
        return f"{n.op_type} {n.name}: {a.name} = {v}"
    r = rng.random()
    if r < 0.6 and a.ints:
        a.ints[rng.randrange(len(a.ints))] = v
        return f"{n.op_type} {n.name}: one of {a.name} = {v}"
    if r < 0.8:
        a.ints.append(rng.choice([0, 1, 2]))
        return f"{n.op_type} {n.name}: {a.name} one element longer"
    del a.ints[:]
    return f"{n.op_type} {n.name}: {a.name} empty"


@mutation("attribute")
def m_attr_float(m: onnx.ModelProto, rng: random.Random) -> str | None:
    cands = [
        (n, a) for n in m.graph.node for a in n.attribute if a.type == onnx.AttributeProto.FLOAT
    ]
    if not cands:
        return None
    n, a = rng.choice(cands)
    a.f = v = rng.choice(HOSTILE_FLOATS)
    return f"{n.op_type} {n.name}: {a.name} = {v}"


@mutation("attribute")
def m_attr_string(m: onnx.ModelProto, rng: random.Random) -> str | None:
    cands = [
        (n, a) for n in m.graph.node for a in n.attribute if a.type == onnx.AttributeProto.STRING
    ]
    if not cands:
        return None
    n, a = rng.choice(cands)
    a.s = v = rng.choice([b"", b"SAME_LOWER", b"VALID", b"bogus", b"\xff\xfe", b"cubic", b"NOTSET"])
    return f"{n.op_type} {n.name}: {a.name} = {v!r}"


@mutation("attribute")
def m_attr_drop_or_add(m: onnx.ModelProto, rng: random.Random) -> str | None:
    nodes = list(m.graph.node)
    if not nodes:
        return None
    n = rng.choice(nodes)
    if n.attribute and rng.random() < 0.5:
        a = n.attribute[rng.randrange(len(n.attribute))]
        name = a.name
        n.attribute.remove(a)
        return f"{n.op_type} {n.name}: drop attribute {name}"
    choice = rng.choice(
        [
            ("dilations", [0, 0]),
            ("strides", [0, 1]),
            ("group", 3),
            ("axis", 7),
            ("pads", [-1, 0, 0, 0]),
            ("kernel_shape", [0, 0]),
            ("auto_pad", "SAME_UPPER"),
            ("bogus_attr", 1),
        ]
    )
    _set_attr(n, *choice)
    return f"{n.op_type} {n.name}: set {choice[0]}={choice[1]}"


@mutation("attribute")
def m_conv_attrs(m: onnx.ModelProto, rng: random.Random) -> str | None:
    convs = [
        n for n in m.graph.node if n.op_type in ("Conv", "ConvTranspose", "MaxPool", "AveragePool")
    ]
    if not convs:
        return None
    n = rng.choice(convs)
    key = rng.choice(["dilations", "strides", "pads", "group", "kernel_shape"])
    rank = 2
    if key == "pads":
        val: object = [rng.choice([0, 1, 2, -1, 1 << 31, 100]) for _ in range(2 * rank)]
    elif key == "group":
        val = rng.choice([0, -1, 2, 3, 5, 1 << 31])
    else:
        val = [rng.choice([0, 1, 2, 3, -1, 100, 1 << 31]) for _ in range(rank)]
    _set_attr(n, key, val)
    return f"{n.op_type} {n.name}: {key}={val}"


# -- initializer -----------------------------------------------------------------------------------


@mutation("initializer")
def m_raw_length(m: onnx.ModelProto, rng: random.Random) -> str | None:
    cands = [t for t in m.graph.initializer if t.raw_data]
    if not cands:
        return None
    t = rng.choice(cands)
    k = rng.choice([1, 3, 4, 8, 100])
    if rng.random() < 0.5:
        t.raw_data = t.raw_data[:-k] if len(t.raw_data) > k else b""
        return f"initializer {t.name}: raw_data {k} bytes short"
    t.raw_data = t.raw_data + bytes(k)
    return f"initializer {t.name}: raw_data {k} bytes long"


@mutation("initializer")
def m_init_shape(m: onnx.ModelProto, rng: random.Random) -> str | None:
    if not m.graph.initializer:
        return None
    t = rng.choice(list(m.graph.initializer))
    a = numpy_helper.to_array(t)
    r = rng.random()
    if r < 0.4:
        _set_array(
            t, np.asarray(a.reshape(-1)[:1].reshape(()) if a.size else np.zeros((), a.dtype))
        )
        return f"initializer {t.name}: a scalar instead of {list(a.shape)}"
    if r < 0.7:
        _set_array(t, a.reshape(-1))
        return f"initializer {t.name}: flattened from {list(a.shape)}"
    _set_array(t, np.zeros((0,) + a.shape[1:], a.dtype))
    return f"initializer {t.name}: zero-size"


@mutation("initializer")
def m_init_bool(m: onnx.ModelProto, rng: random.Random) -> str | None:
    if not m.graph.initializer:
        return None
    t = rng.choice(list(m.graph.initializer))
    a = numpy_helper.to_array(t)
    _set_array(t, a != 0)
    return f"initializer {t.name}: bool data"


@mutation("initializer")
def m_init_external(m: onnx.ModelProto, rng: random.Random) -> str | None:
    cands = [t for t in m.graph.initializer if t.raw_data]
    if not cands:
        return None
    t = rng.choice(cands)
    n = len(t.raw_data)
    t.ClearField("raw_data")
    t.data_location = TensorProto.EXTERNAL
    loc = rng.choice(["weights.bin", "../../../etc/passwd", "/dev/zero", "", "missing.bin"])
    entries = {"location": loc}
    if rng.random() < 0.7:
        entries["offset"] = str(rng.choice([0, 4096, 1 << 40, -1]))
        entries["length"] = str(rng.choice([n, n + 1, 0, 1 << 40]))
    for k, v in entries.items():
        e = t.external_data.add()
        e.key, e.value = k, v
    return f"initializer {t.name}: external data {entries}"


@mutation("initializer")
def m_init_values(m: onnx.ModelProto, rng: random.Random) -> str | None:
    cands = _float_inits(m)
    if not cands:
        return None
    t = rng.choice(cands)
    a = numpy_helper.to_array(t).copy()
    if a.size == 0:
        return None
    kind = rng.choice(["nan", "inf", "negate", "huge", "zero"])
    flat = a.reshape(-1)
    if kind == "nan":
        flat[rng.randrange(flat.size)] = np.nan
    elif kind == "inf":
        flat[rng.randrange(flat.size)] = rng.choice([np.inf, -np.inf])
    elif kind == "negate":
        flat[...] = -np.abs(flat) - 0.1  # a negative BatchNorm variance, a negative scale
    elif kind == "huge":
        flat[...] = 1e38
    else:
        flat[...] = 0
    _set_array(t, a)
    return f"initializer {t.name}: {kind} values"


@mutation("initializer")
def m_init_typed_fields(m: onnx.ModelProto, rng: random.Random) -> str | None:
    cands = _float_inits(m)
    if not cands:
        return None
    t = rng.choice(cands)
    a = numpy_helper.to_array(t).reshape(-1)
    t.ClearField("raw_data")
    k = rng.choice([-1, 1, 5])
    vals = [float(x) for x in a[: max(a.size + k, 0)]] + [0.0] * max(k, 0)
    t.float_data.extend(vals)
    return f"initializer {t.name}: float_data with {len(vals)} of {a.size} values"


@mutation("initializer")
def m_init_duplicate(m: onnx.ModelProto, rng: random.Random) -> str | None:
    if not m.graph.initializer:
        return None
    t = rng.choice(list(m.graph.initializer))
    dup = m.graph.initializer.add()
    dup.CopyFrom(t)
    dup.dims[:] = [1]
    dup.raw_data = bytes(numpy_helper.to_array(t).dtype.itemsize)
    return f"initializer {t.name}: defined twice"


# -- graph structure -------------------------------------------------------------------------------


@mutation("graph")
def m_delete_node(m: onnx.ModelProto, rng: random.Random) -> str | None:
    if len(m.graph.node) < 2:
        return None
    i = rng.randrange(len(m.graph.node))
    n = m.graph.node[i]
    desc = f"delete node {i} ({n.op_type} {n.name})"
    del m.graph.node[i]
    return desc


@mutation("graph")
def m_duplicate_node(m: onnx.ModelProto, rng: random.Random) -> str | None:
    if not m.graph.node:
        return None
    i = rng.randrange(len(m.graph.node))
    n = m.graph.node[i]
    m.graph.node.insert(i + 1, n)
    return f"node {i} ({n.op_type}) appears twice"


@mutation("graph")
def m_reorder(m: onnx.ModelProto, rng: random.Random) -> str | None:
    if len(m.graph.node) < 2:
        return None
    nodes = list(m.graph.node)
    if rng.random() < 0.5:
        nodes.reverse()
        desc = "nodes in reverse order"
    else:
        i, j = rng.sample(range(len(nodes)), 2)
        nodes[i], nodes[j] = nodes[j], nodes[i]
        desc = f"nodes {i} and {j} swapped"
    del m.graph.node[:]
    m.graph.node.extend(nodes)
    return desc


@mutation("graph")
def m_rewire(m: onnx.ModelProto, rng: random.Random) -> str | None:
    cands = [n for n in m.graph.node if n.input]
    if not cands:
        return None
    n = rng.choice(cands)
    idx = list(m.graph.node).index(n)
    earlier = [vi.name for vi in m.graph.input] + [t.name for t in m.graph.initializer]
    for p in m.graph.node[:idx]:
        earlier.extend(o for o in p.output if o)
    k = rng.randrange(len(n.input))
    if rng.random() < 0.15:
        new = rng.choice(["", "no_such_value"])
    else:
        new = rng.choice(earlier)
    old, n.input[k] = n.input[k], new
    return f"{n.op_type} {n.name}: input {k} {old} -> {new!r}"


@mutation("graph")
def m_change_op(m: onnx.ModelProto, rng: random.Random) -> str | None:
    if not m.graph.node:
        return None
    n = rng.choice(list(m.graph.node))
    old = n.op_type
    n.op_type = rng.choice(
        ["Relu", "Add", "MatMul", "Conv", "Softmax", "Transpose", "NonZero", "Loop", "Foo", ""]
    )
    if rng.random() < 0.1:
        n.domain = "com.microsoft"
    return f"node {n.name}: {old} -> {n.op_type} (domain {n.domain!r})"


@mutation("graph")
def m_opset(m: onnx.ModelProto, rng: random.Random) -> str | None:
    v = rng.choice([1, 6, 7, 9, 11, 12, 13, 18, 21, 22, 99])
    for o in m.opset_import:
        if o.domain in ("", "ai.onnx"):
            o.version = v
    if rng.random() < 0.1:
        del m.opset_import[:]
        return "no opset_import"
    return f"opset {v}"


@mutation("graph")
def m_outputs(m: onnx.ModelProto, rng: random.Random) -> str | None:
    r = rng.random()
    if r < 0.3 and m.graph.output:
        del m.graph.output[:]
        return "no graph outputs"
    produced = [o for n in m.graph.node for o in n.output if o]
    if not produced:
        return None
    v = rng.choice(produced)
    m.graph.output.append(_typed_output(m, v, TensorProto.FLOAT))
    return f"intermediate {v} is also an output"


def _insert_unary(
    m: onnx.ModelProto, rng: random.Random, node: onnx.NodeProto, what: str
) -> str | None:
    """Put `node` (one input, one output) on the path into the first graph output."""
    if not m.graph.output:
        return None
    out = m.graph.output[0]
    fresh = _fresh(m, "fz")
    for n in m.graph.node:
        for i, o in enumerate(n.output):
            if o == out.name:
                n.output[i] = fresh
        for i, x in enumerate(n.input):
            if x == out.name:
                n.input[i] = fresh
    node.input[:] = [fresh] + list(node.input)[1:] if node.input else [fresh]
    node.output[:] = [out.name]
    node.name = node.name or _fresh(m, "fuzz_node")
    m.graph.node.append(node)
    return what


def _hostile_subgraph(m: onnx.ModelProto, rng: random.Random) -> tuple[list, list, str, int, list]:
    """(nodes, initializers, output name, elem type, output dims) of a standalone hostile piece."""
    x = _first_input(m)
    xin = x.name if x is not None else None
    kind = rng.choice(
        [
            "constofshape",
            "tile",
            "expand",
            "pad",
            "resize",
            "range",
            "intdiv0",
            "intmin",
            "gather_oob",
            "log_neg",
            "clip_nan",
            "chain",
            "fanout",
        ]
    )
    big = rng.choice([100000, 1 << 20, 1 << 31, 10**12])
    F, I64 = TensorProto.FLOAT, TensorProto.INT64
    o = _fresh(m, "hostile")
    c = lambda name, a: numpy_helper.from_array(np.asarray(a), name)  # noqa: E731
    if kind == "constofshape":
        return (
            [
                helper.make_node(
                    "ConstantOfShape", [o + "_s"], [o], value=c("v", np.array([1.0], np.float32))
                )
            ],
            [c(o + "_s", np.array([big, big], np.int64))],
            f"ConstantOfShape {big}x{big}",
            F,
            None,
        )
    if kind == "range":
        return (
            [helper.make_node("Range", [o + "_a", o + "_b", o + "_d"], [o])],
            [
                c(o + "_a", np.array(0.0, np.float32)),
                c(o + "_b", np.array(float(big), np.float32)),
                c(o + "_d", np.array(rng.choice([1.0, 1e-9, 0.0]), np.float32)),
            ],
            f"Range 0..{big}",
            F,
            None,
        )
    if xin is None:
        return [], [], "", 0, []
    if kind in ("tile", "expand", "pad", "resize"):
        rank = len(x.type.tensor_type.shape.dim)
        if kind == "tile":
            rep = [1] * rank
            rep[-1] = big
            return (
                [helper.make_node("Tile", [xin, o + "_r"], [o])],
                [c(o + "_r", np.array(rep, np.int64))],
                f"Tile x{big}",
                F,
                None,
            )
        if kind == "expand":
            shp = [big] + [1] * rank
            return (
                [helper.make_node("Expand", [xin, o + "_s"], [o])],
                [c(o + "_s", np.array(shp, np.int64))],
                f"Expand to {shp}",
                F,
                None,
            )
        if kind == "pad":
            pads = [0] * (2 * rank)
            pads[rank - 1] = rng.choice([big, 1 << 31, -(1 << 20)])
            return (
                [helper.make_node("Pad", [xin, o + "_p"], [o])],
                [c(o + "_p", np.array(pads, np.int64))],
                f"Pad {pads}",
                F,
                None,
            )
        scales = [1.0] * rank
        scales[-1] = float(rng.choice([1e6, 1e9, 0.0, -1.0]))
        return (
            [helper.make_node("Resize", [xin, "", o + "_sc"], [o], mode="nearest")],
            [c(o + "_sc", np.array(scales, np.float32))],
            f"Resize scales {scales}",
            F,
            None,
        )
    if kind in ("intdiv0", "intmin"):
        dt = rng.choice([np.int32, np.int64])
        op = rng.choice(["Div", "Mod"])
        den = 0 if kind == "intdiv0" else -1
        num = np.iinfo(dt).min
        onnx_t = TensorProto.INT32 if dt == np.int32 else I64
        nodes = [
            helper.make_node("Cast", [xin], [o + "_i"], to=onnx_t),
            helper.make_node("Add", [o + "_i", o + "_n"], [o + "_a"]),
            helper.make_node(op, [o + "_a", o + "_d"], [o]),
        ]
        return (
            nodes,
            [
                c(o + "_n", np.array(num if kind == "intmin" else 1, dt)),
                c(o + "_d", np.array(den, dt)),
            ],
            f"integer {op} by {den} ({np.dtype(dt).name})",
            onnx_t,
            None,
        )
    if kind == "gather_oob":
        return (
            [helper.make_node("Gather", [xin, o + "_i"], [o], axis=0)],
            [c(o + "_i", np.array([rng.choice([5, 1000, -1000, 1 << 40])], np.int64))],
            "Gather with out-of-range indices",
            F,
            None,
        )
    if kind == "log_neg":
        op = rng.choice(["Log", "Sqrt"])
        return (
            [helper.make_node("Neg", [xin], [o + "_n"]), helper.make_node(op, [o + "_n"], [o])],
            [],
            f"{op} of negatives",
            F,
            None,
        )
    if kind == "clip_nan":
        return (
            [helper.make_node("Clip", [xin, o + "_lo", o + "_hi"], [o])],
            [
                c(o + "_lo", np.array(rng.choice([np.nan, 0.0]), np.float32)),
                c(o + "_hi", np.array(rng.choice([np.nan, 1.0, -1.0]), np.float32)),
            ],
            "Clip with NaN/crossed bounds",
            F,
            None,
        )
    if kind == "chain":
        n = rng.choice([500, 1000, 3000])
        nodes, prev = [], xin
        for i in range(n):
            nxt = o if i == n - 1 else f"{o}_{i}"
            nodes.append(helper.make_node(rng.choice(["Relu", "Neg", "Abs"]), [prev], [nxt]))
            prev = nxt
        return nodes, [], f"{SLOW} a chain of {n} unary nodes", F, None
    n = rng.choice([500, 2000])
    nodes = [helper.make_node("Relu", [xin], [f"{o}_{i}"]) for i in range(n)]
    nodes.append(helper.make_node("Sum", [f"{o}_{i}" for i in range(n)], [o]))
    return nodes, [], f"{SLOW} a value with {n} users", F, None


@mutation("graph")
def m_hostile(m: onnx.ModelProto, rng: random.Random) -> str | None:
    nodes, inits, what, elem, _ = _hostile_subgraph(m, rng)
    if not nodes:
        return None
    m.graph.node.extend(nodes)
    m.graph.initializer.extend(inits)
    out = nodes[-1].output[0]
    if rng.random() < 0.5:
        _redirect_output(m, out, elem)
    else:
        m.graph.output.append(_typed_output(m, out, elem))
    return what


# -- bytes -----------------------------------------------------------------------------------------

BYTE_MUTATIONS = ("flip", "insert", "truncate", "duplicate", "zero")


def mutate_bytes(data: bytes, rng: random.Random) -> tuple[bytes, str]:
    b = bytearray(data)
    kind = rng.choice(BYTE_MUTATIONS)
    if not b:
        return bytes(b), "empty"
    i = rng.randrange(len(b))
    if kind == "flip":
        k = rng.choice([1, 2, 8])
        for _ in range(k):
            j = rng.randrange(len(b))
            b[j] ^= 1 << rng.randrange(8)
        return bytes(b), f"bytes: {k} bit flips"
    if kind == "insert":
        chunk = bytes(rng.randrange(256) for _ in range(rng.choice([1, 4, 16])))
        b[i:i] = chunk
        return bytes(b), f"bytes: {len(chunk)} inserted at {i}"
    if kind == "truncate":
        return bytes(b[:i]), f"bytes: truncated to {i}"
    if kind == "duplicate":
        j = min(len(b), i + rng.choice([8, 64, 512]))
        b[j:j] = b[i:j]
        return bytes(b), f"bytes: {j - i} duplicated at {i}"
    j = min(len(b), i + rng.choice([4, 64]))
    b[i:j] = bytes(j - i)
    return bytes(b), f"bytes: {j - i} zeroed at {i}"


# -- driver ----------------------------------------------------------------------------------------

FAMILIES = ("shape", "dtype", "attribute", "initializer", "graph", "bytes")


def mutate(data: bytes, seed: int, *, family: str | None = None) -> tuple[bytes, str, str]:
    """A mutant of the serialized model `data`: (bytes, family, description). Deterministic."""
    rng = random.Random(seed)
    fam = family or rng.choice(FAMILIES)
    if fam == "bytes":
        out, desc = mutate_bytes(data, rng)
        return out, fam, desc
    model = onnx.ModelProto()
    model.ParseFromString(data)
    choices = [mu for mu in MUTATIONS if mu.family == fam]
    descs = []
    for _ in range(8):  # some mutations do not apply to some models: try others
        mu = rng.choice(choices)
        try:
            d = mu.fn(model, rng)
        except Exception:  # noqa: BLE001 - an earlier mutation broke what this one reads
            continue
        if d is not None:
            descs.append(f"{mu.name}: {d}")
            # a second mutation now and then, so combinations are tried too
            if rng.random() > 0.15:
                break
    return model.SerializeToString(), fam, "; ".join(descs) or "no mutation applied"


__all__ = ["FAMILIES", "MUTATIONS", "SLOW", "Mutation", "mutate", "mutate_bytes"]
