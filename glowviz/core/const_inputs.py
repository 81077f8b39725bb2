"""`--const-input` arguments -> the arrays `CompileOptions.const_inputs` specializes a model on.

The CLI and the IDE take the values the ONNX backend takes at run time for inputs that shape
the graph (Reshape's shape, Pad's pads, ...): `NAME=1,3,-1` (a list), `NAME=5` (a scalar),
`NAME=FILE.npy` (an array from a file), or `FILE.npz` (every array in it, by input name). Text
values take the element type and, when the count fits, the shape the model declares for the
input; the importer checks the result like any specialized value.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import onnx

from compiler.errors import CompilerError

_SYNTAX = "expected NAME=V1,V2,... NAME=FILE.npy or FILE.npz, e.g. shape=1,3,-1"


def _load_array_file(path: Path, item: str) -> np.ndarray | dict[str, np.ndarray]:
    if not path.exists():
        raise CompilerError(f"--const-input '{item}': file not found: {path}")
    try:
        with np.load(path, allow_pickle=False) as data:
            return {k: np.asarray(data[k]) for k in data.files}
    except AttributeError:  # np.load of a .npy returns the array itself (no context manager)
        return np.asarray(np.load(path, allow_pickle=False))
    except (OSError, ValueError) as e:
        raise CompilerError(f"--const-input '{item}': cannot read {path}: {e}") from None


def _parse_values(item: str, text: str) -> np.ndarray:
    words = [w.strip() for w in text.replace(";", ",").split(",") if w.strip()]
    if not words:
        raise CompilerError(f"bad --const-input '{item}': no value", hint=_SYNTAX)
    values: list[int | float] = []
    for w in words:
        try:
            values.append(int(w))
        except ValueError:
            try:
                values.append(float(w))
            except ValueError:
                raise CompilerError(
                    f"bad --const-input '{item}': '{w}' is not a number", hint=_SYNTAX
                ) from None
    # One number and no comma: a scalar (reshaped below to the declared shape if it has one).
    return np.array(values[0] if len(words) == 1 and "," not in text else values)


def parse_const_input_args(items: list[str] | None) -> dict[str, np.ndarray]:
    """`--const-input` items (repeatable) -> {input name: array}, before fitting to a model."""
    out: dict[str, np.ndarray] = {}
    for item in items or []:
        name, sep, value = item.partition("=")
        if not sep:
            loaded = _load_array_file(Path(item), item)
            if not isinstance(loaded, dict):
                raise CompilerError(
                    f"bad --const-input '{item}': a .npy file needs a name (NAME={item})",
                    hint=_SYNTAX,
                )
            out.update(loaded)
            continue
        if not name or not value:
            raise CompilerError(f"bad --const-input '{item}'", hint=_SYNTAX)
        if value.endswith((".npy", ".npz")):
            loaded = _load_array_file(Path(value), item)
            if isinstance(loaded, dict):
                if name not in loaded:
                    raise CompilerError(
                        f"--const-input '{item}': {value} has no array '{name}' "
                        f"(it has: {', '.join(loaded) or 'none'})"
                    )
                loaded = loaded[name]
            out[name] = loaded
        else:
            out[name] = _parse_values(item, value)
    return out


def fit_const_inputs(
    model: onnx.ModelProto, values: dict[str, np.ndarray]
) -> dict[str, np.ndarray]:
    """`values` in the element type the model declares for each input, and in its declared
    shape where the element count fits (so `shape=1,3,-1` suits a 1-D input of 3 and
    `axis=1` a scalar one). Names that are not inputs are refused here, listing the inputs."""
    from compiler.frontend.onnx_importer import ONNX_TO_ELEM

    inits = {t.name for t in model.graph.initializer}
    inputs = {vi.name: vi for vi in model.graph.input if vi.name not in inits}
    out: dict[str, np.ndarray] = {}
    for name, arr in values.items():
        vi = inputs.get(name)
        if vi is None:
            raise CompilerError(
                f"--const-input names '{name}', which is not an input of the model",
                hint=f"the model's inputs are: {', '.join(inputs) or 'none'}",
            )
        tt = vi.type.tensor_type
        elem = ONNX_TO_ELEM.get(tt.elem_type)
        if elem is not None and arr.dtype != elem.np_dtype:
            cast = arr.astype(elem.np_dtype)
            if not np.array_equal(cast, arr, equal_nan=arr.dtype.kind == "f"):
                raise CompilerError(
                    f"--const-input '{name}': {arr.tolist()} does not fit the input's element "
                    f"type {elem.value}"
                )
            arr = cast
        if tt.HasField("shape"):
            dims = [d.dim_value if d.HasField("dim_value") else None for d in tt.shape.dim]
            if None not in dims and math.prod(d or 0 for d in dims) == arr.size:
                arr = arr.reshape([d or 0 for d in dims])
        out[name] = arr
    return out


__all__ = ["fit_const_inputs", "parse_const_input_args"]
