"""A small hand-made pipeline for IDE tests: fixed graph, passes with provenance, and a hand-made
low-level result (schedule, LIR, memory plan: the compiler's own classes, so the session reads
them through the real APIs) and a fake stepping executor — stable whatever the real passes,
scheduler and allocator do, so snapshot and Pilot tests test the IDE."""

from __future__ import annotations

from typing import Any

import numpy as np

from compiler.graph.ir import Module
from compiler.graph.types import f32
from compiler.lir.ir import LIRFunction
from compiler.memory.plan import BufferPlacement, MemoryPlan
from compiler.passes.manager import PassEvent, ir_kind, ir_size
from compiler.pipeline import CompileOptions, CompileResult
from compiler.scheduling import Schedule
from glowviz.session import SteppingExecutor


def build_module() -> Module:
    m = Module("tiny")
    x = m.add_placeholder("input", f32(1, 3, 8, 8))
    out = m.add_placeholder("output", f32(1, 4, 1, 1), is_output=True)
    rng = np.random.default_rng(0)
    w1 = m.add_constant("w1", rng.standard_normal((4, 3, 3, 3)).astype(np.float32))
    b1 = m.add_constant("b1", np.zeros(4, np.float32))
    w2 = m.add_constant("w2", rng.standard_normal((4, 4, 3, 3)).astype(np.float32))
    b2 = m.add_constant("b2", np.zeros(4, np.float32))
    s = m.add_constant("bn_scale", np.ones(4, np.float32))
    fn = m.create_function("main")
    c1 = fn.create("Conv", [x, w1, b1], {"pads": [1, 1, 1, 1]}, name="conv1")
    bn = fn.create("BatchNorm", [c1.result, s, b1, b1, s], name="bn1")
    r1 = fn.create("Relu", [bn.result], name="relu1")
    c2 = fn.create("Conv", [r1.result, w2, b2], {"pads": [1, 1, 1, 1]}, name="conv2")
    r2 = fn.create("Relu", [c2.result], name="relu2")
    add = fn.create("Add", [r2.result, r1.result], name="add1")
    gp = fn.create("GlobalAvgPool", [add.result], name="pool")
    fn.create("Save", [gp.result, out], name="save")
    fn.journal.clear()
    return m


def _fold_bn(m: Module) -> bool:
    fn = m.main
    bn, c1 = fn.find("bn1"), fn.find("conv1")
    new = fn.create("Conv", list(c1.operands), dict(c1.attrs), name="conv1_bn", origin=[c1, bn])
    fn.replace(bn.result, new.result)
    fn.erase(bn)
    fn.erase(c1)
    return True


def _fuse_relu(m: Module) -> bool:
    fn = m.main
    c2, r2 = fn.find("conv2"), fn.find("relu2")
    attrs = dict(c2.attrs, activation="relu")
    new = fn.create("Conv", list(c2.operands), attrs, name="conv2_relu", origin=[c2, r2])
    fn.replace(r2.result, new.result)
    fn.erase(r2)
    fn.erase(c2)
    return True


def _nothing(m: Module) -> bool:
    return False


PASSES = [
    ("graph-opt", "fold-batchnorm", _fold_bn),
    ("graph-opt", "dce", _nothing),
    ("graph-opt", "fuse-activations", _fuse_relu),
    ("lower", "lower-cpu", _nothing),
    ("post-lower-opt", "cse", _nothing),
]


def fake_low_level(m: Module) -> tuple[Schedule, LIRFunction, MemoryPlan]:
    """A hand-made schedule, LIR and memory plan of the final graph, built with the compiler's
    own classes: three activation buffers, the middle one (relu1_res) live across a reuse."""
    fn = m.main
    sz = 4 * 4 * 8 * 8
    t = f32(1, 4, 8, 8)
    lir = LIRFunction("main")
    w = {
        p.name: lir.add_weight(
            p.name, p.type, "mutable", role="output" if p.is_output else "input", exact_name=True
        )
        for p in m.placeholders.values()
    }
    for name in ("w1", "b1", "w2", "b2"):
        c = m.constants[name]
        w[name] = lir.add_weight(name, c.type, data=c.data, exact_name=True)

    def alloc(name: str):
        return lir.create("allocactivation", type=t, name=name, exact_name=True)

    a0 = alloc("conv1_bn_res")
    lir.create(
        "conv",
        [(a0, "out"), (w["input"], "in"), (w["w1"], "in"), (w["b1"], "in")],
        {"pads": [1, 1, 1, 1]},
        name="conv1_bn",
        exact_name=True,
    )
    a1 = alloc("relu1_res")
    lir.create("relu", [(a1, "out"), (a0, "in")], name="relu1", exact_name=True)
    lir.create("deallocactivation", [(a0, "out")], name="conv1_bn_res.dealloc", exact_name=True)
    a2 = alloc("conv2_relu_res")
    lir.create(
        "conv",
        [(a2, "out"), (a1, "in"), (w["w2"], "in"), (w["b2"], "in")],
        {"pads": [1, 1, 1, 1], "activation": "relu"},
        name="conv2_relu",
        exact_name=True,
    )
    lir.create("add", [(a2, "out"), (a2, "in"), (a1, "in")], name="add1", exact_name=True)
    lir.create("globalavgpool", [(w["output"], "out"), (a2, "in")], name="pool", exact_name=True)

    def buf(name, offset, first, last, producer, users, reason):
        return BufferPlacement(
            name, sz, offset, "activations", first, last, producer, users, reason, producer, sz
        )

    bufs = [
        buf("conv1_bn_res", 0, 0, 4, "conv1_bn", ["relu1"], "first fit at 0"),
        buf(
            "relu1_res",
            sz,
            2,
            7,
            "relu1",
            ["conv2_relu", "add1"],
            "conv1_bn still live: placed after it",
        ),
        buf(
            "conv2_relu_res",
            0,
            5,
            8,
            "conv2_relu",
            ["add1", "pool"],
            "reuses conv1_bn's space (freed at #4)",
        ),
    ]
    plan = MemoryPlan(
        allocator="lower-bound",
        region_sizes={"constant": 0, "mutable": 0, "activations": 2 * sz},
        buffers=bufs,
        peak_bytes=2 * sz,
        lower_bound_bytes=2 * sz,
        no_reuse_bytes=3 * sz,
        peak_instruction=2,
    )
    order = [fn.find(n) for n in ("conv1_bn", "relu1", "conv2_relu", "add1", "pool", "save")]
    sched = Schedule("child-mem-size", order, [sz, 2 * sz, 2 * sz, 2 * sz, sz, 0], 2 * sz, 1)
    return sched, lir, plan


