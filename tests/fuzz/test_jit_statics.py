"""Huge conv strides against the kernels' static buffers (issue 11). Mutant 1909 of seed 2026
(mobilenet_small, a conv stride of 2^31) once generated a 275 GB padded-input buffer: the
buffer's slack grew with the stride for the over-read of a tail vector's unused lanes. MCJIT
aborted the process (SIGABRT) when it could not map the section under the campaign's 3 GiB cap;
then the JIT's memory check refused it with exit 2. Wide strides now load only a vector's valid
lanes, so the buffer is the size of the padded image and the model runs, under the same cap, with
the answer of the interpreter and onnxruntime. (The JIT's refusal without headroom is
tests/backends/llvm/test_jit_headroom.py.)"""

from __future__ import annotations

from .runner import GIB, Settings, mutant_cases, run_cases


def test_a_stride_of_2_31_runs_under_the_cap_and_agrees() -> None:
    case = next(mutant_cases(2026, 1, start=1909))
    assert "strides = 2147483648" in case.desc
    st = Settings(timeout=60.0, mem_limit=3 * GIB, commands=("run-llvm", "run-interpreter"))
    ((_, outcomes),) = list(run_cases([case], st, jobs=1))
    by_command = {o.command: o for o in outcomes}
    assert set(by_command) == {"run-llvm", "run-interpreter", "check"}, outcomes
    for o in outcomes:
        assert o.cls == "ok", (o.command, o.cls, o.cause, o.detail)
