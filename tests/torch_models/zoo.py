"""The model zoo's storage (tests/torch_models/zoo/): models too large to commit keep their
graph and every small initializer, while each large float initializer keeps only its name,
dtype and shape plus the statistics it is refilled from. `strip` is used by export_zoo.py (with
torch), `refill` by tests/test_torch_zoo.py (without): the test refills a model before anything
else sees it, and onnxruntime on the refilled model is then the reference.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path

import numpy as np
import onnx
from onnx import numpy_helper

ZOO_DIR = Path(__file__).resolve().parent / "zoo"
#: metadata_props key holding {"seed": int, "tensors": {name: [row means, row stds, min, max]}}
META_KEY = "glowviz.zoo.stripped"
#: float initializers with at least this many elements are stripped; smaller ones (biases,
#: norms, scalars) are kept exactly, as are integer tensors (shapes, indices).
MIN_STRIPPED = 1024


def _strippable(arr: np.ndarray) -> bool:
    # Tensors of a few distinct values (masks, constant fills) carry structure, not weights.
    return (
        arr.dtype.kind == "f"
        and arr.size >= MIN_STRIPPED
        and bool(np.isfinite(arr).all())
        and np.unique(arr[:4096]).size > 16
    )


def _pack(values: np.ndarray) -> str:
    return base64.b64encode(values.astype("<f2").tobytes()).decode("ascii")


def _unpack(text: str) -> np.ndarray:
    return np.frombuffer(base64.b64decode(text), "<f2").astype(np.float64)


def strip(model: onnx.ModelProto, seed: int) -> onnx.ModelProto:
    """A copy of `model` whose large float initializers have no data, with the statistics
    `refill` draws new values from recorded in the model's metadata: the tensor's min and max,
    and the mean and std of each row (axis 0; float16, base64). Per-row scales matter: an
    exporter that folds BatchNorm into a convolution scales each output channel differently,
    and a refill at one scale for the whole tensor makes a deep net's activations explode."""
    out = onnx.ModelProto()
    out.CopyFrom(model)
    stats: dict[str, list[float | str]] = {}
    for init in out.graph.initializer:
        arr = numpy_helper.to_array(init)
        if not _strippable(arr):
            continue
        # A vector is one row (its per-element "rows" would be its values).
        rows = arr.astype(np.float64).reshape(arr.shape[0] if arr.ndim > 1 else 1, -1)
        stats[init.name] = [
            _pack(rows.mean(axis=1)),
            _pack(rows.std(axis=1)),
            float(rows.min()),
            float(rows.max()),
        ]
        dims, dtype, name = list(init.dims), init.data_type, init.name
        init.Clear()
        init.name, init.data_type = name, dtype
        init.dims.extend(dims)
    entry = out.metadata_props.add()
    entry.key, entry.value = META_KEY, json.dumps({"seed": seed, "tensors": stats})
    return out


def is_stripped(model: onnx.ModelProto) -> bool:
    return any(p.key == META_KEY for p in model.metadata_props)


def refill(model: onnx.ModelProto) -> onnx.ModelProto:
    """A copy of a stripped model with every stripped initializer filled deterministically:
    each row normal(row mean, row std), the whole clipped to [min, max], from the recorded seed
    and the tensor's position, so positive tensors (BatchNorm variances) stay positive and
    scales stay those of the original weights. A model not stripped is returned unchanged."""
    meta = next((json.loads(p.value) for p in model.metadata_props if p.key == META_KEY), None)
    if meta is None:
        return model
    out = onnx.ModelProto()
    out.CopyFrom(model)
    tensors: dict[str, list] = meta["tensors"]
    keep = [p for p in out.metadata_props if p.key != META_KEY]
    del out.metadata_props[:]
    out.metadata_props.extend(keep)
    for index, init in enumerate(out.graph.initializer):
        if init.name not in tensors:
            continue
        means, stds, lo, hi = tensors[init.name]
        rng = np.random.default_rng([meta["seed"], index])
        dtype = onnx.helper.tensor_dtype_to_np_dtype(init.data_type)
        shape = tuple(init.dims)
        values = _draw(rng, _unpack(means), _unpack(stds), lo, hi, int(np.prod(shape)), dtype)
        init.CopyFrom(numpy_helper.from_array(values.reshape(shape), init.name))
    return out


#: float64 elements `_draw` works on at a time (512 KiB: it stays in the caches)
_BLOCK = 1 << 16


def _draw(
    rng: np.random.Generator,
    row_means: np.ndarray,
    row_stds: np.ndarray,
    lo: float,
    hi: float,
    size: int,
    dtype: np.dtype,
) -> np.ndarray:
    """`size` values in rows of normal(row mean, row std), clipped to [lo, hi], as `dtype`:
    the values of drawing the whole (rows, size / rows) float64 matrix at once, scaling,
    shifting and clipping it (the generator's stream is the same drawn in pieces, and each
    element takes the same float64 operations), done a block of rows at a time in place. The
    zoo's ~210 million refilled values were three float64 passes over 1.7 GB each: 4.4 -> 3.0 s
    of CPU (of which 2.1 s is the draw itself)."""
    nrows = row_stds.size
    ncols = size // nrows
    values = np.empty((nrows, ncols), dtype)
    step = max(1, _BLOCK // max(ncols, 1))
    buf = np.empty(step * ncols)
    for r0 in range(0, nrows, step):
        r1 = min(nrows, r0 + step)
        block = buf[: (r1 - r0) * ncols].reshape(r1 - r0, ncols)
        rng.standard_normal(out=block)
        block *= row_stds[r0:r1, None]
        block += row_means[r0:r1, None]
        np.clip(block, lo, hi, out=block)
        values[r0:r1] = block
    return values


def load(path: Path) -> onnx.ModelProto:
    """A zoo model ready to run: loaded and, when stripped, refilled."""
    return refill(onnx.load(str(path)))
