"""Low-level IR core: text round trip, use lists under rewrites, clone, verifier cases as text."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from compiler.errors import ParseError, VerifyError
from compiler.lir import LIRFunction, parse_lir, print_lir, verify_lir
from compiler.lir.instructions import all_instrs, get_instr
from compiler.lir.ir import Instruction, view_root
from compiler.lir.irgen import irgen
from compiler.pipeline import CompileOptions, compile_model
from tests.roundtrip import assert_round_trips

SAMPLES = Path(__file__).resolve().parents[2] / "sample_models"
SAMPLE_MODELS = sorted(p.name for p in SAMPLES.glob("*.onnx"))

GOOD = """\
function @main
declare {
  %input = weight mutable input : f32<1x4>
  %output = weight mutable output : f32<1x2x2>
  %w = weight const : f32<4> = dense<[1.0, 2.0, 3.0, 4.0]>
}
code {
  0 %a = allocactivation : f32<1x4>
  1 %add = add @out %a, @in %input, @in %w
  2 %r = relu @out %a, @in %a
  3 %v = tensorview @in %a {offsets = [0, 0]} : f32<1x2x2>
  4 %c = copy @out %output, @in %v
  5 %d = deallocactivation @out %a
}
"""

CONCAT = """\
function @main
declare {
  %x = weight mutable input : f32<2x3>
  %out = weight mutable output : f32<2x4>
}
code {
  0 %cat = allocactivation : f32<2x6>
  1 %i0 = inserttensor @inout %cat, @in %x {offsets = [0, 0], count = 2, axis = 1}
  2 %e = extracttensor @out %out, @in %cat {offsets = [0, 1]}
  3 %d = deallocactivation @out %cat
}
"""


@pytest.mark.parametrize("text", [GOOD, CONCAT])
def test_print_parse_print_identical(text: str) -> None:
    fn = parse_lir(text)
    verify_lir(fn)
    assert print_lir(fn) == text
    assert print_lir(parse_lir(print_lir(fn))) == text


def test_indices_are_optional_and_checked() -> None:
    stripped = (
        "\n".join(
            ("  " + line.strip().split(" ", 1)[1]) if line.strip()[:1].isdigit() else line
            for line in GOOD.splitlines()
        )
        + "\n"
    )
    assert "  0 " not in stripped
    assert print_lir(parse_lir(stripped)) == GOOD
    with pytest.raises(ParseError, match="index 7 should be 1"):
        parse_lir(GOOD.replace("  1 %add", "  7 %add"))


def test_with_data_round_trip_is_lossless() -> None:
    fn = LIRFunction("main")
    data = np.arange(40, dtype=np.float32).reshape(5, 8) / 7
    fn.add_weight("big", fn_type(data), "constant", data=data)
    text = print_lir(fn, with_data=True)
    assert "hex<" in text
    back = parse_lir(text)
    np.testing.assert_array_equal(back.weights["big"].data, data)
    assert print_lir(back, with_data=True) == text
    assert "elided<" in print_lir(fn)


def fn_type(a: np.ndarray):
    from compiler.graph.types import TensorType

    return TensorType.of(a)


@pytest.mark.parametrize(
    "bad, message",
    [
        ("function main\n", "expected 'function @name'"),
        (GOOD.replace("@in %input, @in %w", "@in %nope, @in %w"), "unknown value '%nope'"),
        (GOOD.replace("allocactivation : f32<1x4>", "allocactivation"), "needs a result type"),
        (GOOD.replace("@out %a, @in %input", "@up %a, @in %input"), "bad operand"),
        (GOOD.replace("{offsets = [0, 0]}", "{offset = [0, 0]}"), "no attribute 'offset'"),
        (GOOD.replace("2 %r = relu", "2 %add = relu"), "redefinition of '%add'"),
        (GOOD.rstrip("}\n") + "\n", "missing"),
    ],
)
def test_parse_errors(bad: str, message: str) -> None:
    with pytest.raises(ParseError, match=message):
        parse_lir(bad)


# -- verifier: positive and negative cases as IR text -------------------------------------------

VERIFY_BAD = [
    (
        "type",
        GOOD.replace("0 %a = allocactivation : f32<1x4>", "0 %a = allocactivation : f32<1x5>"),
        "destination type f32<1x5> differs from inferred f32<1x4>",
    ),
    (
        "const written",
        GOOD.replace("2 %r = relu @out %a, @in %a", "2 %r = relu @out %w, @in %w"),
        "constant weight %w is written",
    ),
    (
        "mode",
        GOOD.replace("@out %a, @in %input", "@in %a, @in %input"),
        "operand 0 \\(%a\\) is @in, the table says @out",
    ),
    ("arity", GOOD.replace(", @in %w\n", "\n"), "add expects 3 operands, got 2"),
    (
        "use after dealloc",
        GOOD.replace(
            "  4 %c = copy @out %output, @in %v\n  5 %d = deallocactivation @out %a",
            "  4 %d = deallocactivation @out %a\n  5 %c = copy @out %output, @in %v",
        ),
        "used after its deallocation at instruction 4",
    ),
    (
        "view overrun",
        GOOD.replace("{offsets = [0, 0]} : f32<1x2x2>", "{offsets = [0, 2]} : f32<1x2x2>"),
        "overruns its source",
    ),
    (
        "copy types",
        GOOD.replace("4 %c = copy @out %output, @in %v", "4 %c = copy @out %a, @in %v"),
        "copy between different types",
    ),
    (
        "dealloc of a view",
        GOOD.replace("5 %d = deallocactivation @out %a", "5 %d = deallocactivation @out %v"),
        "deallocactivation must name an allocactivation",
    ),
    (
        "extract overrun",
        CONCAT.replace("{offsets = [0, 1]}", "{offsets = [0, 3]}"),
        "overruns the source",
    ),
    ("insert overrun", CONCAT.replace("count = 2", "count = 3"), "overruns the destination"),
]


def _fix_double_dealloc(text: str) -> str:
    lines = text.rstrip("\n").splitlines()
    assert lines[-1] == "}"
    return "\n".join(lines[:-1] + ["  6 %d2 = deallocactivation @out %a", "}"]) + "\n"


VERIFY_BAD.append(
    ("double dealloc", _fix_double_dealloc(GOOD), "used after its deallocation at instruction 5")
)


@pytest.mark.parametrize("case, text, message", VERIFY_BAD, ids=[c[0] for c in VERIFY_BAD])
def test_verifier_rejects(case: str, text: str, message: str) -> None:
    fn = parse_lir(text)
    with pytest.raises(VerifyError, match=message) as info:
        verify_lir(fn)
    assert "at instruction" in str(info.value) or "weight" in str(info.value)


def test_verifier_output_must_be_written() -> None:
    text = GOOD.replace("  4 %c = copy @out %output, @in %v\n", "").replace("  5 %d", "  4 %d")
    with pytest.raises(VerifyError, match="output weight %output is never written"):
        verify_lir(parse_lir(text))


def test_verifier_use_before_alloc() -> None:
    fn = parse_lir(GOOD)
    a = fn.get("a")
    assert isinstance(a, Instruction)
    fn.move_after(a, fn.code[1])  # alloc after its first writer
    with pytest.raises(VerifyError, match="not defined before use"):
        verify_lir(fn)


def test_verifier_accepts_good() -> None:
    verify_lir(parse_lir(GOOD))
    verify_lir(parse_lir(CONCAT))


# -- use lists and rewrites --------------------------------------------------------------------


def test_use_lists_follow_rewrites() -> None:
    fn = parse_lir(GOOD)
    a, inp = fn.get("a"), fn.get("input")
    add = fn.find("add")
    assert add is not None
    assert {(i.name, k) for i, k in a.users} == {("add", 0), ("r", 0), ("r", 1), ("v", 0), ("d", 0)}
    b = Instruction("allocactivation", "b", type=a.type)
    fn.insert_before(add, b)
    assert b.index == 1 and add.index == 2
    relu = fn.find("r")
    assert relu is not None
    relu.set_operand(0, b)
    assert (relu, 0) in b.users and (relu, 0) not in a.users
    assert relu.mode(0) == "out"
    fn.insert_after(fn.code[-1], Instruction("deallocactivation", "db", [(b, "out")]))
    # relu(a) now writes b; the view still reads a: fine, and it verifies.
    verify_lir(fn)
    assert print_lir(parse_lir(print_lir(fn))) == print_lir(fn)
    with pytest.raises(ValueError, match="still has users"):
        fn.erase(b)
    fn.erase(fn.find("db"))
    relu.set_operand(0, a)
    fn.erase(b)
    assert not b.users and "b" not in fn
    add.set_operand(1, a)
    assert (add, 1) in a.users and not any(i is add for i, _ in inp.users)
    a.replace_all_uses_with(fn.get("input"))
    assert not a.users


def test_move_and_indices() -> None:
    fn = parse_lir(GOOD)
    d = fn.find("d")
    c = fn.find("c")
    assert d is not None and c is not None
    fn.move_before(d, c)
    assert [i.name for i in fn.code] == ["a", "add", "r", "v", "d", "c"]
    assert d.index == 4 and c.index == 5
    fn.move_to(d, 5)
    assert [i.name for i in fn.code] == ["a", "add", "r", "v", "c", "d"]
    verify_lir(fn)


def test_clone_is_deep_but_shares_weight_data() -> None:
    fn = parse_lir(GOOD)
    cl = fn.clone()
    assert print_lir(cl) == print_lir(fn)
    assert cl.weights["w"].data is fn.weights["w"].data
    assert cl.get("a") is not fn.get("a")
    cl.erase(cl.find("d"))
    assert print_lir(cl) != print_lir(fn)
    verify_lir(fn)
    assert all(u.function is cl for u, _ in cl.get("a").users)


def test_view_root_offsets() -> None:
    fn = parse_lir(
        CONCAT.replace(
            "  2 %e", "  2 %v = tensorview @in %cat {offsets = [1, 0]} : f32<6>\n  3 %e"
        ).replace("  3 %d", "  4 %d")
    )
    root, off = view_root(fn.get("v"))
    assert root is fn.get("cat") and off == 6 * 4


def test_table_covers_every_graph_op() -> None:
    from compiler.graph.ops import all_ops

    table = all_instrs()
    for op in all_ops():
        if op in ("Save", "Split"):
            continue
        d = get_instr(op.lower())
        assert d.graph_op == op and d.operands[0] == ("dest", "out")
        assert all(m == "in" for _, m in d.operands[1:])
    assert "inplace" in table["add"].traits and "inplace" not in table["conv"].traits
    assert table["inserttensor"].operands[0] == ("dest", "inout")


# -- sample models ------------------------------------------------------------------------------


def test_sample_models_are_there() -> None:
    assert SAMPLE_MODELS, f"no sample models in {SAMPLES}"


@pytest.mark.parametrize("model", SAMPLE_MODELS)
def test_sample_model_irgen_round_trip(model: str) -> None:
    result = compile_model(SAMPLES / model, CompileOptions(low_level=False))
    lir = irgen(result.module)
    verify_lir(lir)
    assert_round_trips(lir)
    assert_round_trips(lir, with_data=True)
