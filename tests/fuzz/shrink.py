"""Shrinking a failing case into a small regression model, and localizing a wrong answer.

`shrink_model` keeps the failure's signature while cutting the graph: first down to the
ancestors of one output, then truncated at the earliest intermediate value that still fails.
`localize_wrong` finds the first node whose value disagrees between our executors and
onnxruntime (every intermediate made an output) and cuts the model to that node alone, fed with
the values onnxruntime computed for its inputs, or to its ancestors.

    python -m tests.fuzz.shrink FAILING.onnx --command compile --out reduced.onnx
    python -m tests.fuzz.shrink --graph-seed 7000033 --out tests/fuzz/regressions/x.onnx
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
from onnx import helper, shape_inference

from .runner import COMMANDS, Case, Outcome, Settings, Worker, run_case, run_check

# -- graph surgery ---------------------------------------------------------------------------------


def _inferred(model: onnx.ModelProto) -> dict[str, onnx.ValueInfoProto]:
    try:
        inf = shape_inference.infer_shapes(model)
    except Exception:  # noqa: BLE001 - mutants may not infer
        return {}
    vis = {vi.name: vi for vi in inf.graph.value_info}
    vis.update({vi.name: vi for vi in inf.graph.output})
    return vis


def cut(model: onnx.ModelProto, outputs: list[onnx.ValueInfoProto]) -> onnx.ModelProto:
    """`model` computing only `outputs`: nodes that do not feed them and unused initializers
    dropped (graph inputs kept, so the inputs file still fits)."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    g = m.graph
    need = {o.name for o in outputs}
    keep = []
    for n in reversed(list(g.node)):
        if any(o in need for o in n.output):
            keep.append(n)
            need.update(i for i in n.input if i)
    keep.reverse()
    del g.node[:]
    g.node.extend(keep)
    inits = [t for t in g.initializer if t.name in need]
    del g.initializer[:]
    g.initializer.extend(inits)
    del g.output[:]
    g.output.extend(outputs)
    del g.value_info[:]
    return m


def single_node(
    model: onnx.ModelProto, index: int, values: dict[str, np.ndarray]
) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """Node `index` alone: its non-constant inputs become graph inputs fed with `values`."""
    node = model.graph.node[index]
    inits = {t.name: t for t in model.graph.initializer}
    consts = {n.output[0]: n for n in model.graph.node if n.op_type == "Constant"}
    vis = _inferred(model)
    ins, feeds, keep_inits, keep_nodes = [], {}, [], []
    for name in node.input:
        if not name or name in feeds:
            continue
        if name in inits:
            keep_inits.append(inits[name])
        elif name in consts:
            keep_nodes.append(consts[name])
        else:
            a = values[name]
            ins.append(
                helper.make_tensor_value_info(
                    name, helper.np_dtype_to_tensor_dtype(a.dtype), list(a.shape)
                )
            )
            feeds[name] = a
    outs = [
        vis[o] if o in vis else helper.make_tensor_value_info(o, onnx.TensorProto.FLOAT, None)
        for o in node.output
        if o
    ]
    g = helper.make_graph(
        [*keep_nodes, node], f"{model.graph.name}_node{index}", ins, outs, keep_inits
    )
    m = helper.make_model(
        g, opset_imports=list(model.opset_import), producer_name="glowviz-fuzz-shrink"
    )
    m.ir_version = model.ir_version
    return m, feeds


# -- shrinking by signature -------------------------------------------------------------------------


def shrink_model(
    model: onnx.ModelProto,
    still_fails: Callable[[onnx.ModelProto], bool],
    log: Callable[[str], None] = print,
) -> onnx.ModelProto:
    """The smallest cut of `model` (greedy) for which `still_fails` holds."""
    best = model
    vis = _inferred(model)
    # 1. one output at a time
    for o in list(model.graph.output):
        cand = cut(best, [o])
        if len(cand.graph.node) < len(best.graph.node) and still_fails(cand):
            best = cand
            log(f"  one output {o.name}: {len(best.graph.node)} nodes")
            break
    # 2. truncate at the earliest intermediate value that still fails
    produced = [o for n in best.graph.node for o in n.output if o and o in vis]
    for name in produced:
        cand = cut(best, [vis[name]])
        if len(cand.graph.node) < len(best.graph.node) and still_fails(cand):
            best = cand
            log(f"  truncated at {name}: {len(best.graph.node)} nodes")
            break
    return best


