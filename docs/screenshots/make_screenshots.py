"""Regenerate the IDE screenshots in this folder: `python docs/screenshots/make_screenshots.py`
(the default model, dark theme, 160x45; SVG from Textual, PNG with rsvg-convert)."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT))

SIZE = (160, 45)


async def _idle(app, pilot) -> None:
    from textual.worker import WorkerState

    for _ in range(400):
        await pilot.pause(0.02)
        if app.session.done and not any(
                w.state in (WorkerState.PENDING, WorkerState.RUNNING) for w in app.workers):
            break
    await pilot.pause(0.1)


async def main() -> list[Path]:
    from glowviz.app import GlowvizApp
    from glowviz.screens.main import MainScreen

    app = GlowvizApp(None, theme="dark")
    shots: list[Path] = []

    def save(name: str) -> None:
        path = HERE / f"ide_{name}.svg"
        app.save_screenshot(str(path))
        shots.append(path)

    async with app.run_test(size=SIZE) as pilot:
        await _idle(app, pilot)
        main = next(s for s in app.screen_stack if isinstance(s, MainScreen))
        save("graph")
        main.goto_stage(main.session.stage_index("batchnorm-folding") or 1)
        await pilot.press("2")
        await _idle(app, pilot)
        save("diff")
        main.goto_stage(len(main.session.stages) - 1)
        await pilot.press("3")
        await _idle(app, pilot)
        save("ir")
        for key, name in (("4", "schedule"), ("5", "lifetimes"), ("6", "memory")):
            await pilot.press(key)
            await _idle(app, pilot)
            save(name)
        await pilot.press("7")
        await _idle(app, pilot)
        await pilot.click("#debug-table")
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
    return shots


if __name__ == "__main__":
    paths = asyncio.run(main())
    conv = shutil.which("rsvg-convert")
    for p in paths:
        if conv:
            subprocess.run([conv, str(p), "-o", str(p.with_suffix(".png"))], check=True)
        print(p.with_suffix(".png") if conv else p)
