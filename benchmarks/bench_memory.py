"""Memory benchmark: planned activation peak before and after issue 14, the three schedulers, and
the certificate of every plan.

For every sample model and the ResNet-50-, Inception-v1-, DenseNet-121-, ShuffleNet-v2 (1.0x and
2.0x)-, MobileNet-v2- and BERT-shaped models (built by `benchmarks/models.py`, in memory): compile
with each scheduler, plan with both allocators, check every plan, and print one table.
`python benchmarks/bench_memory.py [--models NAME ...] [--json FILE]`.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from compiler.memory.plan import check_plan, plan_memory  # noqa: E402
from compiler.memory.report import human_bytes  # noqa: E402
from compiler.pipeline import CompileOptions, compile_model  # noqa: E402
from compiler.scheduling import SCHEDULERS  # noqa: E402

BIG = ("resnet50", "inception", "densenet121", "shufflenet", "shufflenet_2x", "mobilenet", "bert")

#: Planned activations (lower-bound allocator, child-mem-size, the then default) on main before
#: issue 14 (commit a102bf0), same generators: the "before" column.
BEFORE = {
    "lenet": 23552,
    "mlp": 768,
    "mlp_opset9": 768,
    "mobilenet_small": 40960,
    "resnet_small": 196608,
    "transformer_block": 36864,
    "unet_small": 393216,
    "resnet50": 7225344,
    "inception": 4014080,
    "densenet121": 8429568,
    "shufflenet": 1505280,
    "shufflenet_2x": 2214016,
    "mobilenet": 6021120,
    "bert": 3538944,
}

#: Glow's own figure where known: `allocateAll` on resnet50 v1.
GLOW = {"resnet50": 7225344}


def model_sources(names: list[str] | None) -> list[tuple[str, object]]:
    from models import BUILDERS

    samples = sorted((ROOT / "sample_models").glob("*.onnx"))
    out: list[tuple[str, object]] = [
        (p.stem, str(p)) for p in samples if not names or p.stem in names
    ]
    for big in BIG:
        if not names or big in names:
            out.append((big, BUILDERS[big]()))
    return out


def measure(name: str, model: object) -> dict:
    row: dict = {"model": name, "before": BEFORE.get(name), "glow": GLOW.get(name)}
    for sched in SCHEDULERS:
        t0 = time.perf_counter()
        res = compile_model(model, CompileOptions(scheduler=sched))
        seconds = time.perf_counter() - t0
        plan, cert = res.plan, res.plan.certificate
        ff = plan_memory(res.lir, "first-fit", schedule=res.schedule)
        row[sched] = {
            "planned": plan.peak_bytes,
            "lower_bound": plan.lower_bound_bytes,
            "first_fit": ff.peak_bytes,
            "valid": not (check_plan(plan) or check_plan(ff)),
            "compile_s": round(seconds, 2),
        }
        if sched == SCHEDULERS[0]:
            row.update(
                nodes=len(res.module.main),
                instructions=len(res.lir.code),
                certificate=cert.to_json(),
                search_ms=res.schedule.stats.get("search_ms"),
            )
    return row


def _mb(n: int | None) -> str:
    return "-" if n is None else human_bytes(n).replace(" ", "")


def print_table(rows: list[dict]) -> None:
    opt, cms, topo = SCHEDULERS
    head = [
        "model",
        "before",
        "after",
        "x",
        "Glow",
        "topo",
        "cms",
        "optimal",
        "LB all",
        "proven",
        "no-reuse",
        "aliases",
        "search",
        "valid",
    ]
    lines = [head]
    for r in rows:
        c = r["certificate"]
        after = r[opt]["planned"]
        aliases = ", ".join(f"{n} {k}" for k, n in sorted(c["aliases"].items())) or "-"
        lines.append(
            [
                r["model"],
                _mb(r["before"]),
                _mb(after),
                f"{after / r['before']:.3f}" if r["before"] else "-",
                _mb(r["glow"]),
                _mb(r[topo]["lower_bound"]),
                _mb(r[cms]["lower_bound"]),
                _mb(r[opt]["lower_bound"]),
                _mb(c["all_schedules_lower_bound_bytes"]),
                "yes" if c["schedule_proven_optimal"] else "no",
                _mb(c["no_reuse_bytes"]),
                aliases,
                f"{r['search_ms']}ms"
                if r["search_ms"] is not None
                else c["search"].get("fallback", "-"),
                "yes" if all(r[s]["valid"] for s in SCHEDULERS) else "NO",
            ]
        )
    widths = [max(len(line[i]) for line in lines) for i in range(len(head))]
    for k, line in enumerate(lines):
        print(
            "  ".join(
                c.ljust(w) if i in (0, 11) else c.rjust(w)
                for i, (c, w) in enumerate(zip(line, widths))
            )
        )
        if k == 0:
            print("  ".join("-" * w for w in widths))
    print(
        "\nbefore = main before issue 14 (child-mem-size, no aliasing); after = the default now\n"
        "(optimal scheduler, channel split, sum post-op, zero-copy concat); topo/cms/optimal =\n"
        "each scheduler's low-level lower bound (the planner reaches it unless the certificate\n"
        "says otherwise);\n"
        "LB all = lower bound over all schedules; proven = the optimal schedule reaches it;\n"
        "search = the exact search's time; valid = check_plan on every plan (both allocators)."
    )
    gaps = [r["model"] for r in rows if r["certificate"]["allocation_gap_bytes"]]
    print("lower bound reached on every model" if not gaps else f"allocation gap on: {gaps}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--models", nargs="*", help="model names (sample stems or " + ", ".join(BIG) + ")"
    )
    ap.add_argument("--json", type=Path, help="write the rows as JSON")
    args = ap.parse_args(argv)
    rows = []
    for name, model in model_sources(args.models):
        t0 = time.perf_counter()
        rows.append(measure(name, model))
        print(f"  measured {name} in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    print_table(rows)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
