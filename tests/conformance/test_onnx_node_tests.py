"""The ONNX node test suite (1,884 cases) through onnx's own runner, on both executors.

`onnx.backend.test.BackendTest` drives `compiler.onnx_backend` exactly as any ONNX harness does
(see harness.py): no shape-like input is frozen, no case is patched. Inputs that feed shape-like
operands (Reshape's shape, Pad's pads, ...) are specialized at run time by the backend.

Every case must pass or be refused with the project's error naming a node or input of the
model; no wrong answer, no crash. The pass counts may only go up: raise the floors when more
cases pass (the issue 12 target is 85% of the suite, after new ops and dtypes).

Within the op set (the cases whose ops all have converters, with values of the element types
the frontend reads: a new converter or element type brings its cases in), every case passes except those listed in
REFUSED, which must be refused with an UnsupportedError naming the node, the op and the listed
reason; a listed case that stops being refused fails too (remove it from the list).
"""

from __future__ import annotations

import functools

import numpy as np
import onnx
import pytest

from compiler.frontend import CONVERTERS
from compiler.frontend.onnx_importer import ONNX_TO_ELEM
from tests.conformance import harness

#: Passing cases per executor. Through the raw API before run-time specialization: 512.
PASS_FLOOR = {"interpreter": 1640, "llvm": 1640}

#: The op set under test: every ONNX op the frontend converts.
OP_SET = frozenset(CONVERTERS)
OP_SET_PASS_RATE = 0.97
_INEXACT = "that are not exactly out/in (ambiguous)"
_TRAINING = "training_mode = true (only inference is supported)"
#: Op-set case -> the reason the compiler refuses it (a fragment of the UnsupportedError message).
REFUSED: dict[str, str] = {
    "test_resize_downsample_scales_cubic_align_corners": _INEXACT,
    "test_resize_downsample_scales_linear_align_corners": _INEXACT,
    # Quantized convolutions whose weights have a zero point other than 0 (int8) / 128 (uint8),
    # and per-channel ConvInteger zero points: the int8 kernels take symmetric weights.
    "test_qlinearconv": "weights with a zero point other than 0",
    "test_convinteger_with_padding": "per-channel w_zero_point",
    # Random masks: nothing to compare with but the runner's own random draw.
    "test_training_dropout": _TRAINING,
    "test_training_dropout_default": _TRAINING,
    "test_training_dropout_default_mask": _TRAINING,
    "test_training_dropout_mask": _TRAINING,
    # Opset 8's Scan has a batch dim and sequence_lens; opset 9 dropped both.
    "test_scan_sum": "Scan before opset 9",
}
#: The element types the frontend reads (its table is the one source), less the narrow storage
#: kinds (bfloat16, float8, int4...): only Cast and the quantization ops take those, so their
#: cases of other ops are refusals by design (they count in the totals, not in the op set).
_DTYPES = {code for code, kind in ONNX_TO_ELEM.items() if not kind.is_narrow}
_NP_KINDS = {k.np_dtype for k in ONNX_TO_ELEM.values() if not k.is_narrow}


def _all_nodes(g: onnx.GraphProto) -> list[onnx.NodeProto]:
    """The graph's nodes and, recursively, its subgraphs' (GRAPHS attributes count as foreign:
    Loop/Scan bodies are not imported)."""
    out = []
    for n in g.node:
        out.append(n)
        for a in n.attribute:
            if a.type == onnx.AttributeProto.GRAPH:
                out.extend(_all_nodes(a.g))
            elif a.type == onnx.AttributeProto.GRAPHS:
                out.append(onnx.helper.make_node("Graphs", [], []))
    return out


def _in_op_set(case: object) -> bool:
    """Only ops of OP_SET (subgraphs included: If's branches) and element types of
    ONNX_TO_ELEM throughout."""
    g = case.model.graph  # type: ignore[attr-defined]
    if not g.node or any(
        n.domain not in ("", "ai.onnx") or n.op_type not in OP_SET for n in _all_nodes(g)
    ):
        return False
    values = list(g.input) + list(g.output)
    if not all(
        v.type.HasField("tensor_type") and v.type.tensor_type.elem_type in _DTYPES for v in values
    ):
        return False
    return all(
        isinstance(a, np.ndarray | np.generic) and a.dtype in _NP_KINDS
        for ins, outs in case.data_sets  # type: ignore[attr-defined]
        for a in list(ins) + list(outs)
    )


@functools.cache
def _op_set_cases() -> dict[str, object]:
    # The runner's own node cases (onnx's `collect_testcases(None)`: the same list).
    return {c.name: c for c in harness.node_cases() if _in_op_set(c)}


# The LLVM case compiles ~1,700 models: minutes on a quiet 2-core machine, more under load.
@pytest.mark.parametrize(
    "executor",
    [
        # 15-17 s in CI: slow too, so that it starts first and does not end the run alone
        pytest.param("interpreter", marks=pytest.mark.slow),
        pytest.param("llvm", marks=[pytest.mark.slow, pytest.mark.timeout(1800)]),
    ],
)
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


def _simple_model_ops() -> set[str]:
    """Ops of onnx's shipped `simple` model data (test_onnx_model_tests.py runs those)."""
    from pathlib import Path

    root = Path(onnx.__file__).parent / "backend" / "test" / "data" / "simple"
    return {n.op_type for f in root.glob("*/model.onnx") for n in onnx.load(f).graph.node}


def test_every_converted_op_has_a_case() -> None:
    covered = {n.op_type for case in _op_set_cases().values() for n in case.model.graph.node}
    # The sequence ops' node cases take or give sequences as graph inputs/outputs, Gradient's
    # domain is outside the op set: onnx's `simple` models exercise them (tensors in and out;
    # test_onnx_model_tests.py runs them).
    covered |= _simple_model_ops()
    assert OP_SET <= covered, f"converted ops no conformance case exercises: {OP_SET - covered}"
