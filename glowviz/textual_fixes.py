"""Three fixes to Textual internals the IDE applies once, at import of `glowviz.app`.

Each one checks that Textual's code is the one it was written for (signatures, attributes,
initial values) and leaves Textual alone otherwise, so a Textual release that changes them
loses the saving, not the behaviour. pyproject.toml caps Textual below the next major version
for the same reason; the footer's in-place key update (`glowviz/widgets/footer.py`) is the
other place that reads Textual's private names.

- `unpin_styles_caches`: a leak (Textualize/textual#6665): a method-level lru_cache pins up to
  1,024 dead widgets' style caches with every line they rendered.
- `lazy_strip_caches`: every rendered line made seven caches it rarely uses (work for the cycle
  collector the IDE runs after each compile).
- `share_parsed_css`: each app and each theme change parsed all style sources again.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

def unpin_styles_caches() -> None:
    """Textual's `StylesCache.get_inner_outer` is an `lru_cache` on an instance method, so its
    keys hold the StylesCache: up to 1,024 caches of widgets long gone stay alive with every
    line they rendered (Textualize/textual#6665, open). The IDE makes and drops widgets all
    the time (the footer's keys at each view switch, dialogs, the palette): ~75,000 objects
    pinned per workspace's worth, which each full collection then scans (a test process
    opening a hundred workspaces spent more time collecting than drawing). The method never
    reads its instance: cache by the two colours alone. Left alone if Textual changed it."""
    from textual._styles_cache import StylesCache

    pinned = StylesCache.__dict__.get("get_inner_outer")
    inner = getattr(pinned, "__wrapped__", None)
    if inner is None or not hasattr(pinned, "cache_info"):
        return

    @lru_cache(1024)
    def by_colours(base_background: Any, background: Any) -> Any:
        return inner(None, base_background, background)

    def get_inner_outer(self: Any, base_background: Any, background: Any) -> Any:
        return by_colours(base_background, background)

    setattr(StylesCache, "get_inner_outer", get_inner_outer)  # noqa: B010


#: What Textual's `Strip([])` holds besides its caches (the attributes `lazy_strip_caches`
#: sets itself).
_STRIP_PLAIN: dict[str, Any] = {
    "_segments": [],
    "_cell_length": None,
    "_render_cache": None,
    "_link_ids": None,
    "_cell_count": None,
}


def lazy_strip_caches() -> None:
    """Textual's `Strip` (one line of a widget's rendering) makes seven FIFOCaches in its
    `__init__` (for crops, divides, styles...), and most strips use one or two of them, if
    any: seven objects more per line the IDE renders, tracked by the cycle collector. They
    were 51,000 of the 117,000 objects a workspace left to collect when it closed (the
    fake-pipeline workspace after one visit of every view), and made each strip slower to
    create. Create each cache on its first use instead (the same size, the same caching,
    as Textual's own `Content._divide_cache` does). Left alone if Textual's Strip is not the
    one this was written for (its attributes and their initial values are checked)."""
    import inspect

    from textual.cache import FIFOCache
    from textual.strip import Strip

    try:
        probe = Strip([])
        sizes = {
            name: getattr(probe, name)._maxsize
            for name in Strip.__slots__
            if isinstance(getattr(probe, name, None), FIFOCache)
        }
        plain = {name: getattr(probe, name) for name in Strip.__slots__ if name not in sizes}
        params = list(inspect.signature(Strip.__init__).parameters)
    except Exception:  # noqa: BLE001 - another Textual: keep its Strip as it is
        return
    if (
        not sizes
        or plain != _STRIP_PLAIN
        or params != ["self", "segments", "cell_length"]
        or "__getattr__" in Strip.__dict__
    ):
        return

    # Strip's own __init__, without the seven caches.
    def __init__(self: Any, segments: Any, cell_length: int | None = None) -> None:  # noqa: N807
        self._segments = list(segments)
        self._cell_length = cell_length
        self._render_cache = None
        self._link_ids = None
        self._cell_count = None

    # Only called for an attribute not set yet.
    def __getattr__(self: Any, name: str) -> Any:  # noqa: N807
        size = sizes.get(name)
        if size is None:
            raise AttributeError(f"'Strip' object has no attribute '{name}'", name=name, obj=self)
        cache: FIFOCache[Any, Any] = FIFOCache(size)
        setattr(self, name, cache)
        return cache

    setattr(Strip, "__init__", __init__)  # noqa: B010
    setattr(Strip, "__getattr__", __getattr__)  # noqa: B010


#: How many sets of CSS variables (themes) `share_parsed_css` keeps the parsed rules of.
PARSED_THEMES = 4


def share_parsed_css() -> None:
    """Textual parses a style sheet's sources into rule sets per Stylesheet, caching them only
    in that Stylesheet, and a change of theme parses every source again into a fresh one: the
    IDE's ~45 sources, ~30-40 ms of CPU per app started (a tenth of the workspace's start, paid
    again by every app a process makes) and per theme chosen (ctrl+t). The rule sets depend
    only on the source, where it was read from, its flags and the CSS variables (the theme's
    colours), and Textual never changes them once parsed (its own cache already hands the same
    ones out again): keep them per process, for the last PARSED_THEMES sets of variables.
    Sources whose rules have errors are not kept (Textual reports those as it did). Left alone
    if Textual's `_parse_rules` is not the one this was written for."""
    import inspect

    from textual.css.stylesheet import Stylesheet

    parse_rules = Stylesheet.__dict__.get("_parse_rules")
    if not callable(parse_rules):
        return
    try:
        params = list(inspect.signature(parse_rules).parameters)
    except (TypeError, ValueError):
        return
    if params != ["self", "css", "read_from", "is_default_rules", "tie_breaker", "scope"]:
        return
    themes: dict[tuple, dict[tuple, list]] = {}

    def shared_parse_rules(
        self: Any,
        css: str,
        read_from: Any,
        is_default_rules: bool = False,
        tie_breaker: int = 0,
        scope: str = "",
    ) -> Any:
        variables = self._variables
        key = getattr(self, "_glowviz_variables_key", None)
        if key is None or key[0] is not variables:
            key = (variables, tuple(sorted(variables.items())))
            self._glowviz_variables_key = key
        parsed = themes.pop(key[1], None)
        if parsed is None:
            parsed = {}
            while len(themes) >= PARSED_THEMES:
                del themes[next(iter(themes))]
        themes[key[1]] = parsed  # the most recent last
        source = (css, read_from, is_default_rules, tie_breaker, scope)
        rules = parsed.get(source)
        if rules is None:
            rules = parse_rules(self, css, read_from, is_default_rules, tie_breaker, scope)
            if not any(rule.errors for rule in rules):
                parsed[source] = rules
        return rules

    setattr(Stylesheet, "_parse_rules", shared_parse_rules)  # noqa: B010


_applied = False


def apply() -> None:
    """Apply the three fixes (once per process; later calls do nothing)."""
    global _applied
    if _applied:
        return
    _applied = True
    unpin_styles_caches()
    lazy_strip_caches()
    share_parsed_css()
