#!/usr/bin/env python3
"""A small model on which the default scheduler loses to plain topological order (the worked
scheduler regression of docs/memory-regression.md, and a test's).

    python scripts/make_scheduler_example.py [-o two_branches.onnx]

Two branches meet in a Mul, as in a squeeze-and-excitation gate: branch B (first in the file)
widens to 64 channels and pools them to a 96-value gate; branch A produces 96 channels at
once. child-mem-size runs the hungrier subtree first -- A, whose 96-channel result then stays
live while B peaks -- where the file's order (B first, keeping only its tiny gate) needs far
less: ordering subtrees by their peak alone ignores what each leaves behind.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def build_two_branches(seed: int = 0) -> onnx.ModelProto:
    rng = np.random.default_rng(seed)
    inits = []

    def conv(name: str, x: str, cin: int, cout: int) -> onnx.NodeProto:
        w = (rng.standard_normal((cout, cin, 1, 1)) * 0.3).astype(np.float32)
        inits.append(numpy_helper.from_array(w, f"{name}.w"))
        return helper.make_node("Conv", [x, f"{name}.w"], [name], name=name)

    nodes = [
        conv("b_wide", "input", 8, 64),
        helper.make_node("ReduceMean", ["b_wide"], ["b_pool"], name="b_pool", axes=[2, 3], keepdims=1),
        conv("b_gate", "b_pool", 64, 96),
        conv("a_wide", "input", 8, 96),
        helper.make_node("Mul", ["a_wide", "b_gate"], ["gated"], name="gated"),
        conv("output", "gated", 96, 8),
    ]
    graph = helper.make_graph(
        nodes,
        "two_branches",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 8, 16, 16])],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, 8, 16, 16])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-o", "--output", type=Path, default=Path("two_branches.onnx"))
    args = ap.parse_args(argv)
    args.output.write_bytes(build_two_branches().SerializeToString())
    print(args.output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
