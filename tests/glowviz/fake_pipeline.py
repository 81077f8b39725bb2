"""A small hand-made pipeline for IDE tests: fixed graph, passes with provenance, and a fake
low-level result (schedule, LIR, memory plan, stepping executor) — stable whatever the real
compiler does, so snapshot and Pilot tests test the IDE."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from compiler.graph.ir import Module
from compiler.graph.types import f32
from compiler.passes.manager import PassEvent


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


@dataclass
class FakeBuffer:
    name: str
    size: int
    offset: int
    first: int
    last: int
    producer: str
    users: list[str]
    reason: str
    region: str = "activations"


@dataclass
class FakeInstr:
    name: str
    kind: str
    operands: list[tuple[str, str]]

    def __str__(self) -> str:
        ops = ", ".join(f"@{m} %{n}" for n, m in self.operands)
        return f"%{self.name} = {self.kind} {ops}"


@dataclass
class FakeLIR:
    instructions: list[FakeInstr]

    def __str__(self) -> str:
        return "function main {\n" + "\n".join(f"  {i}" for i in self.instructions) + "\n}\n"


@dataclass
class FakePlan:
    buffers: list[FakeBuffer]
    peak_bytes: int
    lower_bound_bytes: int
    no_reuse_bytes: int


@dataclass
class FakeSchedule:
    order: list[str]
    live_bytes: list[int]


@dataclass
class FakeResult:
    module: Module
    options: Any
    schedule: Any = None
    lir: Any = None
    plan: Any = None
    events: list = field(default_factory=list)
    stopped_after: str | None = None
    time_ms: float = 1.0


def fake_low_level() -> tuple[FakeSchedule, FakeLIR, FakePlan]:
    ins = [
        FakeInstr("a0", "allocactivation", [("conv1_bn", "out")]),
        FakeInstr("conv1_bn", "convolution", [("conv1_bn", "out"), ("input", "in"), ("w1", "in")]),
        FakeInstr("a1", "allocactivation", [("relu1", "out")]),
        FakeInstr("relu1", "relu", [("relu1", "out"), ("conv1_bn", "in")]),
        FakeInstr("d0", "deallocactivation", [("conv1_bn", "out")]),
        FakeInstr("a2", "allocactivation", [("conv2_relu", "out")]),
        FakeInstr(
            "conv2_relu", "convolution", [("conv2_relu", "out"), ("relu1", "in"), ("w2", "in")]
        ),
        FakeInstr(
            "add1", "elementadd", [("conv2_relu", "out"), ("conv2_relu", "in"), ("relu1", "in")]
        ),
        FakeInstr("pool", "avgpool", [("output", "out"), ("conv2_relu", "in")]),
    ]
    sz = 4 * 4 * 8 * 8
    bufs = [
        FakeBuffer("conv1_bn", sz, 0, 0, 4, "conv1_bn", ["relu1"], "first fit at 0"),
        FakeBuffer(
            "relu1",
            sz,
            sz,
            2,
            7,
            "relu1",
            ["conv2_relu", "add1"],
            "conv1_bn still live: placed after it",
        ),
        FakeBuffer(
            "conv2_relu",
            sz,
            0,
            5,
            8,
            "conv2_relu",
            ["add1", "pool"],
            "reuses conv1_bn's space (freed at #4)",
        ),
    ]
    plan = FakePlan(bufs, 2 * sz, 2 * sz, 3 * sz)
    sched = FakeSchedule(
        ["conv1_bn", "relu1", "conv2_relu", "add1", "pool", "save"],
        [sz, 2 * sz, 2 * sz, 2 * sz, sz, 0],
    )
    return sched, FakeLIR(ins), plan


class FakeExecutor:
    """Steps the fake LIR: each instruction writes its @out buffer with a known value."""

    name = "fake"

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


def _import_event(m: Module) -> PassEvent:
    return PassEvent(
        index=0,
        stage="import",
        pass_name="import-onnx",
        ir_kind="graph",
        ir=m.clone(),
        changed=True,
        time_ms=0.5,
        count_before=0,
        count_after=m.node_count(),
    )


def fake_compile(model: Any, options: Any, observer: Any = None, **_: Any) -> FakeResult:
    import time

    m = build_module()
    idx = 0
    observer(_import_event(m))
    for stage, name, fn in PASSES:
        idx += 1
        before = m.node_count()
        m.main.journal.clear()
        t0 = time.perf_counter()
        changed = fn(m)
        observer(
            PassEvent(
                index=idx,
                stage=stage,
                pass_name=name,
                ir_kind="graph",
                ir=m.clone(),
                changed=changed,
                time_ms=0.1 + 0 * (time.perf_counter() - t0),
                count_before=before,
                count_after=m.node_count(),
                provenance=list(m.main.journal),
            )
        )
    sched, lir, plan = fake_low_level()
    idx += 1
    observer(
        PassEvent(
            index=idx,
            stage="irgen",
            pass_name="irgen",
            ir_kind="lir",
            ir=lir,
            changed=True,
            time_ms=0.2,
            count_before=m.node_count(),
            count_after=len(lir.instructions),
        )
    )
    return FakeResult(m, options, sched, lir, plan)


def fake_failing_compile(model: Any, options: Any, observer: Any = None, **_: Any) -> Any:
    from compiler.errors import PassError

    m = build_module()
    observer(_import_event(m))
    raise PassError(
        "cannot fold BatchNorm with a non-constant scale", pass_name="fold-batchnorm", node="bn1"
    )
