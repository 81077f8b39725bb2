"""`onnx.backend.base` implementation: run ONNX models and single nodes through glowviz.

    import compiler.onnx_backend as backend
    rep = backend.prepare("model.onnx", executor="interpreter")
    outputs = rep.run([x])            # list in graph input order, or {name: array}

Options of `prepare`: `executor` (a key of `compiler.executors.EXECUTORS`), `input_shapes`
({input name: shape}), `max_specializations` (how many run-time specializations a prepared
model keeps, default 16) and any field of `compiler.pipeline.CompileOptions`.
`rep.with_executor(kind)` runs a prepared model on another executor off the same compiles.

The compiler only compiles static graphs. The API still takes any model, as ONNX harnesses
drive it: `prepare` compiles what it can, and when the frontend reports that a shape-like
operand (Reshape's shape, Pad's pads, ...) depends on a graph input (`InputValueRequiredError`)
or an input has symbolic dims, `run` specializes the model on those inputs' values and shapes:
they become constants and static dims, the whole pipeline runs, and the executor is cached
keyed by them.
"""

from __future__ import annotations

import copy
import dataclasses
from collections import OrderedDict
from collections.abc import Hashable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import onnx
import onnx.backend.base as onnx_base
from onnx import helper, shape_inference

from compiler.errors import CompilerError, InputError, InputValueRequiredError, UnsupportedError
from compiler.executors import EXECUTORS, LOW_LEVEL_EXECUTORS, Executor, make_executor

if TYPE_CHECKING:
    from compiler.pipeline import CompileOptions, CompileResult

#: Executor used when `prepare` is given none.
DEFAULT_EXECUTOR = "llvm"
#: Run-time specializations a prepared model keeps (least recently used dropped first).
DEFAULT_MAX_SPECIALIZATIONS = 16

_DEVICES = ("CPU",)


def _device_name(device: Any) -> str:
    text = str(getattr(device, "type", device))
    text = text.split(".")[-1]  # DeviceType.CPU
    return text.split(":")[0].upper()


@dataclasses.dataclass(frozen=True)
class Specialization:
    """One compiled form of a prepared model: the executor, and the ONNX inputs it takes."""

    executor: Executor
    result: CompileResult
    input_names: tuple[str, ...]


