"""glowviz export: stage names, view/format rules, determinism, golden DOT and JSON files."""

from __future__ import annotations

import json
import re
import shutil
import time

import pytest
from export_helpers import MODELS, check_golden, session_for

from compiler.scheduling import SCHEDULERS
from glowviz.cli import main
from glowviz.exports.dot_graph import graph_data, graph_to_dot
from glowviz.exports.render import ExportError
from glowviz.exports.views import render_view, resolve_stage


def test_stage_names_last_occurrence_numbered_and_index():
    s = session_for("mlp.onnx")
    dces = [r for r in s.stages if r.pass_name == "dce"]
    assert len(dces) >= 2
    assert resolve_stage(s.stages, "dce").index == dces[-1].index
    assert resolve_stage(s.stages, "dce#1").index == dces[0].index
    assert resolve_stage(s.stages, "post-lower-opt/dce").index == dces[-1].index
    assert resolve_stage(s.stages, "@3").index == 3
    assert resolve_stage(s.stages, "final", want="graph").ir_kind == "graph"
    assert resolve_stage(s.stages, "final", want="lir").ir_kind == "lir"
    with pytest.raises(ExportError, match="buffer-sharing") as e:
        resolve_stage(s.stages, "no-such-pass")
    assert "dce#1" in str(e.value)
    with pytest.raises(ExportError, match="there is no #99"):
        resolve_stage(s.stages, "dce#99")


def test_view_kind_mismatch_is_clear():
    s = session_for("mlp.onnx")
    with pytest.raises(ExportError, match="low-level IR, not a graph"):
        render_view(s, "graph", "dot", stage="irgen")
    with pytest.raises(ExportError, match="not low-level IR"):
        render_view(s, "lir", "dot", stage="cse")
    with pytest.raises(ExportError, match="cannot be exported as dot"):
        render_view(s, "memory", "dot")


def test_cli_bad_combinations_exit_2(tmp_path, capsys):
    model = str(MODELS / "mlp.onnx")
    out = str(tmp_path / "x.dot")
    assert main(["export", model, "--view", "schedule", "--format", "dot", "-o", out]) == 2
    assert "cannot be exported as dot" in capsys.readouterr().err
    assert main(["export", model, "--view", "graph", "--stage", "nope", "-o", out]) == 2
    assert "unknown stage 'nope'" in capsys.readouterr().err
    assert main(["export", str(tmp_path / "missing.onnx"), "--view", "graph", "-o", out]) == 2
    assert main(["export", model, "--view", "graph", "--theme", "neon", "-o", out]) == 2
    assert not list(tmp_path.iterdir())


def test_cli_writes_file_and_format_from_extension(tmp_path):
    out = tmp_path / "m.json"
    assert main(["export", str(MODELS / "mlp.onnx"), "--view", "memory", "-o", str(out)]) == 0
    data = json.loads(out.read_text())
    assert data["schema"] == "glowviz.memory/1"  # the memory report: mem-diff reads it
    assert data["peak_bytes"] >= data["lower_bound_bytes"] > 0


def test_graph_dot_is_deterministic_across_compiles():
    from compiler.pipeline import CompileOptions
    from glowviz.exports.views import compile_session

    a = render_view(session_for("lenet.onnx"), "graph", "dot", stage="post-lower-opt")
    b = render_view(
        compile_session(str(MODELS / "lenet.onnx"), CompileOptions()),
        "graph",
        "dot",
        stage="post-lower-opt",
    )
    assert a == b
    assert not re.search(rb"0x[0-9a-f]{6,}", a)  # no object ids


def test_golden_graph_dot_and_json():
    s = session_for("mlp.onnx")
    check_golden("mlp.graph.final.dot", render_view(s, "graph", "dot").decode())
    check_golden("mlp.graph.import.dot", render_view(s, "graph", "dot", stage="import").decode())
    check_golden(
        "mlp.graph.final.compact.dot", render_view(s, "graph", "dot", compact=True).decode()
    )
    check_golden(
        "lenet.graph.final.json", render_view(session_for("lenet.onnx"), "graph", "json").decode()
    )


def test_golden_lir_and_memory():
    s = session_for("mlp.onnx")
    check_golden("mlp.lir.final.dot", render_view(s, "lir", "dot").decode())
    check_golden("mlp.memory.final.json", _stable(render_view(s, "memory", "json")))
    check_golden("mlp.schedule.final.json", render_view(s, "schedule", "json").decode())
    check_golden(
        "lenet.lifetimes.final.json",
        _stable(render_view(session_for("lenet.onnx"), "lifetimes", "json")),
    )


