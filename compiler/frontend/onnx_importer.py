"""ONNX -> graph IR: the importer driver (values, constants, inputs/outputs, folding).

Op converters live in `converters_*.py`, registered by ONNX op type in `registry.py`. Every value
known at compile time is a Constant; a node whose operands are all Constants is folded on the
spot with the reference kernels, so shape computations never reach the graph.
"""

from __future__ import annotations

import builtins
import os
from collections.abc import Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import onnx
from onnx import numpy_helper

from compiler.errors import (
    CompilerError,
    InputError,
    InputValueRequiredError,
    ShapeError,
    UnsupportedError,
    UnsupportedOpError,
    UnsupportedTypeError,
)
from compiler.frontend.input_shapes import (
    declared_dims,
    example_shape,
    format_dims,
    static_shape,
)
from compiler.frontend.loader import (
    ModelSource,
    check_model,
    default_opset,
    read_model,
    upgrade_opset,
)
from compiler.frontend.registry import CONVERTERS, DOMAIN_OPS
from compiler.frontend.validate import check_input_dims, validate_model, validate_node
from compiler.graph.ir import Constant, Function, Module, Placeholder, Result, Value
from compiler.graph.ops import get_op
from compiler.graph.types import ElemKind, TensorType
from compiler.kernels.reference import evaluate, has_kernel
from compiler.limits import DEFAULT_FOLD_LIMIT

MIN_OPSET, MAX_OPSET = 7, 28
#: Folding results larger than this (elements) are left as nodes rather than materialised.
FOLD_LIMIT = 1 << 24

ONNX_TO_ELEM: dict[int, ElemKind] = {
    onnx.TensorProto.FLOAT: ElemKind.F32,
    onnx.TensorProto.FLOAT16: ElemKind.F16,
    onnx.TensorProto.DOUBLE: ElemKind.F64,
    onnx.TensorProto.INT64: ElemKind.I64,
    onnx.TensorProto.INT32: ElemKind.I32,
    onnx.TensorProto.INT16: ElemKind.I16,
    onnx.TensorProto.INT8: ElemKind.I8,
    onnx.TensorProto.UINT64: ElemKind.U64,
    onnx.TensorProto.UINT32: ElemKind.U32,
    onnx.TensorProto.UINT16: ElemKind.U16,
    onnx.TensorProto.UINT8: ElemKind.U8,
    onnx.TensorProto.BOOL: ElemKind.BOOL,
    onnx.TensorProto.BFLOAT16: ElemKind.BF16,
    onnx.TensorProto.FLOAT8E4M3FN: ElemKind.F8E4M3FN,
    onnx.TensorProto.FLOAT8E4M3FNUZ: ElemKind.F8E4M3FNUZ,
    onnx.TensorProto.FLOAT8E5M2: ElemKind.F8E5M2,
    onnx.TensorProto.FLOAT8E5M2FNUZ: ElemKind.F8E5M2FNUZ,
    onnx.TensorProto.FLOAT4E2M1: ElemKind.F4E2M1,
    onnx.TensorProto.INT4: ElemKind.I4,
    onnx.TensorProto.UINT4: ElemKind.U4,
    onnx.TensorProto.INT2: ElemKind.I2,
    onnx.TensorProto.UINT2: ElemKind.U2,
}
ELEM_TO_ONNX: dict[ElemKind, int] = {kind: code for code, kind in ONNX_TO_ELEM.items()}
#: The ONNX ops that take the narrow storage kinds (bfloat16, float8, int4...); any other op
#: with such an input is refused before its converter runs.
NARROW_OPS = frozenset({"Cast", "CastLike", "QuantizeLinear", "DequantizeLinear"})
_SUPPORTED_NP = {np.dtype(k.np_dtype) for k in ONNX_TO_ELEM.values()}
#: The element types the frontend reads, as error messages list them.
SUPPORTED_DTYPES = ", ".join(onnx.TensorProto.DataType.Name(code).lower() for code in ONNX_TO_ELEM)


def dtype_name(onnx_type: int) -> str:
    try:
        return onnx.TensorProto.DataType.Name(onnx_type).lower()
    except ValueError:
        return f"type {onnx_type}"


