"""Command palette providers: every action, plus go to pass / node / buffer / instruction,
breakpoints on op kinds and buffer writes, themes, export and open model."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from functools import partial

from textual.command import DiscoveryHit, Hit, Hits, Provider

Entry = tuple[str, Callable[[], object], str]


def _main(app):
    from glowviz.screens.main import MainScreen

    for s in reversed(app.screen_stack):
        if isinstance(s, MainScreen):
            return s
    return None


def _debug_mode(screen, mode: str) -> None:
    screen.action_show_view("debugger")
    screen.refresh_active_view()
    screen.view("debugger").set_mode(mode)


def _memory_compare_report(screen) -> None:
    screen.action_show_view("memory")
    screen.refresh_active_view()
    screen.view("memory").action_open_report()


def entries(app) -> Iterator[Entry]:
    """(text, callback, help) for every palette command of the current state."""
    screen = _main(app)
    if screen is None:
        return
    session = screen.session
    from glowviz.screens.main import VIEWS

    for tab_id, title, _ in VIEWS:
        yield (f"View: {title}", partial(screen.action_show_view, tab_id), f"show the {title} view")
    yield ("Next stage", partial(screen.action_step_stage, 1), "n")
    yield ("Previous stage", partial(screen.action_step_stage, -1), "p")
    yield ("Toggle hide unchanged passes", screen.action_toggle_unchanged, "u")
    yield ("Diff: pin/unpin the current stage as base", screen.view("diff").action_pin_base, "a")
    yield ("Diff: toggle full text / context", screen.view("diff").action_toggle_full, "f")
    yield ("Open model…", screen.action_open_model, "ctrl+o")
    yield ("Recompile", partial(screen.start_compile, None), "compile the model again")
    yield ("Help: key bindings", app.action_help, "?")
    for name in app.glowviz_theme_names():
        yield (f"Theme: {name}", partial(app.set_glowviz_theme, name), "switch theme (remembered)")
    yield (
        "Export current view…",
        app.action_export_view,
        "write the current view as a file (glowviz.exports)",
    )
    dbg = screen.view("debugger")
    for label, act in (
        ("step", dbg.action_step),
        ("next", dbg.action_next),
        ("continue", dbg.action_cont),
        ("restart", dbg.action_restart),
        ("run to first divergence (LLVM vs interpreter)", dbg.action_divergence),
        ("toggle breakpoint on selected instruction", dbg.action_toggle_breakpoint),
        ("show values (LLVM vs interpreter)", partial(_debug_mode, screen, "values")),
        ("show LLVM IR of the selected instruction", partial(_debug_mode, screen, "llvm")),
        ("show assembly of the selected instruction", partial(_debug_mode, screen, "asm")),
    ):
        yield (f"Debugger: {label}", act, "")
    if session.quantized:
        quant = screen.view("quant")
        for label, act, keys in (
            ("mark the selected node float (what-if)", quant.action_toggle_float, "f"),
            ("clear the what-if float marks", quant.action_reset_float, "r"),
            ("go to the first node under the threshold", quant.action_first_below, "j"),
            ("raise the SQNR threshold by 5 dB", partial(quant.action_threshold, 5), "+"),
            ("lower the SQNR threshold by 5 dB", partial(quant.action_threshold, -5), "-"),
        ):
            yield (f"Quant: {label}", act, keys)
    from compiler.memory.allocators import allocator_names
    from compiler.scheduling import SCHEDULERS

    mem = screen.view("memory")
    yield (
        "Memory: compare with report…",
        partial(_memory_compare_report, screen),
        "o: a glowviz.memory/1 JSON, an .onnx model or model.onnx:key=value,... side by side",
    )
    for a in allocator_names():
        yield (f"Memory: compare with allocator {a}", partial(mem.compare, allocator=a), "")
    for s in SCHEDULERS:
        yield (f"Memory: compare with scheduler {s}", partial(mem.compare, scheduler=s), "")
    for i, rec in enumerate(session.stages):
        yield (
            f"Go to pass: {i} {rec.label}",
            partial(screen.goto_stage, i),
            f"{'changed' if rec.changed else 'unchanged'} {rec.count_before}→{rec.count_after}",
        )
    if screen.index is not None and screen.index < len(session.stages):
        for row in session.graph_nodes(screen.index):
            yield (
                f"Go to node: {row['name']} ({row['op']})",
                partial(screen.goto_node, row["name"]),
                row["type"],
            )
    if session.done:
        report = session.memory_report()
        for b in report.buffers if report is not None else ():
            yield (
                f"Go to buffer: {b.name}",
                partial(screen.goto_buffer, b.name),
                f"{b.size} B at {b.offset}",
            )
            yield (
                f"Break on write to buffer: {b.name}",
                partial(app.break_on_write, b.name),
                "debugger breakpoint",
            )
        instrs = session.instructions()
        for ins in instrs:
            yield (
                f"Go to instruction: #{ins['index']} {ins['text'][:70]}",
                partial(screen.goto_instruction, ins["index"]),
                "",
            )
        for kind in sorted({ins["kind"] for ins in instrs}):
            yield (f"Break on op: {kind}", partial(app.break_on_op, kind), "debugger breakpoint")
    yield ("Quit", app.exit, "q")


class GlowvizCommands(Provider):
    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for text, cb, help_ in entries(self.app):
            score = matcher.match(text)
            if score > 0:
                yield Hit(score, matcher.highlight(text), cb, text=text, help=help_ or None)

    async def discover(self) -> Hits:
        for text, cb, help_ in entries(self.app):
            if text.startswith(
                (
                    "View:",
                    "Next",
                    "Previous",
                    "Theme:",
                    "Open",
                    "Help",
                    "Export",
                    "Debugger:",
                    "Memory: compare with report",
                )
            ):
                yield DiscoveryHit(text, cb, text=text, help=help_ or None)
