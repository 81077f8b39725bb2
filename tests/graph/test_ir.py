"""Graph IR core: types, use lists, text round trip, verifier, clone, topological order."""

from __future__ import annotations

import ast
import pathlib

import numpy as np
import pytest

from compiler.errors import ParseError, ShapeError, VerifyError
from compiler.graph import Module, parse_module, print_module, verify_module
from compiler.graph.types import ElemKind, TensorType, broadcast_shapes, f32
from tests.roundtrip import assert_round_trips

ROOT = pathlib.Path(__file__).resolve().parents[2]


def small_module() -> Module:
    m = Module("t")
    x = m.add_placeholder("input", f32(1, 3, 8, 8))
    out = m.add_placeholder("output", f32(1, 4, 8, 8), is_output=True)
    rng = np.random.default_rng(0)
    w = m.add_constant("w", rng.standard_normal((4, 3, 3, 3)).astype(np.float32))
    b = m.add_constant("b", np.zeros(4, np.float32))
    fn = m.create_function()
    c = fn.create("Conv", [x, w, b], {"pads": [1, 1, 1, 1]})
    r = fn.create("Relu", [c.result])
    sp = fn.create("Split", [r.result], {"axis": 1, "splits": [2, 2]})
    cc = fn.create("Concat", [sp.results[1], sp.results[0]], {"axis": 1})
    cl = fn.create("Clip", [cc.result], {"min": 0.0, "max": 6.0})
    fn.create("Save", [cl.result, out])
    return m


def test_types_text_and_sizes():
    t = TensorType.parse("f32<1x3x224x224>")
    assert t == f32(1, 3, 224, 224) and t.size_bytes == 3 * 224 * 224 * 4
    assert str(TensorType.parse("i64<>")) == "i64<>" and TensorType.parse("i64<>").numel == 1
    q = TensorType(ElemKind.I8, (4,), 0.5, -3)
    assert TensorType.parse(str(q)) == q
    assert broadcast_shapes((4, 1, 3), (5, 1)) == (4, 5, 3)
    with pytest.raises(ValueError):
        broadcast_shapes((3,), (4,))


def test_round_trip_and_verify():
    m = small_module()
    verify_module(m)
    assert_round_trips(m)
    m2 = assert_round_trips(m, with_data=True)
    np.testing.assert_array_equal(m2.constants["w"].data, m.constants["w"].data)


def test_use_lists_follow_rewrites():
    m = small_module()
    fn = m.main
    conv = fn.find("conv")
    relu = fn.find("relu")
    assert [u.name for u in conv.result.user_nodes()] == ["relu"]
    # bypass relu: its users now read conv directly
    fn.replace(relu.result, conv.result)
    fn.erase(relu)
    verify_module(m)
    assert {u.op for u in conv.result.user_nodes()} == {"Split"}
    assert [r.kind for r in fn.journal][-2:] == ["replace", "erase"]


def test_clone_is_independent():
    m = small_module()
    c = m.clone()
    assert print_module(c) == print_module(m)
    c.main.find("clip").attrs["max"] = 1.0
    assert "max = 6.0" in print_module(m)


def test_clones_share_their_weights_and_hash_them_once(monkeypatch):
    """A clone's constants hold the same read-only arrays, so their digests (printed for every
    stage snapshot) are computed once; a writable array's digest follows its bytes."""
    import hashlib

    from compiler.graph import uses

    m = small_module()
    c = m.clone()
    assert c.constants["w"].data is m.constants["w"].data
    calls = []
    real_sha1 = hashlib.sha1
    monkeypatch.setattr(uses.hashlib, "sha1", lambda b: calls.append(1) or real_sha1(b))
    assert print_module(c) == print_module(m)
    first = len(calls)
    assert first >= 1 and c.constants["w"].digest == m.constants["w"].digest
    assert len(calls) == first  # the clone's digest came from the shared array
    # the digests are the bytes' own: equal to a fresh hash of a copy
    assert m.constants["w"].digest == uses.content_digest(m.constants["w"].data.copy())
    data = np.arange(4, dtype=np.float32)  # writable: never cached
    before = uses.content_digest(data)
    data[0] = 7
    assert uses.content_digest(data) != before


def test_topological_order_is_stable_after_insertion():
    m = small_module()
    fn = m.main
    conv = fn.find("conv")
    neg = fn.create("Neg", [conv.result])  # created last, but must precede its users
    fn.find("relu").set_operand(0, neg.result)
    names = [n.name for n in fn.nodes]
    assert names.index("neg") < names.index("relu")
    verify_module(m)


def test_shape_errors_name_the_node():
    m = Module()
    x = m.add_placeholder("x", f32(2, 3))
    y = m.add_placeholder("y", f32(4, 3))
    with pytest.raises(ShapeError, match="Add 'bad'"):
        m.create_function().create("Add", [x, y], name="bad")


@pytest.mark.parametrize(
    "text, message",
    [
        (
            "module @m {\n  placeholder %x : f32<2>\n  func @main {\n    %a = Relu(%x) : f32<3>\n"
            "  }\n}\n",
            "differ from inferred",
        ),
        (
            "module @m {\n  placeholder %x : f32<2>\n  placeholder %o : f32<2> output\n"
            "  func @main {\n    %a = Relu(%x) : f32<2>\n  }\n}\n",
            "saved 0 times",
        ),
    ],
)
def test_verifier_rejects(text, message):
    with pytest.raises(VerifyError, match=message):
        verify_module(parse_module(text))


@pytest.mark.parametrize(
    "text",
    [
        "garbage",
        "module @m {\n  func @main {\n    %a = Relu(%nope) : f32<2>\n  }\n}\n",
        "module @m {\n  placeholder %x : f32<2>\n  func @main {\n    %a = Frob(%x) : f32<2>\n  }\n}\n",
        "module @m {\n  placeholder %x : f32<2>\n",
    ],
)
def test_parser_errors_have_line_numbers(text):
    with pytest.raises(ParseError, match="line"):
        parse_module(text)


def test_compiler_does_not_import_ui_packages():
    banned = {"textual", "rich", "glowviz"}
    for path in (ROOT / "compiler").rglob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            for n in names:
                assert n.split(".")[0] not in banned, f"{path} imports {n}"
