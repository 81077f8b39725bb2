"""Where glowviz's data files are: the theme files and the sample models (the default model).

A source checkout keeps them in the repository's `themes/` and `sample_models/` folders (an
editable install runs from there too). A wheel carries the same folders inside the package, as
`glowviz/data/themes` and `glowviz/data/sample_models` (pyproject.toml: force-include), so an
installed `glowviz` finds them from any directory. `python -m glowviz.resources` prints them.
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

#: The model the IDE opens and the CLI offers when none is named.
DEFAULT_MODEL_NAME = "resnet_small.onnx"


def _data_dir(name: str) -> Path:
    packaged = Path(str(files("glowviz") / "data" / name))
    if packaged.is_dir():  # installed from a wheel
        return packaged
    return Path(__file__).resolve().parent.parent / name  # the repository's own folder


def themes_dir() -> Path:
    """The folder of theme files (`*.toml`)."""
    return _data_dir("themes")


def sample_models_dir() -> Path:
    """The folder of sample models (`*.onnx`, each with `.input.npz` and `.expected.npz`)."""
    return _data_dir("sample_models")


def default_model() -> Path:
    return sample_models_dir() / DEFAULT_MODEL_NAME


if __name__ == "__main__":
    print(f"themes: {themes_dir()}")
    print(f"sample models: {sample_models_dir()}")
    print(f"default model: {default_model()}")
