"""The JIT cache keyed before code generation (compiler/backends/llvm/cache.py): a hit runs no
emitter, anything that changes the code misses, damaged entries recompile, and a hit computes
what a fresh compile computes."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import compiler.backends.llvm.cache as jit_cache
from compiler.backends.interpreter.arena import ArenaInterpreter, NaivePlan
from compiler.backends.llvm import codegen
from compiler.backends.llvm.executor import LLVMExecutor, _lir_and_plan, executor_key
from compiler.backends.llvm.jit import JITEngine, ModuleCache
from compiler.backends.llvm.kernels import parallel
from compiler.pipeline import compile_model

ROOT = Path(__file__).resolve().parents[3]
SAMPLES = ROOT / "sample_models"


@pytest.fixture(autouse=True)
def own_memory_cache(monkeypatch):
    """Each test starts with an empty in-memory module cache (the disk is what is tested)."""
    monkeypatch.setattr(JITEngine, "_memory", ModuleCache())
    monkeypatch.setattr(JITEngine, "_programs", ModuleCache())
    monkeypatch.delenv("GLOWVIZ_NO_DISK_CACHE", raising=False)
    monkeypatch.delenv("GLOWVIZ_CONV_STRATEGY", raising=False)


@pytest.fixture
def generations(monkeypatch):
    """Counts the code generator's runs (``CodeGen.generate``: every emitter runs inside it)."""
    calls = []
    real = codegen.CodeGen.generate

    def counting(self, *args, **kwargs):
        calls.append(self.lir.name)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(codegen.CodeGen, "generate", counting)
    return calls


def _forget_memory() -> None:
    JITEngine._memory.clear()
    JITEngine._programs.clear()


