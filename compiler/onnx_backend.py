"""`onnx.backend.base` implementation: run ONNX models and single nodes through glowviz.

    import compiler.onnx_backend as backend
    rep = backend.prepare("model.onnx", executor="interpreter")
    outputs = rep.run([x])            # list in graph input order, or {name: array}

Options of `prepare`: `executor` (a key of `compiler.executors.EXECUTORS`), `input_shapes`
({input name: shape}), and any field of `compiler.pipeline.CompileOptions`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnx.backend.base as onnx_base
from onnx import helper, shape_inference

from compiler.errors import CompilerError, InputError, UnsupportedError
from compiler.executors import EXECUTORS, LOW_LEVEL_EXECUTORS, Executor, make_executor

#: Executor used when `prepare` is given none.
DEFAULT_EXECUTOR = "llvm"

_DEVICES = ("CPU",)


def _device_name(device: Any) -> str:
    text = str(getattr(device, "type", device))
    text = text.split(".")[-1]  # DeviceType.CPU
    return text.split(":")[0].upper()


class GlowvizRep(onnx_base.BackendRep):
    """A prepared model; `run` returns the outputs in graph order (by index or by name)."""

    def __init__(self, executor: Executor, result: Any = None) -> None:
        self.executor = executor
        self.result = result
        module = getattr(executor, "module", None) or getattr(result, "module", None)
        meta = getattr(module, "meta", {}) or {}
        onnx_out = {p: o for o, p in meta.get("onnx_outputs", ())}
        onnx_in = {p: o for o, p in meta.get("onnx_inputs", ())}
        self.output_names = [onnx_out.get(n, n) for n in executor.output_names]
        self.input_names = [onnx_in.get(n, n) for n in executor.input_names]
        self._outputs_type = onnx_base.namedtupledict("Outputs", self.output_names)

    def run(self, inputs: Any, **kwargs: Any) -> tuple[Any, ...]:
        if isinstance(inputs, np.ndarray):
            inputs = [inputs]
        elif not isinstance(inputs, Mapping | Sequence):
            raise InputError(
                f"inputs must be a list of arrays or a dict by input name, "
                f"got {type(inputs).__name__}"
            )
        outs = self.executor.run(inputs)
        return self._outputs_type(*(outs[n] for n in self.executor.output_names))


# Kept under the name the onnx backend docs use.
BackendRep = GlowvizRep


def _compile_options(options: dict[str, Any]) -> tuple[str, Any]:
    from compiler.pipeline import CompileOptions

    options = dict(options)
    kind = options.pop("executor", None) or DEFAULT_EXECUTOR
    if kind not in EXECUTORS:
        raise UnsupportedError(
            f"unknown executor '{kind}'; known executors: {', '.join(sorted(EXECUTORS))}"
        )
    fields = {f.name for f in dataclasses.fields(CompileOptions)}
    unknown = sorted(k for k in options if k not in fields)
    if unknown:
        raise UnsupportedError(
            f"unknown backend option{'s' if len(unknown) > 1 else ''} "
            f"{', '.join(unknown)}; options are: executor, "
            f"{', '.join(sorted(fields))}"
        )
    if "input_shapes" in options:
        options["input_shapes"] = {
            k: tuple(int(d) for d in v) for k, v in (options["input_shapes"] or {}).items()
        }
    if "disabled_passes" in options:
        options["disabled_passes"] = frozenset(options["disabled_passes"])
    options.setdefault("low_level", kind in LOW_LEVEL_EXECUTORS)
    return kind, CompileOptions(**options)


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
        from compiler.pipeline import compile_model

        if not cls.supports_device(device):
            raise UnsupportedError(
                f"device '{device}' is not supported; glowviz runs on: {', '.join(_DEVICES)}"
            )
        kind, options = _compile_options(kwargs)
        if isinstance(model, bytearray | memoryview):
            model = bytes(model)
        result = compile_model(model, options)
        if result.stopped_after is not None:
            raise CompilerError(
                f"compilation stopped after '{result.stopped_after}'; "
                "a prepared model needs the whole pipeline"
            )
        return GlowvizRep(make_executor(result, kind), result)

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