class GlowvizRep(onnx_base.BackendRep):
    """A prepared model; `run` returns the outputs in graph order (by index or by name).

    `value_inputs` are the inputs the model is specialized on by value (they feed shape-like
    operands), `shape_inputs` those with symbolic dims (specialized on their shape). A model
    with neither is compiled once, by `prepare`.
    """

    def __init__(
        self,
        source: Any,
        proto: onnx.ModelProto,
        kind: str,
        options: CompileOptions,
        max_specializations: int = DEFAULT_MAX_SPECIALIZATIONS,
    ) -> None:
        from compiler.frontend.input_shapes import declared_dims, format_dims, symbolic_inputs

        self._source = source  # what compile_model reads (a path keeps the file name in errors)
        self.kind = kind
        self.options = options
        # Inputs given as constants up front (the const_inputs option) are not run's business.
        fixed = {t.name for t in proto.graph.initializer} | options.const_inputs.keys()
        self.input_names = [vi.name for vi in proto.graph.input if vi.name not in fixed]
        self.output_names = [o.name for o in proto.graph.output]
        self._outputs_type = onnx_base.namedtupledict("Outputs", self.output_names)
        self.shape_inputs = frozenset(symbolic_inputs(proto)) - options.const_inputs.keys()
        # Declared dims of the symbolic inputs (None where free), to check a run's shapes.
        self._declared = {
            vi.name: (declared_dims(vi.type.tensor_type), format_dims(vi.type.tensor_type))
            for vi in proto.graph.input
            if vi.name in self.shape_inputs and vi.type.tensor_type.HasField("shape")
        }
        self.value_inputs: frozenset[str] = frozenset()
        self.max_specializations = max(1, max_specializations)
        self.compile_count = 0
        self._cache: OrderedDict[Hashable, Specialization] = OrderedDict()
        self._last: Specialization | None = None

    # -- what the last run used (the static compile right after `prepare`) ---------------------
    @property
    def executor(self) -> Executor | None:
        return self._last.executor if self._last else None

    @property
    def result(self) -> CompileResult | None:
        return self._last.result if self._last else None

    def with_executor(self, kind: str) -> GlowvizRep:
        """This prepared model on executor `kind`, sharing its compiles: every cached
        specialization gets an executor of `kind` over the same compile result, so nothing is
        compiled again (the interpreter and LLVM take the same low-level compile). Run-time
        specializations compiled later are the new rep's own."""
        if kind not in EXECUTORS:
            raise UnsupportedError(
                f"unknown executor '{kind}'; known executors: {', '.join(sorted(EXECUTORS))}"
            )
        new = copy.copy(self)
        new.kind = kind
        new.compile_count = 0
        new._cache = OrderedDict()
        new._last = None
        if kind in LOW_LEVEL_EXECUTORS and not self.options.low_level:
            # The compiles stopped before the stages this executor needs: compile anew.
            new.options = dataclasses.replace(self.options, low_level=True)
            return new
        for key, spec in self._cache.items():
            shared = Specialization(make_executor(spec.result, kind), spec.result, spec.input_names)
            new._cache[key] = shared
            if spec is self._last:
                new._last = shared
        return new

    # -- running ---------------------------------------------------------------------------------
    def run(self, inputs: Any, **kwargs: Any) -> tuple[Any, ...]:
        feed = self._feed(inputs)
        spec = self.specialize(feed)
        outs = spec.executor.run({n: feed[n] for n in spec.input_names})
        return self._outputs_type(*(outs[n] for n in spec.executor.output_names))

    def specialize(self, feed: Mapping[str, np.ndarray] | None = None) -> Specialization:
        """The compiled form for these inputs (by ONNX name): cached, else compiled now.

        Without `feed` (at `prepare`), symbolic dims take the `input_shapes` option's shapes.
        """
        feed = feed or {}
        while True:
            key = self._key(feed)
            spec = self._cache.get(key)
            if spec is not None:
                self._cache.move_to_end(key)
                self._last = spec
                return spec
            try:
                spec = self._compile(self._options_for(feed))
            except InputValueRequiredError as e:
                new = set(e.inputs) - self.value_inputs
                if not new:  # given and still not constant: nothing more to specialize on
                    raise
                self.value_inputs |= new
                if not feed:  # prepare: the values come with the first run
                    raise
                continue
            self._cache[key] = spec
            while len(self._cache) > self.max_specializations:
                self._cache.popitem(last=False)
            self._last = spec
            return spec

    def _key(self, feed: Mapping[str, np.ndarray]) -> Hashable:
        shapes = tuple(
            (n, tuple(feed[n].shape) if n in feed else self.options.input_shapes.get(n))
            for n in sorted(self.shape_inputs - self.value_inputs)
        )
        values = tuple(
            (n, feed[n].dtype.str, feed[n].shape, feed[n].tobytes())
            for n in sorted(self.value_inputs)
            if n in feed
        )
        return shapes, values

    def _options_for(self, feed: Mapping[str, np.ndarray]) -> CompileOptions:
        shapes = dict(self.options.input_shapes)
        shapes.update(
            (n, tuple(feed[n].shape)) for n in self.shape_inputs - self.value_inputs if n in feed
        )
        for n in self.value_inputs:
            shapes.pop(n, None)
        return dataclasses.replace(
            self.options,
            input_shapes=shapes,
            const_inputs={
                **self.options.const_inputs,
                **{n: feed[n] for n in self.value_inputs if n in feed},
            },
        )

    def _compile(self, options: CompileOptions) -> Specialization:
        from compiler.pipeline import compile_model

        result = compile_model(self._source, options)
        self.compile_count += 1
        if result.stopped_after is not None:
            raise CompilerError(
                f"compilation stopped after '{result.stopped_after}'; "
                "a prepared model needs the whole pipeline"
            )
        executor = make_executor(result, self.kind)
        names = tuple(o for o, _ in result.module.meta.get("onnx_inputs", ()))
        return Specialization(executor, result, names or tuple(executor.input_names))

    def _feed(self, inputs: Any) -> dict[str, np.ndarray]:
        """The inputs as {ONNX input name: array}, checked for count and names."""
        if isinstance(inputs, np.ndarray):
            inputs = [inputs]
        if isinstance(inputs, Mapping):
            unknown = [k for k in inputs if k not in self.input_names]
            if unknown:
                raise InputError(
                    f"unknown input{'s' if len(unknown) > 1 else ''} "
                    f"{', '.join(map(repr, unknown))}; the model's inputs are "
                    f"{', '.join(self.input_names) or 'none'}"
                )
            missing = [n for n in self.input_names if n not in inputs]
            if missing:
                raise InputError(
                    f"no array for input{'s' if len(missing) > 1 else ''} "
                    f"{', '.join(map(repr, missing))}"
                )
            return self._checked({n: np.asarray(inputs[n]) for n in self.input_names})
        if not isinstance(inputs, Sequence) or isinstance(inputs, str | bytes):
            raise InputError(
                f"inputs must be a list of arrays or a dict by input name, "
                f"got {type(inputs).__name__}"
            )
        if len(inputs) != len(self.input_names):
            raise InputError(
                f"expected {len(self.input_names)} inputs "
                f"({', '.join(self.input_names)}), got {len(inputs)}"
            )
        return self._checked({n: np.asarray(a) for n, a in zip(self.input_names, inputs)})

    def _checked(self, feed: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """`feed`, once the dims the model fixes on its symbolic inputs are checked."""
        for name, (dims, text) in self._declared.items():
            shape = feed[name].shape
            if len(shape) != len(dims) or any(d not in (None, s) for d, s in zip(dims, shape)):
                raise InputError(
                    f"input '{name}' has shape {list(shape)}, the model expects {text}"
                )
        return feed


# Kept under the name the onnx backend docs use.
BackendRep = GlowvizRep


def _compile_options(options: dict[str, Any]) -> tuple[str, int, CompileOptions]:
    from compiler.pipeline import CompileOptions

    options = dict(options)
    kind = options.pop("executor", None) or DEFAULT_EXECUTOR
    if kind not in EXECUTORS:
        raise UnsupportedError(
            f"unknown executor '{kind}'; known executors: {', '.join(sorted(EXECUTORS))}"
        )
    max_specs = int(options.pop("max_specializations", DEFAULT_MAX_SPECIALIZATIONS))
    fields = {f.name for f in dataclasses.fields(CompileOptions)}
    unknown = sorted(k for k in options if k not in fields)
    if unknown:
        raise UnsupportedError(
            f"unknown backend option{'s' if len(unknown) > 1 else ''} "
            f"{', '.join(unknown)}; options are: executor, max_specializations, "
            f"{', '.join(sorted(fields))}"
        )
    if "input_shapes" in options:
        options["input_shapes"] = {
            k: tuple(int(d) for d in v) for k, v in (options["input_shapes"] or {}).items()
        }
    if "disabled_passes" in options:
        options["disabled_passes"] = frozenset(options["disabled_passes"])
    options.setdefault("low_level", kind in LOW_LEVEL_EXECUTORS)
    return kind, max_specs, CompileOptions(**options)


class Backend(onnx_base.Backend):
    """The glowviz ONNX backend (CPU only)."""

    @classmethod
    def is_compatible(cls, model: Any, device: str = "CPU", **kwargs: Any) -> bool:
        return cls.supports_device(device)

    @classmethod
    def supports_device(cls, device: Any) -> bool:
        return _device_name(device) in _DEVICES

    @classmethod
    def prepare(
        cls, model: onnx.ModelProto | str | Path | bytes, device: str = "CPU", **kwargs: Any
    ) -> GlowvizRep:
        """Compile `model` for `device`, or check it and defer to `run` what needs inputs.

        Deferred: inputs with symbolic dims (not fixed by the `input_shapes` option) and inputs
        whose values shape the graph. Everything else is refused here with a CompilerError.
        """
        from compiler.frontend import load_model
        from compiler.frontend.onnx_importer import check_importable

        if not cls.supports_device(device):
            raise UnsupportedError(
                f"device '{device}' is not supported; glowviz runs on: {', '.join(_DEVICES)}"
            )
        kind, max_specs, options = _compile_options(kwargs)
        if isinstance(model, bytearray | memoryview):
            model = bytes(model)
        proto = load_model(model, check=False)
        source = model if isinstance(model, str | Path) else proto
        rep = GlowvizRep(source, proto, kind, options, max_specs)
        if rep.shape_inputs - options.input_shapes.keys():
            check_importable(proto)  # the shapes come with the first run
            return rep
        try:
            rep.specialize()
        except InputValueRequiredError:
            pass  # rep.value_inputs now names them: the values come with the first run
        return rep

    @classmethod
    def run_model(
        cls, model: Any, inputs: Any, device: str = "CPU", **kwargs: Any
    ) -> tuple[Any, ...]:
        return cls.prepare(model, device, **kwargs).run(inputs)

    @classmethod
    def run_node(
        cls,
        node: onnx.NodeProto,
        inputs: Any,
        device: str = "CPU",
        outputs_info: Sequence[tuple[Any, tuple[int, ...]]] | None = None,
        **kwargs: Any,
    ) -> tuple[Any, ...]:
        """Run one node: builds a one-node model (output types by ONNX shape inference)."""
        opset = kwargs.pop("opset_version", None) or onnx.defs.onnx_opset_version()
        model = make_node_model(node, inputs, opset, outputs_info)
        in_names = [n for n in node.input if n]
        if isinstance(inputs, Mapping):
            feed: Any = dict(inputs)
        else:
            feed = list(inputs) if not isinstance(inputs, np.ndarray) else [inputs]
            feed = feed[: len(in_names)]
        return cls.prepare(model, device, **kwargs).run(feed)


def make_node_model(
    node: onnx.NodeProto,
    inputs: Any,
    opset: int,
    outputs_info: Sequence[tuple[Any, tuple[int, ...]]] | None = None,
) -> onnx.ModelProto:
    """A model whose graph is `node` alone, with inputs typed from the given arrays."""
    in_names = [n for n in node.input if n]
    if isinstance(inputs, Mapping):
        missing = [n for n in in_names if n not in inputs]
        if missing:
            raise InputError(
                f"run_node: missing input{'s' if len(missing) > 1 else ''} "
                f"{', '.join(missing)} of node {node.op_type}"
            )
        arrays = [np.asarray(inputs[n]) for n in in_names]
    else:
        seq = [inputs] if isinstance(inputs, np.ndarray) else list(inputs)
        if len(seq) < len(in_names):
            raise InputError(
                f"run_node: node {node.op_type} has {len(in_names)} inputs, got {len(seq)} arrays"
            )
        arrays = [np.asarray(a) for a in seq[: len(in_names)]]
    try:
        graph_inputs = [
            helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)
            for n, a in zip(in_names, arrays)
        ]
    except (KeyError, TypeError, ValueError) as e:
        raise UnsupportedError(
            f"run_node: input dtype not supported: {e}", op=node.op_type
        ) from None
    out_names = [n for n in node.output if n]
    if outputs_info is not None:
        graph_outputs = [
            helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(np.dtype(dt)), shape)
            for n, (dt, shape) in zip(out_names, outputs_info)
        ]
        graph = helper.make_graph([node], f"{node.op_type}_node", graph_inputs, graph_outputs)
        return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    graph = helper.make_graph([node], f"{node.op_type}_node", graph_inputs, [])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    try:
        inferred = shape_inference.infer_shapes(model, strict_mode=True, data_prop=True)
    except Exception as e:  # noqa: BLE001 - onnx raises several unrelated types here
        raise UnsupportedError(
            f"run_node: ONNX shape inference failed: {e}", op=node.op_type, opset=opset
        ) from None
    types = {vi.name: vi for vi in inferred.graph.value_info}
    missing = [n for n in out_names if n not in types]
    if missing:
        raise UnsupportedError(
            f"run_node: cannot infer the type of output {', '.join(missing)}; pass outputs_info",
            op=node.op_type,
        )
    model.graph.output.extend(types[n] for n in out_names)
    return model


# Module-level API, as onnx.backend expects of a backend module.
prepare = Backend.prepare
run_model = Backend.run_model
run_node = Backend.run_node
supports_device = Backend.supports_device
is_compatible = Backend.is_compatible

__all__ = [
    "DEFAULT_EXECUTOR",
    "LOW_LEVEL_EXECUTORS",
    "Backend",
    "BackendRep",
    "GlowvizRep",
    "is_compatible",
    "make_node_model",
    "prepare",
    "run_model",
    "run_node",
    "supports_device",
]