class NodeContext:
    """What a converter sees of one ONNX node: attributes, operands, and node creation."""

    def __init__(self, imp: Importer, node: onnx.NodeProto, name: str) -> None:
        self.imp = imp
        self.node = node
        self.name = name
        self.op_type = node.op_type
        self.opset = imp.opset
        self._attrs = {a.name: a for a in node.attribute}

    # -- attributes ----------------------------------------------------------------------------
    def has_attr(self, key: str) -> bool:
        return key in self._attrs

    def attr(self, key: str, default: Any = None) -> Any:
        a = self._attrs.get(key)
        if a is None:
            return default
        if a.type == onnx.AttributeProto.TENSOR:
            return self.imp.tensor_to_array(a.t, f"{self.name}.{key}")
        if a.type in (
            onnx.AttributeProto.GRAPH,
            onnx.AttributeProto.GRAPHS,
            onnx.AttributeProto.SPARSE_TENSOR,
            onnx.AttributeProto.SPARSE_TENSORS,
            onnx.AttributeProto.TENSORS,
            onnx.AttributeProto.TYPE_PROTO,
            onnx.AttributeProto.TYPE_PROTOS,
        ):
            raise self.unsupported(
                f"attribute '{key}' of kind {onnx.AttributeProto.AttributeType.Name(a.type)}"
            )
        if a.ref_attr_name:
            raise self.unsupported(f"attribute '{key}' refers to a function attribute")
        v = onnx.helper.get_attribute_value(a)
        if isinstance(v, bytes):
            return v.decode("utf-8", "replace")
        if isinstance(v, list):
            return [x.decode("utf-8", "replace") if isinstance(x, bytes) else x for x in v]
        return v

    def check_attrs(self, allowed: dict[str, Any]) -> None:
        """Refuse any attribute not listed, or listed with a fixed value and set otherwise.

        `allowed` maps an attribute name to None (any value is handled) or to a tuple of the
        values the converter handles.
        """
        for key in self._attrs:
            if key not in allowed:
                raise self.unsupported(f"attribute '{key}' is not supported")
            ok = allowed[key]
            if ok is not None:
                v = self.attr(key)
                if v not in ok:
                    raise self.unsupported(
                        f"attribute {key}={v!r} is not supported "
                        f"(supported: {', '.join(map(repr, ok))})"
                    )

    # -- operands -------------------------------------------------------------------------------
    @property
    def num_inputs(self) -> int:
        return len(self.node.input)

    def has_input(self, i: int) -> bool:
        return i < len(self.node.input) and self.node.input[i] != ""

    def inp(self, i: int) -> Value:
        if not self.has_input(i):
            raise self.unsupported(f"required input {i} is missing")
        return self.imp.lookup(self.node.input[i], self)

    def inputs(self) -> list[Value]:
        return [self.inp(i) for i in range(self.num_inputs) if self.has_input(i)]

    def seq(self, i: int) -> list[Value]:
        """Input `i` as a sequence (a list of tensors known at import)."""
        name = self.node.input[i] if self.has_input(i) else ""
        if name not in self.imp.sequences:
            raise self.unsupported(
                f"input '{name}' is not a sequence built in the graph (sequence graph inputs "
                "are not supported)"
            )
        return list(self.imp.sequences[name])

    def set_sequence(self, i: int, values: list[Value]) -> None:
        """Output `i` is the sequence `values` (the converter returns None for it)."""
        self.imp.sequences[self.node.output[i]] = list(values)
        self.imp.sequence_makers[self.node.output[i]] = self

    def type(self, i: int) -> TensorType:
        return self.inp(i).type

    def onnx_elem_type(self, i: int) -> int | None:
        """Input i's ONNX element type (a TensorProto data type), read without converting an
        initializer; None when absent or not a tensor (a sequence)."""
        if not self.has_input(i):
            return None
        name = self.node.input[i]
        v = self.imp.values.get(name)
        if v is not None:
            return ELEM_TO_ONNX[v.type.elem]
        t = self.imp.initializers.get(name)
        return t.data_type if t is not None else None

    def const(self, i: int) -> np.ndarray | None:
        """The input's value if it is known at compile time, else None (also if absent)."""
        if not self.has_input(i):
            return None
        v = self.inp(i)
        return v.data if isinstance(v, Constant) else None

    def require_const(self, i: int, what: str) -> np.ndarray:
        v = self.const(i)
        if v is None:
            if not self.has_input(i):
                raise self.unsupported(f"input '{what}' is missing")
            needed = self.imp.graph_inputs_behind(self.inp(i))
            if needed:
                # Not a limitation but a request: with these inputs' values the graph is static.
                raise InputValueRequiredError(
                    f"input '{what}' ({self.node.input[i]}) must be known at compile time and "
                    f"depends on graph input{'s' if len(needed) > 1 else ''} "
                    f"{', '.join(repr(n) for n in needed)}; give "
                    f"{'their values' if len(needed) > 1 else 'its value'} "
                    f"(CLI/IDE: {' '.join(f'--const-input {n}=...' for n in needed)}; "
                    "compiler.onnx_backend specializes on the values given to run; "
                    "CompileOptions.const_inputs)",
                    inputs=needed,
                    node=self.node.name or self.name,
                    op=self.op_type,
                    opset=self.opset,
                    model=self.imp.source,
                )
            raise self.unsupported(
                f"input '{what}' ({self.node.input[i]}) must be known at "
                "compile time, but it depends on a run-time value"
            )
        return v

    def output_used(self, i: int) -> bool:
        return (
            i < len(self.node.output)
            and self.node.output[i] != ""
            and self.node.output[i] in self.imp.used
        )

    @property
    def num_outputs(self) -> int:
        return len(self.node.output)

    # -- creation -------------------------------------------------------------------------------
    def create(
        self,
        op: str,
        operands: Sequence[Value],
        attrs: dict[str, Any] | None = None,
        suffix: str | None = None,
        *,
        fold: bool = True,
    ) -> Value:
        """One node (`fold=False`: kept even when every operand is constant)."""
        vals = self.create_multi(op, operands, attrs, suffix, fold=fold)
        assert len(vals) == 1, op
        return vals[0]

    def create_multi(
        self,
        op: str,
        operands: Sequence[Value],
        attrs: dict[str, Any] | None = None,
        suffix: str | None = None,
        *,
        fold: bool = True,
    ) -> list[Value]:
        # The narrow storage kinds are converted, never computed on (the converters of
        # NARROW_OPS cast them first).
        assert op == "Cast" or not any(v.type.elem.is_narrow for v in operands), (op, self.name)
        return self.imp.create(op, list(operands), attrs or {}, self.name, suffix, fold=fold)

    def constant(
        self, data: np.ndarray | float | int | bool, dtype: Any = None, suffix: str = "const"
    ) -> Constant:
        arr = np.asarray(data, dtype=dtype)
        return self.imp.detached_constant(f"{self.name}.{suffix}", arr)

    def scalar_like(self, v: Value, x: float | int | bool, suffix: str = "const") -> Constant:
        return self.constant(np.array(x, dtype=v.type.np_dtype), suffix=suffix)

    def unsupported(
        self,
        message: str,
        kind: builtins.type[UnsupportedError] = UnsupportedError,
        *,
        hint: str | None = None,
    ) -> UnsupportedError:
        """The error to raise; `kind` says what is wrong (UnsupportedTypeError: a dtype,
        InvalidModelError: a model breaking ONNX's own rules)."""
        return kind(
            message,
            node=self.node.name or self.name,
            op=self.op_type,
            opset=self.opset,
            model=self.imp.source,
            hint=hint,
        )


