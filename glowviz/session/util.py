"""Small helpers the session modules share: byte formatting and tolerant attribute access."""

from __future__ import annotations

from typing import Any


def fmt_bytes(n: float | int | None) -> str:
    if n is None:
        return "-"
    n = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"


def _get(obj: Any, *names: str, default: Any = None) -> Any:
    """The first attribute (or key) of `obj` among `names` — the low-level APIs are young."""
    for n in names:
        if isinstance(obj, dict) and n in obj:
            return obj[n]
        if hasattr(obj, n):
            return getattr(obj, n)
    return default


def _name_of(v: Any) -> str:
    if isinstance(v, str):
        return v
    return str(_get(v, "name", default=v))


__all__ = ["fmt_bytes"]
