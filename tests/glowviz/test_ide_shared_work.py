"""What the IDE computes once and shares, checked against computing it afresh: Textual strips
whose caches are made on first use (glowviz.app), view data shared by the stages of one IR
snapshot, diffs from node summaries made once per stage, the text diff of identical texts."""

from __future__ import annotations

import difflib

import pytest
from ide_helpers import ROOT

import glowviz.app  # noqa: F401 - makes Textual's strip caches lazy
from glowviz.diff import diff_modules, side_by_side, summarize_nodes, text_diff
from glowviz.session import CompileSession


def test_strips_make_their_caches_on_first_use_and_cache_as_before():
    from rich.segment import Segment
    from rich.style import Style
    from textual.cache import FIFOCache
    from textual.strip import Strip

    bold, red = Style(bold=True), Style(color="red")
    strip = Strip([Segment("hello ", bold), Segment("world", red)])
    assert _caches() and not any(_is_set(strip, n) for n in _caches())
    assert strip.cell_length == 11 and strip.text == "hello world"
    crop = strip.crop(2, 8)
    assert crop.text == "llo wo" and strip.crop(2, 8) is crop  # cached, as Textual does
    assert isinstance(strip._crop_cache, FIFOCache) and strip._crop_cache._maxsize == 16
    parts = strip.divide([3, 7, 11])
    assert [p.text for p in parts] == ["hel", "lo w", "orld"] and strip.divide([3, 7, 11]) is parts
    styled = strip.apply_style(Style(italic=True))
    assert styled is strip.apply_style(Style(italic=True))
    assert all(s.style is not None and s.style.italic for s in styled)
    assert strip.adjust_cell_length(14).cell_length == 14
    assert strip.crop_extend(4, 15, None).text == "o world    "
    assert Strip.blank(3).text == "   "
    with pytest.raises(AttributeError):
        strip.no_such_attribute  # noqa: B018 - only the caches are made on demand


def _caches() -> list[str]:
    from textual.strip import Strip

    return [n for n in Strip.__slots__ if n.endswith("_cache") and n != "_render_cache"]


def _is_set(strip, name: str) -> bool:
    from textual.strip import Strip

    try:
        Strip.__dict__[name].__get__(strip, Strip)  # the slot itself, not __getattr__
    except AttributeError:
        return False
    return True


@pytest.mark.parametrize(
    "text", ["", "a", "a\nb\na", "\n\nx\n", "\n".join(f"l{k % 7}" for k in range(300))]
)
def test_text_diff_of_identical_texts_is_difflibs(text):
    lines = text.splitlines()
    unified = list(difflib.unified_diff(lines, lines, "a", "b", lineterm=""))
    assert text_diff(text, text, "a", "b") == (unified, side_by_side(lines, lines))


def test_stages_of_one_snapshot_share_rows_and_diffs_match_fresh_ones():
    s = CompileSession(str(ROOT / "sample_models" / "resnet_small.onnx")).compile()
    assert s.error is None
    shared = 0
    for i, rec in enumerate(s.stages):
        if rec.ir_kind != "graph":
            continue
        if rec._same_as is not None:
            assert s.graph_nodes(i) is s.graph_nodes(rec._same_as.index)
            shared += 1
        assert s.graph_nodes(i) == CompileSession._graph_nodes(s, i)
        assert s.node_summaries(i) == summarize_nodes(rec.module)
        j = s.started_from(i)
        if j is None or s.stages[j].ir_kind != "graph":
            continue
        ra = s.stages[j]
        fresh = diff_modules(
            ra.module,
            rec.module,
            records=[
                (s.stages[k].pass_name, r)
                for k in range(j + 1, i + 1)
                for r in s.stages[k].provenance
            ],
            before_text=ra.text,
            after_text=rec.text,
            names=(ra.label, rec.label),
        )
        assert s.diff(j, i).to_dict() == fresh.to_dict()
        assert s.diff(j, i).side_by_side == fresh.side_by_side
    assert shared  # passes that changed nothing share their snapshot


def test_parsed_css_is_shared_per_theme_and_errors_are_still_reported():
    from textual.css.stylesheet import Stylesheet, StylesheetParseError

    css = "Label.x { color: $accent; width: 3; }"

    def parsed(variables: dict[str, str]) -> Stylesheet:
        sheet = Stylesheet(variables=variables)
        sheet.add_source(css, read_from=("test", "shared"))
        sheet.parse()
        return sheet

    a, b = parsed({"accent": "#ff0000"}), parsed({"accent": "#ff0000"})
    assert a.rules and a.rules[0] is b.rules[0]  # parsed once for both
    c = parsed({"accent": "#00ff00"})  # another theme: its own rules
    assert c.rules[0] is not a.rules[0]
    assert a.rules[0].styles.color != c.rules[0].styles.color
    assert a.rules[0].css == b.rules[0].css and a.rules[0].styles.width == c.rules[0].styles.width

    bad = "Label { colour: red; }"  # an unknown rule: an error each time it is parsed
    for _ in range(2):
        sheet = Stylesheet()
        sheet.add_source(bad, read_from=("test", "bad"))
        with pytest.raises(StylesheetParseError):
            sheet.parse()
