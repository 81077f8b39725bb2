"""The ONNX package's own node test cases as a conformance suite for the supported op set.

Each case whose model uses only ops the frontend converts (its converter table is the op set: a
new converter brings its cases in), with float32/int64/int32/bool inputs
and outputs, runs through `compiler.onnx_backend.prepare(model, executor="interpreter")`.
A case passes when every output matches (dtype kind, shape, values within the case's
rtol/atol). The cases listed in REFUSED must be refused with an UnsupportedError naming the node,
the op and the listed reason; any other refusal, a crash or a wrong answer fails, and so does a
listed case that stops being refused (remove it from the list). The aggregate test requires a
pass rate of at least 97%.

glowviz compiles static graphs: shape-like operands (Reshape's shape, Slice's starts, Pad's pads,
Resize's scales...) must be compile-time constants. The node tests feed them as graph inputs,
so inputs used only at such positions are frozen into initializers with the case's values
(when every data set gives the same value) before compiling; the remaining inputs stay inputs.
Set GLOWVIZ_CONFORMANCE_LOCAL=1 to bypass the pipeline (import_onnx + graph interpreter only).
"""

from __future__ import annotations

import functools
import os
import traceback
import warnings
from dataclasses import dataclass

import numpy as np
import onnx
import pytest

from compiler.errors import CompilerError
from compiler.frontend import CONVERTERS, import_onnx

PASS_RATE = 0.97
_ANTIALIAS = "attribute antialias=1 is not supported"
_CROP = "coordinate_transformation_mode='tf_crop_and_resize' is not supported"
_INEXACT = "that are not exactly out/in (ambiguous)"
#: Case name -> the reason the compiler refuses it (a fragment of the UnsupportedError message).
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
}
DTYPES = {
    onnx.TensorProto.FLOAT,
    onnx.TensorProto.INT64,
    onnx.TensorProto.INT32,
    onnx.TensorProto.BOOL,
}
NP_KINDS = {np.dtype(np.float32), np.dtype(np.int64), np.dtype(np.int32), np.dtype(np.bool_)}


@functools.cache
def _all_cases() -> list:
    from onnx.backend.test.case.node import collect_testcases

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return list(collect_testcases(None))


def _value_ok(vi: onnx.ValueInfoProto) -> bool:
    return vi.type.HasField("tensor_type") and vi.type.tensor_type.elem_type in DTYPES


def _arrays_ok(arrays) -> bool:
    return all(isinstance(a, np.ndarray) and a.dtype in NP_KINDS for a in arrays)


#: The op set under test: every ONNX op the frontend converts.
OP_SET = frozenset(CONVERTERS)


def _in_scope(case) -> bool:
    g = case.model.graph
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
    if not all(_value_ok(v) for v in list(g.input) + list(g.output)):
        return False
    return all(_arrays_ok(list(ins) + list(outs)) for ins, outs in case.data_sets)


@functools.cache
def _cases() -> dict[str, object]:
    return {c.name: c for c in _all_cases() if _in_scope(c)}


#: (op type, input index) positions whose value must be known at compile time.
SHAPE_LIKE = {
    "Reshape": {1},
    "Slice": {1, 2, 3, 4},
    "Pad": {1, 2, 3},
    "Resize": {1, 2, 3},
    "Upsample": {1},
    "Tile": {1},
    "Expand": {1},
    "Split": {1},
    "Clip": {1, 2},
    "Squeeze": {1},
    "Unsqueeze": {1},
    "ConstantOfShape": {0},
    "Range": {0, 1, 2},
    "Dropout": {1, 2},
    "ReduceMean": {1},
    "ReduceSum": {1},
    "ReduceMax": {1},
    "ReduceMin": {1},
    "ReduceProd": {1},
    "ReduceSumSquare": {1},
    "ReduceL1": {1},
    "ReduceL2": {1},
    "ReduceLogSum": {1},
    "ReduceLogSumExp": {1},
}


def _freeze_shape_inputs(case) -> tuple[onnx.ModelProto, list[int]]:
    """The case's model with shape-like graph inputs turned into initializers.

    Returns the new model and the indices of the graph inputs that remain inputs.
    """
    g = case.model.graph
    consumers: dict[str, list[tuple[onnx.NodeProto, int]]] = {}
    for n in g.node:
        for i, name in enumerate(n.input):
            if name:
                consumers.setdefault(name, []).append((n, i))
    graph_outputs = {o.name for o in g.output}

    @functools.cache
    def shape_only(name: str) -> bool:
        """The value only ever reaches shape-like operands (directly or through other ops)."""
        uses = consumers.get(name, [])
        if not uses or name in graph_outputs:
            return False
        return all(
            i in SHAPE_LIKE.get(n.op_type, ()) or all(o and shape_only(o) for o in n.output)
            for n, i in uses
        )

    freeze = []
    for idx, vi in enumerate(g.input):
        if shape_only(vi.name):
            values = [np.asarray(ins[idx]) for ins, _ in case.data_sets]
            if all(np.array_equal(values[0], v) for v in values[1:]):
                freeze.append(idx)
    if not freeze:
        return case.model, list(range(len(g.input)))
    model = onnx.ModelProto()
    model.CopyFrom(case.model)
    keep = [i for i in range(len(g.input)) if i not in freeze]
    inputs = list(model.graph.input)
    del model.graph.input[:]
    model.graph.input.extend(inputs[i] for i in keep)
    for i in freeze:
        arr = np.asarray(case.data_sets[0][0][i])
        model.graph.initializer.append(onnx.numpy_helper.from_array(arr, inputs[i].name))
    return model, keep


