"""The campaign's command line: `python -m tests.fuzz.campaign [--long] [--seed N] ...`.

Prints the outcome counts per class and per command and the failure signatures, most frequent
first, each with one example case, marked KNOWN when `known.py` lists it (the work queue) and
NEW otherwise. `--save DIR` writes every failing model (one per signature) for shrinking into
a regression file (`python -m tests.fuzz.shrink`).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from .known import known_signature
from .runner import (
    FAILURES,
    GIB,
    Case,
    Outcome,
    Settings,
    Tally,
    classify_cli,
    graph_cases,
    mutant_cases,
    run_cases,
    run_cli_subprocess,
)

SMALL = {"mutants": 80, "graphs": 40, "subprocess": 6}
LONG = {"mutants": 2000, "graphs": 500, "subprocess": 40}


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m tests.fuzz.campaign", description=__doc__)
    p.add_argument(
        "--long", action="store_true", help="thousands of cases (2000 mutants, 500 graphs)"
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--mutants", type=int, help="number of mutants of the sample models")
    p.add_argument("--graphs", type=int, help="number of random valid graphs")
    p.add_argument("--subprocess", type=int, help="CLI runs repeated as real subprocesses")
    p.add_argument(
        "--start", type=int, default=0, help="first mutant and graph number (resume a run)"
    )
    p.add_argument(
        "--cases", metavar="IDS", help="only these cases of the run, e.g. mut-2026-83,gen-11-5"
    )
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument(
        "--timeout", type=float, default=30.0, help="CPU seconds per command (wall: 10x as long)"
    )
    p.add_argument("--mem", type=float, default=3.0, help="GiB of address space per case")
    p.add_argument("--no-check", action="store_true", help="skip the differential check")
    p.add_argument("--json", metavar="FILE", help="write every outcome as JSON lines")
    p.add_argument("--save", metavar="DIR", help="write one failing model per signature")
    p.add_argument("--quiet", action="store_true")
    p.add_argument("--report", metavar="FILE", help="only print the counts of a --json file")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.report:
        return report(args.report)
    sizes = dict(LONG if args.long else SMALL)
    for k in sizes:
        if getattr(args, k) is not None:
            sizes[k] = getattr(args, k)
    st = Settings(timeout=args.timeout, mem_limit=int(args.mem * GIB), check=not args.no_check)
    tally = Tally()
    t0 = time.perf_counter()
    out = open(args.json, "w") if args.json else None  # noqa: SIM115
    save = Path(args.save) if args.save else None
    if save:
        save.mkdir(parents=True, exist_ok=True)

    only: dict[str, set[int]] | None = None
    if args.cases:
        only = {"gen": set(), "mut": set()}
        for cid in args.cases.split(","):
            kind, _seed, num = cid.strip().split("-")
            only[kind].add(int(num))

    def cases():
        yield from graph_cases(
            args.seed, sizes["graphs"], start=args.start, only=only and only["gen"]
        )
        yield from mutant_cases(
            args.seed, sizes["mutants"], start=args.start, only=only and only["mut"]
        )

    n = 0
    for case, outcomes in run_cases(cases(), st, jobs=args.jobs):
        n += 1
        tally.add(case, outcomes)
        for o in outcomes:
            if out:
                out.write(
                    json.dumps({**o.__dict__, "desc": case.desc, "family": case.family}) + "\n"
                )
            if o.cls in FAILURES:
                if save and len(tally.signatures[o.signature]) == 1:
                    (save / f"{case.id}.onnx").write_bytes(case.model)
                if not args.quiet:
                    print(
                        f"[{n}] {case.id} {o.command}: {o.cls} {o.cause} -- {case.desc[:100]}",
                        flush=True,
                    )
    # a sample of commands again as real subprocesses: the in-process worker must agree
    sub = 0
    mismatch = []
    if sizes["subprocess"]:
        from .runner import COMMANDS

        picks = sorted(tally.cases.values(), key=lambda c: c.id)[
            :: max(1, len(tally.cases) // sizes["subprocess"])
        ]
        for case, cmd in zip(picks[: sizes["subprocess"]], list(COMMANDS) * 100):
            o = run_cli_subprocess(case.model, cmd, st)
            sub += 1
            o.case = case.id
            inproc = tally.classes.get((case.id, cmd))
            if inproc != o.cls:
                mismatch.append(
                    f"{case.id} {cmd}: in-process {inproc}, subprocess {o.cls} {o.cause}"
                )
    if out:
        out.close()
    dt = time.perf_counter() - t0
    print()
    print(
        f"{n} cases ({sizes['mutants']} mutants, {sizes['graphs']} random graphs), seed {args.seed}, {dt:.0f} s"
    )
    print(tally.table())
    if sub:
        print(f"{sub} CLI runs repeated as subprocesses: {len(mismatch)} classified differently")
        for m in mismatch:
            print("  " + m)
    print()
    print_signatures(tally)
    return 0


def print_signatures(tally: Tally) -> None:
    """Failure signatures, most frequent first, each with one example (KNOWN: in known.py)."""
    print("failure signatures (count, KNOWN = listed in tests/fuzz/known.py):")
    for sig, os_ in sorted(tally.signatures.items(), key=lambda kv: -len(kv[1])):
        k = known_signature(sig)
        tag = f"KNOWN {k.bug}" if k else "NEW"
        ex = os_[0]
        print(f"{len(os_):5d}  {sig}   [{tag}]")
        print(f"       e.g. {ex.case}: {tally.cases[ex.case].desc[:150]}")
        if ex.detail.strip():
            print(f"       {ex.detail.strip().splitlines()[0][:200]}")


def report(path: str) -> int:
    """Counts and signatures of a finished run, from its --json file (re-classified hangs)."""
    tally = Tally()
    by_case: dict[str, tuple[Case, list[Outcome]]] = {}
    for line in open(path):  # noqa: SIM115
        d = json.loads(line)
        case = Case(d["case"], "", d.get("family", ""), d.get("desc", ""), b"")
        keys = Outcome.__dataclass_fields__
        o = Outcome(**{k: v for k, v in d.items() if k in keys})
        if o.cls == "hang":
            o.cause = classify_cli(None, "", timed_out=True, dump=o.detail)[1]
        by_case.setdefault(o.case, (case, []))[1].append(o)
    for case, outcomes in by_case.values():
        tally.add(case, outcomes)
    print(f"{len(by_case)} cases from {path}")
    print(tally.table())
    print()
    print_signatures(tally)
    return 0


if __name__ == "__main__":
    sys.exit(main())
