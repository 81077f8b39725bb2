#!/usr/bin/env python3
"""Time every view of the benchmark models in every export format (the issue-18 table).

    python benchmarks/bench_exports.py [--only resnet50 ...] [--json FILE]

Each (model, view, format) is one `render_view` call on a compiled session (what
`glowviz export` does after compiling; the compile is timed once per model and listed
apart). Wall and CPU seconds (this process plus its `dot` children) are both printed: on a
loaded machine the wall time is the CPU time stretched by the load.
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

MODELS = ("densenet121", "resnet50", "inception", "bert")
LIMIT_S = 10.0


def _cpu() -> float:
    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def main(argv: list[str] | None = None) -> int:
    from models import ensure_model

    from compiler.pipeline import CompileOptions
    from glowviz.exports.views import VIEW_FORMATS, compile_session, render_view

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", nargs="*", choices=MODELS, default=None)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)
    rows = []
    for name in args.only or MODELS:
        path = ensure_model(name)
        t0, c0 = time.perf_counter(), _cpu()
        session = compile_session(str(path), CompileOptions())
        print(f"{name}: compile {time.perf_counter() - t0:.2f} s wall, {_cpu() - c0:.2f} s CPU")
        for view, fmts in VIEW_FORMATS.items():
            for fmt in fmts:
                t0, c0 = time.perf_counter(), _cpu()
                data = render_view(session, view, fmt)
                wall, cpu = time.perf_counter() - t0, _cpu() - c0
                rows.append(
                    {
                        "model": name,
                        "view": view,
                        "format": fmt,
                        "wall_s": round(wall, 3),
                        "cpu_s": round(cpu, 3),
                        "bytes": len(data),
                    }
                )
                flag = "  SLOW" if wall >= LIMIT_S else ""
                print(
                    f"  {view:9} {fmt:4} {wall:6.2f} s wall {cpu:6.2f} s CPU {len(data):>10} B{flag}",
                    flush=True,
                )
    worst = max(rows, key=lambda r: r["wall_s"])
    print(f"slowest: {worst['model']} {worst['view']} {worst['format']} {worst['wall_s']:.2f} s")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")
    return 1 if worst["wall_s"] >= LIMIT_S else 0


if __name__ == "__main__":
    raise SystemExit(main())
