"""Loading ONNX models from files, bytes or protos, with one clear ModelLoadError on bad input.

The first stage of the pipeline: everything after it may assume a parsed, checked ModelProto.
"""

from __future__ import annotations

import os
from pathlib import Path

import onnx
from google.protobuf.message import DecodeError
from onnx import numpy_helper, shape_inference

from compiler.errors import ModelLoadError, UnsupportedError

ModelSource = onnx.ModelProto | str | os.PathLike | bytes | bytearray


def load_model(source: ModelSource, *, check: bool = True) -> onnx.ModelProto:
    """Return the ModelProto for a path, raw bytes or an existing proto.

    Raises ModelLoadError naming the file and the problem: missing, a directory, empty,
    unreadable, not ONNX, truncated, or a model without a graph/opset. `check=False` skips
    the ONNX checker (the caller runs `check_model` itself, after its own checks).
    """
    return read_model(source, check=check)[0]


def read_model(source: ModelSource, *, check: bool = True) -> tuple[onnx.ModelProto, bytes | None]:
    """`load_model`, and the bytes the proto was parsed from when they are the whole model
    (None for a proto passed in, or when weights came from external files): `check_model`
    hands those to the ONNX checker instead of serializing the proto again, which took 1.4-2
    of a 340 MiB BERT's 2.5 s import."""
    if isinstance(source, onnx.ModelProto):
        check_model(source, "<ModelProto>", checker=check)
        return source, None
    if isinstance(source, bytes | bytearray | memoryview):
        data, where = bytes(source), "<bytes>"
    elif isinstance(source, str | os.PathLike):
        path = Path(source)
        where = str(path)
        if not path.exists():
            raise ModelLoadError(f"model file '{where}' does not exist")
        if path.is_dir():
            raise ModelLoadError(f"model path '{where}' is a directory, not an ONNX file")
        if path.is_char_device() or path.is_block_device() or path.is_socket():
            # /dev/zero, /dev/urandom: reading "the file" would never end
            raise ModelLoadError(f"model path '{where}' is a device, not an ONNX file")
        data = _read_capped(path, where)
    else:
        raise ModelLoadError(
            f"cannot load a model from a {type(source).__name__}; "
            "pass a path, bytes or an onnx.ModelProto"
        )
    if not data:
        raise ModelLoadError(f"model file '{where}' is empty")
    model = onnx.ModelProto()
    try:
        model.ParseFromString(data)
    except (DecodeError, ValueError, RuntimeError) as e:
        raise ModelLoadError(
            f"model file '{where}' is not a valid ONNX model (truncated or not ONNX: {_short(e)})"
        ) from None
    # External weights first: the ONNX checker resolves their files against the working
    # directory when it is given a proto, so it only sees them right once they are loaded.
    raw: bytes | None = data
    if _load_external(model, where, source):
        raw = None  # the file's bytes lack the weights now in the proto
    check_model(model, where, checker=check, data=raw)
    return model, raw


#: Protobuf cannot parse a message of 2 GiB or more: an ONNX file that big keeps its weights
#: in external data files.
MAX_MODEL_BYTES = 2**31 - 1


def _read_capped(path: Path, where: str) -> bytes:
    """The file's bytes, refusing (without reading it all) one larger than protobuf's limit;
    a pipe is read up to that limit too."""
    try:
        with path.open("rb") as f:
            data = f.read(MAX_MODEL_BYTES + 1)
    except OSError as e:
        raise ModelLoadError(f"cannot read model file '{where}': {e.strerror or e}") from None
    except MemoryError:
        raise ModelLoadError(f"model file '{where}' does not fit in memory") from None
    if len(data) > MAX_MODEL_BYTES:
        raise ModelLoadError(
            f"model file '{where}' is larger than 2 GiB, the most a protobuf message can hold",
            hint="an ONNX model that big keeps its weights in external data files",
        )
    return data


def check_model(
    model: onnx.ModelProto, where: str, *, checker: bool = True, data: bytes | None = None
) -> None:
    """Raise ModelLoadError unless `model` looks like a model (and passes the ONNX checker).
    `data`: the bytes `model` was parsed from (`read_model`), which the checker reads as they
    are instead of serializing `model` again."""
    if not model.HasField("graph") or (not model.graph.node and not model.graph.output):
        raise ModelLoadError(f"model file '{where}' is not an ONNX model: it has no graph")
    if not model.opset_import and model.ir_version == 0:
        raise ModelLoadError(f"model file '{where}' is not an ONNX model: no IR version or opset")
    if not model.opset_import:
        raise ModelLoadError(
            f"model file '{where}' has no opset_import; cannot tell its ONNX version"
        )
    if not checker:
        return
    try:
        # Light check: structure only (full_check would also run shape inference).
        onnx.checker.check_model(model if data is None else data, full_check=False)
    except onnx.checker.ValidationError as e:
        raise ModelLoadError(f"model file '{where}' failed the ONNX checker: {_short(e)}") from None
    except Exception as e:  # noqa: BLE001 - the checker raises assorted errors on garbage
        raise ModelLoadError(f"model file '{where}' failed the ONNX checker: {_short(e)}") from None


