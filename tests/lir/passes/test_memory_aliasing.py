"""IR-text tests of the aliasing low-level passes: sum-post-op (a Conv/MatMul accumulates into
the residual Add's other operand) and zero-copy-concat (producers write their concat slice),
each with the cases where it must not fire."""

from __future__ import annotations

import pytest

from compiler.lir.parser import parse_lir
from compiler.lir.printer import print_lir
from compiler.lir.verifier import verify_lir
from compiler.passes.registry import get_pass
from tests.filecheck import check
from tests.lir.passes.lir_cases import run_pass
from tests.lir_text import function_head

CONV_HEAD = function_head("""
  %x = weight mutable input : f32<1x4x4x4>
  %y = weight mutable output : f32<1x4x4x4>
  %y2 = weight mutable output : f32<1x4x4x4>
  %w = weight const : f32<4x4x1x1> = elided<00000000000000aa>
  %b = weight const : f32<4> = elided<00000000000000bb>
""")

#: r = relu(x); a = sigmoid(x); t = conv(a); z = t + r; y = -z  (r dies at the add)
RESIDUAL = """
  %r = allocactivation : f32<1x4x4x4>
  %rr = relu @out %r, @in %x
  %a = allocactivation : f32<1x4x4x4>
  %aa = sigmoid @out %a, @in %x
  %t = allocactivation : f32<1x4x4x4>
  %conv = conv @out %t, @in %a, @in %w, @in %b
  %a.d = deallocactivation @out %a
  %z = allocactivation : f32<1x4x4x4>
  %add = add @out %z, @in {lhs}, @in {rhs}
  %t.d = deallocactivation @out %t
  %r.d = deallocactivation @out %r
  %n = neg @out %y, @in %z
  %z.d = deallocactivation @out %z
"""


def _write_y2(code: str) -> str:
    """Every output weight must be written: %y2 too, when the case does not use it."""
    return code if "%y2" in code else code + "  %y2w = relu @out %y2, @in %x\n"


def run(
    name: str, code: str, *, changed: bool, meta: dict | None = None, head: str = CONV_HEAD
) -> str:
    return run_pass(name, _write_y2(code), changed=changed, head=head, meta=meta)


# -- sum-post-op ------------------------------------------------------------------------------


@pytest.mark.parametrize(("lhs", "rhs"), [("%t", "%r"), ("%r", "%t")])
def test_conv_accumulates_into_the_dying_residual(lhs: str, rhs: str) -> None:
    out = run("sum-post-op", RESIDUAL.format(lhs=lhs, rhs=rhs), changed=True)
    check(
        out,
        """
CHECK: %t.sum = tensorview @in %r {offsets = [0, 0, 0, 0]} : f32<1x4x4x4>
CHECK-NEXT: %conv = conv @inout %t.sum, @in %a, @in %w, @in %b
CHECK-NOT: add
CHECK-NOT: %z
CHECK: %n = neg @out %y, @in %r
CHECK-NEXT: deallocactivation @out %r
CHECK-COUNT-1: deallocactivation @out %r
""",
    )


#: The residual case edited so that the pass must not fire: what changes, as text replacements.
NOT_FIRING = {
    "residual read after the add": [
        ("  %r.d = deallocactivation @out %r\n", ""),
        (
            "  %z.d = deallocactivation @out %z\n",
            "  %z.d = deallocactivation @out %z\n"
            "  %later = sigmoid @out %y2, @in %r\n  %r.d = deallocactivation @out %r\n",
        ),
    ],
    "residual read between conv and add": [
        ("  %z = allocactivation", "  %peek = sigmoid @out %y2, @in %r\n  %z = allocactivation"),
    ],
    "residual computed after the conv": [
        ("  %rr = relu @out %r, @in %x\n", ""),
        ("  %z = allocactivation", "  %rr = relu @out %r, @in %x\n  %z = allocactivation"),
    ],
    "conv reads the residual": [("conv @out %t, @in %a,", "conv @out %t, @in %r,")],
    "conv has a fused activation": [("@in %b\n", '@in %b {activation = "relu"}\n')],
    "sum is also a graph output": [("  %n = neg", "  %save = copy @out %y2, @in %z\n  %n = neg")],
}


