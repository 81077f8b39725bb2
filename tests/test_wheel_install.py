"""The installable package: a wheel built from this tree, installed (not editable) into a fresh
venv, runs from another directory and finds its theme files and the default sample model.

To stay fast and offline the wheel is built without build isolation (hatchling is a test
dependency) and installed with `--no-deps`; the venv reaches the dependencies already installed
for this test run through a `.pth` line naming their site-packages. A `.pth` line only adds that
folder to sys.path (the `.pth` files inside it, such as an editable install's, are not run), so
glowviz itself can only come from the wheel: the test checks that too.
"""

from __future__ import annotations

import json
import os
import site
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
THEMES = sorted(p.stem for p in (ROOT / "themes").glob("*.toml"))


def _run(args: list[str | Path], cwd: Path, env: dict[str, str]) -> str:
    proc = subprocess.run(
        [str(a) for a in args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, f"{args}: exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, dict[str, str]]:
    """(the venv's bin folder, a working folder outside the repository, the environment)."""
    tmp = tmp_path_factory.mktemp("wheel")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
    env.update(
        HOME=str(tmp),
        GLOWVIZ_CONFIG_DIR=str(tmp / "config"),
        GLOWVIZ_CACHE_DIR=str(tmp / "cache"),
        PIP_DISABLE_PIP_VERSION_CHECK="1",
    )
    dist = tmp / "dist"
    pip = [sys.executable, "-m", "pip"]
    _run([*pip, "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", dist, ROOT], tmp, env)
    (wheel,) = dist.glob("glowviz-*.whl")

    target = tmp / "venv"
    venv.create(target, with_pip=False)  # from the base interpreter: no glowviz, no packages
    py = target / "bin" / "python"
    _run([*pip, "--python", py, "install", "--no-deps", "--no-index", "-q", wheel], tmp, env)
    purelib = _run(
        [py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], tmp, env
    )
    deps = {*site.getsitepackages(), sysconfig.get_paths()["purelib"]}
    (Path(purelib.strip()) / "_test_dependencies.pth").write_text("\n".join(sorted(deps)) + "\n")

    work = tmp / "elsewhere"
    work.mkdir()
    return target / "bin", work, env


@pytest.mark.slow
def test_wheel_finds_its_data_from_another_directory(installed) -> None:
    bin_dir, work, env = installed
    py = bin_dir / "python"
    probe = "import glowviz, glowviz.themes as t; print(glowviz.__file__, *t.load_themes())"
    where, *themes = _run([py, "-c", probe], work, env).split()
    assert Path(where).is_relative_to(bin_dir.parent), f"glowviz imported from {where}"
    assert sorted(themes) == THEMES

    paths = dict(
        line.split(": ", 1)
        for line in _run([py, "-m", "glowviz.resources"], work, env).splitlines()
    )
    model = Path(paths["default model"])
    assert model.is_file() and model.is_relative_to(bin_dir.parent)
    assert Path(paths["themes"]).is_relative_to(bin_dir.parent)
    table = _run([bin_dir / "glowviz", "compile", model], work, env)
    assert [row.split()[1] for row in table.splitlines()[-1:]] == ["memory"]  # the last stage ran

    for view, fmt in (("memory", "json"), ("graph", "dot")):
        dest = work / f"{view}.{fmt}"
        _run(
            [bin_dir / "glowviz", "export", model, "--view", view, "--format", fmt]
            + ["--theme", "paper", "-o", dest],
            work,
            env,
        )
        assert dest.stat().st_size > 0
    json.loads((work / "memory.json").read_text())
    assert "digraph" in (work / "graph.dot").read_text()


def test_checkout_reads_the_repository_folders() -> None:
    from glowviz import resources

    assert resources.themes_dir() == ROOT / "themes"
    assert resources.sample_models_dir() == ROOT / "sample_models"
    assert resources.default_model().is_file()
