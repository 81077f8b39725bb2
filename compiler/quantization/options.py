"""What `CompileOptions.quantize` takes: a profile (path or object) and how to use it."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from compiler.quantization.params import check_calibration, check_schema
from compiler.quantization.profile import Profile

#: The arithmetic ops with an int8 kernel (the fallback search's compute nodes add Softmax).
ARITHMETIC_OPS = frozenset(
    {"Conv", "FullyConnected", "MatMul", "Add", "Mul", "AvgPool", "GlobalAvgPool", "ReduceMean"}
)

#: The float ops the quantizer rewrites by default ("everything the schema allows").
DEFAULT_OPS = ARITHMETIC_OPS | frozenset(
    {
        "MaxPool",
        "GlobalMaxPool",
        "Concat",
        "Relu",
        "Clip",
        "Softmax",
        # Element-wise functions of one value: a QLookup table (quantizer.lookup_ops).
        "Tanh",
        "Sigmoid",
        "Erf",
        "Exp",
        "Log",
        "Sqrt",
        "Neg",
        "Abs",
        "HardSigmoid",
        "HardSwish",
        "Gelu",
        "Elu",
        "Selu",
        "LeakyRelu",
        "Softplus",
        "Div",
        "Sub",
        "Pow",
        # Data movement: run on int8 when their input already is quantized.
        "Reshape",
        "Transpose",
        "Slice",
        "Split",
        "Pad",
        "Broadcast",
    }
)


#: Weight rounding methods (`QuantizeOptions.weight_rounding`).
WEIGHT_ROUNDINGS = ("nearest", "gptq")

_LOADED: dict[tuple[Any, ...], Profile] = {}


@dataclass(frozen=True)
class QuantizeOptions:
    """How to quantize: the profile, the schema and calibration of activations, per-channel
    weights, and the nodes to keep in float (by name at the quantization point)."""

    profile: Profile | str | Path
    schema: str = "asymmetric"
    calibration: str = "mse"
    percentile: float = 99.99
    per_channel: bool = True
    keep_float: frozenset[str] = frozenset()
    ops: frozenset[str] = DEFAULT_OPS
    #: Shift the int32 biases of Conv / FullyConnected by the mean error that quantizing
    #: their weights and input makes on the profiled channel means (params.clip_bias,
    #: Quantizer.bias_correction).
    bias_correction: bool = True
    #: Per tensor (value name) calibration overrides, e.g. {"conv_3": "kl"}.
    tensor_calibration: dict[str, str] = field(default_factory=dict)
    #: How int8 weights are rounded on their per-channel grid: "nearest", or "gptq" (each
    #: layer's columns in turn, the rounding error spread over the columns not yet rounded
    #: through the inverse of the layer's input Hessian from the profile;
    #: compiler/quantization/gptq.py). The grid, and so the kernels, are the same.
    weight_rounding: str = "nearest"
    #: A Concat whose smallest input would span fewer than this many steps of the output's
    #: int8 grid (its inputs' ranges differ ~256 / N times: a ViT's class token beside the
    #: patch embeddings) stays float, with the element-wise ops by a constant that carry the
    #: small slice on and the nodes reading such a value (quantizer.mixed_range_values).
    #: 0 quantizes them anyway.
    min_slice_steps: int = 16

    def __post_init__(self) -> None:
        if self.weight_rounding not in WEIGHT_ROUNDINGS:
            raise ValueError(
                f"unknown weight rounding {self.weight_rounding!r} "
                f"(one of: {', '.join(WEIGHT_ROUNDINGS)})"
            )
        if self.min_slice_steps < 0:
            raise ValueError(f"min_slice_steps must be >= 0, not {self.min_slice_steps}")
        check_schema(self.schema)
        check_calibration(self.calibration)
        for method in self.tensor_calibration.values():
            check_calibration(method)
        object.__setattr__(self, "keep_float", frozenset(self.keep_float))
        object.__setattr__(self, "ops", frozenset(self.ops))

    def load_profile(self) -> Profile:
        """The profile; one read from a file is shared by later compiles in this process
        while the file is unchanged (GPTQ's rounded weights are memoised on it)."""
        if isinstance(self.profile, Profile):
            return self.profile
        path = Path(self.profile)
        try:
            st = path.stat()
            key: tuple[Any, ...] | None = (str(path.resolve()), st.st_mtime_ns, st.st_size)
        except OSError:
            key = None  # Profile.load names the problem
        if key is not None and key in _LOADED:
            return _LOADED[key]
        profile = Profile.load(path)
        if key is not None:
            _LOADED.clear()  # one profile at a time: they can hold large Hessians
            _LOADED[key] = profile
        return profile

    def with_keep_float(self, names: Any) -> QuantizeOptions:
        from dataclasses import replace

        return replace(self, keep_float=frozenset(names))


def as_quantize_options(value: QuantizeOptions | Profile | str | Path) -> QuantizeOptions:
    """`CompileOptions.quantize` accepts a profile path or object too (default options)."""
    if isinstance(value, QuantizeOptions):
        return value
    return QuantizeOptions(profile=value)


__all__ = [
    "ARITHMETIC_OPS",
    "DEFAULT_OPS",
    "WEIGHT_ROUNDINGS",
    "QuantizeOptions",
    "as_quantize_options",
]