@pytest.mark.parametrize("edits", NOT_FIRING.values(), ids=NOT_FIRING.keys())
def test_sum_post_op_must_not_fire(edits: list[tuple[str, str]]) -> None:
    code = RESIDUAL.format(lhs="%t", rhs="%r")
    for old, new in edits:
        assert old in code, old
        code = code.replace(old, new, 1)
    check(
        run("sum-post-op", code, changed=False), "CHECK: %conv = conv @out %t,\nCHECK: add @out %z"
    )


def test_not_when_the_backend_does_not_accumulate() -> None:
    code = RESIDUAL.format(lhs="%t", rhs="%r")
    out = run("sum-post-op", code, changed=False, meta={"accumulating_ops": frozenset()})
    check(out, "CHECK: conv @out %t")
    run("sum-post-op", code, changed=True, meta={"accumulating_ops": frozenset({"Conv"})})


def test_verifier_allows_inout_dest_only_where_it_can_accumulate() -> None:
    from compiler.errors import VerifyError

    lir = parse_lir(
        CONV_HEAD + "  %s = sigmoid @inout %y, @in %x\n  %c = conv @inout %y2, @in %x, @in %w, "
        "@in %b\n}\n"
    )
    with pytest.raises(VerifyError, match="operand 0 .* is @inout, the table says @out"):
        verify_lir(lir)


# -- zero-copy-concat -------------------------------------------------------------------------

CAT_HEAD = function_head("""
  %x = weight mutable input : f32<1x2x4x4>
  %y = weight mutable output : f32<1x6x4x4>
  %y2 = weight mutable output : f32<1x2x4x4>
""")

#: cat = concat(relu(x), sigmoid(x)); then cat2 = concat(cat, neg(x)); y = tanh(cat2)
CONCATS = """
  %a = allocactivation : f32<1x2x4x4>
  %aa = relu @out %a, @in %x
  %b = allocactivation : f32<1x2x4x4>
  %bb = sigmoid @out %b, @in %x
  %cat = allocactivation : f32<1x4x4x4>
  %cat.insert0 = inserttensor @inout %cat, @in %a {offsets = [0, 0, 0, 0], count = 1, axis = 1}
  %cat.insert1 = inserttensor @inout %cat, @in %b {offsets = [0, 2, 0, 0], count = 1, axis = 1}
  %a.d = deallocactivation @out %a
  %b.d = deallocactivation @out %b
  %c = allocactivation : f32<1x2x4x4>
  %cc = neg @out %c, @in %x
  %cat2 = allocactivation : f32<1x6x4x4>
  %cat2.insert0 = inserttensor @inout %cat2, @in %cat {offsets = [0, 0, 0, 0], count = 1, axis = 1}
  %cat2.insert1 = inserttensor @inout %cat2, @in %c {offsets = [0, 4, 0, 0], count = 1, axis = 1}
  %cat.d = deallocactivation @out %cat
  %c.d = deallocactivation @out %c
  %t = tanh @out %y, @in %cat2
  %cat2.d = deallocactivation @out %cat2
"""


def run_cat(code: str, *, changed: bool) -> str:
    return run("zero-copy-concat", code, changed=changed, head=CAT_HEAD)


def test_concat_inputs_write_their_slices_nested_for_chains() -> None:
    check(
        run_cat(CONCATS, changed=True),
        """
CHECK: %cat2 = allocactivation : f32<1x6x4x4>
CHECK-NEXT: %cat = tensorview @in %cat2 {offsets = [0, 0, 0, 0]} : f32<1x4x4x4>
CHECK-NEXT: %a.slice = tensorview @in %cat.slice {offsets = [0, 0, 0, 0]} : f32<1x2x4x4>
CHECK-NEXT: %aa = relu @out %a.slice, @in %x
CHECK: %b.slice = tensorview @in %cat.slice {offsets = [0, 2, 0, 0]} : f32<1x2x4x4>
CHECK-NEXT: %bb = sigmoid @out %b.slice, @in %x
CHECK: %c.slice = tensorview @in %cat2 {offsets = [0, 4, 0, 0]} : f32<1x2x4x4>
CHECK-NEXT: %cc = neg @out %c.slice, @in %x
CHECK-NOT: inserttensor
CHECK: %t = tanh @out %y, @in %cat2
CHECK-COUNT-1: deallocactivation
""".replace("CHECK-NEXT: %cat = tensorview", "CHECK-NEXT: %cat.slice = tensorview"),
    )


