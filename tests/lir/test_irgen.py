"""IRGen: the special forms (Save, Reshape, Concat, Slice, Split), deallocs after the last use,
provenance, the order argument, and the generic table path for every single-result graph op."""

from __future__ import annotations

import numpy as np
import pytest

from compiler.errors import CompilerError
from compiler.graph.ir import Module
from compiler.graph.ops import all_ops
from compiler.graph.types import ElemKind, TensorType, f32
from compiler.lir import parse_lir, print_lir, verify_lir
from compiler.lir.irgen import irgen
from tests.filecheck import check


def _module(shape=(1, 4, 6, 6)):
    m = Module("t")
    fn = m.create_function("main")
    x = m.add_placeholder("x", f32(*shape))
    return m, fn, x


def _lir_text(m: Module, order=None) -> str:
    lir = irgen(m, order)
    verify_lir(lir)
    text = print_lir(lir)
    assert print_lir(parse_lir(text)) == text
    return text


def test_concat_becomes_alloc_and_inserts() -> None:
    m, fn, x = _module((2, 3))
    out = m.add_placeholder("out", f32(2, 10), is_output=True)
    e = fn.create("Exp", [x], name="e")
    y = m.add_constant("y", np.ones((2, 1), np.float32))
    cat = fn.create("Concat", [x, e.result, x, y], {"axis": -1}, name="cat")
    fn.create("Save", [cat.result, out])
    check(
        _lir_text(m),
        """
    CHECK: %cat_res = allocactivation : f32<2x10>
    CHECK: %cat.insert0 = inserttensor @inout %cat_res, @in %x {offsets = [0, 0], count = 1, axis = 1}
    CHECK: %cat.insert1 = inserttensor @inout %cat_res, @in %e_res {offsets = [0, 3], count = 1, axis = 1}
    CHECK-NEXT: %e_res.dealloc = deallocactivation @out %e_res
    CHECK: %cat.insert2 = inserttensor @inout %cat_res, @in %x {offsets = [0, 6], count = 1, axis = 1}
    CHECK: %cat.insert3 = inserttensor @inout %cat_res, @in %y {offsets = [0, 9], count = 1, axis = 1}
    CHECK: %save = copy @out %out, @in %cat_res
    CHECK-NEXT: %cat_res.dealloc = deallocactivation @out %cat_res
    """,
    )


def test_reshape_is_a_view_and_extends_the_source_lifetime() -> None:
    m, fn, x = _module((2, 6))
    out = m.add_placeholder("out", f32(3, 4), is_output=True)
    r = fn.create("Relu", [x], name="r")
    v = fn.create("Reshape", [r.result], {"shape": (3, 4)}, name="v")
    t = fn.create("Tanh", [v.result], name="t")
    fn.create("Save", [t.result, out])
    text = _lir_text(m)
    check(
        text,
        """
    CHECK: 0 %r_res = allocactivation : f32<2x6>
    CHECK: 2 %v = tensorview @in %r_res {offsets = [0, 0]} : f32<3x4>
    CHECK: 4 %t = tanh @out %t_res, @in %v
    CHECK-NEXT: 5 %r_res.dealloc = deallocactivation @out %r_res
    """,
    )
    assert "reshape" not in text


def test_slice_unit_steps_is_extracttensor_else_generic() -> None:
    m, fn, x = _module((4, 6))
    o1 = m.add_placeholder("o1", f32(2, 3), is_output=True)
    o2 = m.add_placeholder("o2", f32(2, 3), is_output=True)
    s1 = fn.create("Slice", [x], {"starts": (1, 2), "ends": (3, 5), "steps": (1, 1)}, name="s1")
    s2 = fn.create("Slice", [x], {"starts": (0, 0), "ends": (4, 6), "steps": (2, 2)}, name="s2")
    fn.create("Save", [s1.result, o1])
    fn.create("Save", [s2.result, o2])
    check(
        _lir_text(m),
        """
    CHECK: %s1 = extracttensor @out %s1_res, @in %x {offsets = [1, 2]}
    CHECK: %s2 = slice @out %s2_res, @in %x {starts = [0, 0], ends = [4, 6], steps = [2, 2]}
    """,
    )


def test_split_is_one_extract_per_result() -> None:
    m, fn, x = _module((2, 6))
    outs = [m.add_placeholder(f"o{i}", f32(2, n), is_output=True) for i, n in enumerate((1, 2, 3))]
    sp = fn.create("Split", [x], {"axis": 1, "splits": (1, 2, 3)}, name="sp")
    for r, o in zip(sp.results, outs):
        fn.create("Save", [r, o])
    check(
        _lir_text(m),
        """
    CHECK: %sp_0_res = allocactivation : f32<2x1>
    CHECK: %sp.extract0 = extracttensor @out %sp_0_res, @in %x {offsets = [0, 0]}
    CHECK: %sp.extract1 = extracttensor @out %sp_1_res, @in %x {offsets = [0, 1]}
    CHECK: %sp.extract2 = extracttensor @out %sp_2_res, @in %x {offsets = [0, 3]}
    """,
    )


