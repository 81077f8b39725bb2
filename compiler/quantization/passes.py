"""The quantization passes (pipeline stage "quantize", after post-lower-opt, as in Glow):

- `instrument-profile`: a profile point on every float activation (and graph input): a Save
  into an extra output placeholder `profile.<value>`, so either executor can profile the graph
  and the profile runner (compiler/quantize.py) reads every activation from the outputs. The
  graph's hash (before instrumenting) keys the profile.
- `quantize`: rewrites float nodes into quantized ones from a profile (quantizer.py); refuses a
  profile of another graph.
- `quant-opt`: removes what quantizing node by node leaves between neighbours:
  Quantize(Dequantize(q)) becomes q (or a RescaleQuantized when the parameters differ), an
  identity rescale disappears, and a rescale after a single-use requantizing op is folded into
  that op's output parameters (one rounding instead of two).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from compiler.graph.ir import Function, Module, Node, Result
from compiler.graph.ops_quant import QMAX, QMIN, is_quantized
from compiler.passes.manager import GraphPass
from compiler.passes.rewriter import (
    Rewriter,
    apply_patterns,
    const_data,
    graph_patterns,
    is_trivially_dead,
    producer,
)
from compiler.quantization.options import QuantizeOptions, as_quantize_options
from compiler.quantization.profile import graph_hash
from compiler.quantization.quantizer import (
    REQUANTIZING,
    Quantizer,
    find_chains,
    mixed_range_values,
    params_of,
    qattrs,
    quantize_chain,
    quantize_node,
)

if TYPE_CHECKING:  # the backend comes from the pipeline (lowering's policy)
    from compiler.backends.contract import Backend

#: Output placeholders of profile points are named PROFILE_PREFIX + the value's name.
PROFILE_PREFIX = "profile."


def profiled_values(fn: Function) -> list[Any]:
    """The values a profile covers: float graph inputs and float node results."""
    out: list[Any] = [p for p in fn.module.inputs() if p.type.elem.is_float]
    for node in fn.nodes:
        if node.op == "Save":
            continue
        out.extend(r for r in node.results if r.type.elem.is_float and r.type.numel > 0)
    return out


def weighted_layers(fn: Function) -> dict[str, dict[str, Any]]:
    """The layers whose int8 weights GPTQ rounds (compiler/quantization/gptq.py), by node name:
    what the profile runner needs to gather each one's input Hessian from the profiled input
    value: {"op", "input" (value name), "weight_shape", and a Conv's geometry}."""
    out: dict[str, dict[str, Any]] = {}
    for node in fn.nodes:
        if node.op not in ("Conv", "FullyConnected", "MatMul") or not node.results:
            continue
        x, w = node.operands[0], node.operands[1]
        if not x.type.elem.is_float or const_data(w) is None or const_data(x) is not None:
            continue
        if node.op == "MatMul" and w.type.rank != 2:
            continue
        if node.op == "Conv" and x.type.rank != 4:
            continue
        entry: dict[str, Any] = {
            "op": node.op,
            "input": x.name,
            "weight_shape": list(w.type.shape),
        }
        if node.op == "Conv":
            entry.update(
                {k: list(node.attrs[k]) for k in ("strides", "pads", "dilations")},
                group=int(node.attrs["group"]),
            )
        out[node.name] = entry
    return out


class InstrumentProfile(GraphPass):
    """Saves every float activation into a `profile.<name>` output (see the module docstring)."""

    name = "instrument-profile"
    affects_memory = True

    def run_on_module(self, module: Module) -> bool:
        module.meta["profile_graph_hash"] = graph_hash(module)
        return super().run_on_module(module)

    def run(self, fn: Function) -> bool:
        rw = Rewriter(fn, rule=self.name)
        points: dict[str, str] = fn.module.meta.setdefault("profile_points", {})
        layers: dict[str, dict[str, Any]] = fn.module.meta.setdefault("profile_layers", {})
        layers.update(weighted_layers(fn))
        for v in profiled_values(fn):
            ph = fn.module.add_placeholder(PROFILE_PREFIX + v.name, v.type, is_output=True)
            points[ph.name] = v.name
            anchor = v.node if isinstance(v, Result) else None
            if anchor is not None:
                with rw.at(anchor):
                    rw.create("Save", [v, ph], name=f"profile_{v.name}")
            else:
                rw.create("Save", [v, ph], name=f"profile_{v.name}", origin=[])
        return rw.changed


class QuantizeGraph(GraphPass):
    """Quantizes the graph from a profile (see compiler/quantization/quantizer.py)."""

    name = "quantize-graph"

    def __init__(self, options: Any, backend: Backend) -> None:
        self.options: QuantizeOptions = as_quantize_options(options)
        self.backend = backend

    def run_on_module(self, module: Module) -> bool:
        profile = self.options.load_profile()
        profile.check_hash(graph_hash(module), "the graph being quantized")
        self._profile = profile
        changed = super().run_on_module(module)
        if changed:
            module.remove_unused_constants()
        return changed

    def run(self, fn: Function) -> bool:
        rw = Rewriter(fn, rule=self.name)
        q = Quantizer(rw, self.options, self._profile, self.backend)
        nodes = list(fn.nodes)
        q.mixed = mixed_range_values(q, nodes)
        chains = find_chains(q, nodes)
        inner = {id(m) for _, chain in chains.values() for m in chain[:-1]}
        for node in nodes:
            if node.function is not fn:
                continue  # replaced by an earlier rewrite (a fused bias Add)
            if id(node) in inner:
                continue  # one table with its sink, or left float if the table is not built
            if id(node) in chains:
                with rw.at(node, "quantize-elementwise-chain"):
                    if quantize_chain(q, node, *chains[id(node)]):
                        q.decisions.setdefault(node.name, "quantized")
                        continue
            with rw.at(node, f"quantize-{node.op.lower()}"):
                quantize_node(q, node)
        fn.module.meta.setdefault("quantization", {}).update(q.decisions)
        # The int8 arithmetic is the project's own: a residual QAdd may fold into its QConv
        # with one rounding (sum-post-op), where an imported QDQ model keeps onnxruntime's two.
        fn.module.meta["int8_sum_post_op"] = True
        return rw.changed


# -- quant-opt ------------------------------------------------------------------------------------


def fold_quantize_dequantize(node: Node, rw: Rewriter) -> bool:
    """Quantize(Dequantize(q)) -> q, or a rescale of q to the Quantize's parameters."""
    src = producer(node.operands[0])
    if src is None or src.op != "Dequantize":
        return False
    q = src.operands[0]
    if q.type == node.result.type:
        rw.replace(node.result, q)
        return True
    attrs = {"scale": node.attrs["scale"], "offset": node.attrs["offset"]}
    rw.replace(node.result, rw.create("RescaleQuantized", [q], attrs, name=node.name).result)
    return True


def fold_rescale(node: Node, rw: Rewriter) -> bool:
    """An identity rescale disappears; a rescale of a single-use requantizing op's result
    becomes that op's own output parameters and clamp."""
    (x,) = node.operands
    full = (node.attrs["qmin"], node.attrs["qmax"]) == (QMIN, QMAX)
    if full and x.type == node.result.type:
        rw.replace(node.result, x)
        return True
    src = producer(x)
    live_users = [u for u in x.user_nodes() if not is_trivially_dead(u)]
    if (
        src is None
        or src.op not in REQUANTIZING
        or live_users != [node]
        or (src.attrs["qmin"], src.attrs["qmax"]) != (QMIN, QMAX)
    ):
        return False
    attrs = dict(src.attrs)
    attrs.update(qattrs(params_of(node.result.type), (node.attrs["qmin"], node.attrs["qmax"])))
    folded = rw.create(src.op, list(src.operands), attrs, name=src.name, origin=[src, node])
    # It now computes the rescale's value (a folded Relu's) or, rescaled, still the op's own.
    folded.meta["quantizes"] = node.meta.get("quantizes") or src.meta.get("quantizes", {})
    rw.replace(node.result, folded.result)
    return True


CLEANUP = graph_patterns(
    {"Quantize": [fold_quantize_dequantize], "RescaleQuantized": [fold_rescale]}
)


class QuantCleanup(GraphPass):
    """quant-opt: see the module docstring."""

    name = "quant-opt"

    def run(self, fn: Function) -> bool:
        if not any(is_quantized(r.type) for n in fn.nodes for r in n.results):
            return False
        return apply_patterns(fn, CLEANUP)


__all__ = [
    "CLEANUP",
    "PROFILE_PREFIX",
    "InstrumentProfile",
    "QuantCleanup",
    "QuantizeGraph",
    "fold_quantize_dequantize",
    "fold_rescale",
    "profiled_values",
]
