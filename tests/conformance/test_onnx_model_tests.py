"""onnx's shipped model test data through onnx's own runner, on both executors.

The categories of `onnx/backend/test/data/`: `light` (BackendTest's "Real" category: nine
classic CNNs, run from local files with the runner's dummy inputs), `simple`,
`pytorch-converted` and `pytorch-operator` (most of the PyTorch ones are opset 6: the frontend
upgrades them with onnx's version converter). Same rules as the node suite (harness.py): pass,
or a clear refusal; no wrong answer or crash outside `harness.KNOWN_ISSUES`.
"""

from __future__ import annotations

import pytest

from tests.conformance import harness

#: Passing cases per (category, executor); only ever raised. Issue 12's target: 95% overall.
PASS_FLOOR = {
    ("Real", "interpreter"): 8,
    ("Real", "llvm"): 9,
    ("Simple", "interpreter"): 17,
    ("Simple", "llvm"): 17,
    ("PyTorchConverted", "interpreter"): 82,
    ("PyTorchConverted", "llvm"): 81,
    ("PyTorchOperator", "interpreter"): 35,
    ("PyTorchOperator", "llvm"): 35,
}

_CASES = [
    pytest.param(
        category,
        executor,
        # The light CNNs take minutes to JIT-compile, and half a minute in the interpreter's
        # numpy kernels: the slow set (still run in CI, started first).
        marks=[pytest.mark.slow] if category == "Real" else [],
        id=f"{category}-{executor}",
    )
    for category in harness.MODEL_CATEGORIES
    for executor in harness.EXECUTORS
]


@pytest.mark.parametrize("category, executor", _CASES)
def test_model_data(category: str, executor: str, tmp_path) -> None:
    results = harness.outcomes(executor, category, tmp_path)
    print("\n" + harness.summary(executor, category, results))
    bad = harness.bad_cases(executor, results)
    assert not bad, "wrong answers or crashes:\n" + "\n".join(bad)
    passed = harness.counts(results)["pass"]
    assert passed >= PASS_FLOOR[category, executor], harness.summary(executor, category, results)
