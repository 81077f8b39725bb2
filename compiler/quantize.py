"""The quantization driver: profile a model on calibration inputs, measure how much precision a
quantized model keeps (per-node SQNR, local and propagated), and search the nodes to keep in
float so the output reaches a target SQNR (the CLI's `profile`, `quant-report` and
`--target-sqnr`, and the IDE's quantization view, are built on these).

- `profile_model(model, samples)`: compiles with profile points (`CompileOptions.profile`),
  runs every sample on an executor, returns the `Profile`.
- `quant_report(model, quantize, samples)`: runs the float graph and the quantized graph on the
  samples (numpy reference kernels, bit-exact with the LLVM executor) and gives, per quantized
  node, the SQNR of its result against the float model's: *propagated* (the quantized model as
  it runs) and *local* (the node alone, fed the float model's inputs quantized), the first node
  below a threshold, and each output's SQNR.
- `fallback_search(model, quantize, samples, target_sqnr)`: ranks the compute nodes by
  measured sensitivity (the output SQNR with each alone in float), then greedy with
  re-measurement, until the target.

SQNR (dB) = 10 log10(sum ref^2 / sum (ref - test)^2) over all samples' elements.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from compiler.errors import InputError, QuantizationError
from compiler.graph.ir import Constant, Module, Node, Placeholder, Result, Value
from compiler.graph.ops_quant import is_quantized
from compiler.graph.types import TensorType
from compiler.kernels.reference import evaluate
from compiler.kernels.reference_quant import dequantize, quantize
from compiler.pipeline import CompileOptions, CompileResult, compile_model
from compiler.quantization import (
    PROFILE_PREFIX,
    Profile,
    QuantizeOptions,
    as_quantize_options,
)
from compiler.quantization.options import ARITHMETIC_OPS
from compiler.quantization.profile import DEFAULT_BINS
from compiler.quantization.quantizer import params_of

Sample = Mapping[str, np.ndarray]
ModelLike = Any  # an ONNX ModelProto, a path, bytes, or a graph Module

#: The float ops whose nodes count as compute nodes (the denominator of "% kept in float").
COMPUTE_OPS = ARITHMETIC_OPS | {"Softmax"}


def sqnr_db(ref: np.ndarray, test: np.ndarray) -> float:
    """Signal-to-quantization-noise ratio of `test` against `ref`, in dB (inf when equal)."""
    ref = np.asarray(ref, np.float64).ravel()
    err = ref - np.asarray(test, np.float64).ravel()
    noise = float(np.dot(err, err))
    signal = float(np.dot(ref, ref))
    if noise == 0.0:
        return math.inf
    if signal == 0.0:
        return -math.inf
    return 10.0 * math.log10(signal / noise)


# -- calibration samples ----------------------------------------------------------------------------


def load_samples(
    paths: Sequence[str | Path], input_types: Mapping[str, TensorType]
) -> list[dict[str, np.ndarray]]:
    """Calibration samples from .npz files: arrays named by input, each either one sample (the
    input's shape) or a batch of samples along a new leading axis."""
    samples: list[dict[str, np.ndarray]] = []
    for path in paths:
        try:
            with np.load(path) as z:
                arrays = {k: z[k] for k in z.files}
        except (OSError, ValueError) as e:
            raise InputError(f"cannot read calibration inputs {path}: {e}") from None
        missing = [n for n in input_types if n not in arrays]
        if missing:
            raise InputError(
                f"{path} has no array for input{'s' if len(missing) > 1 else ''} "
                f"{', '.join(missing)} (it has: {', '.join(arrays) or 'nothing'})"
            )
        counts = set()
        for name, t in input_types.items():
            a = arrays[name]
            if tuple(a.shape) == t.shape:
                counts.add(0)
            elif tuple(a.shape[1:]) == t.shape:
                counts.add(a.shape[0])
            else:
                raise InputError(
                    f"{path}: array '{name}' has shape {list(a.shape)}; input '{name}' is {t} "
                    "(one sample), or give a batch of samples along a new first axis"
                )
        if len(counts) != 1:
            raise InputError(f"{path}: the arrays hold different numbers of samples")
        n = counts.pop()
        if n == 0:
            samples.append({k: np.asarray(arrays[k], t.np_dtype) for k, t in input_types.items()})
        else:
            for i in range(n):
                samples.append(
                    {k: np.asarray(arrays[k][i], t.np_dtype) for k, t in input_types.items()}
                )
    return samples


def random_samples(
    input_types: Mapping[str, TensorType], count: int, seed: int = 0, *, int_high: int = 2
) -> list[dict[str, np.ndarray]]:
    """`count` random samples: N(0, 1) floats, integers in [0, int_high)."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(count):
        s = {}
        for name, t in input_types.items():
            if t.elem.is_float:
                s[name] = rng.standard_normal(t.shape).astype(t.np_dtype)
            else:
                s[name] = rng.integers(0, int_high, t.shape).astype(t.np_dtype)
        out.append(s)
    return out


def model_input_types(
    model: ModelLike, options: CompileOptions | None = None
) -> dict[str, TensorType]:
    """The model's graph inputs by ONNX name (as samples are keyed), with their types."""
    from compiler.pipeline import import_model

    if isinstance(model, Module):
        module = model
    else:
        module, _ = import_model(model, options)
    names = {p: o for o, p in module.meta.get("onnx_inputs", ())}
    return {names.get(p.name, p.name): p.type for p in module.inputs()}


# -- profiling ----------------------------------------------------------------------------------------


def _compile(model: ModelLike, options: CompileOptions, executor: str) -> CompileResult:
    from compiler.executors import LOW_LEVEL_EXECUTORS

    low = executor in LOW_LEVEL_EXECUTORS
    if isinstance(model, Module):
        model = model.clone()
    return compile_model(model, replace(options, low_level=low))


def profile_model(
    model: ModelLike,
    samples: Iterable[Sample],
    *,
    options: CompileOptions | None = None,
    executor: str = "llvm",
    bins: int = DEFAULT_BINS,
    hessians: bool = False,
) -> Profile:
    """Profile every activation of `model` on `samples` (Glow's -dump-profile). With
    `hessians`, also gather each Conv / FullyConnected / MatMul-by-constant layer's input
    Hessian (sum of x x^T over im2col rows or rows) for GPTQ weight rounding
    (compiler/quantization/gptq.py; layers of more than `gptq.MAX_COLUMNS` columns are left
    out)."""
    from compiler.executors import make_executor
    from compiler.quantization.gptq import HessianSet, add_layer_hessians

    opts = replace(options or CompileOptions(), profile=True, quantize=None, stop_after=None)
    result = _compile(model, opts, executor)
    meta = result.module.meta
    points: dict[str, str] = meta.get("profile_points", {})
    profile = Profile(
        meta["profile_graph_hash"], source=str(result.source), bins=bins, executor=executor
    )
    ex = make_executor(result, executor)
    layers: dict[str, dict[str, Any]] = meta.get("profile_layers", {}) if hessians else {}
    if hessians:
        profile.hessians = HessianSet()
    for sample in samples:
        outs = ex.run(dict(sample))
        values = {points[k]: v for k, v in outs.items() if k in points}
        profile.update(values)
        if profile.hessians is not None:
            add_layer_hessians(profile.hessians, layers, values)
    if profile.inputs == 0:
        raise InputError("profiling needs at least one calibration sample")
    return profile


# -- running float and quantized graphs, value by value ---------------------------------------------


def _graph_at_quantize(model: ModelLike, options: CompileOptions) -> Module:
    """The graph after the quantize stage (or the float graph there when not quantizing)."""
    opts = replace(options, low_level=False, stop_after=None, profile=False)
    if isinstance(model, Module):
        model = model.clone()
    return compile_model(model, opts).module


def _run_all_values(module: Module, sample: Sample, wanted: Sequence[Value]) -> dict[str, Any]:
    """Run `module` (graph interpreter) and return the arrays of `wanted` values by name."""
    from compiler.backends.interpreter.graph_interpreter import GraphInterpreter
    from compiler.executors import io_specs

    names = {id(v): v.name for v in wanted}
    got: dict[str, np.ndarray] = {}

    class Recorder(GraphInterpreter):
        def run_node(self, node: Node, args: list[np.ndarray]) -> list[np.ndarray]:
            outs = super().run_node(node, args)
            for r, a in zip(node.results, outs):
                if id(r) in names:
                    got[r.name] = a
            return outs

    interp = Recorder(module)
    in_specs, out_specs, aliases = io_specs(module)
    interp.input_specs = in_specs
    interp.output_names = [n for n, _ in out_specs]
    outs = interp.run(dict(sample), aliases)
    for v in wanted:
        if isinstance(v, Placeholder) and not v.is_output:
            got[v.name] = np.asarray(sample.get(v.name, sample.get(_onnx_name(module, v.name))))
    got.update({f"output:{k}": v for k, v in outs.items()})
    return got


def _onnx_name(module: Module, name: str) -> str:
    for o, p in module.meta.get("onnx_inputs", ()):
        if p == name:
            return o
    return name


@dataclass
class NodeSQNR:
    """One quantized node's precision: the float value it computes, its op, SQNRs in dB."""

    node: str  # the quantized node
    op: str
    value: str  # the float value (node result name in the float graph)
    float_op: str
    local: float
    propagated: float
    scale: float
    offset: int


@dataclass
class QuantReport:
    """Per-node and per-output SQNR of a quantized model against its float model."""

    nodes: list[NodeSQNR]
    outputs: dict[str, float]
    decisions: dict[str, str]
    threshold: float
    samples: int
    compute_nodes: int
    float_nodes: list[str] = field(default_factory=list)

    @property
    def output_sqnr(self) -> float:
        return min(self.outputs.values()) if self.outputs else math.inf

    @property
    def first_below(self) -> NodeSQNR | None:
        """The first node (in graph order) whose propagated SQNR is below the threshold."""
        return next((n for n in self.nodes if n.propagated < self.threshold), None)

    def to_json(self) -> dict[str, Any]:
        def num(x: float) -> float | str:
            return x if math.isfinite(x) else ("inf" if x > 0 else "-inf")

        first = self.first_below
        return {
            "format": "glowviz.quant-report/1",
            "samples": self.samples,
            "threshold_db": self.threshold,
            "output_sqnr_db": {k: num(v) for k, v in self.outputs.items()},
            "first_below_threshold": first.node if first else None,
            "compute_nodes": self.compute_nodes,
            "float_nodes": self.float_nodes,
            "nodes": [
                {
                    "node": n.node,
                    "op": n.op,
                    "value": n.value,
                    "float_op": n.float_op,
                    "local_sqnr_db": num(n.local),
                    "propagated_sqnr_db": num(n.propagated),
                    "scale": n.scale,
                    "offset": n.offset,
                }
                for n in self.nodes
            ],
            "decisions": self.decisions,
        }


def _float_name(v: Value) -> str | None:
    """The float-graph value a quantized-graph value stands for (None: a constant)."""
    if isinstance(v, Constant):
        return None
    if isinstance(v, Placeholder):
        return v.name
    assert isinstance(v, Result)
    node = v.node
    mapped = node.meta.get("quantizes", {}).get(v.index)
    if mapped is not None:
        return mapped
    if node.op in ("Quantize", "Dequantize", "RescaleQuantized"):
        return _float_name(node.operands[0])
    return v.name


def quant_report(
    model: ModelLike,
    quantize: QuantizeOptions | Profile | str | Path,
    samples: Sequence[Sample],
    *,
    options: CompileOptions | None = None,
    threshold: float = 30.0,
) -> QuantReport:
    """SQNR of every quantized node, local and propagated, and of every output (see the
    module docstring)."""
    qopts = as_quantize_options(quantize)
    base = replace(options or CompileOptions(), quantize=None)
    fmod = _graph_at_quantize(model, base)
    qmod = _graph_at_quantize(model, replace(base, quantize=qopts))
    fvals = {v.name: v for v in _all_values(fmod)}
    qnodes = [n for n in qmod.main.nodes if n.meta.get("quantizes")]
    wanted_q = [r for n in qnodes for r in n.results]
    wanted_f = list(fvals.values())
    acc: dict[str, list[float]] = {}  # key -> [signal, local noise, propagated noise]
    outs_acc: dict[str, list[float]] = {}
    for sample in samples:
        fv = _run_all_values(fmod, sample, wanted_f)
        qv = _run_all_values(qmod, sample, wanted_q)
        for node in qnodes:
            for idx, fname in node.meta["quantizes"].items():
                r = node.results[idx]
                if fname not in fv or not is_quantized(r.type):
                    continue
                ref = fv[fname]
                prop = dequantize(qv[r.name], r.type.scale, r.type.offset)
                loc = _local_result(node, idx, fv)
                a = acc.setdefault(f"{node.name}#{idx}", [0.0, 0.0, 0.0])
                a[0] += _sq(ref)
                a[1] += _sq(ref - loc) if loc is not None else math.nan
                a[2] += _sq(ref - prop)
        for key, ref in fv.items():
            if key.startswith("output:"):
                o = outs_acc.setdefault(key[7:], [0.0, 0.0])
                o[0] += _sq(ref)
                o[1] += _sq(ref - qv[key])
    nodes = []
    for node in qnodes:
        for idx, fname in node.meta["quantizes"].items():
            sums = acc.get(f"{node.name}#{idx}")
            if sums is None:
                continue
            r = node.results[idx]
            fval = fvals.get(fname)
            fnode = fval.node.op if isinstance(fval, Result) else "input"
            nodes.append(
                NodeSQNR(
                    node.name,
                    node.op,
                    fname,
                    fnode,
                    _db(sums[0], sums[1]),
                    _db(sums[0], sums[2]),
                    float(r.type.scale or 0.0),
                    int(r.type.offset or 0),
                )
            )
    outputs = {k: _db(s, n) for k, (s, n) in outs_acc.items()}
    decisions = dict(qmod.meta.get("quantization", {}))
    compute = [n for n in fmod.main.nodes if n.op in COMPUTE_OPS]
    kept = sorted(k for k, v in decisions.items() if v.startswith("kept") or v.startswith("float"))
    return QuantReport(
        nodes,
        outputs,
        decisions,
        threshold,
        len(samples),
        len(compute),
        [k for k in kept if k in {n.name for n in compute}],
    )


def _all_values(module: Module) -> list[Value]:
    vals: list[Value] = list(module.inputs())
    for n in module.main.nodes:
        vals.extend(n.results)
    return vals


def _sq(x: np.ndarray) -> float:
    x = np.asarray(x, np.float64).ravel()
    return float(np.dot(x, x))


def _db(signal: float, noise: float) -> float:
    if math.isnan(noise):
        return math.nan
    if noise == 0.0:
        return math.inf
    if signal == 0.0:
        return -math.inf
    return 10.0 * math.log10(signal / noise)


def _local_result(node: Node, idx: int, fv: Mapping[str, np.ndarray]) -> np.ndarray | None:
    """The node's result (dequantized) when its quantized operands are the float model's values,
    quantized with the operands' own parameters: the error the node itself adds."""
    args = []
    for v in node.operands:
        if isinstance(v, Constant):
            if v.data is None:
                return None
            args.append(v.data)
            continue
        fname = _float_name(v)
        if fname is None or fname not in fv:
            return None
        ref = fv[fname]
        if is_quantized(v.type):
            if ref.dtype != np.float32:
                return None
            p = params_of(v.type)
            args.append(quantize(ref, p.scale, p.offset))
        else:
            args.append(ref)
    out = evaluate(node, args)[idx]
    r = node.results[idx]
    if not is_quantized(r.type):
        return out
    p = params_of(r.type)
    return dequantize(out, p.scale, p.offset)


# -- the float fallback search ------------------------------------------------------------------------


@dataclass
class FallbackResult:
    """What the fallback search chose and how the output SQNR moved."""

    keep_float: list[str]
    output_sqnr: float
    target: float
    steps: list[tuple[str, float, bool]]  # (node tried, output SQNR with it, kept?)
    compute_nodes: int
    start_sqnr: float
    seconds: float

    @property
    def reached(self) -> bool:
        return self.output_sqnr >= self.target

    @property
    def float_fraction(self) -> float:
        return len(self.keep_float) / max(1, self.compute_nodes)

    def to_json(self) -> dict[str, Any]:
        return {
            "target_sqnr_db": self.target,
            "reached": self.reached,
            "start_sqnr_db": self.start_sqnr,
            "output_sqnr_db": self.output_sqnr,
            "keep_float": self.keep_float,
            "compute_nodes": self.compute_nodes,
            "float_fraction": self.float_fraction,
            "steps": [{"node": n, "output_sqnr_db": s, "kept": k} for n, s, k in self.steps],
            "seconds": self.seconds,
        }


def output_sqnr(
    model: ModelLike,
    quantize: QuantizeOptions,
    samples: Sequence[Sample],
    *,
    options: CompileOptions | None = None,
    reference: list[dict[str, np.ndarray]] | None = None,
) -> float:
    """The lowest output SQNR of the quantized model over the samples (graph interpreter)."""
    base = replace(options or CompileOptions(), quantize=None)
    qmod = _graph_at_quantize(model, replace(base, quantize=quantize))
    if reference is None:
        fmod = _graph_at_quantize(model, base)
        reference = [_run_outputs(fmod, s) for s in samples]
    acc: dict[str, list[float]] = {}
    for s, ref in zip(samples, reference):
        got = _run_outputs(qmod, s)
        for k, r in ref.items():
            a = acc.setdefault(k, [0.0, 0.0])
            a[0] += _sq(r)
            a[1] += _sq(r - got[k])
    return min(_db(s, n) for s, n in acc.values())


def _run_outputs(module: Module, sample: Sample) -> dict[str, np.ndarray]:
    from compiler.executors import GraphInterpreterExecutor

    return GraphInterpreterExecutor(module).run(dict(sample))


def fallback_search(
    model: ModelLike,
    quantize: QuantizeOptions | Profile | str | Path,
    samples: Sequence[Sample],
    target_sqnr: float = 40.0,
    *,
    options: CompileOptions | None = None,
    max_float: int | None = None,
    max_share: float | None = None,
    max_tries: int | None = None,
    per_round: int = 4,
) -> FallbackResult:
    """Find a small set of compute nodes to keep in float so the output SQNR reaches
    `target_sqnr`, ranked by measured propagated sensitivity as AIMET's QuantAnalyzer and
    onnxruntime's qdq_loss_debug do rather than by each node's local error (a node with a
    good local SQNR early in a network can matter more than a poor one near the output):

    1. sensitivity: the output SQNR with each quantized compute node alone kept in float;
    2. greedy with re-measurement: the most sensitive node is kept float; then, while under
       the target, the `per_round` best remaining candidates are measured again with the
       nodes already kept (gains do not add up: two nodes on one path share their error) and
       the best is kept if it raises the output SQNR.

    Stops at the target, when nothing helps, after `max_float` nodes kept (or `max_share`
    of the compute nodes), or after `max_tries` measurements."""
    t0 = time.perf_counter()
    qopts = as_quantize_options(quantize)
    base = replace(options or CompileOptions(), quantize=None)
    fmod = _graph_at_quantize(model, base)
    reference = [_run_outputs(fmod, s) for s in samples]
    report = quant_report(model, qopts, samples, options=base)
    keep = set(qopts.keep_float)
    start = current = report.output_sqnr
    compute = {n.name for n in fmod.main.nodes if n.op in COMPUTE_OPS}
    cap = len(keep) + (max_float if max_float is not None else len(compute))
    if max_share is not None:
        cap = min(cap, int(max_share * len(compute) + 1e-9))
    quantized = [n.value for n in report.nodes if n.value in compute and n.value not in keep]
    candidates = list(dict.fromkeys(quantized))
    steps: list[tuple[str, float, bool]] = []
    tries = 0

    def measure(name: str) -> float:
        nonlocal tries
        tries += 1
        trial = qopts.with_keep_float(keep | {name})
        return output_sqnr(model, trial, samples, options=base, reference=reference)

    def budget() -> bool:
        return (
            current < target_sqnr and len(keep) < cap and (max_tries is None or tries < max_tries)
        )

    gain: dict[str, float] = {}
    if budget():
        for name in candidates:
            if max_tries is not None and tries >= max_tries:
                break
            gain[name] = measure(name)
            steps.append((name, gain[name], False))
    while budget() and gain:
        pool = sorted(gain, key=lambda n: -gain[n])
        if keep != set(qopts.keep_float):  # re-measure the best few with the nodes kept
            for name in pool[:per_round]:
                if max_tries is not None and tries >= max_tries:
                    break
                gain[name] = measure(name)
                steps.append((name, gain[name], False))
            pool = sorted(gain, key=lambda n: -gain[n])
        best = pool[0]
        if gain[best] <= current:
            break
        keep.add(best)
        current = gain.pop(best)
        steps.append((best, current, True))
    return FallbackResult(
        sorted(keep),
        current,
        target_sqnr,
        steps,
        len(compute),
        start,
        time.perf_counter() - t0,
    )


def check_profile(
    profile: Profile, model: ModelLike, options: CompileOptions | None = None
) -> None:
    """Raise QuantizationError unless `profile` belongs to `model` compiled with `options`."""
    from compiler.quantization import graph_hash

    fmod = _graph_at_quantize(model, replace(options or CompileOptions(), quantize=None))
    profile.check_hash(graph_hash(fmod), "this model")


__all__ = [
    "COMPUTE_OPS",
    "FallbackResult",
    "NodeSQNR",
    "PROFILE_PREFIX",
    "QuantReport",
    "QuantizationError",
    "check_profile",
    "fallback_search",
    "load_samples",
    "model_input_types",
    "output_sqnr",
    "profile_model",
    "quant_report",
    "random_samples",
    "sqnr_db",
]