def _stable(report_json: bytes) -> str:
    """A memory report's JSON without what changes with releases and model files (the project
    version, the model's sha256): the golden files pin the plan, not those."""
    data = json.loads(report_json)
    data["config"]["version"] = data["config"]["model_sha256"] = "*"
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


def test_low_level_views_on_other_stages():
    s = session_for("transformer_block.onnx")
    final = json.loads(render_view(s, "memory", "json"))
    before = json.loads(render_view(s, "memory", "json", stage="copy-elimination"))
    assert before["peak_bytes"] > final["peak_bytes"]  # buffer-sharing comes later
    graph_stage = json.loads(render_view(s, "lifetimes", "json", stage="import"))
    assert graph_stage["stage"] == "import/import-onnx" and graph_stage["buffers"]
    sched = json.loads(render_view(s, "schedule", "json"))
    assert {x["scheduler"] for x in sched["series"]} == set(SCHEDULERS)


def test_exports_carry_aliases_and_the_certificate():
    """Aliases come with `alias_of` and their reason, nested in their buffer; the certificate
    and every scheduler's series (with its verdict) are in the JSON; the map draws them."""
    for model, kind in (("resnet_small.onnx", "accumulates into"), ("unet_small.onnx", "slice ")):
        s = session_for(model, "optimal")
        mem = json.loads(render_view(s, "memory", "json"))
        by_name = {b["name"]: b for b in mem["buffers"]}
        aliases = [b for b in mem["buffers"] if b["alias_of"]]
        assert aliases and all(b["reason"].startswith(kind) for b in aliases)
        for a in aliases:
            p = by_name[a["alias_of"]]
            assert p["offset"] <= a["offset"] and a["offset"] + a["size"] <= p["offset"] + p["size"]
        assert mem["certificate"]["schedule_proven_optimal"]
        assert (
            sum(mem["live_bytes"][mem["peak_instruction"] : mem["peak_instruction"] + 1])
            == (mem["lower_bound_bytes"])
        )  # aliases take no bytes of their own
        sched = json.loads(render_view(s, "schedule", "json"))
        assert [x["scheduler"] for x in sched["series"]] == list(SCHEDULERS)
        assert sched["series"][0]["proven_optimal"]
        assert render_view(s, "memory", "svg").startswith(b"<?xml")


def test_memory_json_matches_plan_invariants():
    data = json.loads(render_view(session_for("resnet_small.onnx"), "memory", "json"))
    bufs = data["buffers"]
    parent = {b["name"]: b["alias_of"] for b in bufs}

    def root(n: str) -> str:
        while parent.get(n):
            n = parent[n]
        return n

    for i, a in enumerate(bufs):
        for b in bufs[i + 1 :]:
            if root(a["name"]) == root(b["name"]):
                continue  # shares bytes by design (alias_of)
            if a["first"] <= b["last"] and b["first"] <= a["last"]:
                assert (
                    a["offset"] + a["size"] <= b["offset"] or b["offset"] + b["size"] <= a["offset"]
                )
    assert max(data["live_bytes"]) == data["lower_bound_bytes"]
    assert set(data["live_at_peak"]) <= {b["name"] for b in bufs}


def _synthetic_module(n: int):
    import numpy as np

    from compiler.graph.ir import Module
    from compiler.graph.types import f32

    m = Module("big")
    x = m.add_placeholder("input", f32(1, 64))
    out = m.add_placeholder("output", f32(1, 64), is_output=True)
    fn = m.create_function()
    v = x
    rng = np.random.default_rng(0)
    for i in range(n // 2):
        c = m.add_constant(f"b{i}", rng.standard_normal((1, 64)).astype(np.float32))
        a = fn.create("Add", [v, c]).result
        v = fn.create("Relu", [a]).result
        if i % 10 == 9:
            v = fn.create("Add", [v, a]).result
    fn.create("Save", [v, out])
    return m


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz 'dot' not installed")
@pytest.mark.slow
def test_thousand_node_graph_renders(capsys):
    from glowviz.exports.render import render_dot

    m = _synthetic_module(1000)
    assert m.node_count() >= 1000
    data = graph_data(m)
    timings = {}
    for compact in (True, False):
        t0 = time.perf_counter()
        svg = render_dot(graph_to_dot(data, compact=compact, detail="full"), "svg")
        timings["compact" if compact else "full"] = time.perf_counter() - t0
        assert svg.count(b'<g id="node') >= 1000
    with capsys.disabled():
        print(
            f"\n1000+ node graph: {m.node_count()} nodes, svg render "
            + ", ".join(f"{k} {v:.1f}s" for k, v in timings.items())
        )
