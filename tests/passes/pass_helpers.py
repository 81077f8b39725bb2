"""Helpers of the pass tests: parse IR text, fill elided constants with random data, run a pass
with the verifier, and execute a module before/after to compare numerics."""

from __future__ import annotations

import numpy as np

from compiler.graph import Module, parse_module, print_module, verify_module
from compiler.graph.ir import Constant, Placeholder
from compiler.passes.manager import GraphPass


def load(text: str, seed: int = 0) -> Module:
    """Parse IR text; `elided<...>` constants get seeded random data (positive when the name
    starts with 'var', so BatchNorm variances are valid)."""
    m = parse_module(text)
    rng = np.random.default_rng(seed)
    for c in m.constants.values():
        if c.data is None:
            t = c.type
            if t.elem.is_float:
                data = rng.standard_normal(t.shape)
                if c.name.startswith("var"):
                    data = np.abs(data) + 0.5
            else:
                data = rng.integers(0, 4, t.shape)
            arr = np.ascontiguousarray(data.astype(t.np_dtype))
            arr.setflags(write=False)
            c.data = arr
            c._digest = None
    verify_module(m)
    return m


def run(m: Module, *passes: GraphPass) -> bool:
    """Run passes in order, verifying after each; returns whether any changed the module."""
    changed = False
    for p in passes:
        changed |= p.run_on_module(m)
        verify_module(m)
    return changed


def text(m: Module) -> str:
    return print_module(m)


def random_inputs(m: Module, seed: int = 1) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    out = {}
    for p in m.inputs():
        if p.type.elem.is_float:
            out[p.name] = rng.standard_normal(p.type.shape).astype(p.type.np_dtype)
        else:
            out[p.name] = rng.integers(0, 3, p.type.shape).astype(p.type.np_dtype)
    return out


def execute(m: Module, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Run the main function node by node through the reference kernels."""
    from compiler.kernels.reference import evaluate

    env: dict[int, np.ndarray] = {}

    def value(v) -> np.ndarray:
        if isinstance(v, Constant):
            assert v.data is not None
            return v.data
        if isinstance(v, Placeholder):
            return inputs[v.name]
        return env[id(v)]

    outputs: dict[str, np.ndarray] = {}
    for node in m.main.nodes:
        if node.op == "Save":
            outputs[node.operands[1].name] = np.array(value(node.operands[0]))
            continue
        args = [value(v) for v in node.operands]
        for r, arr in zip(node.results, evaluate(node, args)):
            env[id(r)] = arr
    return outputs


def assert_same_numerics(
    before: Module, after: Module, seed: int = 1, rtol: float = 1e-4, atol: float = 1e-5
) -> None:
    inputs = random_inputs(before, seed)
    want, got = execute(before, inputs), execute(after, inputs)
    assert want.keys() == got.keys()
    for k in want:
        assert got[k].dtype == want[k].dtype, k
        np.testing.assert_allclose(got[k], want[k], rtol=rtol, atol=atol, err_msg=k)


def check_pass(
    src: str, *passes: GraphPass, seed: int = 0, numerics: bool = True
) -> tuple[Module, bool]:
    """Load `src`, run the passes (verified), compare numerics with the original; returns the
    rewritten module and whether it changed."""
    before = load(src, seed)
    after = before.clone()
    changed = run(after, *passes)
    if numerics:
        assert_same_numerics(before, after)
    return after, changed
