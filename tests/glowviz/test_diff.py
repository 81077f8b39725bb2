"""glowviz.diff: node diff by name, provenance lines, text diffs."""

from __future__ import annotations

from fake_pipeline import _fold_bn, _fuse_relu, build_module

from compiler.graph.printer import print_module
from glowviz.diff import diff_modules, diff_texts, provenance_lines, side_by_side


def _journal(m):
    return [(None, r) for r in m.main.journal]


def test_identical_modules_have_empty_diff():
    a = build_module()
    d = diff_modules(a, a.clone(), before_text=print_module(a), after_text=print_module(a))
    assert d.empty
    assert all(r.tag == "equal" for r in d.side_by_side)
    assert d.unified == []


def test_fold_added_removed_changed_and_provenance():
    a = build_module()
    b = a.clone()
    b.main.journal.clear()
    _fold_bn(b)
    recs = [("fold-batchnorm", r) for r in b.main.journal]
    d = diff_modules(a, b, records=recs, before_text=print_module(a), after_text=print_module(b))
    assert [n.name for n in d.added] == ["conv1_bn"]
    assert sorted(n.name for n in d.removed) == ["bn1", "conv1"]
    changed = {c.name: c for c in d.changed}
    assert set(changed) == {"relu1"}
    assert changed["relu1"].fields["operands"] == (("bn1",), ("conv1_bn",))
    assert "conv1 + bn1 -> conv1_bn (Conv)  [fold-batchnorm]" in d.provenance
    # the erasures are explained by the creation, so they are not listed separately
    assert not any("erased" in line for line in d.provenance)
    assert d.summary().startswith("+1 added, -2 removed, ~1 changed")
    assert any(line.startswith("+") and "conv1_bn" in line for line in d.unified)


def test_attr_change_detected():
    a = build_module()
    b = a.clone()
    _fold_bn(b)
    c = b.clone()
    c.main.journal.clear()
    _fuse_relu(c)
    d = diff_modules(b, c, records=[("fuse", r) for r in c.main.journal])
    assert [n.name for n in d.added] == ["conv2_relu"]
    assert "conv2 + relu2 -> conv2_relu (Conv)  [fuse]" in d.provenance
    assert {c.name for c in d.changed} == {"add1"}


def test_erase_without_creation_is_listed():
    from compiler.graph.ir import ProvenanceRecord

    lines = provenance_lines([("dce", ProvenanceRecord("erase", "dead", "Relu"))])
    assert lines == ["- dead (Relu) erased  [dce]"]


def test_side_by_side_alignment():
    rows = side_by_side(["a", "b", "c"], ["a", "x", "c", "d"])
    assert [(r.tag, r.left, r.right) for r in rows] == [
        ("equal", "a", "a"),
        ("replace", "b", "x"),
        ("equal", "c", "c"),
        ("insert", "", "d"),
    ]
    assert rows[-1].left_no is None and rows[-1].right_no == 4


def test_text_only_diff():
    d = diff_texts("x\ny\n", "x\nz\n")
    assert d.unified[0].startswith("---")
    assert sum(r.tag != "equal" for r in d.side_by_side) == 1