def test_save_copies_into_the_output_weight_and_provenance() -> None:
    m, fn, x = _module((3,))
    out = m.add_placeholder("out", f32(3), is_output=True)
    n = fn.create("Neg", [x], name="n")
    fn.create("Save", [n.result, out], name="save_out")
    lir = irgen(m)
    kinds = [(i.kind, i.meta.get("node")) for i in lir.code]
    assert kinds == [
        ("allocactivation", "n"),
        ("neg", "n"),
        ("copy", "save_out"),
        ("deallocactivation", "n"),
    ]
    assert lir.weights["out"].is_output and lir.weights["x"].is_input
    copy = lir.code[2]
    assert copy.operand(0) is lir.weights["out"] and copy.mode(0) == "out"


def test_constants_are_shared_not_copied() -> None:
    m, fn, x = _module((2, 2))
    out = m.add_placeholder("out", f32(2, 2), is_output=True)
    c = m.add_constant("c", np.arange(4, dtype=np.float32).reshape(2, 2))
    m.add_constant("unused", np.zeros(3, np.float32))
    a = fn.create("Add", [x, c], name="a")
    fn.create("Save", [a.result, out])
    lir = irgen(m)
    assert lir.weights["c"].data is c.data
    assert "unused" not in lir.weights
    assert lir.weights["c"].digest == c.digest


def test_order_is_respected_and_checked() -> None:
    m, fn, x = _module((2,))
    o1 = m.add_placeholder("o1", f32(2), is_output=True)
    o2 = m.add_placeholder("o2", f32(2), is_output=True)
    a = fn.create("Exp", [x], name="a")
    b = fn.create("Log", [x], name="b")
    s1 = fn.create("Save", [a.result, o1], name="s1")
    s2 = fn.create("Save", [b.result, o2], name="s2")
    lir = irgen(m, [b, s2, a, s1])
    assert [i.name for i in lir.code if i.kind in ("exp", "log", "copy")] == ["b", "s2", "a", "s1"]
    verify_lir(lir)
    with pytest.raises(CompilerError, match="not topological"):
        irgen(m, [s1, a, b, s2])
    with pytest.raises(CompilerError, match="exactly the nodes"):
        irgen(m, [a, s1])


def test_dealloc_right_after_last_use() -> None:
    m, fn, x = _module((4,))
    out = m.add_placeholder("out", f32(4), is_output=True)
    a = fn.create("Exp", [x], name="a")
    b = fn.create("Relu", [a.result], name="b")
    c = fn.create("Add", [a.result, b.result], name="c")
    d = fn.create("Neg", [c.result], name="d")
    fn.create("Save", [d.result, out], name="s")
    lir = irgen(m)
    names = [i.name for i in lir.code]
    assert names.index("a_res.dealloc") == names.index("c") + 1
    assert names.index("b_res.dealloc") == names.index("c") + 2
    assert names.index("c_res.dealloc") == names.index("d") + 1
    assert names[-1] == "d_res.dealloc"


def _operand_types(op: str) -> tuple[list[TensorType], dict] | None:
    """Operand types and attrs that make a valid node of `op`, for the generic table test."""
    opdef = all_ops()[op]
    t = f32(1, 4, 6, 6)
    if "unary" in opdef.traits:
        if op == "Not":
            return [t.with_elem(ElemKind.BOOL)], {}
        return [t], {}
    if "binary" in opdef.traits:
        if op in ("And", "Or"):
            b = t.with_elem(ElemKind.BOOL)
            return [b, b], {}
        return [t, f32(6)], {}
    table = {
        "Where": ([t.with_elem(ElemKind.BOOL), t, t], {}),
        "Cast": ([t], {"to": "i32"}),
        "Conv": ([t, f32(8, 4, 3, 3), f32(8)], {"pads": (1, 1, 1, 1)}),
        "ConvTranspose": ([t, f32(4, 2, 2, 2), f32(2)], {"strides": (2, 2)}),
        "BatchNorm": ([t, f32(4), f32(4), f32(4), f32(4)], {}),
        "LayerNorm": ([t, f32(6), f32(6)], {}),
        "LRN": ([t], {"size": 3}),
        "MaxPool": ([t], {"kernel": (2, 2), "strides": (2, 2)}),
        "AvgPool": ([t], {"kernel": (3, 3), "pads": (1, 1, 1, 1)}),
        "GlobalAvgPool": ([t], {}),
        "GlobalMaxPool": ([t], {}),
        "Pad": ([t], {"pads": (0, 0, 1, 1, 0, 0, 1, 1)}),
        "Resize": ([t], {"out_shape": (1, 4, 12, 12)}),
        "Concat": ([t, t], {"axis": 1}),
        "Slice": ([t], {"starts": (0, 0, 0, 0), "ends": (1, 4, 6, 6), "steps": (1, 2, 1, 3)}),
        "Reshape": ([t], {"shape": (4, 36)}),
        "Transpose": ([t], {"perm": (0, 2, 3, 1)}),
        "Broadcast": ([f32(1, 1, 6)], {"shape": (2, 3, 6)}),
        "Tile": ([t], {"repeats": (1, 1, 2, 1)}),
        "Gather": ([t, TensorType(ElemKind.I64, (3,))], {"axis": 1}),
        "MatMul": ([f32(2, 3, 4), f32(4, 5)], {}),
        "FullyConnected": ([f32(2, 4), f32(4, 5), f32(5)], {}),
        "Softmax": ([t], {"axis": 1}),
        "LogSoftmax": ([t], {}),
        "ArgMax": ([t], {"axis": 1}),
        "ArgMin": ([t], {"axis": 2, "keepdims": 0}),
        **_quantized_operand_types(t),
        "Trilu": ([t], {"k": 1}),
        "IsNaN": ([t], {}),
        "BitCast": ([t], {"to": "i32"}),
        "IsInf": ([t], {"detect_negative": 0}),
        "CumSum": ([t], {"axis": 2, "reverse": 1}),
        "CumProd": ([t], {"axis": 1, "exclusive": 1}),
        "GatherElements": ([t, t.with_elem(ElemKind.I64)], {"axis": 3}),
        "GatherND": ([t, TensorType(ElemKind.I64, (1, 2, 2))], {"batch_dims": 1}),
        "ScatterND": ([t, TensorType(ElemKind.I64, (3, 2)), f32(3, 6, 6)], {"reduction": "add"}),
        "ScatterElements": ([t, t.with_elem(ElemKind.I32), t], {"axis": 1}),
        "ArgTopK": ([t], {"k": 2, "axis": 3}),
        "MaxPoolArgmax": ([t], {"kernel": (2, 2), "strides": (2, 2), "storage_order": 1}),
        "Einsum": ([f32(2, 3, 4), f32(2, 4, 5)], {"equation": "bij,bjk->bik"}),
        "GroupNorm": ([t, f32(4), f32(4)], {"num_groups": 2}),
        "RMSNorm": ([t, f32(6)], {}),
    }
    if op.startswith("Reduce"):
        return [t], {"axes": (2, 3)}
    return table.get(op)


