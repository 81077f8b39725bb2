"""The IDE's key table (glowviz/keymap.toml): every section feeds a class, every binding's action
exists, and a user's keymap rebinds by id (and warns about ids that name no binding)."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re

import pytest
from ide_helpers import run_async, until
from pilot_helpers import ide

import glowviz
from glowviz import keymap
from glowviz.app import GlowvizApp
from glowviz.screens.help import HelpScreen


def _classes_with_bindings() -> dict[str, type]:
    root = glowviz.__path__[0]
    names = ["glowviz.app"] + [
        f"glowviz.{pkg}.{m.name}"
        for pkg in ("screens", "widgets")
        for m in pkgutil.iter_modules([f"{root}/{pkg}"])
    ]
    found = {}
    for mod in map(importlib.import_module, names):
        for name, cls in vars(mod).items():
            if inspect.isclass(cls) and cls.__module__ == mod.__name__ and "BINDINGS" in vars(cls):
                found[name] = cls
    return found


def test_every_section_is_read_and_every_action_exists() -> None:
    classes = _classes_with_bindings()
    sections = set(keymap._table())
    assert sections <= set(classes), sections - set(classes)
    from glowviz.screens.main import MainScreen

    for name in sections:
        cls = classes[name]
        for b in keymap.bindings(name):
            action = re.sub(r"\(.*", "", b.action)  # type: ignore[union-attr]
            owner, _, action = action.rpartition(".")
            target = {"": cls, "screen": MainScreen, "app": GlowvizApp}[owner]
            assert hasattr(target, f"action_{action}"), (name, b.id, b.action)  # type: ignore[union-attr]


def test_user_keymap_warns_about_unknown_ids(tmp_path) -> None:
    f = tmp_path / "keymap.toml"
    f.write_text('[keys]\n"app.help" = "f1"\n"app.nope" = "f2"\n"graph.search" = 3\n')
    keys, warnings = keymap.user_keymap(f)
    assert keys == {"app.help": "f1"}
    assert any("no binding 'app.nope'" in w for w in warnings)
    assert any("'graph.search' must be a string" in w for w in warnings)
    f.write_text("[keys\n")
    assert keymap.user_keymap(f)[1][0].startswith(str(f))


@run_async
async def test_a_user_keymap_rebinds_the_help_key(tmp_path, monkeypatch: pytest.MonkeyPatch):
    f = tmp_path / "keymap.toml"
    f.write_text('[keys]\n"app.help" = "f1"\n')
    monkeypatch.setenv("GLOWVIZ_KEYMAP", str(f))
    async with ide() as (app, pilot, main):
        await pilot.press("f1")
        await until(pilot, lambda: isinstance(app.screen, HelpScreen))
