"""The ONNX node test suite (1,884 cases) through onnx's own runner, on both executors.

`onnx.backend.test.BackendTest` drives `compiler.onnx_backend` exactly as any ONNX harness does
(see harness.py): no shape-like input is frozen, no case is patched. Inputs that feed shape-like
operands (Reshape's shape, Pad's pads, ...) are specialized at run time by the backend.

Every case must pass or be refused with the project's error naming a node or input of the
model; no wrong answer, no crash. The pass counts may only go up: raise the floors when more
cases pass (the issue 12 target is 85% of the suite, after new ops and dtypes).

Within the op set (the cases whose ops all have converters, with float32/int64/int32/bool
values: a new converter brings its cases in), every case passes except those listed in
REFUSED, which must be refused with an UnsupportedError naming the node, the op and the listed
reason; a listed case that stops being refused fails too (remove it from the list).
"""

from __future__ import annotations

import functools
import warnings

import numpy as np
import onnx
import pytest

from compiler.frontend import CONVERTERS
from tests.conformance import harness

#: Passing cases per executor. Through the raw API before run-time specialization: 512.
PASS_FLOOR = {"interpreter": 725, "llvm": 715}

#: The op set under test: every ONNX op the frontend converts.
OP_SET = frozenset(CONVERTERS)
OP_SET_PASS_RATE = 0.97
_ANTIALIAS = "attribute antialias=1 is not supported"
_CROP = "coordinate_transformation_mode='tf_crop_and_resize' is not supported"
_INEXACT = "that are not exactly out/in (ambiguous)"
#: Op-set case -> the reason the compiler refuses it (a fragment of the UnsupportedError message).
REFUSED: dict[str, str] = {
    "test_convtranspose_3d": "3-D spatial input",
    "test_maxpool_with_argmax_2d_precomputed_pads": "the Indices output is not supported",
    "test_maxpool_with_argmax_2d_precomputed_strides": "the Indices output is not supported",
    "test_reduce_log_sum_exp_empty_set_expanded": "op Cast (opset 28): cast to double",
    "test_resize_downsample_scales_cubic_align_corners": _INEXACT,
    "test_resize_downsample_scales_cubic_antialias": _ANTIALIAS,
    "test_resize_downsample_scales_linear_align_corners": _INEXACT,
    "test_resize_downsample_scales_linear_antialias": _ANTIALIAS,
    "test_resize_downsample_sizes_cubic_antialias": _ANTIALIAS,
    "test_resize_downsample_sizes_linear_antialias": _ANTIALIAS,
    "test_resize_tf_crop_and_resize": _CROP,
    "test_resize_tf_crop_and_resize_axes_2_3": _CROP,
    "test_resize_tf_crop_and_resize_axes_3_2": _CROP,
    "test_resize_tf_crop_and_resize_extrapolation_value": _CROP,
    "test_quantizelinear_axis": "must be a scalar here (per-tensor)",
    "test_quantizelinear_blocked_asymmetric": "block_size=2 is not supported",
    "test_dequantizelinear_blocked": "block_size=2 is not supported",
    "test_qlinearconv": "weights with a zero point other than 0",
    "test_convinteger_with_padding": "per-channel w_zero_point",
}
_DTYPES = {
    onnx.TensorProto.FLOAT,
    onnx.TensorProto.INT64,
    onnx.TensorProto.INT32,
    onnx.TensorProto.BOOL,
}
_NP_KINDS = {np.dtype(np.float32), np.dtype(np.int64), np.dtype(np.int32), np.dtype(np.bool_)}
#: int8/uint8 values are in the op set for the quantization ops' cases (their converters read
#: them; other ops' int8 cases come with int8 arithmetic, issue 12).
_QUANT_OPS = frozenset(
    {"QuantizeLinear", "DequantizeLinear", "QLinearConv", "QLinearMatMul", "MatMulInteger"}
    | {"ConvInteger"}
)
_QUANT_DTYPES = {onnx.TensorProto.INT8, onnx.TensorProto.UINT8}
_QUANT_NP = {np.dtype(np.int8), np.dtype(np.uint8)}


def _in_op_set(case: object) -> bool:
    """Only ops of OP_SET, no subgraphs, and float32/int64/int32/bool values throughout."""
    g = case.model.graph  # type: ignore[attr-defined]
    if not g.node or any(
        n.domain not in ("", "ai.onnx") or n.op_type not in OP_SET for n in g.node
    ):
        return False
    if any(
        a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS)
        for n in g.node
        for a in n.attribute
    ):
        return False
    quant = any(n.op_type in _QUANT_OPS for n in g.node)
    dtypes = _DTYPES | _QUANT_DTYPES if quant else _DTYPES
    kinds = _NP_KINDS | _QUANT_NP if quant else _NP_KINDS
    values = list(g.input) + list(g.output)
    if not all(
        v.type.HasField("tensor_type") and v.type.tensor_type.elem_type in dtypes for v in values
    ):
        return False
    return all(
        isinstance(a, np.ndarray | np.generic if quant else np.ndarray) and a.dtype in kinds
        for ins, outs in case.data_sets  # type: ignore[attr-defined]
        for a in list(ins) + list(outs)
    )


@functools.cache
def _op_set_cases() -> dict[str, object]:
    from onnx.backend.test.case.node import collect_testcases

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return {c.name: c for c in collect_testcases(None) if _in_op_set(c)}


@pytest.mark.parametrize("executor", ["interpreter", pytest.param("llvm", marks=pytest.mark.slow)])
def test_node_suite(executor: str, tmp_path) -> None:
    results = harness.outcomes(executor, harness.NODE, tmp_path)
    print("\n" + harness.summary(executor, harness.NODE, results))
    for reason, count in harness.refusal_reasons(results, top=15):
        print(f"  {count:4}  {reason}")
    bad = harness.bad_cases(executor, results)
    assert not bad, "wrong answers or crashes:\n" + "\n".join(bad)
    passed = harness.counts(results)["pass"]
    assert len(results) > 1000, f"the runner found only {len(results)} node cases"
    assert passed >= PASS_FLOOR[executor], harness.summary(executor, harness.NODE, results)

    scoped = {
        n[: -len("_cpu")]: o for n, o in results.items() if n[: -len("_cpu")] in _op_set_cases()
    }
    unexpected = []
    for name, o in sorted(scoped.items()):
        reason = REFUSED.get(name)
        if reason is None and o.status != "pass":
            unexpected.append(f"{name}: {o.status}: {o.detail}")
        elif reason is not None and not (
            o.status.startswith("refused")
            and "Error: unsupported: node '" in o.detail
            and ", op " in o.detail
            and reason in o.detail
        ):
            unexpected.append(f"{name} is listed in REFUSED ({reason}) but {o.status}: {o.detail}")
    assert not unexpected, "op-set cases:\n" + "\n".join(unexpected)
    rate = harness.counts(scoped)["pass"] / len(scoped)
    assert rate >= OP_SET_PASS_RATE, f"op-set cases: {rate:.1%} passed"


def test_refused_list_names_real_cases() -> None:
    assert set(REFUSED) <= set(_op_set_cases())


def test_every_converted_op_has_a_case() -> None:
    covered = {n.op_type for case in _op_set_cases().values() for n in case.model.graph.node}
    assert OP_SET <= covered, f"converted ops no conformance case exercises: {OP_SET - covered}"