class Importer:
    """Converts one ONNX graph into a Module with a single Function `main`."""

    def __init__(
        self,
        model: onnx.ModelProto,
        input_shapes: dict[str, Sequence[int]] | None,
        name: str | None,
        source: str | None,
        const_inputs: dict[str, np.ndarray] | None = None,
        fold_limit: int | None = None,
    ) -> None:
        self.model = model
        #: bytes one tensor folded at import may take (CompileOptions.fold_limit)
        self.fold_limit = DEFAULT_FOLD_LIMIT if fold_limit is None else fold_limit
        self.graph = model.graph
        self.source = source
        self.opset = _default_opset(model, source)
        mod_name = name or (Path(source).stem if source else "") or model.graph.name or "module"
        self.module = Module(mod_name)
        self.module.meta["opset"] = self.opset
        self.module.meta["model_opset"] = next(
            (i.version for i in model.opset_import if i.domain in ("", "ai.onnx")), self.opset
        )
        self.module.meta["source"] = source
        self.fn: Function = self.module.create_function("main")
        self.values: dict[str, Value] = {}
        #: ONNX sequences, resolved at import: a sequence-typed name -> its tensors (lengths and
        #: positions are compile-time values, so the graph stays a plain static graph).
        self.sequences: dict[str, list[Value]] = {}
        self.sequence_makers: dict[str, NodeContext] = {}  # the node that made each
        self.initializers = {t.name: t for t in self.graph.initializer}
        self.input_shapes = {k: tuple(int(d) for d in v) for k, v in (input_shapes or {}).items()}
        self.const_inputs = dict(const_inputs or {})
        #: ONNX name of each input Placeholder (the module may have renamed it).
        self.input_names: dict[Placeholder, str] = {}
        self.used: set[str] = set()

    # -- values ---------------------------------------------------------------------------------
    def tensor_to_array(self, t: onnx.TensorProto, what: str) -> np.ndarray:
        if t.data_type not in ONNX_TO_ELEM:
            raise UnsupportedTypeError(
                f"tensor '{what}' has element type {dtype_name(t.data_type)}; "
                f"supported: {SUPPORTED_DTYPES}",
                model=self.source,
            )
        if t.data_location == onnx.TensorProto.EXTERNAL:
            raise UnsupportedError(
                f"tensor '{what}' stores its data in an external file; load the model by path",
                model=self.source,
            )
        return numpy_helper.to_array(t)

    def detached_constant(
        self, name: str, data: np.ndarray, type: TensorType | None = None
    ) -> Constant:
        """A Constant not yet in the module; it is added (uniquely named) when a node uses it.
        `type` gives quantized data its scale and offset."""
        if data.dtype not in _SUPPORTED_NP:
            raise UnsupportedTypeError(
                f"constant '{name}' has element type {data.dtype}", model=self.source
            )
        return Constant(name, data, type)

    def attach(self, v: Value) -> Value:
        if isinstance(v, Constant) and self.module.constants.get(v.name) is not v:
            v.name = self.module.unique_name(v.name)
            self.module.constants[v.name] = v
        return v

    def lookup(self, name: str, ctx: NodeContext | None = None) -> Value:
        v = self.values.get(name)
        if v is not None:
            return v
        if name in self.sequences:
            # Refused at the node that reads it, or (a graph output) the node that made it.
            at = ctx or self.sequence_makers[name]
            raise at.unsupported(
                f"'{name}' is a sequence: sequences are resolved at import, only the sequence "
                "ops take them and a graph output must be a tensor"
            )
        t = self.initializers.get(name)
        if t is not None:
            v = self.detached_constant(name, self.tensor_to_array(t, name))
            self.values[name] = v
            return v
        where = f"node '{ctx.name}' reads " if ctx else ""
        raise UnsupportedError(
            f"{where}value '{name}' which no node, input or initializer "
            "defines (a subgraph or out-of-order graph?)",
            model=self.source,
        )

    def graph_inputs_behind(self, v: Value) -> tuple[str, ...]:
        """ONNX names of the graph inputs `v` is computed from, in graph input order."""
        found: set[Placeholder] = set()
        seen: set[int] = set()
        stack = [v]
        while stack:
            x = stack.pop()
            if id(x) in seen:
                continue
            seen.add(id(x))
            if isinstance(x, Placeholder):
                found.add(x)
            elif isinstance(x, Result):
                stack.extend(x.node.operands)
        names = {self.input_names[p] for p in found if p in self.input_names}
        return tuple(vi.name for vi in self.graph.input if vi.name in names)

    # -- node creation and folding --------------------------------------------------------------
    def create(
        self,
        op: str,
        operands: list[Value],
        attrs: dict[str, Any],
        base: str,
        suffix: str | None,
        *,
        fold: bool = True,
    ) -> list[Value]:
        name = base if suffix is None else f"{base}.{suffix}"
        opdef = get_op(op)
        full = opdef.normalize_attrs(attrs, node_name=name)
        types = opdef.infer_types([v.type for v in operands], full, name)
        if (
            fold
            and operands
            and all(isinstance(v, Constant) for v in operands)
            and has_kernel(op)
            and all(t.numel <= FOLD_LIMIT and t.size_bytes <= self.fold_limit for t in types)
        ):
            fake = SimpleNamespace(
                op=op,
                name=name,
                attrs=full,
                operands=operands,
                results=[SimpleNamespace(type=t) for t in types],
            )
            outs = evaluate(
                fake, [v.data for v in operands if isinstance(v, Constant) and v.data is not None]
            )
            return [
                self.detached_constant(name if len(outs) == 1 else f"{name}#{i}", a)
                for i, a in enumerate(outs)
            ]
        for v in operands:
            self.attach(v)
        node = self.fn.create(op, operands, full, name=name, origin=[base], result_types=types)
        node.meta["onnx_node"] = base
        return list(node.results)

    # -- the import -----------------------------------------------------------------------------
    def run(self) -> Module:
        g = self.graph
        for node in g.node:
            self.used.update(x for x in node.input if x)
        self.used.update(o.name for o in g.output)
        inputs = [vi for vi in g.input if vi.name not in self.initializers]
        names = {vi.name for vi in inputs}
        for key in self.input_shapes:
            if key not in names:
                raise ShapeError(
                    f"input_shapes names '{key}', which is not an input of the model"
                    f" (inputs: {', '.join(sorted(names)) or 'none'})"
                )
        for key in self.const_inputs:
            if key not in names:
                raise InputError(
                    f"const_inputs names '{key}', which is not an input of the model"
                    f" (inputs: {', '.join(sorted(names)) or 'none'})"
                )
        self._check_symbolic(
            [vi for vi in inputs if vi.name not in self.const_inputs | self.input_shapes.keys()]
        )
        onnx_inputs = []
        for vi in inputs:
            if vi.name in self.const_inputs:
                self.values[vi.name] = self._const_input(vi)
                continue
            p = self.module.add_placeholder(vi.name, self._input_type(vi))
            self.values[vi.name] = p
            self.input_names[p] = vi.name
            onnx_inputs.append((vi.name, p.name))
        if self.const_inputs:
            # What the module was specialized on, for the stage list and the IDE.
            self.module.meta["const_inputs"] = sorted(self.const_inputs)
            self.module.meta.setdefault("notes", []).extend(
                f"input '{k}' specialized to {_show_value(np.asarray(v))}"
                for k, v in self.const_inputs.items()
            )
        # Reserve the output names so no node takes them; placeholders are made at the end.
        out_names = [self.module.unique_name(o.name) for o in g.output]
        for index, node in enumerate(g.node):
            self._convert(node, index)
        onnx_outputs = []
        for o, pname in zip(g.output, out_names):
            v = self.lookup(o.name)
            v = self._plain_output(o, v)
            self._check_output_type(o, v)
            p = Placeholder(pname, v.type, is_output=True)
            self.module.placeholders[pname] = p
            self.attach(v)
            save = self.fn.create("Save", [v, p], name=f"save_{pname}", origin=[o.name])
            save.meta["onnx_node"] = o.name
            onnx_outputs.append((o.name, pname))
        self.module.meta["onnx_inputs"] = onnx_inputs
        self.module.meta["onnx_outputs"] = onnx_outputs
        return self.module

    def check_supported(self, node: onnx.NodeProto, index: int) -> None:
        name = node.name or f"{node.op_type}_{index}"
        if node.domain not in ("", "ai.onnx") and node.op_type not in DOMAIN_OPS.get(
            node.domain, ()
        ):
            raise _domain_error(node, index, self.source)
        if node.op_type not in CONVERTERS:
            raise UnsupportedOpError(
                "this operator is not supported",
                node=name,
                op=node.op_type,
                opset=self.opset,
                model=self.source,
            )

    def inline_graph(
        self,
        graph: onnx.GraphProto,
        ctx: NodeContext,
        bindings: dict[str, Value] | None = None,
        tag: str = "",
    ) -> list[Value]:
        """Convert a subgraph's nodes into the function being built and return its outputs:
        how an If with a known condition imports its branch, and Loop / Scan unroll their
        body (`bindings`: values for the body's inputs; `tag` keeps iterations' node names
        apart). Outer values stay visible; names the subgraph defines are restored after, so
        it cannot shadow them for the rest of the outer graph."""
        for t in graph.initializer:
            self.initializers.setdefault(t.name, t)
        defined = [i.name for i in graph.input] + [o for n in graph.node for o in n.output]
        saved = {k: self.values[k] for k in defined if k in self.values}
        self.values.update(bindings or {})
        for n in graph.node:
            self.used.update(x for x in n.input if x)
        self.used.update(o.name for o in graph.output)
        try:
            for k, n in enumerate(graph.node):
                named = onnx.NodeProto()
                named.CopyFrom(n)
                base = n.name or f"{n.op_type}_{k}"
                named.name = f"{ctx.name}.{graph.name or 'body'}{tag}.{base}"
                self._convert(named, k)
            return [self.lookup(o.name, ctx) for o in graph.output]
        finally:
            for name in defined:
                self.values.pop(name, None)
            self.values.update(saved)

    def _convert(self, node: onnx.NodeProto, index: int) -> None:
        name = node.name or f"{node.op_type}_{index}"
        self.check_supported(node, index)
        conv = CONVERTERS[node.op_type]
        ctx = NodeContext(self, node, name)
        validate_node(ctx)
        if node.op_type not in NARROW_OPS:
            for iname in node.input:
                v = self.values.get(iname)
                if v is not None and v.type.elem.is_narrow:
                    raise ctx.unsupported(
                        f"input '{iname}' has element type {v.type.elem.value}, a storage "
                        f"type: only {', '.join(sorted(NARROW_OPS))} take it",
                        UnsupportedTypeError,
                    )
        outs = conv(ctx)
        for i, oname in enumerate(node.output):
            if not oname:
                continue
            v = outs[i] if i < len(outs) else None
            if v is None:
                if oname in self.sequences:  # set by a sequence converter (set_sequence)
                    continue
                if oname in self.used:
                    raise ctx.unsupported(f"output {i} ('{oname}') is used but not supported")
                continue
            self.values[oname] = v

    def _input_elem(self, vi: onnx.ValueInfoProto) -> ElemKind:
        if not vi.type.HasField("tensor_type"):
            raise self._input_refusal(
                vi, "is not a tensor (sequence/map/optional)", UnsupportedError
            )
        elem = vi.type.tensor_type.elem_type
        if elem not in ONNX_TO_ELEM:
            raise self._input_refusal(
                vi,
                f"has element type {dtype_name(elem)}; supported: {SUPPORTED_DTYPES}",
                UnsupportedTypeError,
            )
        return ONNX_TO_ELEM[elem]

    def _input_refusal(
        self, vi: onnx.ValueInfoProto, what: str, kind: type[UnsupportedError]
    ) -> UnsupportedError:
        """Refuse an input, naming the first node that reads it (where support would go)."""
        index, user = next(
            ((i, n) for i, n in enumerate(self.graph.node) if vi.name in n.input), (0, None)
        )
        return kind(
            f"input '{vi.name}'{'' if user else ' (read by no node)'} {what}",
            node=(user.name or f"{user.op_type}_{index}") if user else None,
            op=user.op_type if user else None,
            opset=self.opset if user else None,
            model=self.source,
        )

    def _check_symbolic(self, inputs: list[onnx.ValueInfoProto]) -> None:
        """One ShapeError naming every input whose shape is not fully known, with examples."""
        symbolic = [
            vi for vi in inputs if vi.type.HasField("tensor_type") and static_shape(vi) is None
        ]
        if not symbolic:
            return
        what = ", ".join(
            f"input '{vi.name}' has symbolic dims ({format_dims(vi.type.tensor_type)})"
            if vi.type.tensor_type.HasField("shape")
            else f"input '{vi.name}' has no declared shape"
            for vi in symbolic
        )
        examples = {vi.name: example_shape(vi) for vi in symbolic}
        cli = " ".join(f"--input-shape {n}={'x'.join(map(str, s))}" for n, s in examples.items())
        api = ", ".join(f"'{n}': {tuple(s)}" for n, s in examples.items())
        raise ShapeError(
            f"{what}; give concrete shapes, e.g. {cli} (CLI) or input_shapes={{{api}}} (API)"
        )

    def _input_type(self, vi: onnx.ValueInfoProto) -> TensorType:
        elem = self._input_elem(vi)
        tt = vi.type.tensor_type
        given = self.input_shapes.get(vi.name)
        if given is None:
            dims = static_shape(vi)
            assert dims is not None, vi.name  # _check_symbolic ran first
            check_input_dims(vi.name, dims, model=self.source)
            return TensorType(elem, dims)
        check_input_dims(vi.name, given, model=self.source)
        if not tt.HasField("shape"):
            return TensorType(elem, given)
        declared = declared_dims(tt)
        if len(given) != len(declared):
            raise ShapeError(
                f"input_shapes gives '{vi.name}' rank {len(given)} "
                f"({'x'.join(map(str, given))}), the model declares rank "
                f"{len(declared)} ({format_dims(tt)})"
            )
        for i, (g_, d) in enumerate(zip(given, declared)):
            if g_ < 0:
                raise ShapeError(f"input_shapes gives '{vi.name}' a negative dim {g_}")
            if d is not None and d != g_:
                raise ShapeError(
                    f"input_shapes gives '{vi.name}' dim {i} = {g_}, but the model "
                    f"fixes it to {d} ({format_dims(tt)})"
                )
        return TensorType(elem, given)

    def _const_input(self, vi: onnx.ValueInfoProto) -> Constant:
        """The Constant an input specialized on its value becomes (checked against its type)."""
        elem = self._input_elem(vi)
        arr = np.asarray(self.const_inputs[vi.name])
        if arr.dtype != np.dtype(elem.np_dtype):
            raise InputError(
                f"input '{vi.name}': expected element type {elem.value}, got {arr.dtype}"
            )
        tt = vi.type.tensor_type
        if tt.HasField("shape"):
            dims = [d.dim_value if d.HasField("dim_value") else None for d in tt.shape.dim]
            if len(dims) != arr.ndim or any(
                d is not None and d != a for d, a in zip(dims, arr.shape)
            ):
                raise InputError(
                    f"input '{vi.name}': expected shape {format_dims(tt)}, got "
                    f"{'x'.join(map(str, arr.shape)) or 'scalar'}"
                )
        return self.detached_constant(vi.name, arr)

    def _plain_output(self, o: onnx.ValueInfoProto, v: Value) -> Value:
        """A quantized value leaves the model as the int8 / uint8 integers ONNX declares."""
        want = ONNX_TO_ELEM.get(o.type.tensor_type.elem_type)
        if v.type.scale is None or want not in (ElemKind.I8, ElemKind.U8):
            return v
        attrs = {"to": want.value}
        return self.create("ExportQuantized", [v], attrs, o.name, "export")[0]

    def _check_output_type(self, o: onnx.ValueInfoProto, v: Value) -> None:
        tt = o.type.tensor_type
        if o.type.HasField("tensor_type") and tt.elem_type:
            want = ONNX_TO_ELEM.get(tt.elem_type)
            if want is None:
                raise UnsupportedTypeError(
                    f"output '{o.name}' has element type {dtype_name(tt.elem_type)}",
                    model=self.source,
                )
            if want != v.type.elem:
                raise ShapeError(
                    f"output '{o.name}' is declared {dtype_name(tt.elem_type)} but "
                    f"computes {v.type}"
                )


