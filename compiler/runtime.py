"""What every executor shares at run time (pipeline step 11): a compiled model's input and output
specs in ONNX graph order, and the one check of the inputs a caller passes.

The executors (`compiler.executors`, the arena interpreter, the LLVM executor, the graph
interpreter) all import this module and nothing of each other, so there is one place that says
which inputs a model takes and one error message for each way of getting them wrong.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from compiler.errors import InputError
from compiler.graph.ir import Module
from compiler.graph.types import TensorType
from compiler.lir.ir import LIRFunction
from compiler.lir.irgen import irgen

if TYPE_CHECKING:
    from compiler.memory.plan import MemoryPlan
    from compiler.pipeline import CompileResult

Spec = tuple[str, TensorType]


def io_specs(module: Module) -> tuple[list[Spec], list[Spec], dict[str, str]]:
    """(inputs, outputs, aliases) of a module in ONNX graph order where the importer recorded it.

    `aliases` maps ONNX input names to placeholder names (the importer sanitizes names).
    """
    ins = {p.name: p for p in module.inputs()}
    outs = {p.name: p for p in module.outputs()}
    onnx_in = [(o, p) for o, p in module.meta.get("onnx_inputs", ()) if p in ins]
    onnx_out = [(o, p) for o, p in module.meta.get("onnx_outputs", ()) if p in outs]
    in_order = [p for _, p in onnx_in] + [n for n in ins if n not in {p for _, p in onnx_in}]
    out_order = [p for _, p in onnx_out] + [n for n in outs if n not in {p for _, p in onnx_out}]
    aliases = {o: p for o, p in onnx_in if o != p}
    return ([(n, ins[n].type) for n in in_order], [(n, outs[n].type) for n in out_order], aliases)


def lowered(result: CompileResult | Module) -> tuple[Module, LIRFunction, MemoryPlan | None]:
    """The graph module, low-level function and memory plan an executor runs: the compile
    result's own, or - for a compile that stopped before the low-level stages, or a bare graph
    Module - the function IRGen makes now (in the schedule's order if there is one), no plan."""
    if isinstance(result, Module):
        return result, irgen(result), None
    if result.lir is not None:
        return result.module, result.lir, result.plan
    order = result.schedule.order if result.schedule is not None else None
    return result.module, irgen(result.module, order), None


def lir_io_specs(
    lir: LIRFunction, module: Module | None = None
) -> tuple[list[Spec], list[Spec], dict[str, str]]:
    """`io_specs` of the module a low-level function came from; without the module, the
    function's own input and output weights in declaration order (no aliases)."""
    if module is not None:
        return io_specs(module)
    return (
        [(w.name, w.type_) for w in lir.inputs()],
        [(w.name, w.type_) for w in lir.outputs()],
        {},
    )


def check_inputs(
    specs: Sequence[Spec],
    inputs: Mapping[str, Any] | Sequence[Any],
    aliases: Mapping[str, str] | None = None,
) -> dict[str, np.ndarray]:
    """Validate run-time inputs against (name, type) specs; return them keyed by spec name.

    `inputs` is a dict by name or a list in spec order. `aliases` maps other accepted names
    (e.g. the ONNX graph's input names) to spec names. Raises InputError on a missing, extra,
    wrongly typed or wrongly shaped input. Never casts: a float64 array for an f32 input is an
    error, because silently rounding a user's data hides bugs.
    """
    aliases = dict(aliases or {})
    names = [n for n, _ in specs]
    if isinstance(inputs, Mapping):
        given: dict[str, Any] = {}
        for key, value in inputs.items():
            name = key if key in names else aliases.get(key, key)
            if name not in names:
                raise InputError(
                    f"unknown input '{key}'; the model's inputs are: {', '.join(names) or 'none'}"
                )
            if name in given:
                raise InputError(f"input '{name}' is given twice (as '{key}' and another name)")
            given[name] = value
        missing = [n for n in names if n not in given]
        if missing:
            raise InputError(
                f"missing input{'s' if len(missing) > 1 else ''} "
                f"{', '.join(repr(m) for m in missing)}; the model's inputs are: "
                f"{', '.join(names)}"
            )
    else:
        seq = list(inputs)
        if len(seq) != len(names):
            raise InputError(
                f"expected {len(names)} input{'s' if len(names) != 1 else ''} "
                f"({', '.join(names) or 'none'}), got {len(seq)}"
            )
        given = dict(zip(names, seq))
    out: dict[str, np.ndarray] = {}
    for name, t in specs:
        value = given[name]
        arr = value if isinstance(value, np.ndarray) else np.asarray(value)
        if arr.dtype != t.np_dtype:
            raise InputError(
                f"input '{name}': expected element type {t.elem.value} "
                f"({t.np_dtype}), got {arr.dtype}",
                hint=f"convert it with .astype(np.{t.np_dtype})",
            )
        if tuple(arr.shape) != t.shape:
            raise InputError(
                f"input '{name}': expected shape {list(t.shape)} ({t}), got {list(arr.shape)}"
            )
        out[name] = arr
    return out


__all__ = ["Spec", "check_inputs", "io_specs", "lir_io_specs", "lowered"]
