"""Helpers of the pass tests: write a test module's IR text from what the test is about, parse
it with random data for elided constants, run passes with the verifier, compare numerics before
and after through the reference kernels, and assert the rewrite with CHECK lines."""

from __future__ import annotations

import dataclasses
import textwrap

import numpy as np

from compiler.graph import Module, parse_module, print_module, verify_module
from compiler.graph.ir import Constant, Placeholder
from compiler.passes.manager import GraphPass
from tests.filecheck import check

_DECLARATIONS = ("placeholder", "constant")


def module_ir(src: str) -> str:
    """The text of a test module: `module @m` holding the `placeholder`/`constant` lines of `src`
    and one `func @main` holding the other lines. A constant declared without data
    (`constant %w : f32<4x3x3x3>`) is elided: `load` fills it with random data. A pass test
    writes only the graph it is about; every test module has the same frame, as in MLIR tests."""
    decls, body = [], []
    for line in textwrap.dedent(src).strip().splitlines():
        line = line.strip()
        if line.startswith("constant ") and "=" not in line:
            line += f" = elided<{line.split()[1][1:]}>"
        if line:
            (decls if line.split(" ", 1)[0] in _DECLARATIONS else body).append(line)
    inner = "".join(f"  {d}\n" for d in decls) + "  func @main {\n"
    return "module @m {\n" + inner + "".join(f"    {b}\n" for b in body) + "  }\n}\n"


def after_conv(nodes: str) -> str:
    """A module whose padded 3x3 Conv `%conv_3` (3 -> 4 channels, 8x8, random weights) is read
    by `nodes`, which may use random BatchNorm parameters %gamma, %beta, %mean and %var: the
    folding, fusion and pipeline tests start from it."""
    return module_ir(
        """
    placeholder %x : f32<1x3x8x8>
    placeholder %out : f32<1x4x8x8> output
    constant %w : f32<4x3x3x3>
    constant %b : f32<4>
    constant %gamma : f32<4>
    constant %beta : f32<4>
    constant %mean : f32<4>
    constant %var : f32<4>
    %conv_3 = Conv(%x, %w, %b) {pads = [1, 1, 1, 1]} : f32<1x4x8x8>
    """
        + nodes
    )


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


@dataclasses.dataclass(frozen=True)
class Rewritten:
    """A module after the passes of `assert_rewrites`/`assert_unchanged`, to check its text."""

    module: Module

    def check(self, checks: str) -> Module:
        """Assert the module's text satisfies the CHECK lines; returns the module."""
        check(text(self.module), checks)
        return self.module


def assert_rewrites(src: str, *passes: GraphPass, numerics: bool = True) -> Rewritten:
    """The passes change `src`, keeping its numerics (see `check_pass`)."""
    m, changed = check_pass(src, *passes, numerics=numerics)
    assert changed, f"no pass changed the module:\n{text(m)}"
    return Rewritten(m)


def assert_unchanged(src: str, *passes: GraphPass) -> Rewritten:
    """The passes leave `src` alone: a must-not-fire case."""
    m, changed = check_pass(src, *passes)
    assert not changed, f"a pass changed the module:\n{text(m)}"
    return Rewritten(m)
