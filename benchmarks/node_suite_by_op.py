"""Per-op outcome counts of onnx's node test suite through `compiler.onnx_backend`, by executor.

Run by hand (not by CI): the conformance harness (tests/conformance/harness.py, onnx's own
BackendTest runner, no freezing, no patching) gives each case's outcome; this groups them by
the ONNX ops of the case's model, to see which ops and element types pass, are refused, or go
wrong. Outcomes: pass, refused-op, refused-dtype, refused-feature, wrong, crash.

    python benchmarks/node_suite_by_op.py Mod ScatterND --executor interpreter llvm
    python benchmarks/node_suite_by_op.py -k 'cumsum|top_k' -v
    python benchmarks/node_suite_by_op.py --all --json out.json
"""

from __future__ import annotations

import argparse
import functools
import json
import re
import sys
import tempfile
import warnings
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


@functools.cache
def _ops_of_cases() -> dict[str, set[str]]:
    """Case name (as the runner names it, `_cpu` suffix) -> ONNX op types of its model."""
    from onnx.backend.test.case.node import collect_testcases

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return {
            f"{c.name}_cpu": {n.op_type for n in c.model.graph.node}
            for c in collect_testcases(None)
        }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("ops", nargs="*", help="ONNX op types (cases using any of them)")
    ap.add_argument("--all", action="store_true", help="every node case")
    ap.add_argument("-k", dest="pattern", help="only cases whose name matches this regex")
    ap.add_argument("--executor", nargs="+", default=["interpreter", "llvm"])
    ap.add_argument("--json", help="write per-case outcomes here")
    ap.add_argument("-v", "--verbose", action="store_true", help="print each non-pass case")
    args = ap.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    from tests.conformance import harness

    ops_of = _ops_of_cases()
    wanted = set(args.ops)
    names = [
        n
        for n in harness.case_names(harness.NODE)
        if (args.all or not wanted or ops_of.get(n, set()) & wanted)
        and (not args.pattern or re.search(args.pattern, n))
    ]
    results: dict[str, dict[str, list[str]]] = {}
    with tempfile.TemporaryDirectory() as home:
        import os

        os.environ["ONNX_HOME"] = home
        for ex in args.executor:
            per_op: dict[str, Counter] = defaultdict(Counter)
            outcomes = {n: harness.outcome(ex, harness.NODE, n) for n in names}
            results[ex] = {n: [o.status, o.detail] for n, o in outcomes.items()}
            for n, o in outcomes.items():
                ops = ops_of.get(n, set())
                for op in ops if (args.all or not wanted) else ops & wanted:
                    per_op[op][o.status] += 1
                if args.verbose and o.status != "pass":
                    print(
                        f"[{ex}] {n}: {o.status}: {o.detail.splitlines()[0][:200] if o.detail else ''}"
                    )
            print(harness.summary(ex, harness.NODE, outcomes))
            for op in sorted(per_op):
                c = per_op[op]
                print(
                    f"  {op:28s} pass {c['pass']:3d}  refused "
                    f"{c['refused-op'] + c['refused-dtype'] + c['refused-feature']:3d}  "
                    f"wrong {c['wrong']:2d}  crash {c['crash']:2d}"
                )
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
