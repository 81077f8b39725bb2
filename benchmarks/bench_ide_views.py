#!/usr/bin/env python3
"""Time each IDE view's first frame on a benchmark model (issue 13 item 9: under 300 ms).

    python benchmarks/bench_ide_views.py [--model densenet121] [--size 180x50] [--stage N]
    python benchmarks/bench_ide_views.py --startup-runs 5   # start-up alone, medians of 5

Runs the IDE under Textual's Pilot (headless, the size given), waits for the compile and the
warm-up to finish, then presses each view's key once and measures the process CPU time and the
wall time until the view's first frame is drawn (every worker it started is done except the
background ones, `BACKGROUND`: the memory timeline fills in point by point after the view is
usable) and until everything it started is done ("settled"). CPU time is the figure to compare
(wall time is CPU time stretched by the machine's load); load average printed. The first frame's
CPU is the process's (every thread: background work running meanwhile counts) and the UI
thread's alone (`ui`: what delays the next key press when nothing else runs).

`--startup-runs N` times only the start-up (first stage listed, whole pipeline listed) in N
fresh processes, one after the other, and prints each run and the medians: the start-up
counts from the process start, so each run needs a process of its own. Python must find
the project's .pyc files: where PYTHONDONTWRITEBYTECODE is set and no __pycache__ exists,
every run compiles glowviz/ and compiler/ from source first (~0.3 s of CPU more), so the
runs compile them once beforehand (`compileall`, which writes them regardless).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from pathlib import Path

T0 = time.perf_counter()  # the startup rows count from here (interpreter start is ~20 ms before)
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))


#: Worker groups that fill a view in after its first frame (not waited for by "first frame").
BACKGROUND = ("memory-timeline",)


async def _settle(app, pilot, *, background: bool = True) -> None:
    """Wait until every worker is done (`background` False: every worker but BACKGROUND's)."""
    from textual.worker import WorkerState

    busy = (WorkerState.PENDING, WorkerState.RUNNING)

    def running() -> list:
        return [
            w for w in app.workers if w.state in busy and (background or w.group not in BACKGROUND)
        ]

    while True:
        await pilot.pause()
        if not running():
            await pilot.pause()
            if not running():
                return
        for w in running():
            try:
                await w.wait()
            except Exception:  # noqa: BLE001 - a cancelled worker is done too
                pass


async def run(
    model: str, size: tuple[int, int], stage: int | None, startup_only: bool = False
) -> list[tuple[str, float, float, float, float, float]]:
    from glowviz.app import GlowvizApp
    from glowviz.screens.main import VIEWS, MainScreen
    from glowviz.session import CompileSession
    from glowviz.widgets.pipeline_pane import PipelinePane

    app = GlowvizApp(session=CompileSession(model))
    out = []

    def now(label: str) -> tuple[str, float, float, float, float, float]:
        c, u, w = time.process_time(), time.thread_time(), time.perf_counter() - T0
        return (label, c, u, w, c, w)

    def shown() -> int:
        screen = app.screen
        return len(screen.query_one(PipelinePane).records) if isinstance(screen, MainScreen) else 0

    async with app.run_test(size=size) as pilot:
        # the startup (item 9: the pipeline of a 1,000-node model in under 2 s), from the start
        while not shown():
            await pilot.pause(0.02)
        out.append(now("startup: first stage"))
        while not (app.session.done and shown() == len(app.session.stages)):
            await pilot.pause(0.02)
        out.append(now("startup: all stages"))
        if startup_only:
            return out
        await _settle(app, pilot)
        out.append(now("startup: warm-up done"))
        main = app.screen
        assert isinstance(main, MainScreen)
        if stage is not None:
            main.goto_stage(stage)
            await _settle(app, pilot)
        await pilot.pause(0.5)
        # a second round: the same views again (cached: the cost of switching alone)
        for suffix in ("", " (again)"):
            for k, (tab, _title, _cls) in enumerate(VIEWS):
                c0, w0, u0 = time.process_time(), time.perf_counter(), time.thread_time()
                await pilot.press(str(k + 1))
                await _settle(app, pilot, background=False)
                c1, w1, u1 = time.process_time(), time.perf_counter(), time.thread_time()
                await _settle(app, pilot)
                c2, w2 = time.process_time(), time.perf_counter()
                out.append((tab + suffix, c1 - c0, u1 - u0, w1 - w0, c2 - c0, w2 - w0))
    return out


def main(argv: list[str] | None = None) -> int:
    from models import ensure_model

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="densenet121")
    ap.add_argument("--size", default="180x50")
    ap.add_argument("--stage", type=int, default=None)
    ap.add_argument("--startup-runs", type=int, default=0, metavar="N")
    ap.add_argument("--startup-only", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    w, h = (int(x) for x in args.size.split("x"))
    path = str(ensure_model(args.model))
    if args.startup_runs:
        return startup_runs(args.model, args.size, args.startup_runs)
    rows = asyncio.run(run(path, (w, h), args.stage, startup_only=args.startup_only))
    if args.startup_only:  # one line for startup_runs: label=cpu/ui/wall ...
        cells = [
            f"{t.split(': ')[1].replace(' ', '_')}={c:.3f}/{u:.3f}/{wl:.3f}"
            for t, c, u, wl, _c2, _w2 in rows
        ]
        print(" ".join(cells), flush=True)
        os._exit(0)  # not the app's teardown: the warm-up still runs and is not measured
    print(f"{args.model} at {args.size}, load average {os.getloadavg()[0]:.2f}")
    print(f"{'':<22} {'first frame':^23}   {'settled':^15}")
    print(f"{'view':<22} {'cpu s':>7} {'ui s':>7} {'wall s':>7}   {'cpu s':>7} {'wall s':>7}")
    for tab, cpu, ui, wall, cpu2, wall2 in rows:
        if tab.startswith("startup"):  # since the process started: CPU, UI thread, wall
            print(f"{tab:<22} {cpu:7.3f} {ui:7.3f} {wall:7.3f}")
            continue
        print(f"{tab:<22} {cpu:7.3f} {ui:7.3f} {wall:7.3f}   {cpu2:7.3f} {wall2:7.3f}")
    return 0


def startup_runs(model: str, size: str, n: int) -> int:
    """The start-up alone in `n` fresh processes: each run and the medians."""
    import compileall
    import statistics
    import subprocess

    for pkg in ("compiler", "glowviz"):
        compileall.compile_dir(str(ROOT / pkg), quiet=1)
    runs: list[dict[str, tuple[float, float, float]]] = []
    for k in range(n):
        proc = subprocess.run(
            [sys.executable, __file__, "--model", model, "--size", size, "--startup-only"],
            capture_output=True,
            text=True,
            check=True,
        )
        line = proc.stdout.strip().splitlines()[-1]
        row = {}
        for item in line.split():
            label, values = item.split("=")
            c, u, w = (float(x) for x in values.split("/"))
            row[label] = (c, u, w)
        runs.append(row)
        shown = "  ".join(f"{lb} {c:.2f} s CPU / {w:.2f} s wall" for lb, (c, _u, w) in row.items())
        print(f"run {k + 1}: {shown}  (load {os.getloadavg()[0]:.2f})", flush=True)
    print(f"{model} at {size}, medians of {n} runs (process CPU / wall from the start):")
    for label in runs[0]:
        cpu = statistics.median(r[label][0] for r in runs)
        wall = statistics.median(r[label][2] for r in runs)
        lo, hi = min(r[label][0] for r in runs), max(r[label][0] for r in runs)
        print(f"  {label:<12} {cpu:.2f} s CPU ({lo:.2f}-{hi:.2f}) / {wall:.2f} s wall")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
