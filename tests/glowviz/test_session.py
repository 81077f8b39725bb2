"""CompileSession on every sample model (the real pipeline) and on the fake pipeline."""

from __future__ import annotations

import pytest
from ide_helpers import SAMPLES, make_fake_session

from compiler.pipeline import ir_text
from glowviz.session import CompileSession, array_stats, slice_2d


@pytest.mark.parametrize("model", SAMPLES, ids=lambda p: p.stem)
def test_session_on_sample_model(model):
    s = CompileSession(str(model)).compile()
    assert s.done
    assert s.error is None, s.error.headline()
    assert s.low_level_reason is None
    assert s.stages and s.stages[0].stage == "import"
    seen = []
    for i, rec in enumerate(s.stages):
        assert rec.index == i
        assert rec.text
        if rec.ir_kind == "graph":
            rows = s.graph_nodes(i)
            assert any(r["kind"] == "input" for r in rows)
            seen.append(i)
        d = s.diff_prev(i)
        assert d is None or d.summary()
    last = seen[-1]
    node = next(
        r["name"] for r in s.graph_nodes(last) if r["kind"] not in ("input", "output", "constant")
    )
    assert s.node_detail(last, node)["name"] == node
    nodes, edges = s.neighbourhood(last, node)
    assert any(n["name"] == node for n in nodes)
    sched = s.schedules()[0]
    assert sched.order
    assert sched.peak_bytes == max(sched.live_bytes)
    mem = s.memory_report()
    assert mem is not None
    assert mem.peak_bytes >= mem.lower_bound_bytes > 0
    assert mem.live_at_peak
    assert all(b.first <= b.last for b in mem.buffers)
    dbg = s.get_debugger()
    assert dbg.available
    for _ in range(3):
        dbg.step()
    assert dbg.pc == 3
    assert dbg.operands(0)


def test_fake_session_views():
    s = make_fake_session().compile()
    assert s.error is None
    assert [r.pass_name for r in s.stages][:3] == ["import-onnx", "fold-batchnorm", "dce"]
    assert s.stage_index("fuse-activations") == 3
    d = s.diff(0, 3)
    assert d is s.diff(0, 3)  # cached
    assert "conv1 + bn1 -> conv1_bn (Conv)  [fold-batchnorm]" in d.provenance
    assert "conv2 + relu2 -> conv2_relu (Conv)  [fuse-activations]" in d.provenance
    assert s.node_history("conv1_bn")[0].startswith("fold-batchnorm: create conv1_bn")
    mem = s.memory_report()
    assert mem.gap_bytes == 0 and set(mem.live_at_peak) == {"conv1_bn_res", "relu1_res"}
    assert s.schedules()[0].peak_step == 1
    assert [i["kind"] for i in s.instructions()][:2] == ["allocactivation", "conv"]


def test_debugger_breakpoints():
    s = make_fake_session().compile()
    dbg = s.get_debugger()
    assert dbg.available and dbg.pc == 0
    dbg.toggle_breakpoint(5)
    dbg.cont()
    assert dbg.pc == 5 and "breakpoint at #5" in dbg.stop_reason
    dbg.op_breakpoints.add("add")
    dbg.cont()
    assert dbg.pc == 7 and "add" in dbg.stop_reason
    dbg.restart()
    dbg.breakpoints.clear()
    dbg.op_breakpoints.clear()
    dbg.write_breakpoints.add("relu1_res")
    dbg.cont()
    assert dbg.pc == 3  # relu @out %relu1_res (allocactivation writes nothing)
    dbg.step()
    assert dbg.last_written == ["relu1_res"]
    ops = dbg.operands(3)
    assert ops[0]["min"] == 3.0 and ops[0]["nan"] == 0
    dbg.cont()
    assert dbg.finished and dbg.stop_reason == "finished"


def test_error_keeps_stages():
    s = make_fake_session(failing=True).compile()
    assert s.error is not None
    assert s.error.pass_name == "fold-batchnorm" and s.error.node == "bn1"
    assert len(s.stages) == 1
    assert s.memory_report() is None


def test_missing_file_is_an_error(tmp_path):
    s = CompileSession(str(tmp_path / "nope.onnx")).compile()
    assert s.error is not None and "not found" in s.error.message


def test_bad_onnx_is_an_error(tmp_path):
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"this is not onnx")
    s = CompileSession(str(bad)).compile()
    assert s.error is not None and not s.stages