def _run_local(model: onnx.ModelProto, inputs: list[np.ndarray]) -> list[np.ndarray]:
    from compiler.backends.interpreter.graph_interpreter import run_graph

    module = import_onnx(model)
    outs = run_graph(module, inputs)
    return [outs[p.name] for p in module.outputs()]


def _run_backend(model: onnx.ModelProto, inputs: list[np.ndarray]) -> list[np.ndarray]:
    from compiler import onnx_backend

    return list(onnx_backend.prepare(model, executor="interpreter").run(inputs))


def _runner():
    return _run_local if os.environ.get("GLOWVIZ_CONFORMANCE_LOCAL") else _run_backend


@dataclass
class Outcome:
    status: str  # "pass" | "refused" | "wrong" | "crash"
    detail: str = ""


def _compare(case, expected: list[np.ndarray], got: list[np.ndarray]) -> str | None:
    if len(expected) != len(got):
        return f"{len(got)} outputs, expected {len(expected)}"
    rtol = case.rtol if case.rtol is not None else 1e-3
    atol = case.atol if case.atol is not None else 1e-7
    for i, (e, g) in enumerate(zip(expected, got)):
        g = np.asarray(g)
        if e.dtype.kind != g.dtype.kind:
            return f"output {i}: dtype {g.dtype}, expected {e.dtype}"
        if e.shape != g.shape:
            return f"output {i}: shape {g.shape}, expected {e.shape}"
        try:
            np.testing.assert_allclose(g, e, rtol=rtol, atol=atol)
        except AssertionError as err:
            return f"output {i}: values differ: {' '.join(str(err).split())[:300]}"
    return None


def _run_case(case) -> Outcome:
    run = _runner()
    model, keep = _freeze_shape_inputs(case)
    for inputs, expected in case.data_sets:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                got = run(model, [np.asarray(inputs[i]) for i in keep])
        except CompilerError as e:
            return Outcome("refused", f"{type(e).__name__}: {e}")
        except Exception:  # noqa: BLE001 - any other exception is a crash to report
            return Outcome("crash", traceback.format_exc(limit=6))
        problem = _compare(case, list(expected), got)
        if problem:
            return Outcome("wrong", problem)
    return Outcome("pass")


@functools.cache
def _outcome(name: str) -> Outcome:
    return _run_case(_cases()[name])


@pytest.mark.parametrize("name", sorted(_cases()))
def test_node_case(name: str) -> None:
    """Each case passes, or is a listed refusal: the project's UnsupportedError naming the node,
    the op and the listed reason."""
    out = _outcome(name)
    if name not in REFUSED:
        assert out.status == "pass", f"{name}: {out.status}: {out.detail}"
        return
    assert out.status == "refused", f"{name} is listed in REFUSED but {out.status}: {out.detail}"
    assert out.detail.startswith("UnsupportedError: unsupported: node '"), out.detail
    assert ", op " in out.detail and REFUSED[name] in out.detail, out.detail


def test_refused_list_names_real_cases() -> None:
    assert set(REFUSED) <= set(_cases())


def test_conformance_summary() -> None:
    names = sorted(_cases())
    outcomes = {n: _outcome(n) for n in names}
    by = {
        s: [n for n, o in outcomes.items() if o.status == s]
        for s in ("pass", "refused", "wrong", "crash")
    }
    total = len(names)
    print(
        f"\nONNX node conformance: {len(by['pass'])} passed, {len(by['refused'])} refused, "
        f"{len(by['wrong'])} wrong, {len(by['crash'])} crashed, of {total}"
    )
    for n in by["refused"]:
        print(f"  refused {n}: {outcomes[n].detail}")
    bad = [f"{n}: {outcomes[n].status}: {outcomes[n].detail}" for n in by["wrong"] + by["crash"]]
    assert not bad, "wrong answers or crashes:\n" + "\n".join(bad)
    assert total > 0
    rate = len(by["pass"]) / total
    assert rate >= PASS_RATE, f"pass rate {rate:.1%} < {PASS_RATE:.0%}; refused:\n" + "\n".join(
        f"{n}: {outcomes[n].detail}" for n in by["refused"]
    )


def test_every_converted_op_has_a_case() -> None:
    covered = {n.op_type for case in _cases().values() for n in case.model.graph.node}
    assert OP_SET <= covered, f"converted ops no conformance case exercises: {OP_SET - covered}"
