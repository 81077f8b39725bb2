"""glowviz mem-diff: real pairs, a doctored report, thresholds and bad input."""

from __future__ import annotations

import json

import pytest
from export_helpers import MODELS

from compiler.memory.report import MemoryReport
from glowviz.cli import main
from glowviz.core.memdiff import (
    MemDiffInputError,
    diff_reports,
    load_side,
    report_for_model,
    split_spec,
)

TRANSFORMER = str(MODELS / "transformer_block.onnx")


@pytest.fixture(scope="module")
def base_report():
    return report_for_model(TRANSFORMER, {}, {})


def _write(path, data):
    path.write_text(json.dumps(data.to_json() if isinstance(data, MemoryReport) else data))
    return str(path)


def _doctored(report: MemoryReport) -> dict:
    """The report's JSON, to edit by hand (read back with MemoryReport.from_json)."""
    return json.loads(json.dumps(report.to_json()))


def test_spec_syntax():
    assert split_spec("m.onnx") == ("m.onnx", {})
    assert split_spec("m.onnx:scheduler=topological,allocator=first-fit") == (
        "m.onnx",
        {"scheduler": "topological", "allocator": "first-fit"},
    )
    with pytest.raises(MemDiffInputError, match="keys"):
        split_spec("m.onnx:colour=blue")


def test_identical_reports_no_change(base_report):
    d = diff_reports(base_report, base_report, fail_above=0)
    assert d["peak"]["delta"] == 0 and d["exit_code"] == 0
    assert d["buffers"]["matched"] == len(base_report.buffers)
    assert not d["buffers"]["appeared"] and not d["buffers"]["vanished"]


def test_two_schedulers(capsys):
    rc = main(
        [
            "mem-diff",
            str(MODELS / "unet_small.onnx"),
            str(MODELS / "unet_small.onnx") + ":scheduler=topological",
            "--json",
        ]
    )
    d = json.loads(capsys.readouterr().out)
    assert d["schema"] == "glowviz.memdiff/1"
    assert d["old"]["scheduler"] == "optimal" and d["new"]["scheduler"] == "topological"
    assert rc == 0  # no threshold given


def test_buffer_sharing_off_is_a_regression(capsys):
    rc = main(
        ["mem-diff", TRANSFORMER, TRANSFORMER + ":disable=buffer-sharing", "--fail-above", "5"]
    )
    out = capsys.readouterr().out
    assert rc == 1
    assert "REGRESSION" in out and "appeared" in out
    rc = main(
        [
            "mem-diff",
            TRANSFORMER,
            TRANSFORMER + ":disable=buffer-sharing",
            "--fail-above",
            "50",
            "--json",
        ]
    )
    d = json.loads(capsys.readouterr().out)
    assert rc == 0 and d["peak"]["pct"] > 5 and not d["regressed"]
    assert d["new"]["buffers"] > d["old"]["buffers"]


def test_doctored_report_threshold(tmp_path, base_report, capsys):
    old = _write(tmp_path / "old.json", base_report)
    grown = _doctored(base_report)
    victim = grown["live_at_peak"][0]
    extra = 4096
    for b in grown["buffers"]:
        if b["name"] == victim:
            b["size"] += extra
    grown["peak_bytes"] += extra
    grown["lower_bound_bytes"] += extra
    new = _write(tmp_path / "new.json", grown)
    pct = 100 * extra / base_report.peak_bytes
    assert main(["mem-diff", old, new, "--fail-above", f"{pct / 2:.3f}"]) == 1
    out = capsys.readouterr().out
    assert f"%{victim}" in out and "grew" in out
    assert main(["mem-diff", old, new, "--fail-above", f"{pct * 2:.3f}"]) == 0
    assert main(["mem-diff", old, new]) == 0
    capsys.readouterr()
    assert main(["mem-diff", old, new, "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["buffers"]["grew"][0]["new"] == victim
    assert d["buffers"]["grew"][0]["size_delta"] == extra


def test_match_by_producer_when_names_change(base_report):
    renamed = _doctored(base_report)
    for b in renamed["buffers"]:
        b["name"] = b["name"] + "_v2"
    renamed["live_at_peak"] = [n + "_v2" for n in renamed["live_at_peak"]]
    d = diff_reports(base_report, MemoryReport.from_json(renamed))
    assert d["buffers"]["matched_by"]["producer"] + d["buffers"]["matched_by"][
        "instruction"
    ] == len(base_report.buffers)
    assert not d["buffers"]["appeared"]


def test_lifetime_longer_reported(base_report):
    # Lifetimes compare in operations (instruction indices shift with every marker): a buffer
    # read by 3 more operations lived 3 operations longer.
    longer = _doctored(base_report)
    longer["buffers"][0]["last"] += 3
    longer["buffers"][0]["op_span"] += 3
    d = diff_reports(base_report, MemoryReport.from_json(longer))
    assert d["buffers"]["longer"][0]["lifetime_delta"] == 3
    assert d["buffers"]["longer"][0]["lifetime_unit"] == "operations"
    # Only the instruction indices moved (more markers in between): not a longer lifetime.
    shifted = _doctored(base_report)
    shifted["buffers"][0]["last"] += 3
    assert not diff_reports(base_report, MemoryReport.from_json(shifted))["buffers"]["longer"]
    # Reports without operation spans (older files) fall back to instructions.
    old = _doctored(base_report)
    for b in old["buffers"]:
        del b["op_span"]
    old["buffers"][0]["last"] += 3
    d = diff_reports(MemoryReport.from_json(_doctored(base_report)), MemoryReport.from_json(old))
    assert d["buffers"]["longer"][0]["lifetime_unit"] == "instructions"
    assert d["buffers"]["longer"][0]["lifetime_delta"] == 3


def test_bad_input_exits_2(tmp_path, base_report, capsys):
    good = _write(tmp_path / "good.json", base_report)
    notjson = tmp_path / "bad.json"
    notjson.write_text("{not json")
    wrong = _write(tmp_path / "wrong.json", {"schema": "other/1"})
    nobufs = _write(tmp_path / "nobufs.json", {**_doctored(base_report), "buffers": [{"name": 1}]})
    for other in (
        str(tmp_path / "missing.json"),
        str(notjson),
        wrong,
        nobufs,
        TRANSFORMER + ":bogus=1",
    ):
        assert main(["mem-diff", good, other]) == 2, other
        err = capsys.readouterr().err
        assert err.startswith("glowviz: error:") and "Traceback" not in err
    with pytest.raises(MemDiffInputError, match="schema"):
        load_side(wrong)