def test_stats_and_slice():
    import numpy as np

    a = np.array([[1.0, np.nan], [np.inf, 3.0]])
    st = array_stats(a)
    assert st["nan"] == 1 and st["inf"] == 1 and st["min"] == 1.0 and st["max"] == 3.0
    assert slice_2d(np.zeros((2, 3, 4)), 2, 2) == [[0.0, 0.0], [0.0, 0.0]]


def test_compare_arrays():
    import numpy as np

    from glowviz.session import compare_arrays

    a = np.array([1.0, 2.0, np.nan, 0.0], np.float32)
    r = compare_arrays(a, a.copy())
    assert r["ok"] and r["abs"] == 0 and r["rel"] == 0
    b = a.copy()
    b[1] = 2.5
    r = compare_arrays(a, b)
    assert not r["ok"] and r["abs"] == 0.5 and r["worst_index"] == (1,)
    assert r["rel"] == 0.5 / 2.5
    c = a.copy()
    c[3] = np.nan
    assert not compare_arrays(a, c)["ok"]  # NaN only on one side
    assert compare_arrays(a + 1e-7, a)["ok"]  # within atol


def _compiled(name: str = "mlp.onnx") -> CompileSession:
    from ide_helpers import ROOT

    s = CompileSession(str(ROOT / "sample_models" / name)).compile()
    assert s.error is None, s.error.headline()
    assert s.low_level_reason is None
    return s


def test_debugger_steps_llvm_with_the_interpreter_in_lock_step():
    s = _compiled()
    d = s.get_debugger()
    assert d.executor_name == "llvm" and d.reference.name == "interpreter"
    assert not d.run_to_divergence()
    assert d.finished and "no divergence" in d.stop_reason
    d.restart()
    assert d.pc == 0 and d.reference.pc == 0
    k = next(
        i
        for i, ins in enumerate(d.instrs)
        if ins["kind"] not in ("allocactivation", "deallocactivation", "tensorview")
    )
    assert "define" in d.code("llvm", k) and d.code("asm", k).strip()


def test_debugger_falls_back_to_the_interpreter_when_codegen_fails(monkeypatch):
    import glowviz.session as gs
    from compiler.errors import CodegenError

    def boom(*a, **k):
        raise CodegenError("no emitter for op frobnicate")

    monkeypatch.setattr(gs.LLVMStepper, "__init__", boom)
    d = _compiled().get_debugger()
    assert d.available and d.executor_name == "interpreter" and d.reference is None
    assert "no emitter for op frobnicate" in d.fallback_error
    assert "no generated code" in d.code("llvm", 0)
    d.step()
    assert d.pc == 1 and d.comparison is None


def test_the_compile_runs_without_automatic_cycle_collection():
    """The collector's full collections over the growing heap were 0.4-0.7 s of a 1 s
    DenseNet-121 compile: a session compiles with it paused, and turns it back on after."""
    import gc

    seen = []
    s = make_fake_session()
    real = s._compile_fn

    def compile_fn(*args):
        seen.append(gc.isenabled())
        return real(*args)

    s._compile_fn = compile_fn
    assert gc.isenabled()
    s.compile()
    assert s.error is None
    assert seen == [False]
    assert gc.isenabled()


def test_gc_paused_nests_across_threads_and_keeps_a_disabled_collector_off():
    import gc
    import threading

    from glowviz.session import gc_paused

    inner_in, inner_out = threading.Event(), threading.Event()

    def other() -> None:
        with gc_paused():
            inner_in.set()
            inner_out.wait(10)

    with gc_paused():
        t = threading.Thread(target=other)
        t.start()
        assert inner_in.wait(10)
    assert not gc.isenabled()  # the other thread still compiles
    inner_out.set()
    t.join()
    assert gc.isenabled()
    gc.disable()
    try:
        with gc_paused():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_stages_of_unchanged_passes_share_the_snapshot_and_its_text():
    """A pass that changed nothing shares the previous stage's snapshot; its text and hash are
    printed once for both (the warm-up printed the same DenseNet-121 graph 33 times)."""
    s = CompileSession(str(SAMPLES[0])).compile()
    assert s.error is None
    pairs = [(a, b) for a, b in zip(s.stages, s.stages[1:]) if b.ir is a.ir]
    assert pairs and all(not b.changed for _a, b in pairs)
    a, b = pairs[0]
    assert not a.has_text and not b.has_text
    assert b.text is a.text and b.ir_hash == a.ir_hash
    assert b.has_text
    for rec in s.stages:  # every stage's text is still its own IR's
        assert rec.text == ir_text(rec.ir)
