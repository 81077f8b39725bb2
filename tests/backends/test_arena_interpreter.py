"""The arena interpreter: numbers equal the graph interpreter's, poison proves liveness,
stepping equals one-shot execution bit for bit, and a wrong plan gives wrong numbers."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from compiler.backends.interpreter.arena import ArenaExecutor, ArenaInterpreter, NaivePlan, run_lir
from compiler.backends.interpreter.graph_interpreter import run_graph
from compiler.errors import ExecutionError, InputError
from compiler.graph.ir import Module
from compiler.graph.types import ElemKind, TensorType, f32
from compiler.lir import parse_lir, verify_lir
from compiler.lir.irgen import irgen
from compiler.memory.plan import plan_memory
from compiler.pipeline import CompileOptions, compile_model
from tests.lir_text import lir_text

SAMPLES = Path(__file__).resolve().parents[2] / "sample_models"


def _model() -> tuple[Module, dict[str, np.ndarray]]:
    """Conv, Relu, Concat, Slice, Split, Reshape, MatMul, two outputs."""
    rng = np.random.default_rng(0)
    m = Module("t")
    fn = m.create_function("main")
    x = m.add_placeholder("input", f32(1, 4, 6, 6))
    y = m.add_placeholder("output", f32(1, 10), is_output=True)
    y2 = m.add_placeholder("output2", f32(2, 4, 3, 6), is_output=True)
    w = m.add_constant("w", rng.standard_normal((4, 4, 3, 3)).astype(np.float32))
    b = m.add_constant("b", rng.standard_normal(4).astype(np.float32))
    c = fn.create("Conv", [x, w, b], {"pads": (1, 1, 1, 1)}, name="conv")
    r = fn.create("Relu", [c.result], name="relu")
    cat = fn.create("Concat", [r.result, c.result], {"axis": 1}, name="cat")
    sl = fn.create(
        "Slice",
        [cat.result],
        {"starts": (0, 2, 0, 0), "ends": (1, 6, 6, 6), "steps": (1, 1, 1, 1)},
        name="sl",
    )
    sp = fn.create("Split", [sl.result], {"axis": 2, "splits": (3, 3)}, name="sp")
    cat2 = fn.create("Concat", [sp.results[0], sp.results[1]], {"axis": 0}, name="cat2")
    fn.create("Save", [cat2.result, y2], name="save2")
    rs = fn.create("Reshape", [sl.result], {"shape": (1, 144)}, name="flat")
    fcw = m.add_constant("fcw", rng.standard_normal((144, 10)).astype(np.float32))
    mm = fn.create("MatMul", [rs.result, fcw], name="mm")
    e = fn.create("Sigmoid", [mm.result], name="sig")
    fn.create("Save", [e.result, y], name="save")
    inputs = {"input": rng.standard_normal((1, 4, 6, 6)).astype(np.float32)}
    return m, inputs


def _assert_same(out: dict, ref: dict, rtol: float = 1e-5, atol: float = 1e-5) -> None:
    assert list(out) == list(ref)
    for k in ref:
        np.testing.assert_allclose(out[k], ref[k], rtol=rtol, atol=atol, err_msg=k)


@pytest.mark.parametrize("planner", ["naive", "memory"])
@pytest.mark.parametrize("poison", [False, True])
def test_matches_graph_interpreter(planner: str, poison: bool) -> None:
    m, inputs = _model()
    lir = irgen(m)
    plan = NaivePlan(lir) if planner == "naive" else plan_memory(lir)
    out = ArenaInterpreter(lir, plan, poison=poison).run(inputs)
    _assert_same(out, run_graph(m, inputs))


def test_arena_is_one_aligned_buffer_laid_out_by_the_plan() -> None:
    m, inputs = _model()
    lir = irgen(m)
    plan = plan_memory(lir)
    it = ArenaInterpreter(lir, plan)
    assert it.arena.dtype == np.uint8 and it.arena.ctypes.data % 64 == 0
    for name in ("w", "input", "conv_res"):
        region, off = plan.offset_of(name)
        v = it._view(lir.get(name), writable=False)
        assert v.ctypes.data == it.arena.ctypes.data + it.region_base[region] + off
        assert np.shares_memory(v, it.arena)
    flat = lir.get("flat")
    assert (
        it._view(flat, writable=False).ctypes.data
        == it._view(lir.get("sl_res"), writable=False).ctypes.data
    )


def test_stepping_equals_one_shot_bit_for_bit() -> None:
    m, inputs = _model()
    lir = irgen(m)
    plan = plan_memory(lir)
    once = ArenaInterpreter(lir, plan).run(inputs)
    it = ArenaInterpreter(lir, plan)
    it.reset(inputs)
    seen = []
    while not it.done:
        info = it.step()
        seen.append(info.index)
        if info.instruction.name == "conv":
            assert info.written == ["conv_res"]
            conv_now = it.read("conv")
            np.testing.assert_array_equal(conv_now, it.read("conv_res"))
    assert seen == list(range(len(lir.code)))
    for k in once:
        np.testing.assert_array_equal(it.outputs()[k], once[k])
    with pytest.raises(ExecutionError, match="finished"):
        it.step()


def test_breakpoints_and_run_to() -> None:
    m, inputs = _model()
    lir = irgen(m)
    it = ArenaInterpreter(lir, plan_memory(lir))
    it.reset(inputs)
    mm_index = lir.find("mm").index
    it.run(breakpoints={mm_index})
    assert it.pc == mm_index
    it.run(breakpoints={mm_index})  # a stop at the breakpoint itself makes progress
    assert it.done
    it.reset(inputs)
    it.run(breakpoints=[lambda i, ins: ins.kind == "copy"])
    assert lir.code[it.pc].kind == "copy"
    it.run_to(5)
    assert it.pc == 5
    last = it.run()
    assert it.done and last is not None and last.index == len(lir.code) - 1
    _assert_same(it.outputs(), run_graph(m, inputs))


def test_poison_keeps_outputs_and_catches_early_dealloc() -> None:
    m, inputs = _model()
    lir = irgen(m)
    plan = NaivePlan(lir)
    ref = ArenaInterpreter(lir, plan).run(inputs)
    poisoned = ArenaInterpreter(lir, plan, poison=True).run(inputs)
    for k in ref:
        np.testing.assert_array_equal(poisoned[k], ref[k])
    # Move sl_res's dealloc before its last reader (via the %flat view): reads dead memory.
    bad = lir.clone()
    dealloc = bad.find("sl_res.dealloc")
    bad.move_before(dealloc, bad.find("mm"))
    with pytest.raises(Exception, match="after its deallocation"):
        verify_lir(bad)
    out = ArenaInterpreter(bad, NaivePlan(bad), poison=True).run(inputs)
    assert np.isnan(out["output"]).all()
    np.testing.assert_array_equal(out["output2"], ref["output2"])


class _OverlapPlan(NaivePlan):
    """A deliberately wrong plan: two buffers live at the same time share one offset."""

    def __init__(self, lir, a: str, b: str) -> None:
        super().__init__(lir)
        self.offsets[b] = self.offsets[a]


def test_wrong_plan_gives_wrong_numbers() -> None:
    m, inputs = _model()
    lir = irgen(m)
    ref = run_graph(m, inputs)
    # conv_res and relu_res are both read by the concat: they are live together.
    out = ArenaInterpreter(lir, _OverlapPlan(lir, "conv_res", "relu_res")).run(inputs)
    assert not np.allclose(out["output"], ref["output"])
    assert not np.allclose(out["output2"], ref["output2"])
    # Sharing an offset between buffers whose lifetimes do not overlap is fine.
    names = [i.name for i in lir.code]
    assert names.index("cat_res.dealloc") < names.index("mm_res")
    ok = ArenaInterpreter(lir, _OverlapPlan(lir, "cat_res", "mm_res")).run(inputs)
    _assert_same(ok, ref)


def test_in_place_elementwise_output_aliasing_input() -> None:
    text = lir_text("""
  %x = weight mutable input : f32<2x3>
  %out = weight mutable output : f32<2x3>
  %c = weight const : f32<3> = dense<[1.0, 2.0, 3.0]>
  0 %a = allocactivation : f32<2x3>
  1 %e = exp @out %a, @in %x
  2 %add = add @out %a, @in %a, @in %c
  3 %m = mul @out %a, @in %a, @in %a
  4 %cp = copy @out %out, @in %a
  5 %d = deallocactivation @out %a