def signature_of(worker: Worker, model: onnx.ModelProto, command: str, st: Settings) -> str:
    case = Case("shrink", "mutant", "shrink", "", model.SerializeToString())
    if command == "check":
        return run_check(worker, case, st).signature
    return run_case(worker, case, Settings(st.timeout, st.mem_limit, False, (command,)))[
        0
    ].signature


# -- localizing wrong answers ------------------------------------------------------------------------


def all_values_model(model: onnx.ModelProto) -> onnx.ModelProto:
    """`model` with every node output (that shape inference types) as a graph output."""
    vis = _inferred(model)
    m = onnx.ModelProto()
    m.CopyFrom(model)
    have = {o.name for o in m.graph.output}
    for n in m.graph.node:
        if n.op_type == "Constant":
            continue
        for o in n.output:
            if o and o not in have and o in vis:
                m.graph.output.append(vis[o])
                have.add(o)
    return m


def localize_wrong(
    worker: Worker,
    model: onnx.ModelProto,
    feeds: dict[str, np.ndarray],
    st: Settings,
    log: Callable[[str], None] = print,
) -> tuple[onnx.ModelProto, dict[str, np.ndarray], str]:
    """(reduced model, its feeds, what was found) for a graph whose check is `wrong`.

    Every intermediate made an output changes what the compiler fuses and shares, so instead:
    cut to the first wrong output's ancestors, then to the shortest prefix that is still
    wrong; then try its last node alone, fed with onnxruntime's values for its inputs."""
    from .oracle import run_onnxruntime

    def check(m: onnx.ModelProto, f: dict[str, np.ndarray]) -> Outcome:
        return run_check(
            worker, Case("localize", "graph", "graph", "", m.SerializeToString(), f), st
        )

    first = check(model, feeds)
    log(f"  whole graph: {first.cls} {first.cause}")
    if first.cls != "wrong":
        return model, feeds, f"not wrong ({first.cls})"
    vis = _inferred(model)
    cur = model
    if first.wrong_outputs:
        o = next(o for o in model.graph.output if o.name == first.wrong_outputs[0])
        cand = cut(model, [o])
        if check(cand, feeds).cls == "wrong":
            cur = cand
    log(f"  ancestors of the first wrong output: {len(cur.graph.node)} nodes")
    for n in cur.graph.node:
        if n.op_type == "Constant" or n.output[0] not in vis:
            continue
        pre = cut(cur, [vis[n.output[0]]])
        if len(pre.graph.node) >= len(cur.graph.node):
            continue
        c = check(pre, feeds)
        if c.cls == "wrong":
            cur = pre
            log(f"  shortest wrong prefix ends at {n.op_type} ({len(cur.graph.node)} nodes)")
            break
    last = len(cur.graph.node) - 1
    values = run_onnxruntime(all_values_model(cur), feeds) | feeds
    small, sfeeds = single_node(cur, last, values)
    c = check(small, sfeeds)
    op = cur.graph.node[last].op_type
    log(f"  {op} alone: {c.cls} {c.cause}")
    if c.cls == "wrong":
        return small, sfeeds, f"{op} alone: {c.detail[:300]}"
    return cur, feeds, f"prefix ending at {op}: {len(cur.graph.node)} nodes"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tests.fuzz.shrink", description=__doc__)
    p.add_argument("model", nargs="?", help="a failing model (.onnx)")
    p.add_argument("--graph-seed", type=int, help="a random graph's seed (wrong answers)")
    p.add_argument("--command", default="compile", choices=[*COMMANDS, "check"])
    p.add_argument("--out", required=True, help="where to write the reduced model (.onnx)")
    p.add_argument("--timeout", type=float, default=30.0)
    args = p.parse_args(argv)
    st = Settings(timeout=args.timeout)
    w = Worker(st.mem_limit)
    try:
        out = Path(args.out)
        if args.graph_seed is not None:
            from .graphgen import random_graph

            model, feeds, desc = random_graph(args.graph_seed)
            print(desc)
            small, sfeeds, what = localize_wrong(w, model, feeds, st)
            print(what)
            onnx.save(small, out)
            np.savez(out.with_suffix(".inputs.npz"), **sfeeds)
            print(f"wrote {out} ({len(small.graph.node)} nodes) and its inputs")
            return 0
        model = onnx.load(args.model, load_external_data=False)
        sig = signature_of(w, model, args.command, st)
        print(f"signature: {sig}")
        small = shrink_model(model, lambda m: signature_of(w, m, args.command, st) == sig)
        onnx.save(small, out)
        print(f"wrote {out}: {len(model.graph.node)} -> {len(small.graph.node)} nodes")
        return 0
    finally:
        w.close()


if __name__ == "__main__":
    sys.exit(main())