def _load_external(model: onnx.ModelProto, where: str, source: ModelSource) -> bool:
    """Read the weights `model` keeps in external files into it; whether it had any."""
    ext = [t for t in model.graph.initializer if t.data_location == onnx.TensorProto.EXTERNAL]
    if not ext:
        return False
    if not isinstance(source, str | os.PathLike):
        raise ModelLoadError(f"model '{where}' stores weights in external files; load it by path")
    from compiler.frontend.validate import check_external_data

    check_external_data(model, Path(source).resolve().parent, model_name=where)
    try:
        from onnx.external_data_helper import load_external_data_for_model

        load_external_data_for_model(model, str(Path(source).resolve().parent))
    except Exception as e:  # noqa: BLE001
        raise ModelLoadError(
            f"model '{where}': cannot read its external weights: {_short(e)}"
        ) from None
    return True


def _short(e: BaseException) -> str:
    text = " ".join(str(e).split())
    return (text[:200] + "...") if len(text) > 200 else (text or type(e).__name__)


def default_opset(model: onnx.ModelProto) -> int | None:
    """The model's default-domain ONNX opset version, or None if it imports none."""
    version = None
    for imp in model.opset_import:
        if imp.domain in ("", "ai.onnx"):
            version = imp.version
    return version


def upgrade_opset(
    model: onnx.ModelProto, min_opset: int, where: str | None = None
) -> tuple[onnx.ModelProto, str | None]:
    """`model` itself if its opset is at least `min_opset`, else its upgrade to `min_opset`.

    Returns the model and a note saying what was done (None when nothing was). The upgrade is
    onnx's own version converter; when it fails the UnsupportedError says so and why.
    """
    version = default_opset(model)
    if version is None or version >= min_opset:
        return model, None
    from onnx import version_converter

    try:
        upgraded = version_converter.convert_version(model, min_opset)
    except Exception as e:  # noqa: BLE001 - the converter raises assorted errors
        raise UnsupportedError(
            f"ONNX opset {version} is older than the oldest supported ({min_opset}) and "
            f"onnx.version_converter could not upgrade it: {_short(e)}",
            opset=version,
            model=where,
        ) from None
    note = f"upgraded from ONNX opset {version} to {min_opset} by onnx.version_converter"
    if version < 7 <= min_opset and _per_channel_prelu_slopes(upgraded):
        note += " (PRelu slopes made per-channel as before opset 7)"
    return upgraded, note


def _per_channel_prelu_slopes(model: onnx.ModelProto) -> bool:
    """Give old PRelu nodes' 1-D slopes the shape opset 7 broadcasting needs; True if any.

    Before opset 7 a slope of C values applies per channel (axis 1); from opset 7 it
    broadcasts numpy-style from the right. The version converter leaves the node as it was, so
    a constant slope [C] on an input of rank r > 2 gets a copy shaped [C, 1, ..., 1].
    """
    inits = {t.name: t for t in model.graph.initializer}
    prelus = [
        n
        for n in model.graph.node
        if n.op_type == "PRelu" and n.domain in ("", "ai.onnx") and len(n.input) > 1
    ]
    slopes = [
        (n, t)
        for n in prelus
        if (t := inits.get(n.input[1])) is not None and len(t.dims) == 1 and t.dims[0] > 1
    ]
    if not slopes:
        return False
    try:
        inferred = shape_inference.infer_shapes(model)
    except Exception:  # noqa: BLE001 - without ranks nothing can be said; leave it as it is
        return False
    ranks = {
        vi.name: len(vi.type.tensor_type.shape.dim)
        for vi in [*inferred.graph.input, *inferred.graph.value_info]
        if vi.type.tensor_type.HasField("shape")
    }
    changed = False
    for node, slope in slopes:
        rank = ranks.get(node.input[0], 0)
        if rank <= 2:
            continue
        arr = numpy_helper.to_array(slope).reshape([-1] + [1] * (rank - 2))
        name = f"{slope.name}.per_channel_{rank}d"
        if name not in inits:
            inits[name] = numpy_helper.from_array(arr, name)
            model.graph.initializer.append(inits[name])
            if model.ir_version < 4:  # initializers must also be graph inputs then
                model.graph.input.append(
                    onnx.helper.make_tensor_value_info(name, slope.data_type, arr.shape)
                )
        node.input[1] = name
        changed = True
    return changed