def test_not_when_the_concat_input_is_also_a_graph_output() -> None:
    code = CONCATS.replace(
        "  %a.d = deallocactivation", "  %save = copy @out %y2, @in %a\n  %a.d = deallocactivation"
    )
    check(
        run_cat(code, changed=True),
        """
CHECK: %aa = relu @out %a, @in %x
CHECK: %bb = sigmoid @out %b.slice
CHECK-NEXT: inserttensor @inout %cat.slice, @in %a
CHECK-NEXT: copy @out %y2, @in %a
CHECK-COUNT-1: inserttensor
""",
    )


def test_not_when_two_views_would_overlap() -> None:
    code = CONCATS.replace("@in %b {offsets = [0, 2, 0, 0]", "@in %a {offsets = [0, 2, 0, 0]")
    out = run_cat(code, changed=True)  # only cat2's inputs move
    check(out, "CHECK-COUNT-2: inserttensor @inout %cat.slice, @in %a")


def test_not_when_the_slice_is_not_contiguous() -> None:
    code = """
  %a = allocactivation : f32<2x1x4x4>
  %aa = relu @out %a, @in %x
  %b = allocactivation : f32<2x1x4x4>
  %bb = sigmoid @out %b, @in %x
  %cat = allocactivation : f32<2x2x4x4>
  %i0 = inserttensor @inout %cat, @in %a {offsets = [0, 0, 0, 0], count = 1, axis = 1}
  %i1 = inserttensor @inout %cat, @in %b {offsets = [0, 1, 0, 0], count = 1, axis = 1}
  %a.d = deallocactivation @out %a
  %b.d = deallocactivation @out %b
  %t = tanh @out %y2, @in %cat
  %cat.d = deallocactivation @out %cat
"""
    code = code.replace("relu @out %a, @in %x", "relu @out %a, @in %a")
    code = code.replace("sigmoid @out %b, @in %x", "sigmoid @out %b, @in %b")
    lir = parse_lir(
        CAT_HEAD.replace(
            "%y2 = weight mutable output : f32<1x2x4x4>",
            "%y2 = weight mutable output : f32<2x2x4x4>",
        )
        + code
        + "}\n"
    )
    assert get_pass("zero-copy-concat")().run(lir) is False
    check(print_lir(lir), "CHECK-COUNT-2: inserttensor")


def test_not_when_the_source_is_written_after_the_insert() -> None:
    code = CONCATS.replace(
        "  %a.d = deallocactivation @out %a",
        "  %again = relu @out %a, @in %x\n  %keep = copy @out %y2, @in %a\n"
        "  %a.d = deallocactivation @out %a",
    )
    check(run_cat(code, changed=True), "CHECK: inserttensor @inout %cat{{[.a-z]*}}, @in %a")


def test_not_when_the_destination_is_written_while_the_source_lives() -> None:
    code = CONCATS.replace(
        "  %bb = sigmoid @out %b, @in %x",
        "  %bb = sigmoid @out %b, @in %x\n  %scribble = neg @out %cat, @in %cat",
    ).replace("  %cat = allocactivation : f32<1x4x4x4>\n", "")
    code = "  %cat = allocactivation : f32<1x4x4x4>\n" + code
    out = run_cat(code, changed=True)
    check(
        out,
        "CHECK: inserttensor @inout %cat.slice, @in %a\nCHECK-NEXT: inserttensor @inout %cat.slice, @in %b",
    )


def test_slices_keep_the_planner_alignment() -> None:
    code = CONCATS.replace("f32<1x2x4x4>", "f32<1x2x2x1>").replace("f32<1x4x4x4>", "f32<1x4x2x1>")
    code = code.replace("f32<1x6x4x4>", "f32<1x6x2x1>")
    head = CAT_HEAD.replace("4x4>", "2x1>")
    lir = parse_lir(head + _write_y2(code) + "}\n")
    lir.meta["alignment"] = 64  # 2x2x1 floats = 16 B: the second slice would start unaligned
    assert get_pass("zero-copy-concat")().run(lir)
    check(print_lir(lir), "CHECK: inserttensor @inout %cat{{.*}}, @in %b")


# -- the int8 sum post-op -----------------------------------------------------------------------

QCONV_HEAD = """function @main
declare {
  %x = weight mutable input : f32<1x4x4x4>
  %y = weight mutable output : f32<1x4x4x4>
  %w = weight const : i8<4x4x1x1> = elided<00000000000000aa>
  %b = weight const : i32<4> = elided<00000000000000bb>
  %s = weight const : f32<4> = elided<00000000000000cc>
}
code {
"""

