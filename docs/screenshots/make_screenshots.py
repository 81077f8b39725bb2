"""Regenerate the IDE screenshots in this folder: `python docs/screenshots/make_screenshots.py
[quant | png]` (the default model, dark theme, at 180x50 and 100x30; SVG from Textual, PNG with
rsvg-convert; the Quant view on the int8 default model with a profile from 8 random inputs, at
both sizes too; `quant`: only it; `png`: only the PNGs again, from the SVGs here)."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT))

#: Both first-class sizes: a big terminal and 100x30 (the compact layout).
SIZES = ((180, 50), (100, 30))


async def _idle(app, pilot) -> None:
    from textual.worker import WorkerState

    for _ in range(1500):
        await pilot.pause(0.02)
        if app.session.done and not any(
            w.state in (WorkerState.PENDING, WorkerState.RUNNING) for w in app.workers
        ):
            break
    await pilot.pause(0.1)


async def shoot(size: tuple[int, int]) -> list[Path]:
    from glowviz.app import GlowvizApp
    from glowviz.screens.main import MainScreen

    app = GlowvizApp(None, theme="dark")
    shots: list[Path] = []
    tag = "" if size == SIZES[0] else f"_{size[0]}x{size[1]}"

    def save(name: str) -> None:
        path = HERE / f"ide_{name}{tag}.svg"
        app.save_screenshot(str(path))
        shots.append(path)

    async with app.run_test(size=size) as pilot:
        await _idle(app, pilot)
        main = next(s for s in app.screen_stack if isinstance(s, MainScreen))
        session = main.session
        # the batchnorm folding that changed the graph (the pass runs twice; the second time
        # it finds nothing, and its diff would show no change)
        fold = next(
            (k for k, r in enumerate(session.stages) if r.changed and "batchnorm" in r.pass_name),
            1,
        )
        main.goto_stage(fold)
        await pilot.press("1")
        await _idle(app, pilot)
        save("graph")
        await pilot.press("w")  # the whole graph, the pass's new nodes marked
        await _idle(app, pilot)
        save("graph_whole")
        await pilot.press("w", "2")  # a diff of a pass that changed something
        await _idle(app, pilot)
        save("diff")
        main.goto_stage(len(session.stages) - 1)
        await pilot.press("3")
        await _idle(app, pilot)
        save("ir")
        for key, name in (("4", "schedule"), ("5", "lifetimes"), ("6", "memory")):
            await pilot.press(key)
            await _idle(app, pilot)
            save(name)
        # the memory view at an intermediate stage (its own plan) with the timeline
        mid = session.stage_index("copy-elimination") or session.stage_index("irgen")
        if mid is not None:
            main.goto_stage(mid)
            await _idle(app, pilot)
            save("memory_intermediate")
        await pilot.press("7")
        await _idle(app, pilot)
        main.view("debugger").query_one("#debug-table").focus()
        for _ in range(8):
            await pilot.press("n")
        await _idle(app, pilot)
        save("debugger")
        await pilot.press("i")
        await _idle(app, pilot)
        save("debugger_llvm_ir")
        await pilot.press("i")
        await _idle(app, pilot)
        save("debugger_asm")
        await pilot.press("i", "question_mark")
        await _idle(app, pilot)
        save("help")
    return shots


async def main() -> list[Path]:
    shots: list[Path] = []
    for size in SIZES:
        shots += await shoot(size)
    return shots


async def quant_main() -> list[Path]:
    """The Quant view: resnet_small quantized, a node marked float in the what-if."""
    from compiler.pipeline import CompileOptions
    from compiler.quantization import QuantizeOptions
    from compiler.quantize import model_input_types, profile_model, random_samples
    from glowviz.app import GlowvizApp
    from glowviz.session import CompileSession, default_model_path

    model = default_model_path()
    profile = profile_model(model, random_samples(model_input_types(model), 8, seed=1))
    paths = []
    for size in SIZES:
        session = CompileSession(model, CompileOptions(quantize=QuantizeOptions(profile)))
        app = GlowvizApp(session=session, theme="dark")
        tag = "" if size == SIZES[0] else f"_{size[0]}x{size[1]}"
        path = HERE / f"ide_quant{tag}.svg"
        async with app.run_test(size=size) as pilot:
            await _idle(app, pilot)
            await pilot.press("8")
            view = app.screen.query_one("#view-quant")
            while view.analysis is None:
                await pilot.pause(0.1)
            await _idle(app, pilot)
            for _ in range(6):
                await pilot.press("down")
            await pilot.press("f")
            while view.what_if_sqnr is None:
                await pilot.pause(0.1)
            await _idle(app, pilot)
            app.save_screenshot(str(path))
        paths.append(path)
    return paths


def to_png(conv: str, svg: Path) -> Path:
    """`svg` as a PNG beside it. Textual writes each styled run as its own text element, with
    spaces as no-break spaces; rsvg drew a run's leading ones at no width, so runs touched
    ("128.0 KiBat step 1", "glowviz—"): it gets a copy with plain spaces, preserved."""
    text = svg.read_text(encoding="utf-8").replace("&#160;", " ")
    text = text.replace("<svg ", '<svg xml:space="preserve" ', 1)
    tmp = svg.with_suffix(".tmp.svg")
    try:
        tmp.write_text(text, encoding="utf-8")
        png = svg.with_suffix(".png")
        subprocess.run([conv, str(tmp), "-o", str(png)], check=True)
    finally:
        tmp.unlink(missing_ok=True)
    return png


if __name__ == "__main__":
    args = sys.argv[1:]
    if args == ["png"]:
        paths = sorted(HERE.glob("*.svg"))
    else:
        paths = [] if args == ["quant"] else asyncio.run(main())
        paths += asyncio.run(quant_main())
    conv = shutil.which("rsvg-convert")
    for p in paths:
        print(to_png(conv, p) if conv else p)