def _feed(lir, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {
        w.name: rng.standard_normal(w.type_.shape).astype(w.type_.np_dtype) for w in lir.inputs()
    }


def _conv_model(weight: np.ndarray) -> onnx.ModelProto:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 10, 10])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8, 10, 10])
    w = numpy_helper.from_array(weight, "w")
    b = numpy_helper.from_array(np.linspace(-1, 1, weight.shape[0]).astype(np.float32), "b")
    nodes = [
        helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["y"]),
    ]
    graph = helper.make_graph(nodes, "conv", [x], [y], [w, b])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _weight(seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((8, 3, 3, 3)).astype(np.float32)


def _check_against_interpreter(lir, plan, outs: dict[str, np.ndarray], feed) -> None:
    ref = ArenaInterpreter(lir, plan).run(feed)
    for name, got in outs.items():
        np.testing.assert_allclose(got, ref[name], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize(
    "model", ["lenet", "resnet_small", "mobilenet_small", "transformer_block", "unet_small"]
)
def test_a_hit_generates_nothing_and_computes_what_a_fresh_compile_does(
    model, tmp_path, generations
):
    lir, plan = _lir_and_plan(compile_model(str(SAMPLES / f"{model}.onnx")))
    feed = _feed(lir)
    engine = JITEngine(directory=tmp_path)
    fresh = LLVMExecutor(lir, plan, engine=engine)
    assert not fresh.from_cache and not fresh.compiled.from_disk and len(generations) == 1
    expected = fresh.run(feed)
    _check_against_interpreter(lir, plan, expected, feed)

    _forget_memory()
    hit = LLVMExecutor(lir, plan, engine=engine)
    assert hit.from_cache and hit.compiled.from_disk and hit.key == fresh.key
    assert len(generations) == 1  # no emitter ran
    assert hit.info == fresh.info
    got = hit.run(feed)
    for name, want in expected.items():
        np.testing.assert_array_equal(got[name], want)
    # Views of the code work from the entry: optimized IR and assembly of one instruction.
    index = next(i.index for i in hit.info.instrs if i.entry in hit.info.run_entries)
    assert "define" in hit.llvm_ir(index) and hit.assembly(index).strip()
    assert len(generations) == 1


@pytest.mark.parametrize("model", ["transformer_block", "unet_small"])
def test_stepping_a_hit_compiles_the_step_only_module(model, tmp_path, generations):
    """Fused chains' members have entries of their own in a second module: stepping a program
    loaded from the cache still reaches them (a miss of that module generates the program once,
    then it is cached as well), bit for bit with run_all."""
    lir, plan = _lir_and_plan(compile_model(str(SAMPLES / f"{model}.onnx")))
    feed = _feed(lir, 1)
    engine = JITEngine(directory=tmp_path)
    first = LLVMExecutor(lir, plan, engine=engine)
    assert first.info.step_entries
    want = first.run(feed)
    for round_ in range(2):  # the step module: a miss (generates), then a hit (does not)
        _forget_memory()
        before = len(generations)
        ex = LLVMExecutor(lir, plan, engine=engine)
        assert ex.from_cache
        ex.reset(feed)
        while not ex.done:
            ex.step()
        assert ex._step_compiled is not None
        assert ex._step_compiled.from_disk == (round_ == 1)
        assert len(generations) == before + (round_ == 0)
        for name, value in want.items():
            np.testing.assert_array_equal(ex.outputs()[name], value)


def test_a_changed_weight_misses(tmp_path, generations):
    engine = JITEngine(directory=tmp_path)
    w = _weight()
    lir, plan = _lir_and_plan(compile_model(_conv_model(w)))
    first = LLVMExecutor(lir, plan, engine=engine)
    w2 = w.copy()
    w2[3, 1, 2, 0] += 0.5  # one element of the packed filter
    lir2, plan2 = _lir_and_plan(compile_model(_conv_model(w2)))
    _forget_memory()
    second = LLVMExecutor(lir2, plan2, engine=engine)
    assert second.key != first.key and not second.from_cache
    assert len(generations) == 2
    feed = _feed(lir2)
    got = second.run(feed)
    _check_against_interpreter(lir2, plan2, got, feed)
    assert not np.allclose(got["y"], first.run(feed)["y"])


def _renamed(model: onnx.ModelProto, suffix: str) -> onnx.ModelProto:
    """The same model with every value, node and graph name changed."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    g = m.graph
    g.name += suffix
    for vi in [*g.input, *g.output, *g.value_info]:
        vi.name += suffix
    for init in g.initializer:
        init.name += suffix
    for node in g.node:
        node.name += suffix
        node.input[:] = [n + suffix for n in node.input]
        node.output[:] = [n + suffix for n in node.output]
    return m


def test_programs_that_differ_only_in_names_share_an_entry(tmp_path, generations):
    """The code never depends on value names: a renamed model hits the entry of the first
    (as the IR-text key did), and reads its own constants in place by position."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 33])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 33])
    c = numpy_helper.from_array(np.linspace(-2, 2, 33, dtype=np.float32), "c")
    nodes = [
        helper.make_node("Add", ["x", "c"], ["a"]),
        helper.make_node("Tanh", ["a"], ["t"]),
        helper.make_node("Mul", ["t", "c"], ["y"]),
    ]
    graph = helper.make_graph(nodes, "addmul", [x], [y], [c])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    engine = JITEngine(directory=tmp_path)
    for m in (model, _conv_model(_weight(4))):
        lir, plan = _lir_and_plan(compile_model(m))
        first = LLVMExecutor(lir, plan, engine=engine)
        lir2, plan2 = _lir_and_plan(compile_model(_renamed(m, "_2")))
        assert [w.name for w in lir2.weights.values()] != [w.name for w in lir.weights.values()]
        _forget_memory()
        count = len(generations)
        second = LLVMExecutor(lir2, plan2, engine=engine)
        assert second.key == first.key and second.from_cache
        assert len(generations) == count
        feed = _feed(lir2)
        got = second.run(feed)
        _check_against_interpreter(lir2, plan2, got, feed)
        want = first.run({a.name: v for a, v in zip(lir.inputs(), feed.values())})
        for (_, a), (_, b) in zip(sorted(got.items()), sorted(want.items())):
            np.testing.assert_array_equal(a, b)


def test_programs_with_the_same_code_share_its_object(tmp_path, generations):
    """Two keys whose code comes out the same (ArgMax's keepdims only changes the output's
    shape): the second is generated (its key misses) but not compiled: it loads the object of
    the first, as the IR-text key did."""
    engine = JITEngine(directory=tmp_path)
    executors = []
    for keepdims in (1, 0):
        x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [5, 7])
        y = helper.make_tensor_value_info("y", TensorProto.INT64, [5, 1] if keepdims else [5])
        node = helper.make_node("ArgMax", ["x"], ["y"], axis=1, keepdims=keepdims)
        graph = helper.make_graph([node], "argmax", [x], [y])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
        lir, plan = _lir_and_plan(compile_model(model))
        _forget_memory()
        ex = LLVMExecutor(lir, plan, engine=engine)
        feed = _feed(lir)
        _check_against_interpreter(lir, plan, ex.run(feed), feed)
        executors.append(ex)
    first, second = executors
    assert first.key != second.key and not second.from_cache and len(generations) == 2
    assert second.compiled.key == first.compiled.key and second.compiled.from_disk


def test_options_switches_and_the_plan_are_in_the_key(tmp_path, monkeypatch):
    lir, plan = _lir_and_plan(compile_model(_conv_model(_weight())))
    base = executor_key(lir, plan)
    assert executor_key(lir, plan) == base  # deterministic
    assert executor_key(lir, plan, fuse=False) != base
    assert executor_key(lir, plan, conv_strategy="direct") != base
    monkeypatch.setenv("GLOWVIZ_CONV_STRATEGY", "direct")
    assert executor_key(lir, plan) == executor_key(lir, plan, conv_strategy="direct")
    monkeypatch.delenv("GLOWVIZ_CONV_STRATEGY")
    # Other offsets baked into the code (the planner's reuse vs one slot per buffer):
    lir_r, plan_r = _lir_and_plan(compile_model(str(SAMPLES / "resnet_small.onnx")))
    naive = NaivePlan(lir_r)
    assert any(plan_r.offset_of(i.name) != naive.offset_of(i.name) for i in lir_r.allocs())
    assert executor_key(lir_r, naive) != executor_key(lir_r, plan_r)
    with monkeypatch.context() as m:
        m.setattr(parallel, "CHUNK_FMAS", parallel.CHUNK_FMAS // 2)  # a module-level switch
        assert executor_key(lir, plan) != base
    with monkeypatch.context() as m:
        m.setattr(codegen, "MERGE_FUNCTIONS", not codegen.MERGE_FUNCTIONS)
        assert executor_key(lir, plan) != base
    with monkeypatch.context() as m:
        m.setenv("GLOWVIZ_LLVM_CPU", "x86-64")  # another target
        m.setenv("GLOWVIZ_LLVM_FEATURES", "")
        assert executor_key(lir, plan) != base
    assert executor_key(lir, plan) == base
    # A changed program: one attribute of one instruction.
    conv = next(i for i in lir.code if i.kind == "conv")
    lir2, plan2 = _lir_and_plan(compile_model(_conv_model(_weight())))
    conv2 = next(i for i in lir2.code if i.kind == "conv")
    assert executor_key(lir2, plan2) == base  # the same program compiled again
    conv2.attrs = {**conv2.attrs, "activation": "none" if conv.attrs.get("activation") else "relu"}
    assert executor_key(lir2, plan2) != base


def test_a_stand_in_function_gets_a_key_of_its_own(monkeypatch):
    """A test replacing a kernel helper by a closure (pool's vector width) must not hit entries
    of the real one, nor one closure hit another's with a different captured value."""
    from compiler.backends.llvm.emitters import pool

    lir, plan = _lir_and_plan(compile_model(str(SAMPLES / "lenet.onnx")))
    base = executor_key(lir, plan)
    keys = set()
    for lanes in (4, 8):
        with monkeypatch.context() as m:
            m.setattr(pool, "vector_width_f32", lambda isa=None: lanes)
            keys.add(executor_key(lir, plan))
    assert len(keys) == 2 and base not in keys
    assert executor_key(lir, plan) == base
    # An entry of a table replaced in place (the table itself is the same dict).
    from compiler.backends.llvm.emitters import EMITTERS

    with monkeypatch.context() as m:
        m.setitem(EMITTERS, "relu", lambda ctx, ins: None)
        assert executor_key(lir, plan) != base
    assert executor_key(lir, plan) == base


def test_sources_are_the_code_generators_import_closure(tmp_path):
    files = {str(p.relative_to(jit_cache._ROOT)) for p in jit_cache.source_files()}
    pkg = Path(jit_cache.__file__).resolve().parent
    for sub in ("emitters", "kernels"):
        for p in pkg.joinpath(sub).rglob("*.py"):
            assert str(p.relative_to(jit_cache._ROOT)) in files
    for needed in (
        "compiler/backends/llvm/codegen.py",
        "compiler/backends/llvm/target.py",
        "compiler/graph/activations.py",  # the fused activations' IR
        "compiler/lir/ir.py",
        "compiler/memory/regions.py",
    ):
        assert needed in files
    # Editing a source changes the digest.
    a, b = tmp_path / "a.py", tmp_path / "b.py"
    a.write_text("X = 1\n")
    b.write_text("def f():\n    return 2\n")
    before = jit_cache.sources_digest([a, b])
    b.write_text("def f():\n    return 3\n")
    assert jit_cache.sources_digest([a, b]) != before


def _entry_of(tmp_path: Path, key: str) -> Path:
    jit_cache.flush_writes()  # entries are written in the background (as a later process sees them)
    path = jit_cache.entry_path(tmp_path, key)
    assert path.exists()
    return path


def _damage_blob_byte(path: Path) -> None:
    raw = bytearray(path.read_bytes())
    raw[-7] ^= 0x40  # the last section: the packed weights
    path.write_bytes(bytes(raw))


@pytest.mark.parametrize(
    "damage",
    ["flip", "truncate", "empty", "garbage", "other-key", "old-format", "object", "no-object"],
)
def test_a_damaged_entry_recompiles_and_computes_right(damage, tmp_path, generations):
    lir, plan = _lir_and_plan(compile_model(_conv_model(_weight(2))))
    feed = _feed(lir)
    engine = JITEngine(directory=tmp_path)
    first = LLVMExecutor(lir, plan, engine=engine)
    want = first.run(feed)
    path = _entry_of(tmp_path, first.key)
    raw = path.read_bytes()
    if damage in ("object", "no-object"):  # the program's entry is whole, its object is not
        obj = _entry_of(tmp_path, first.compiled.key)
        if damage == "object":
            _damage_blob_byte(obj)  # the last section: the optimized IR
            data = bytearray(obj.read_bytes())
            data[len(data) // 3] ^= 0x01  # and a byte of the object code
            obj.write_bytes(bytes(data))
        else:
            obj.unlink()
    elif damage == "flip":
        _damage_blob_byte(path)
    elif damage == "truncate":
        path.write_bytes(raw[: len(raw) // 2])
    elif damage == "empty":
        path.write_bytes(b"")
    elif damage == "garbage":
        path.write_bytes(np.random.default_rng(0).bytes(len(raw)))
    elif damage == "other-key":
        other = _conv_model(_weight(3))
        lir_o, plan_o = _lir_and_plan(compile_model(other))
        o = LLVMExecutor(lir_o, plan_o, engine=engine)
        path.write_bytes(_entry_of(tmp_path, o.key).read_bytes())
    else:
        header = jit_cache._HEAD.unpack_from(raw)
        path.write_bytes(
            jit_cache._HEAD.pack(header[0], jit_cache.FORMAT + 1, header[2])
            + raw[jit_cache._HEAD.size :]
        )
    _forget_memory()
    count = len(generations)
    again = LLVMExecutor(lir, plan, engine=engine)
    assert not again.from_cache and len(generations) == count + 1
    if damage in ("object", "no-object"):
        assert not again.compiled.from_disk
    got = again.run(feed)
    np.testing.assert_array_equal(got["y"], want["y"])
    _check_against_interpreter(lir, plan, got, feed)
    # The entries were rewritten whole: the next compile is a hit again.
    _forget_memory()
    last = LLVMExecutor(lir, plan, engine=engine)
    assert last.from_cache and last.compiled.from_disk
    np.testing.assert_array_equal(last.run(feed)["y"], want["y"])


def test_entries_are_checked_section_by_section(tmp_path):
    path = tmp_path / "k.gvz"
    sections = {"meta": b"{}", "object": b"\x7fELF" + bytes(100), "blobs": bytes(range(256))}
    assert jit_cache.write_entry(path, "k", sections)
    got = jit_cache.read_entry(path, "k", required=("meta", "object"))
    assert got is not None and {n: bytes(v) for n, v in got.items()} == sections
    assert jit_cache.read_entry(path, "other") is None
    assert jit_cache.read_entry(path, "k", required=("ir",)) is None
    assert jit_cache.read_entry(tmp_path / "missing.gvz", "k") is None
    path.write_bytes(path.read_bytes() + b"x")  # trailing bytes: not what was written
    assert jit_cache.read_entry(path, "k") is None
    assert not list(tmp_path.glob("*.tmp*"))


def test_concurrent_writers_of_one_key_leave_a_whole_entry(tmp_path):
    """Writers each write a temporary file of their own and rename it: whichever rename comes
    last, readers see one whole entry, never a mix."""
    path = tmp_path / "k.gvz"
    payloads = [bytes([i]) * (1 << 20) for i in range(8)]
    seen: list[bool] = []

    def write(i: int) -> None:
        for _ in range(3):
            jit_cache.write_entry(path, "k", {"meta": b"{}", "object": payloads[i]})
            got = jit_cache.read_entry(path, "k")
            seen.append(got is not None and bytes(got["object"]) in payloads)

    threads = [threading.Thread(target=write, args=(i,)) for i in range(len(payloads))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(seen) and len(seen) == 3 * len(payloads)
    assert not list(tmp_path.glob("*.tmp*"))


def test_a_read_only_cache_only_costs_speed(tmp_path, generations):
    lir, plan = _lir_and_plan(compile_model(str(SAMPLES / "mlp.onnx")))
    blocked = tmp_path / "file"
    blocked.write_text("not a directory")
    engine = JITEngine(directory=blocked / "cache")
    feed = _feed(lir)
    got = LLVMExecutor(lir, plan, engine=engine).run(feed)
    _check_against_interpreter(lir, plan, got, feed)
    _forget_memory()
    assert not LLVMExecutor(lir, plan, engine=engine).from_cache


def test_a_process_leaves_its_entries_written_when_it_exits(tmp_path):
    """Entries are written on a background thread, after the executor is ready; the process's
    exit waits for them: a run that ends right after its compile leaves whole entries (the
    program's and its object's) and no temporary file."""
    code = (
        "import sys; from compiler.pipeline import compile_model;"
        "from compiler.backends.llvm.executor import LLVMModelExecutor;"
        f"LLVMModelExecutor(compile_model({str(SAMPLES / 'lenet.onnx')!r}))"
    )
    env = dict(os.environ, GLOWVIZ_CACHE_DIR=str(tmp_path))
    env.pop("GLOWVIZ_NO_DISK_CACHE", None)
    subprocess.run([sys.executable, "-c", code], check=True, env=env, cwd=ROOT, timeout=300)
    entries = sorted(tmp_path.rglob("*.gvz"))
    assert len(entries) == 2, entries
    assert not list(tmp_path.rglob("*.tmp*"))
    for path in entries:
        assert jit_cache.read_entry(path, path.stem) is not None


def test_prune_drops_the_costliest_files_first(tmp_path):
    """Over the limit, files go (of one size: the least recently used first) until the rest
    fit in 80% of it; a writer's fresh temporary file stays, one left for an hour goes; under
    the limit nothing else is touched."""
    import time

    now = time.time()
    for i in range(10):  # 10 files of 100 KiB, file0 the oldest
        p = tmp_path / f"file{i}.gvz"
        p.write_bytes(bytes(100 << 10))
        os.utime(p, (now - 1000 + i, now - 1000 + i))
    fresh_tmp = tmp_path / "x.gvz.tmp1.a"
    fresh_tmp.write_bytes(b"1")
    stale_tmp = tmp_path / "y.gvz.tmp2.b"
    stale_tmp.write_bytes(b"2")
    os.utime(stale_tmp, (now - 7200, now - 7200))
    assert jit_cache.prune(tmp_path, 2000 << 10) == 1  # under the limit: the stale tmp only
    assert len(list(tmp_path.glob("file*"))) == 10
    assert fresh_tmp.exists() and not stale_tmp.exists()
    freed = jit_cache.prune(tmp_path, 800 << 10)  # 1,000 KiB > 800: keep <= 640 KiB
    left = sorted(p.name for p in tmp_path.glob("file*"))
    assert left == [f"file{i}.gvz" for i in range(4, 10)], left
    assert freed == 4 * (100 << 10)
    assert fresh_tmp.exists()
    # bytes times idle time: a 6x bigger entry used 10 minutes ago goes before the small ones
    # used ~16 minutes ago (a run's few model entries must not push out its many small ones)
    big = tmp_path / "big.gvz"
    big.write_bytes(bytes(600 << 10))
    os.utime(big, (now - 600, now - 600))
    jit_cache.prune(tmp_path, 1000 << 10)  # 1,200 KiB > 1,000: keep <= 800 KiB
    assert not big.exists()
    assert len(list(tmp_path.glob("file*"))) == 6


def test_the_writer_keeps_the_cache_under_its_limit_and_hits_stay(tmp_path, monkeypatch):
    """With $GLOWVIZ_CACHE_MAX_MB set, compiles past the limit prune the oldest entries; a
    hit touches its entry, so the model in use stays; a pruned model compiles again, right."""
    monkeypatch.setenv("GLOWVIZ_CACHE_MAX_MB", "1")
    monkeypatch.setattr(jit_cache, "PRUNE_EVERY_BYTES", 0)  # prune after every entry
    engine = JITEngine(directory=tmp_path)
    models = [_lir_and_plan(compile_model(_conv_model(_weight(i)))) for i in range(2, 6)]
    feed = _feed(models[0][0])
    want = ArenaInterpreter(*models[0]).run(feed)
    for lir, plan in models:
        LLVMExecutor(lir, plan, engine=engine)
        jit_cache.flush_writes()
        assert sum(p.stat().st_size for p in tmp_path.iterdir()) <= 1 << 20
    _forget_memory()
    again = LLVMExecutor(*models[0], engine=engine)  # pruned or not: right
    np.testing.assert_allclose(again.run(feed)["y"], want["y"], rtol=1e-5, atol=1e-5)