def _show_value(a: np.ndarray) -> str:
    return str(a.tolist()) if a.size <= 16 else f"a {a.dtype} tensor of shape {list(a.shape)}"


def _domain_error(node: onnx.NodeProto, index: int, source: str | None) -> UnsupportedOpError:
    return UnsupportedOpError(
        f"operator domain '{node.domain}' is not supported (only the default ONNX domain)",
        node=node.name or f"{node.op_type}_{index}",
        op=node.op_type,
        model=source,
    )


def _default_opset(model: onnx.ModelProto, source: str | None) -> int:
    version = default_opset(model)
    if version is None:
        # A model of another domain only (ai.onnx.ml, training): name its first node.
        for index, node in enumerate(model.graph.node):
            if node.domain not in ("", "ai.onnx"):
                raise _domain_error(node, index, source)
        raise UnsupportedError("the model imports no default-domain ONNX opset", model=source)
    if not MIN_OPSET <= version <= MAX_OPSET:
        raise UnsupportedError(
            f"ONNX opset {version} is not supported (supported: {MIN_OPSET}..{MAX_OPSET})",
            opset=version,
            model=source,
        )
    return version


def import_onnx(
    model: ModelSource,
    input_shapes: dict[str, Sequence[int]] | None = None,
    name: str | None = None,
    const_inputs: dict[str, np.ndarray] | None = None,
    *,
    fold_limit: int | None = None,
    source: str | None = None,
) -> Module:
    """Import an ONNX model (proto, path or bytes) into a graph-IR Module.

    `input_shapes` gives concrete shapes for inputs with symbolic dims; `const_inputs` gives
    inputs' values, which then become Constants (the model is specialized on them). Models
    below opset 7 are upgraded by onnx's version converter first (noted in
    `module.meta["notes"]`). `fold_limit` bounds the bytes of one tensor computed at import
    (default compiler.limits.DEFAULT_FOLD_LIMIT); `source` names the file a proto came from in
    messages. Raises ModelLoadError, UnsupportedError (InputValueRequiredError when a
    shape-like operand depends on an input; InvalidModelError for what the ONNX checker lets
    through), ShapeError or InputError: all CompilerErrors, naming what is wrong.
    """
    try:
        importer = _checked_importer(
            model, input_shapes, name, const_inputs, fold_limit=fold_limit, source=source
        )
        return importer.run()
    except CompilerError:
        raise
    except RecursionError:  # pragma: no cover
        source = str(model) if isinstance(model, str | os.PathLike) else None
        raise UnsupportedError("the graph is too deep to import", model=source) from None


