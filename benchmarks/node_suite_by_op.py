"""Per-op pass counts of onnx's node test suite through `compiler.onnx_backend`, by executor.

Run by hand (not by CI): measures which ONNX ops and element types the compiler runs and
matches. Every node case (not only those in the conformance test's scope) whose model uses one
of the selected ops runs through `prepare(model, executor=...)`; shape-like inputs are frozen
into initializers the way tests/conformance does (so this counts op and type support, not the
backend API's run-time specialization). Outcomes: pass, refused (a CompilerError), wrong,
crash.

    python benchmarks/node_suite_by_op.py Mod ScatterND --executor interpreter llvm
    python benchmarks/node_suite_by_op.py --all --json out.json
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import re
import sys
import traceback
import warnings
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def _conformance():
    """The conformance test module (its freezing and comparison are the measure)."""
    path = ROOT / "tests" / "conformance" / "test_onnx_node_tests.py"
    spec = importlib.util.spec_from_file_location("_node_conformance", path)
    mod = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    sys.modules[spec.name] = mod  # dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


def _arrays(values) -> list:
    """Case data as numpy arrays (some cases store TensorProtos)."""
    import onnx
    from onnx import numpy_helper

    return [numpy_helper.to_array(v) if isinstance(v, onnx.TensorProto) else v for v in values]


def run_case(conf, case, executor: str) -> tuple[str, str]:
    from compiler import onnx_backend
    from compiler.errors import CompilerError

    freeze = getattr(conf, "_freeze_shape_inputs", None)
    model, keep = freeze(case) if freeze else (case.model, list(range(len(case.model.graph.input))))
    for inputs, expected in case.data_sets:
        inputs, expected = _arrays(inputs), _arrays(expected)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                rep = onnx_backend.prepare(model, executor=executor)
                got = list(rep.run([np.asarray(inputs[i]) for i in keep]))
        except CompilerError as e:
            return "refused", f"{type(e).__name__}: {e}"
        except Exception:  # noqa: BLE001 - a crash is an outcome to report
            return "crash", traceback.format_exc(limit=4)
        problem = conf._compare(case, list(expected), got)
        if problem:
            return "wrong", problem
    return "pass", ""


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("ops", nargs="*", help="ONNX op types (cases using any of them)")
    ap.add_argument("--all", action="store_true", help="every node case")
    ap.add_argument("--executor", nargs="+", default=["interpreter", "llvm"])
    ap.add_argument("-k", dest="pattern", help="only cases whose name matches this regex")
    ap.add_argument("--json", help="write per-case outcomes here")
    ap.add_argument("-v", "--verbose", action="store_true", help="print each non-pass case")
    args = ap.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    conf = _conformance()
    # Operands the ops added since the conformance table was written also need freezing.
    if hasattr(conf, "SHAPE_LIKE"):
        for op, idx in {"CumSum": {1}, "TopK": {1}, "Trilu": {1}, "Range": {0, 1, 2}}.items():
            conf.SHAPE_LIKE.setdefault(op, set()).update(idx)
    cases = conf._all_cases()
    wanted = set(args.ops)
    selected = [
        c
        for c in cases
        if (args.all or any(n.op_type in wanted for n in c.model.graph.node))
        and (not args.pattern or re.search(args.pattern, c.name))
    ]
    results: dict[str, dict[str, list]] = {}
    for ex in args.executor:
        per_op: dict[str, Counter] = defaultdict(Counter)
        outcomes = {}
        for case in selected:
            status, detail = run_case(conf, case, ex)
            outcomes[case.name] = [status, detail]
            ops = {n.op_type for n in case.model.graph.node}
            for op in ops if args.all else ops & wanted:
                per_op[op][status] += 1
            if args.verbose and status != "pass":
                print(
                    f"[{ex}] {case.name}: {status}: {detail.splitlines()[0][:200] if detail else ''}"
                )
        results[ex] = outcomes
        total = Counter(s for s, _ in outcomes.values())
        print(f"== {ex}: {dict(total)} of {len(selected)}")
        for op in sorted(per_op):
            c = per_op[op]
            print(
                f"  {op:28s} pass {c['pass']:3d}  refused {c['refused']:3d}  "
                f"wrong {c['wrong']:2d}  crash {c['crash']:2d}"
            )
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