def _quantized_operand_types(t: TensorType) -> dict[str, tuple[list[TensorType], dict]]:
    """The quantized ops (compiler/graph/ops_quant.py): int8 operands with scale and offset."""
    q = TensorType(ElemKind.I8, t.shape, 0.1, 3)
    i8, i32 = ElemKind.I8, ElemKind.I32
    out = {"scale": 0.2, "offset": -1}
    return {
        "Quantize": ([t], out),
        "Dequantize": ([q], {}),
        "DequantizeAxis": (
            [TensorType(i8, (8, 4)), f32(8), TensorType(i32, (8,))],
            {"axis": 0},
        ),
        "ImportQuantized": ([t.with_elem(ElemKind.U8)], out),
        "ExportQuantized": ([q], {"to": "u8"}),
        "RescaleQuantized": ([q], {**out, "qmin": -1}),
        "QLookup": ([q, TensorType(i8, (256,))], out),
        "QSoftmax": ([q, TensorType(i32, (256,))], {"axis": 1, **out}),
        "QConv": (
            [q, TensorType(i8, (8, 4, 3, 3)), TensorType(i32, (8,)), f32(8)],
            {"pads": (1, 1, 1, 1), **out},
        ),
        "QFullyConnected": (
            [TensorType(i8, (2, 4), 0.1, 0), TensorType(i8, (4, 5)), TensorType(i32, (5,)), f32(5)],
            out,
        ),
        "QMatMul": ([TensorType(i8, (2, 3, 4), 0.1, 0), TensorType(i8, (4, 5), 0.3, 2)], out),
        "IntMatMul": ([TensorType(i8, (2, 3, 4), 1.0, 0), TensorType(i8, (4, 5), 1.0, 2)], {}),
        "IntConv": ([q, TensorType(i8, (8, 4, 3, 3), 1.0, 0)], {"pads": (1, 1, 1, 1)}),
        "QAdd": ([q, TensorType(i8, (6,), 0.05, 0)], out),
        "QMul": ([q, TensorType(i8, (6,), 0.05, 0)], out),
        "QAvgPool": ([q], {"kernel": (3, 3), "pads": (1, 1, 1, 1), **out}),
        "QGlobalAvgPool": ([q], out),
    }


GENERIC_OPS = sorted(op for op in all_ops() if op not in ("Save", "Split"))


@pytest.mark.parametrize("op", GENERIC_OPS)
def test_every_graph_op_goes_through_irgen(op: str) -> None:
    spec = _operand_types(op)
    if spec is None:
        pytest.fail(f"no operand spec for {op}: add one to _operand_types")
    types, attrs = spec
    m = Module("t")
    fn = m.create_function("main")
    ins = [m.add_placeholder(f"in{i}", t) for i, t in enumerate(types)]
    node = fn.create(op, ins, attrs, name="n")
    out = m.add_placeholder("out", node.result.type, is_output=True)
    fn.create("Save", [node.result, out], name="s")
    lir = irgen(m)
    verify_lir(lir)
    text = print_lir(lir)
    assert print_lir(parse_lir(text)) == text
    producers = [i for i in lir.code if i.meta.get("node") == "n" and i.kind != "deallocactivation"]
    assert producers, text
