"""NodeList: the Graph view's virtualized table of graph values and nodes (kind, name, type,
inputs, users), a VirtualTable whose kind column takes the theme's category styles.

Only the rows in view are drawn, so showing a ResNet-50 stage (~500 rows) costs the same as
showing ten. Column widths are computed once per row list from the longest cell of each column,
capped, and fitted to the list's width (shrunk, then the least useful columns hidden); longer
cells end with an ellipsis."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from rich.style import Style

from glowviz.widgets.virtual_table import Column, VirtualTable

#: A row: (kind, name, type, inputs, users), all already formatted as strings.
Row = tuple[str, str, str, str, str]


class NodeList(VirtualTable):
    COLUMNS: tuple[str, ...] = ("kind", "name", "type", "inputs", "users")
    #: The widest each column may get (cells, without the padding); longer cells are cut.
    MAX_WIDTHS: tuple[int, ...] = (12, 48, 32, 40, 40)
    #: How far each column shrinks when the table is narrower than its line (at 100x30 the
    #: pane is ~30 cells): cells then end with an ellipsis instead of running off the edge.
    MIN_WIDTHS: tuple[int, ...] = (6, 12, 10, 10, 10)
    #: Which columns go when even their minimum widths do not fit: users, then inputs, then
    #: the type (Enter on a row shows all of them in the node's details).
    DROP: tuple[int, ...] = (0, 0, 1, 2, 3)
    HEADER_CLASS = "node-list--header"
    CURSOR_CLASS = "node-list--cursor"
    COMPONENT_CLASSES = {"node-list--header", "node-list--cursor"}

    def __init__(
        self,
        *,
        kind_styles: Mapping[str, str] | None = None,
        name: str | None = None,
        id: str | None = None,
        classes: str | None = None,
        disabled: bool = False,
    ) -> None:
        super().__init__(
            [
                Column(t, cap=c, min=m, drop=d)
                for t, c, m, d in zip(
                    self.COLUMNS, self.MAX_WIDTHS, self.MIN_WIDTHS, self.DROP, strict=True
                )
            ],
            name=name,
            id=id,
            classes=classes,
            disabled=disabled,
        )
        self._kind_styles = {k: Style.parse(v) for k, v in (kind_styles or {}).items()}

    def set_kind_styles(self, kind_styles: Mapping[str, str]) -> None:
        """Rich styles of the first column by kind (a theme's [ui.categories])."""
        self._kind_styles = {k: Style.parse(v) for k, v in kind_styles.items()}
        self.refresh()

    def set_rows(  # type: ignore[override]
        self, rows: Sequence[Row], keys: Sequence[str] | None = None, cursor: int = 0
    ) -> None:
        """Replace the rows (keys default to the name column) and put the cursor on `cursor`."""
        super().set_rows(rows, [r[1] for r in rows] if keys is None else keys, cursor)

    def cell_style(self, row: int, col: int) -> Style | None:
        if col != 0 or row == self.cursor_row:
            return None
        return self._kind_styles.get(str(self.rows[row][0]))
