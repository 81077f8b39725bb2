"""The fuzzing campaign's small seeded run (the long one: `python -m tests.fuzz.campaign --long`).

Mutants of the sample models and random valid graphs go through every CLI command (in capped
worker processes) and the differential check. The test fails on any failure whose signature is
not in known.KNOWN (the work queue): a new traceback, hang, crash, memory blow-up or wrong
answer. A sample of the commands is repeated as real `glowviz` subprocesses and must be
classified the same way.
"""

from __future__ import annotations

import pytest

from tests.llvm_cache import LLVM_TEST_CACHE

from .known import known_signature
from .runner import (
    COMMANDS,
    GIB,
    Settings,
    Tally,
    graph_cases,
    mutant_cases,
    run_cases,
    run_cli_subprocess,
)

SEED = 11
MUTANTS, GRAPHS, SUBPROCESS = 60, 30, 4
#: The campaign (the module fixture) runs for half a minute: started first under xdist.
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def tally() -> Tally:
    # The workers keep their compiled modules in the LLVM tests' cache: a run after no code
    # generator change loads them instead of running O3 again (the subprocess sample below
    # still compiles from nothing, and must agree).
    st = Settings(timeout=30.0, mem_limit=3 * GIB, llvm_cache=LLVM_TEST_CACHE)
    t = Tally()

    def cases():
        yield from graph_cases(SEED, GRAPHS)
        yield from mutant_cases(SEED, MUTANTS, slow=False)

    for case, outcomes in run_cases(cases(), st, jobs=2):
        t.add(case, outcomes)
    return t


def test_no_unknown_failures(tally: Tally) -> None:
    new = []
    for sig, outcomes in tally.signatures.items():
        if known_signature(sig) is None:
            o = outcomes[0]
            new.append(
                f"{len(outcomes)} x {sig}\n    {o.case}: {tally.cases[o.case].desc[:200]}\n    {o.detail[:300]}"
            )
    assert not new, "failures not in tests/fuzz/known.py:\n" + "\n".join(new) + "\n" + tally.table()


def test_the_generators_make_useful_cases(tally: Tally) -> None:
    check = tally.by_command.get("check", {})
    # random graphs are valid: onnxruntime runs them and so do we
    assert check.get("ok", 0) + check.get("wrong", 0) >= 0.8 * GRAPHS, tally.table()
    # mutants reach both sides: some still run, most are refused
    compile_row = tally.by_command["compile"]
    assert compile_row.get("refusal", 0) >= MUTANTS // 3, tally.table()
    assert compile_row.get("ok", 0) >= GRAPHS, tally.table()


def test_subprocess_sample_agrees(tally: Tally) -> None:
    st = Settings(timeout=30.0, mem_limit=3 * GIB)
    ids = sorted(tally.cases)
    picks = ids[:: max(1, len(ids) // SUBPROCESS)][:SUBPROCESS]
    for case_id, command in zip(picks, list(COMMANDS) * SUBPROCESS):
        o = run_cli_subprocess(tally.cases[case_id].model, command, st)
        assert o.cls == tally.classes[(case_id, command)], (case_id, command, o.signature, o.detail)
