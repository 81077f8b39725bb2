"""The work queue of the fuzzing campaign: regression files, what every command must do with
them, and the failures still expected today, by bug class.

`REGRESSIONS` lists the models in tests/fuzz/regressions/ (built by `generate.py` there, or
shrunk from random graphs with `python -m tests.fuzz.shrink`). `test_regressions.py` runs each
through its commands; a (model, command) listed in `failing` is an expected failure
(xfail strict=True, so a fix shows up as XPASS and the entry must be deleted).

`KNOWN` maps failure signatures of the seeded campaign runs ("class | command | cause") to the
same bug classes; `test_campaign.py` fails on any failure that matches none.

    python -m tests.fuzz.known       # prints the queue: bug class -> regressions and commands
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

CLI = ("compile", "run-interpreter", "run-llvm", "mem", "export-dot")
ALL = (*CLI, "check")

#: Bug classes still open, what they are and where the fix belongs (issue 11 items).
BUGS: dict[str, str] = {}


@dataclass(frozen=True)
class Regression:
    name: str  # tests/fuzz/regressions/<name>.onnx (and <name>.inputs.npz for `check`)
    expect: str  # "refusal" | "ok" | "no-crash" (ok or refusal) for every command listed
    commands: tuple[str, ...] = CLI
    match: str = ""  # a regex every refusal line must contain
    failing: dict[str, str] = field(default_factory=dict)  # command -> bug class (xfail)
    timeout: float = 20.0
    note: str = ""


_OOM = r"above the memory limit of 8\.0 GiB"

REGRESSIONS: list[Regression] = [
    # import validation: what the ONNX checker lets through
    Regression(
        "raw_data_short",
        "refusal",
        match=r"invalid model: .*initializer 'b': raw_data holds 60 bytes",
    ),
    Regression(
        "raw_data_long",
        "refusal",
        match=r"raw_data holds 72 bytes, but shape \[4, 4\] float needs 64",
    ),
    Regression("float_data_count", "refusal", match=r"float_data holds 17 values"),
    Regression("scalar_for_matrix", "refusal", match=r"Gemm.*2-D"),
    Regression("bool_initializer", "refusal", match=r"node 'conv'.*is bool; Conv takes"),
    Regression("external_data_outside", "refusal", match=r"outside the model's folder"),
    Regression("external_data_dev_zero", "refusal", match=r"'/dev/zero' is outside"),
    Regression("conv_dilation_0", "refusal", match=r"node 'conv'.*dilations=\[0, 0\]"),
    Regression("conv_stride_0", "refusal", match=r"node 'conv'.*strides=\[0, 1\]"),
    Regression("conv_group_not_dividing", "refusal", match=r"group=3 does not divide"),
    Regression("softmax_axis_out_of_range", "refusal", match=r"axis=5 is out of range"),
    Regression("input_dim_0", "ok", ALL, note="empty tensors are legal; the allocator hung"),
    Regression("input_dim_int64_max", "refusal", match=r"dim 1 is 9223372036854775807"),
    Regression("input_dim_1e12", "refusal", match=r"dim 0 is 1000000000000"),
    Regression("gather_index_out_of_range", "refusal", match=r"Gather.*out of range"),
    # resource limits: one line, nothing allocated
    Regression("constant_of_shape_huge", "refusal", match=_OOM),
    Regression("tile_huge", "refusal", match=_OOM),
    Regression("expand_huge", "refusal", match=_OOM),
    Regression("pad_2_31", "refusal", match=_OOM),
    Regression("resize_huge", "refusal", match=_OOM),
    Regression("range_huge", "refusal", match=r"Range.*constant-folding limit"),
    # the lower-bound allocator's endless loop on a zero-size buffer
    Regression("zero_size_intermediate", "ok", ALL),
    # graph size: compile in a few seconds
    Regression("chain_3000", "ok", ("compile",), timeout=15),
    Regression("fanout_2000", "ok", ("compile",), timeout=15),
    # integer semantics: never a signal
    Regression("int_div_by_const_zero", "refusal", match=r"node 'Div_2'.*integer division by zero"),
    Regression("int_div_by_runtime_zero", "no-crash", match=r"error: integer division by zero$"),
    Regression("int_min_div_minus_one", "no-crash", match=r"error: integer division by zero$"),
    # NaN and Inf propagate as in onnxruntime
    Regression("nan_weight_conv_relu", "ok", ALL),
    Regression("batchnorm_negative_variance", "ok", ALL),
    Regression("batchnorm_nan_epsilon", "ok", ALL),
    Regression("clip_nan_bound", "ok", ALL),
    Regression("log_of_negative", "ok", ALL),
    Regression("max_with_nan", "ok", ALL),
    # wrong answers on valid graphs
    Regression("conv_tiny_spatial_stride2", "ok", ALL),
    Regression(
        "graph_conv1d_same_lower_stride2",
        "ok",
        ALL,
        note="random graph 1000084 shrunk: a 12-node prefix ending in a 1-D Conv, kernel 5, "
        "stride 2, SAME_LOWER on a length-1 input",
    ),
    Regression(
        "graph_conv1d_k3_s2_same_upper",
        "ok",
        ALL,
        note="random graph 7000054 shrunk to one 1-D Conv: kernel 3, stride 2, SAME_UPPER, "
        "length-1 input, 4 -> 8 channels",
    ),
    Regression(
        "graph_conv1d_group2_stride3",
        "ok",
        ALL,
        note="random graph 5000049 shrunk to one grouped 1-D Conv: kernel 3, stride 3, "
        "SAME_UPPER, length-1 input; two runs differ",
    ),
    Regression(
        "graph_conv3x3_on_1x1_nondeterministic",
        "ok",
        ALL,
        note="random graph 2026006218 shrunk to 6 nodes: a 3x3 Conv, strides [1, 3], SAME_UPPER "
        "on a 1x1 input; two runs of the same program differ",
    ),
    Regression(
        "graph_layernorm_near_constant",
        "ok",
        ALL,
        note="random graph 7000486 shrunk: LayerNormalization of nearly-equal values (float32 "
        "x - mean cancelled in the interpreter before LayerNorm kept its double kernel)",
    ),
    Regression(
        "graph_instancenorm_constant_rows",
        "ok",
        ALL,
        note="random graph 7000145 shrunk: InstanceNormalization then GlobalAveragePool "
        "(float32 x - mean cancelled; InstanceNorm is LayerNorm from axis 2 now, in double)",
    ),
]


@dataclass(frozen=True)
class Known:
    bug: str  # a key of BUGS
    pattern: str  # a regex over the signature "class | command | cause"


KNOWN: list[Known] = []


def known_signature(signature: str) -> Known | None:
    for k in KNOWN:
        if re.search(k.pattern, signature):
            return k
    return None


def expected_failures() -> list[tuple[str, str, str]]:
    """(bug class, regression, command) of every expected failure: the work queue."""
    return sorted((bug, r.name, cmd) for r in REGRESSIONS for cmd, bug in r.failing.items())


def main() -> None:
    by_bug: dict[str, list[str]] = {}
    for bug, name, cmd in expected_failures():
        by_bug.setdefault(bug, []).append(f"{name} ({cmd})")
    for bug, text in BUGS.items():
        print(f"{bug}: {text}")
        for it in by_bug.get(bug, ["(no regression file: seen as a campaign signature)"]):
            print(f"    {it}")


if __name__ == "__main__":
    main()