#: Two residual blocks: z = conv(a) + r; z2 = conv(conv(z)) + z (z dies at the second add).
QRESIDUAL = """
  %r = allocactivation : i8<1x4x4x4:0.1,2>
  %rq = quantize @out %r, @in %x {scale = 0.1, offset = 2}
  %a = allocactivation : i8<1x4x4x4:0.05,-3>
  %aq = quantize @out %a, @in %x {scale = 0.05, offset = -3}
  %t = allocactivation : i8<1x4x4x4:0.2,5>
  %conv = qconv @out %t, @in %a, @in %w, @in %b, @in %s {scale = 0.2, offset = 5}
  %a.d = deallocactivation @out %a
  %z = allocactivation : i8<1x4x4x4:0.3,-1>
  %add = qadd @out %z, @in %t, @in %r {scale = 0.3, offset = -1}
  %t.d = deallocactivation @out %t
  %r.d = deallocactivation @out %r
  %u1 = allocactivation : i8<1x4x4x4:0.2,5>
  %c1 = qconv @out %u1, @in %z, @in %w, @in %b, @in %s {scale = 0.2, offset = 5, qmin = 5}
  %u2 = allocactivation : i8<1x4x4x4:0.25,7>
  %c2 = qconv @out %u2, @in %u1, @in %w, @in %b, @in %s {scale = 0.25, offset = 7}
  %u1.d = deallocactivation @out %u1
  %z2 = allocactivation : i8<1x4x4x4:0.4,0>
  %add2 = qadd @out %z2, @in %z, @in %u2 {scale = 0.4, offset = 0}
  %u2.d = deallocactivation @out %u2
  %z.d = deallocactivation @out %z
  %n = dequantize @out %y, @in %z2
  %z2.d = deallocactivation @out %z2
"""


def _run_int8(code: str, *, changed: bool, meta: dict) -> str:
    lir = parse_lir(QCONV_HEAD + code + "}\n")
    lir.meta.update(meta)
    verify_lir(lir)
    did = get_pass("sum-post-op")().run(lir)
    verify_lir(lir)
    text = print_lir(lir)
    assert did is changed, text
    return text


def test_int8_conv_requantizes_into_the_residual_through_a_view_typed_as_the_sum() -> None:
    out = _run_int8(QRESIDUAL, changed=True, meta={"int8_sum_post_op": True})
    check(
        out,
        """
CHECK: %t.sum = tensorview @in %r {offsets = [0, 0, 0, 0]} : i8<1x4x4x4:0.3,-1>
CHECK-NEXT: %conv = qconv @inout %t.sum, @in %a, {{.*}}sum_scale = 0.1, sum_offset = 2, scale = 0.3, offset = -1,
CHECK-NOT: qadd
CHECK: %c1 = qconv @out %u1, @in %t.sum,
CHECK: %u2.sum = tensorview @in %r {offsets = [0, 0, 0, 0]} : i8<1x4x4x4:0.4,0>
CHECK-NEXT: %c2 = qconv @inout %u2.sum, @in %u1, {{.*}}sum_scale = 0.3, sum_offset = -1, scale = 0.4, offset = 0,
CHECK-NOT: qadd
CHECK: %n = dequantize @out %y, @in %u2.sum
CHECK-NEXT: deallocactivation @out %r
CHECK-NOT: deallocactivation @out %r
""",
    )


def test_int8_sum_post_op_only_where_the_quantize_stage_chose_the_arithmetic() -> None:
    # An imported QDQ model rounds the conv and the add apart, as onnxruntime does.
    check(_run_int8(QRESIDUAL, changed=False, meta={}), "CHECK: qadd @out %z,\nCHECK: qadd")


def test_int8_sum_post_op_not_over_a_clamp_folded_into_the_conv() -> None:
    # relu(conv) + r is not the fused sum: the first block's conv gets a folded Relu.
    code = QRESIDUAL.replace(
        "{scale = 0.2, offset = 5}\n  %a.d", "{scale = 0.2, offset = 5, qmin = 5}\n  %a.d"
    )
    out = _run_int8(code, changed=True, meta={"int8_sum_post_op": True})
    check(out, "CHECK: %conv = qconv @out %t,\nCHECK: qadd @out %z,\nCHECK: qconv @inout %u2.sum")
