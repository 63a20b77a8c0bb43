"""Result tables that stay readable at the width they are printed at (80 columns included).

rich fits a table to the console by narrowing its columns; a column narrower than its longest word
cuts cells with an ellipsis (`[29.…`, `Wils…`), which hides the very numbers a reader came for.
`fit` keeps a table whose every word fits, with cells folded rather than cut; a table that cannot
fit (ten columns of intervals in 80) is shown one row at a time instead, each row a two-column
table of header and value, so every number stays whole.
"""
from __future__ import annotations

from typing import Any


def _cells(column: Any) -> list:
    return list(getattr(column, "_cells", []) or [])


def min_width(table: Any) -> int:
    """The narrowest width at which every word of `table` (headers and cells) stays whole: each
    column's longest word plus its padding, and the borders.

    Args:
        table: a rich.table.Table.
    """
    total = 1  # the left border
    for col in table.columns:
        words = [w for cell in [col.header, *_cells(col)] for w in str(getattr(cell, "plain", cell)).split()]
        total += max((len(w) for w in words), default=1) + 2 + 1  # padding, right border
    return total


def fit(table: Any, console: Any) -> Any:
    """`table` as is when its words fit `console`'s width (cells fold, never end in an ellipsis),
    else its rows one at a time, each as a header/value table.

    Args:
        table: a rich.table.Table.
        console: the rich Console it is printed on.
    """
    from rich.console import Group
    from rich.table import Table

    if min_width(table) <= console.width:
        for col in table.columns:
            col.overflow = "fold"
        return table
    headers = [str(col.header) for col in table.columns]
    columns = [_cells(col) for col in table.columns]
    n_rows = max((len(c) for c in columns), default=0)
    parts: list = []
    if table.title:
        parts.append(table.title)
    for r in range(n_rows):
        values = [c[r] if r < len(c) else "" for c in columns]
        one = Table(title=f"{headers[0]} {values[0]}" if headers else None, show_header=False, title_justify="left")
        one.add_column(overflow="fold", style="bold")
        one.add_column(overflow="fold")
        for h, v in zip(headers[1:], values[1:]):
            one.add_row(h.replace("\n", " "), v)
        parts.append(one)
    return Group(*parts)
