"""`NAME=1x3x224x224` shape arguments (`--input-shape`, mem-diff's `input=` key) -> shapes."""

from __future__ import annotations

from compiler.errors import CompilerError


def parse_shape_args(items: list[str] | None) -> dict[str, tuple[int, ...]]:
    """`--input-shape name=1x3x224x224` (repeatable) -> {name: shape}."""
    shapes: dict[str, tuple[int, ...]] = {}
    for item in items or []:
        name, sep, dims = item.partition("=")
        try:
            if not sep or not name:
                raise ValueError
            shapes[name] = tuple(int(d) for d in dims.lower().split("x"))
            if any(d <= 0 for d in shapes[name]):
                raise ValueError
        except ValueError:
            raise CompilerError(
                f"bad --input-shape '{item}'",
                hint="expected NAME=DIMxDIMx..., e.g. input=1x3x224x224",
            ) from None
    return shapes


__all__ = ["parse_shape_args"]