""")
    lir = parse_lir(text)
    verify_lir(lir)
    x = np.arange(6, dtype=np.float32).reshape(2, 3) / 10
    out = run_lir(lir, {"x": x}, poison=True)
    expect = (np.exp(x) + np.array([1, 2, 3], np.float32)) ** 2
    np.testing.assert_allclose(out["out"], expect, rtol=1e-6)


def test_insert_extract_and_views() -> None:
    text = lir_text("""
  %x = weight mutable input : f32<2x3>
  %out = weight mutable output : f32<2x4>
  %row = weight mutable output : f32<6>
  0 %cat = allocactivation : f32<2x6>
  1 %i0 = inserttensor @inout %cat, @in %x {offsets = [0, 0], count = 2, axis = 1}
  2 %e = extracttensor @out %out, @in %cat {offsets = [0, 1]}
  3 %v = tensorview @in %cat {offsets = [1, 0]} : f32<6>
  4 %c = copy @out %row, @in %v
  5 %d = deallocactivation @out %cat
""")
    lir = parse_lir(text)
    verify_lir(lir)
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    out = run_lir(lir, [x])
    cat = np.concatenate([x, x], axis=1)
    np.testing.assert_array_equal(out["out"], cat[:, 1:5])
    np.testing.assert_array_equal(out["row"], cat[1])


def test_input_errors_and_elided_constants() -> None:
    m, inputs = _model()
    lir = irgen(m)
    it = ArenaInterpreter(lir)
    with pytest.raises(InputError, match="missing input 'input'"):
        it.reset({})
    with pytest.raises(InputError, match="shape"):
        it.reset({"input": np.zeros((1, 4, 6, 5), np.float32)})
    with pytest.raises(InputError, match="unknown input .other."):
        it.reset({"input": inputs["input"], "other": inputs["input"]})
    from compiler.lir import print_lir

    elided = parse_lir(print_lir(lir))
    with pytest.raises(ExecutionError, match="no data"):
        ArenaInterpreter(elided)
    full = parse_lir(print_lir(lir, with_data=True))
    _assert_same(ArenaInterpreter(full).run(inputs), run_graph(m, inputs))


def test_plan_overrun_is_reported() -> None:
    m, _ = _model()
    lir = irgen(m)
    plan = NaivePlan(lir)
    plan.region_sizes = dict(plan.region_sizes, activations=64)
    with pytest.raises(ExecutionError, match="overruns the activations region"):
        ArenaInterpreter(lir, plan)


def test_executor_api() -> None:
    m, inputs = _model()
    ex = ArenaExecutor(SimpleNamespace(module=m, lir=None, plan=None, schedule=None))
    assert ex.kind == "interpreter"
    assert ex.input_names == ["input"] and ex.output_names == ["output", "output2"]
    ref = run_graph(m, inputs)
    _assert_same(ex.run(inputs), ref)
    _assert_same(ex.run([inputs["input"]]), ref)
    _assert_same(ArenaExecutor(m).run(inputs), ref)


# -- sample models ------------------------------------------------------------------------------


@pytest.mark.parametrize("model", sorted(p.stem for p in SAMPLES.glob("*.onnx")))
def test_sample_models(model: str) -> None:
    result = compile_model(SAMPLES / f"{model}.onnx", CompileOptions(low_level=False))
    inputs = dict(np.load(SAMPLES / f"{model}.input.npz"))
    expected = dict(np.load(SAMPLES / f"{model}.expected.npz"))
    lir = irgen(result.module)
    verify_lir(lir)
    plan = plan_memory(lir)
    out = ArenaInterpreter(lir, plan, poison=True).run(inputs)
    ref = run_graph(result.module, inputs)
    _assert_same(out, ref, rtol=1e-5, atol=1e-5)
    for k, v in expected.items():
        np.testing.assert_allclose(out[k], v, rtol=1e-4, atol=1e-4, err_msg=k)
    it = ArenaInterpreter(lir, plan)
    it.reset(inputs)
    while not it.done:
        it.step()
    for k in out:
        np.testing.assert_array_equal(it.outputs()[k], out[k])


@pytest.mark.parametrize("model", sorted(p.stem for p in SAMPLES.glob("*.onnx")))
def test_sample_models_full_pipeline(model: str) -> None:
    """The LIR after the memory engineer's passes, over the real plan, via the executor."""
    result = compile_model(SAMPLES / f"{model}.onnx", CompileOptions())
    assert result.lir is not None and result.plan is not None, "the pipeline produced no LIR/plan"
    verify_lir(result.lir)
    inputs = dict(np.load(SAMPLES / f"{model}.input.npz"))
    expected = dict(np.load(SAMPLES / f"{model}.expected.npz"))
    out = ArenaExecutor(result, poison=True).run(inputs)
    for k, v in expected.items():
        np.testing.assert_allclose(out[k], v, rtol=1e-4, atol=1e-4, err_msg=k)


def test_integer_buffers_poison_and_scalars() -> None:
    m = Module("t")
    fn = m.create_function("main")
    x = m.add_placeholder("x", f32(3, 5))
    out = m.add_placeholder("idx", TensorType(ElemKind.I64, ()), is_output=True)
    out2 = m.add_placeholder("f", f32(3), is_output=True)
    a = fn.create("ArgMax", [x], {"axis": 1, "keepdims": 0}, name="am")
    r = fn.create("ReduceMax", [a.result], {"axes": (0,), "keepdims": 0}, name="rm")
    fn.create("Save", [r.result, out])
    c = fn.create("Cast", [a.result], {"to": "f32"}, name="c")
    fn.create("Save", [c.result, out2])
    inputs = {"x": np.random.default_rng(1).standard_normal((3, 5)).astype(np.float32)}
    lir = irgen(m)
    verify_lir(lir)
    out = ArenaInterpreter(lir, plan_memory(lir), poison=True).run(inputs)
    ref = run_graph(m, inputs)
    for k in ref:
        np.testing.assert_array_equal(out[k], ref[k])
        assert out[k].dtype == ref[k].dtype