def check_importable(model: ModelSource) -> None:
    """Raise what import_onnx would refuse whatever the inputs' shapes and values are.

    That is: a bad file, an opset the converter cannot upgrade, an unknown op or domain, a
    model the ONNX checker rejects, an input that is not a tensor of a supported type. For
    callers that cannot import yet (symbolic dims).
    """
    importer = _checked_importer(model, None, None, None)
    inits = set(importer.initializers)
    for vi in importer.graph.input:
        if vi.name not in inits:
            importer._input_elem(vi)


def _checked_importer(
    model: ModelSource,
    input_shapes: dict[str, Sequence[int]] | None,
    name: str | None,
    const_inputs: dict[str, np.ndarray] | None,
    *,
    fold_limit: int | None = None,
    source: str | None = None,
) -> Importer:
    if isinstance(model, str | os.PathLike):
        source = str(model)
    proto, data = read_model(model, check=False)
    original = proto
    proto, note = upgrade_opset(proto, MIN_OPSET, source)
    importer = Importer(proto, input_shapes, name, source, const_inputs, fold_limit)
    if note:
        importer.module.meta.setdefault("notes", []).append(note)
        importer.module.meta["model_opset"] = default_opset(original)
    # Unknown ops first: UnsupportedError names them better than the checker would.
    for index, node in enumerate(proto.graph.node):
        importer.check_supported(node, index)
    validate_model(proto, source)  # what the ONNX checker lets through
    # the file's own bytes, unless the converter upgraded the model
    check_model(proto, source or "<ModelProto>", data=data if proto is original else None)
    return importer


__all__ = [
    "Importer",
    "NodeContext",
    "check_importable",
    "import_onnx",
]
