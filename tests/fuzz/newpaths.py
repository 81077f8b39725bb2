"""Differential fuzzing of session 9's LLVM fast paths (issue 11 follow-up).

Random small ONNX graphs aimed at the code paths that landed together in session 9: the GEMM's
fused row bias (`bias_after`), residual `addend` and element-wise epilogue chains (GELU in its
erf and tanh forms, Relu, Sigmoid, Swish), the M=1 GEMV body, the scratch-tile epilogue,
softmax rows of every length, LayerNorm far from a zero mean, the float32 sigmoid, the conv rows
`direct-lanes`, `direct-vector` and `depthwise-direct` with activations and residual Adds, and
tiled transposes of odd shapes. Each case runs on

- the arena interpreter (the reference kernels: the answer),
- the LLVM executor on 1 and 2 threads (bit-identical to each other), one `@run_all` call and
  stepped instruction by instruction (bit-identical), and for convs every forced row that
  applies,
- onnxruntime, for finite inputs only (its non-finite behaviour differs on purpose in places:
  docs/fuzzing.md),

compared with the campaign's rule (`oracle.compare`: rtol 1e-4, NaN at the same places,
infinities equal). Inputs are sometimes salted with NaN, +-inf, -0.0 and huge values.

    python -m tests.fuzz.newpaths --cases 300 --seed 9      # a campaign; exit 1 on a finding
    python -m tests.fuzz.newpaths --case mm-9-17             # one case, printed

`tests/fuzz/test_newpaths.py` runs a few seeded cases of each family.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable
from typing import Any
from dataclasses import dataclass, field

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from .oracle import compare, float32_range_exceeded, run_onnxruntime, run_reference64

F = TensorProto.FLOAT
#: conv rows forced on every conv case besides the table's choice (each where it applies)
FORCED = (
    "direct-lanes", "direct-vector", "depthwise-direct", "direct", "pixel-rows-gemm", "winograd",
    "winograd-4x4",
)
FAMILIES = ("mm", "softmax", "layernorm", "conv", "transpose", "act")
#: values salted into inputs: the exp overflow / underflow edges of sigmoid, softmax and GELU
SPECIAL = np.array(
    [np.nan, np.inf, -np.inf, -0.0, 0.0, 1e30, -1e30, 88.8, -88.8, 104.0, -104.0, 3e38, -3e38],
    np.float32,
)


@dataclass
class Builder:
    """A graph under construction: nodes, inputs (with their data), constants."""

    rng: np.random.Generator
    special: bool
    nodes: list[onnx.NodeProto] = field(default_factory=list)
    inputs: list[onnx.ValueInfoProto] = field(default_factory=list)
    inits: list[onnx.TensorProto] = field(default_factory=list)
    feeds: dict[str, np.ndarray] = field(default_factory=dict)
    n: int = 0

    def name(self, base: str) -> str:
        self.n += 1
        return f"{base}{self.n}"

    def input(self, shape: tuple[int, ...], scale: float = 1.0, offset: float = 0.0) -> str:
        name = self.name("in")
        data = (self.rng.standard_normal(shape) * scale + offset).astype(np.float32)
        if self.special and data.size:
            k = int(self.rng.integers(1, max(2, data.size // 8) + 1))
            idx = self.rng.integers(0, data.size, size=k)
            data.reshape(-1)[idx] = self.rng.choice(SPECIAL, size=k)
        self.feeds[name] = data
        self.inputs.append(helper.make_tensor_value_info(name, F, list(shape)))
        return name

    def const(self, data: object) -> str:
        name = self.name("c")
        self.inits.append(numpy_helper.from_array(np.asarray(data, np.float32), name))
        return name

    def op(self, op: str, ins: list[str], **attrs: Any) -> str:
        out = self.name(op.lower())
        self.nodes.append(helper.make_node(op, ins, [out], **attrs))
        return out

    def add(self, a: str, b: str) -> str:
        return self.op("Add", [a, b] if self.rng.random() < 0.5 else [b, a])

    def model(self, outs: list[str], opset: int = 17) -> onnx.ModelProto:
        graph = helper.make_graph(
            self.nodes,
            "g",
            self.inputs,
            [helper.make_tensor_value_info(o, F, None) for o in outs],
            self.inits,
        )
        m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
        m.ir_version = 8
        return onnx.shape_inference.infer_shapes(m)


ACTS = ("none", "relu", "sigmoid", "swish", "gelu", "gelu_tanh", "tanh")


def activation(b: Builder, x: str, act: str) -> str:
    if act == "relu":
        return b.op("Relu", [x])
    if act == "sigmoid":
        return b.op("Sigmoid", [x])
    if act == "tanh":
        return b.op("Tanh", [x])
    if act == "swish":
        return b.op("Mul", [x, b.op("Sigmoid", [x])])
    if act == "gelu":  # x * 0.5 * (1 + erf(x / sqrt 2)), PyTorch's export
        e = b.op("Erf", [b.op("Div", [x, b.const(np.float32(math.sqrt(2.0)))])])
        h = b.op("Add", [e, b.const(np.float32(1.0))])
        return b.op("Mul", [b.op("Mul", [x, h]), b.const(np.float32(0.5))])
    if act == "gelu_tanh":  # GPT-2's: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
        cube = b.op("Pow", [x, b.const(np.float32(3.0))])
        inner = b.op("Add", [x, b.op("Mul", [cube, b.const(np.float32(0.044715))])])
        t = b.op("Tanh", [b.op("Mul", [inner, b.const(np.float32(math.sqrt(2 / math.pi)))])])
        h = b.op("Add", [t, b.const(np.float32(1.0))])
        return b.op("Mul", [b.op("Mul", [b.const(np.float32(0.5)), x]), h])
    return x


def gen_mm(b: Builder) -> tuple[onnx.ModelProto, str]:
    r = b.rng
    m = 1 if r.random() < 0.4 else int(r.integers(2, 40))
    k = int(r.choice([1, 3, 7, 8, 16, 17, 33, 64, 100, 130, 300]))
    n = int(r.choice([1, 2, 5, 8, 15, 16, 17, 31, 48, 64, 65, 100, 129, 256]))
    batch: tuple[int, ...] = tuple(int(d) for d in r.integers(1, 4, size=int(r.integers(0, 3))))
    use_gemm = not batch and r.random() < 0.2
    x = b.input((*batch, m, k))
    w = (r.standard_normal((k, n)) / math.sqrt(k)).astype(np.float32)
    desc = [f"x{[*batch, m, k]} w[{k},{n}]"]
    if use_gemm:
        trans = bool(r.random() < 0.5)
        y = b.op(
            "Gemm",
            [x, b.const(w.T.copy() if trans else w), b.const(r.standard_normal(n))],
            transB=int(trans),
        )
        desc.append(f"Gemm transB={int(trans)}")
    else:
        wname = b.const(w) if r.random() < 0.85 else b.input((k, n), scale=1 / math.sqrt(k))
        y = b.op("MatMul", [x, wname])
    if r.random() < 0.7:
        shape = (n,) if r.random() < 0.8 else (1, n)
        y = b.add(y, b.const(r.standard_normal(shape)))
        desc.append(f"bias{list(shape)}")
    act_first = r.random() < 0.3
    act = str(r.choice(ACTS))
    if act_first:
        y = activation(b, y, act)
    if r.random() < 0.4:
        y = b.add(y, b.input((*batch, m, n)))
        desc.append("residual")
    if not act_first:
        y = activation(b, y, act)
    desc.append(f"{act}{' first' if act_first else ''}")
    return b.model([y]), " ".join(desc)


def gen_softmax(b: Builder) -> tuple[onnx.ModelProto, str]:
    r = b.rng
    length = int(r.integers(1, 71)) if r.random() < 0.7 else int(r.integers(71, 2100))
    rows = int(r.integers(1, 20))
    scale = float(r.choice([1.0, 10.0, 100.0, 1000.0]))
    lead = (int(r.integers(1, 3)),) if r.random() < 0.3 else ()
    x = b.input((*lead, rows, length), scale=scale, offset=float(r.choice([0.0, 50.0, -80.0])))
    op = str(r.choice(["Softmax", "LogSoftmax"])) if r.random() < 0.2 else "Softmax"
    y = b.op(op, [x], axis=-1)
    return b.model([y], opset=13), f"{op} {[*lead, rows, length]} scale {scale}"


def gen_layernorm(b: Builder) -> tuple[onnx.ModelProto, str]:
    r = b.rng
    length = int(r.choice([1, 2, 3, 7, 8, 15, 16, 17, 31, 64, 96, 100, 768, 1000]))
    rows = int(r.integers(1, 12))
    offset = float(r.choice([0.0, 1.0, 100.0, 3000.0, -1e4]))
    spread = float(r.choice([0.1, 1.0, 5.0]))
    x = b.input((rows, length), scale=spread, offset=offset)
    s, bias = b.const(r.standard_normal(length)), b.const(r.standard_normal(length))
    eps = float(r.choice([1e-5, 1e-12, 1e-3]))
    y = b.op("LayerNormalization", [x, s, bias], axis=-1, epsilon=eps)
    if r.random() < 0.3:
        y = activation(b, y, str(r.choice(ACTS)))
    return b.model([y]), f"LN [{rows},{length}] mean {offset} spread {spread} eps {eps}"


def gen_conv(b: Builder) -> tuple[onnx.ModelProto, str]:
    r = b.rng
    for _ in range(100):
        c = int(r.integers(1, 21))
        kind = r.random()
        if kind < 0.3:
            groups, cout = c, c * int(r.choice([1, 1, 2]))
        elif kind < 0.45:
            divs = [g for g in range(2, c + 1) if c % g == 0]
            groups = int(r.choice(divs)) if divs else 1
            cout = groups * int(r.integers(1, 4))
        else:
            groups, cout = 1, int(r.integers(1, 25))
        h, w = int(r.integers(1, 17)), int(r.integers(1, 17))
        kh = int(r.integers(1, 8))
        kw = kh if r.random() < 0.7 else int(r.integers(1, 8))
        st = int(r.integers(1, 4))
        dil = 1 if r.random() < 0.75 else 2
        pads = [int(r.integers(0, max(1, kh))), int(r.integers(0, max(1, kw)))] * 2
        if r.random() < 0.3:
            pads = [int(p) for p in r.integers(0, 3, size=4)]
        oh = (h + pads[0] + pads[2] - dil * (kh - 1) - 1) // st + 1
        ow = (w + pads[1] + pads[3] - dil * (kw - 1) - 1) // st + 1
        if oh >= 1 and ow >= 1:
            break
    nb = 1 if r.random() < 0.8 else 2
    x = b.input((nb, c, h, w))
    wt = (r.standard_normal((cout, c // groups, kh, kw)) / math.sqrt(c // groups * kh * kw))
    ins = [x, b.const(wt)]
    if r.random() < 0.7:
        ins.append(b.const(r.standard_normal(cout) * 0.5))
    y = b.op(
        "Conv", ins, strides=[st, st], pads=pads, dilations=[dil, dil], group=groups,
        kernel_shape=[kh, kw],
    )
    act = str(r.choice(("none", "relu", "swish", "sigmoid", "gelu")))
    residual = r.random() < 0.3
    before = r.random() < 0.5
    if residual and before:
        y = b.add(y, b.input((nb, cout, oh, ow)))
    y = activation(b, y, act)
    if residual and not before:
        y = b.add(y, b.input((nb, cout, oh, ow)))
    desc = (
        f"conv x[{nb},{c},{h},{w}] -> {cout} k{kh}x{kw} s{st} d{dil} p{pads} g{groups} "
        f"{len(ins) == 3 and 'bias' or 'nobias'} {act}{' residual' if residual else ''}"
    )
    return b.model([y]), desc


def gen_transpose(b: Builder) -> tuple[onnx.ModelProto, str]:
    r = b.rng
    rank = int(r.integers(2, 5))
    shape = tuple(int(d) for d in r.integers(1, 40 if rank == 2 else 13, size=rank))
    perm = [int(p) for p in r.permutation(rank)]
    x = b.input(shape)
    pre = str(r.choice(("none", "relu", "sigmoid")))
    y = b.op("Transpose", [activation(b, x, pre) if pre != "none" else x], perm=perm)
    if r.random() < 0.5:
        y = b.op("Mul", [y, b.const(np.float32(2.0))])
    return b.model([y]), f"transpose {list(shape)} perm {perm} after {pre}"


def gen_act(b: Builder) -> tuple[onnx.ModelProto, str]:
    r = b.rng
    shape = tuple(int(d) for d in r.integers(1, 70, size=int(r.integers(1, 4))))
    x = b.input(shape, scale=float(r.choice([1.0, 30.0, 1e3])))
    act = str(r.choice(ACTS[1:]))
    return b.model([activation(b, x, act)]), f"{act} {list(shape)}"


GENERATORS: dict[str, Callable[[Builder], tuple[onnx.ModelProto, str]]] = {
    "mm": gen_mm,
    "softmax": gen_softmax,
    "layernorm": gen_layernorm,
    "conv": gen_conv,
    "transpose": gen_transpose,
    "act": gen_act,
}


def make_case(case: str) -> tuple[onnx.ModelProto, dict[str, np.ndarray], str]:
    """`family-seed-index` -> (model, feeds, description)."""
    family, seed, index = case.rsplit("-", 2)
    rng = np.random.default_rng([int(seed), int(index), FAMILIES.index(family)])
    b = Builder(rng, special=bool(rng.random() < 0.25))
    model, desc = GENERATORS[family](b)
    return model, b.feeds, desc + (" special" if b.special else "")


def _bits(outs: dict[str, np.ndarray]) -> dict[str, bytes]:
    """The outputs' bytes with every NaN made one quiet NaN: which NaN an invalid operation
    gives (x86's negative default NaN, or an operand's NaN carried through) depends on the
    instruction order LLVM picks for a fused loop, and IEEE leaves sign and payload open; the
    NaN positions themselves must agree."""
    out = {}
    for k, v in outs.items():
        v = np.ascontiguousarray(v)
        if v.dtype.kind == "f" and np.isnan(v).any():
            v = np.where(np.isnan(v), v.dtype.type(np.nan), v)
        out[k] = v.tobytes()
    return out


def check_case(case: str) -> list[str]:
    """The findings of one case (empty: every comparison holds)."""
    from compiler.backends.interpreter.arena import ArenaInterpreter
    from compiler.backends.llvm.executor import LLVMExecutor, _lir_and_plan
    from compiler.backends.llvm.kernels.conv import STRATEGY_NAMES
    from compiler.errors import CodegenError
    from compiler.pipeline import compile_model

    model, feeds, desc = make_case(case)
    result = compile_model(model)
    lir, plan = _lir_and_plan(result)
    names = [v.name for v in lir.inputs()]
    feed = {n: feeds[k] for n, k in zip(names, feeds)}
    want = ArenaInterpreter(lir, plan).run(feed)
    found: list[str] = []

    beyond: list[str] | None = None

    def against(label: str, got: dict[str, np.ndarray], ref: dict[str, np.ndarray]) -> None:
        nonlocal beyond
        for k in ref:
            c = compare(got[k], ref[k])
            if not c.ok and beyond is None:
                # Sums whose exact value passes FLT_MAX overflow (to which infinity, or NaN)
                # in the order a kernel adds them: the campaign's class float32-range.
                beyond = float32_range_exceeded(model, feeds)
            if not c.ok and beyond:
                print(f"{case} [{desc}] {label}: float32-range ({', '.join(beyond[:3])})")
            elif not c.ok:
                found.append(
                    f"{case} [{desc}] {label}: {c.note or 'values'} max_abs={c.max_abs:.3g} "
                    f"max_rel={c.max_rel:.3g}"
                )

    strategies: list[str | None] = [None]
    if any(i.kind == "conv" for i in lir.code):
        strategies += [s for s in STRATEGY_NAMES if s in FORCED]
    for strategy in strategies:
        try:
            ex = LLVMExecutor(lir, plan, conv_strategy=strategy)
        except CodegenError:
            if strategy is None:
                raise
            continue
        label = f"llvm[{strategy or 'default'}]"
        got = ex.run(feed)
        against(label, got, want)
        ex.set_threads(2)
        if _bits(ex.run(feed)) != _bits(got):
            found.append(f"{case} [{desc}] {label}: 2 threads differ from 1")
        ex.set_threads(1)
        ex.reset(feed)
        while not ex.done:
            ex.step()
        if _bits(ex.outputs()) != _bits(got):
            found.append(f"{case} [{desc}] {label}: stepping differs from one call")
    if all(np.isfinite(v).all() for v in feeds.values()):
        ort = run_onnxruntime(model, feeds)
        outs = [o.name for o in model.graph.output]
        ort_named = dict(zip(want, (ort[o] for o in outs))) if len(outs) == 1 else {}
        if ort_named:
            ref_ok = all(compare(want[k], ort_named[k]).ok for k in want)
            if not ref_ok:  # the float64 reference decides, as in the campaign's check
                ref64 = run_reference64(model, feeds)
                named64 = dict(zip(want, (ref64[o] for o in outs)))
                against("interpreter vs float64 reference", want, named64)
    return found


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seed", type=int, default=9)
    p.add_argument("--cases", type=int, default=60, help="cases per family")
    p.add_argument("--families", default=",".join(FAMILIES))
    p.add_argument("--case", help="run only this case (family-seed-index) and describe it")
    args = p.parse_args(argv)
    if args.case:
        fam = args.case.split("-")[0]
        if fam not in FAMILIES:
            print(f"newpaths: unknown family in case '{args.case}'", file=sys.stderr)
            return 2
        print(make_case(args.case)[2])
        found = check_case(args.case)
        print("\n".join(found) or "ok")
        return 1 if found else 0
    families = args.families.split(",")
    if not set(families) <= set(FAMILIES):
        print(f"newpaths: families must be among {','.join(FAMILIES)}", file=sys.stderr)
        return 2
    bad = 0
    for i in range(args.cases):
        for fam in families:
            case = f"{fam}-{args.seed}-{i}"
            try:
                found = check_case(case)
            except Exception as e:  # noqa: BLE001 - a crash is a finding too
                found = [f"{case} [{make_case(case)[2]}] raised {type(e).__name__}: {e}"]
            for f in found:
                print(f, flush=True)
            bad += bool(found)
    print(f"newpaths: {args.cases * len(families)} cases, {bad} with findings")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
