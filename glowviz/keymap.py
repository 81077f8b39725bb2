"""The IDE's key bindings: one table, `keymap.toml` beside this module, with a section per
screen or widget (`BINDINGS = keymap.bindings("GraphView")`), so the keys of every view can be
read, compared and changed in one place, and the help screen and footer show what the table says.

A user may rebind any binding by its id in `~/.config/glowviz/keymap.toml` (or the file named
by `GLOWVIZ_KEYMAP`): a `[keys]` table of `"graph.search" = "ctrl+f"` rows, which the app
applies at start-up through Textual's keymap (`user_keymap`).
"""

from __future__ import annotations

import os
import tomllib
from functools import cache
from importlib.resources import files
from pathlib import Path
from typing import Any

from textual.binding import Binding, BindingType


@cache
def _table() -> dict[str, dict[str, dict[str, Any]]]:
    return tomllib.loads((files("glowviz") / "keymap.toml").read_text(encoding="utf-8"))


def bindings(scope: str) -> list[BindingType]:
    """The bindings of section `scope` of keymap.toml, in the file's order."""
    return [
        Binding(
            row["keys"],
            row["action"],
            row.get("description", ""),
            show=row.get("show", True),
            key_display=row.get("display"),
            priority=row.get("priority", False),
            tooltip=row.get("tooltip", ""),
            id=bid,
        )
        for bid, row in _table()[scope].items()
    ]


def palette_rows(scope: str) -> list[tuple[str, str, str]]:
    """(palette text, action, the key as the footer shows it and any hint) of the bindings of
    `scope` that have a command-palette entry."""
    rows = []
    for row in _table().get(scope, {}).values():
        if "palette" in row:
            key = row.get("display") or row["keys"].split(",")[0]
            hint = f"{key}: {row['hint']}" if "hint" in row else key
            rows.append((row["palette"], row["action"], hint))
    return rows


def binding_ids() -> set[str]:
    """Every binding id the table defines."""
    return {bid for section in _table().values() for bid in section}


def user_keymap(path: Path | None = None) -> tuple[dict[str, str], list[str]]:
    """The user's rebindings ({binding id: keys}) and a warning per row that names no binding
    or is not a string (shown, not fatal: a stale keymap must not stop the IDE)."""
    if path is None:
        env = os.environ.get("GLOWVIZ_KEYMAP")
        path = Path(env) if env else Path.home() / ".config" / "glowviz" / "keymap.toml"
    if not path.is_file():
        return {}, []
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
        return {}, [f"{path}: not read ({e})"]
    known = binding_ids()
    keys: dict[str, str] = {}
    warnings: list[str] = []
    rows = data.get("keys", {})
    for bid, value in rows.items() if isinstance(rows, dict) else ():
        if bid not in known and not bid.startswith("view."):
            warnings.append(f"{path}: no binding '{bid}'")
        elif not isinstance(value, str):
            warnings.append(f"{path}: '{bid}' must be a string of keys")
        else:
            keys[bid] = value
    return keys, warnings


__all__ = ["binding_ids", "bindings", "palette_rows", "user_keymap"]