class FakeExecutor(SteppingExecutor):
    """Steps the fake LIR: each instruction writes its @out buffer with a known value."""

    name = "fake"
    generates_code = True

    def __init__(self, session: Any) -> None:
        self.instrs = session.instructions()
        self.values: dict[str, np.ndarray] = {}
        self._pc = 0

    @property
    def pc(self) -> int:
        return self._pc

    def reset(self, inputs: dict[str, Any]) -> None:
        self._pc = 0
        self.values = {k: np.asarray(v) for k, v in inputs.items()}

    def value(self, k: int) -> float:
        return float(k)

    def step(self) -> list[str]:
        ins = self.instrs[self._pc]
        written = []
        if ins["kind"] != "deallocactivation":
            for n, mode in ins["operands"]:
                if "out" in mode:
                    self.values[n] = np.full((4, 8, 8), self.value(self._pc), np.float32)
                    written.append(n)
        self._pc += 1
        return written

    def read(self, name: str) -> Any:
        if name not in self.values:
            raise KeyError(name)
        return self.values[name]

    def write(self, name: str, data: Any) -> None:
        self.values[name] = np.array(data)

    def llvm_ir(self, k: int) -> str:
        ins = self.instrs[k]
        if ins["kind"] in ("allocactivation", "deallocactivation"):
            return f"; %{ins['name']} ({ins['kind']}) generates no code\n"
        return (
            f"define void @instr_{k}(ptr %constant, ptr %mutable, ptr %activations) {{\n"
            f"entry:\n  tail call fastcc void @{ins['kind']}(ptr %activations)\n"
            f"  ret void\n}}\n"
        )

    def assembly(self, k: int) -> str:
        return f"instr_{k}:\n\tmovq\t%rsi, %rax\n\tjmpq\t*%r8\n"

    def strategy(self, k: int) -> str:
        return "fake"


class FakeReference(FakeExecutor):
    """The reference run in lock-step: agrees with FakeExecutor except at instruction 7
    (add1), off by 0.5 — "run to first divergence" stops there."""

    name = "fake-reference"

    def value(self, k: int) -> float:
        return float(k) + (0.5 if k == 7 else 0.0)


def _event(
    index: int,
    stage: str,
    name: str,
    ir: Module | LIRFunction,
    before: int,
    time_ms: float,
    changed: bool = True,
    provenance: list | None = None,
) -> PassEvent:
    """What the real runner reports after a pass: a snapshot of the IR, its kind and size."""
    return PassEvent(
        index=index,
        stage=stage,
        pass_name=name,
        ir_kind=ir_kind(ir),
        ir=ir.clone(),
        changed=changed,
        time_ms=time_ms,
        count_before=before,
        count_after=ir_size(ir),
        provenance=provenance or [],
    )


def fake_compile(model: Any, options: Any, observer: Any = None, **_: Any) -> CompileResult:
    import time

    m = build_module()
    idx = 0
    observer(_event(0, "import", "import-onnx", m, 0, 0.5))
    for stage, name, fn in PASSES:
        idx += 1
        before = m.node_count()
        m.main.journal.clear()
        t0 = time.perf_counter()
        changed = fn(m)
        time_ms = 0.1 + 0 * (time.perf_counter() - t0)
        observer(_event(idx, stage, name, m, before, time_ms, changed, list(m.main.journal)))
    sched, lir, plan = fake_low_level(m)
    idx += 1
    observer(_event(idx, "irgen", "irgen", lir, m.node_count(), 0.2))
    options = options or CompileOptions()
    return CompileResult(m, str(model), options, sched, lir, plan, time_ms=1.0)


def fake_failing_compile(model: Any, options: Any, observer: Any = None, **_: Any) -> Any:
    from compiler.errors import PassError

    m = build_module()
    observer(_event(0, "import", "import-onnx", m, 0, 0.5))
    raise PassError(
        "cannot fold BatchNorm with a non-constant scale", pass_name="fold-batchnorm", node="bn1"
    )
