"""Input shapes as the ONNX model declares them: static, symbolic, and examples for hints.

Used by the importer (which refuses symbolic dims without concrete shapes, naming every such
input with an example) and by `compiler.onnx_backend` (which specializes on a run's shapes).
"""

from __future__ import annotations

import onnx


def declared_dims(tt: onnx.TypeProto.Tensor) -> list[int | None]:
    """The declared dims, None for a symbolic one."""
    return [
        d.dim_value if d.HasField("dim_value") and d.dim_value >= 0 else None for d in tt.shape.dim
    ]


def static_shape(vi: onnx.ValueInfoProto) -> tuple[int, ...] | None:
    """The input's static shape, or None if it has no shape or a symbolic dim."""
    tt = vi.type.tensor_type
    if not tt.HasField("shape"):
        return None
    dims = declared_dims(tt)
    return None if None in dims else tuple(int(d) for d in dims if d is not None)


#: Example sizes for symbolic dims in hints, by what the dim's name says it is.
_EXAMPLE_DIMS = (
    (("batch", "bs", "n", "b"), 1),
    (("seq", "len", "token", "sentence", "position", "time", "step", "frame", "t", "s", "l"), 128),
    (("height", "width", "h", "w", "size", "img", "image"), 224),
    (("audio", "sample", "wav", "signal"), 16000),
)


def example_shape(vi: onnx.ValueInfoProto) -> tuple[int, ...]:
    """A plausible concrete shape for an input with symbolic dims (for hints, not guesses).

    Known dims are kept; a named symbolic dim is sized by its name (batch 1, sequence 128,
    height/width 224, audio samples 16000); an unnamed one by its place (the first is the
    batch, the trailing dims of a 4-D input are spatial, the last of a 2-D/3-D one a length).
    """
    tt = vi.type.tensor_type
    if not tt.HasField("shape"):
        return (1, 3, 224, 224)
    dims = list(tt.shape.dim)
    out: list[int] = []
    for i, d in enumerate(dims):
        if d.HasField("dim_value") and d.dim_value > 0:
            out.append(int(d.dim_value))
            continue
        out.append(_example_dim(d.dim_param, i, len(dims)))
    return tuple(out)


def _example_dim(name: str, index: int, rank: int) -> int:
    words = [w for w in "".join(c if c.isalnum() else " " for c in name.lower()).split() if w]
    for keys, size in _EXAMPLE_DIMS:
        if any(w == k or (len(k) > 2 and k in w) for w in words for k in keys):
            return size
    if index == 0:
        return 1
    if rank == 4:
        return 224 if index >= 2 else 3
    return 128


def format_dims(tt: onnx.TypeProto.Tensor) -> str:
    """The declared shape as text: `batchx3x224x224`, symbolic dims by name."""
    return (
        "x".join(
            str(d.dim_value) if d.HasField("dim_value") else (d.dim_param or "?")
            for d in tt.shape.dim
        )
        or "scalar"
    )


def symbolic_inputs(model: onnx.ModelProto) -> list[str]:
    """Names of the graph inputs whose shape is not fully static (symbolic or missing dims)."""
    inits = {t.name for t in model.graph.initializer}
    return [
        vi.name
        for vi in model.graph.input
        if vi.name not in inits and vi.type.HasField("tensor_type") and static_shape(vi) is None
    ]
