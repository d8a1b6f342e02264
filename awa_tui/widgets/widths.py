"""One width policy for every table: the columns that answer the screen's question stay, the
others narrow or drop, and the one flexible column takes the room that is left.

A table declares its columns (key, label, width; no width: as wide as its cells), which of them
is flexible (the text that matters most: the browser's last error, a failure group's
signature), and its shrink steps, in order: ``(key, None)`` drops a column, ``(key, n)``
narrows it to ``n`` cells. ``fit`` applies steps until the flexible column keeps at least
``flexible_min`` cells, and gives it every cell left, so a wide terminal shows more of it.
Its text is cut to that width with ``cut``, never by the table, so the cut is marked.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

Column = tuple[str, str, int | None]
"""Key, label, width (None: as wide as its cells, or the room left for the flexible one)."""
PADDING = 2  # DataTable's cell padding: one cell each side
SCROLLBAR = 2


@dataclass(frozen=True)
class WidthPolicy:
    columns: tuple[Column, ...]
    steps: tuple[tuple[str, int | None], ...] = ()
    flexible: tuple[str, ...] = ()
    """Keys of the column that takes the room left (a table shows at most one of them)."""
    flexible_min: int = 24

    def fit(self, width: int, columns: Sequence[Column] | None = None) -> tuple[Column, ...]:
        """The columns shown in ``width`` cells (``columns``: instead of the declared ones),
        the flexible one given the room left."""
        shown = list(self.columns if columns is None else columns)
        for key, narrower in self.steps:
            if self._needed(shown) <= width:
                break
            if narrower is None:
                shown = [c for c in shown if c[0] != key]
            else:
                shown = [(k, lbl, narrower if k == key else w) for k, lbl, w in shown]
        # every step taken and still short: the flexible column gets what is left, so the
        # table never runs past the terminal
        room = max(8, width - self._needed(shown) + self.flexible_min)
        return tuple(
            (k, lbl, room if w is None and k in self.flexible else w) for k, lbl, w in shown
        )

    def _needed(self, columns: Sequence[Column]) -> int:
        """Cells the columns take, the flexible one at its least (a column as wide as its
        cells is counted at its label's width)."""

        def cells(key: str, label: str, width: int | None) -> int:
            if width is not None:
                return width
            return self.flexible_min if key in self.flexible else len(label)

        return sum(cells(*c) + PADDING for c in columns) + SCROLLBAR


def width_of(columns: Sequence[Column], key: str) -> int | None:
    """The width ``key`` was given; None when it is not shown."""
    return next((w for k, _l, w in columns if k == key), None)


def cut(text: str, width: int, *, middle: bool = False) -> str:
    """``text`` on one line in ``width`` cells, cut with a mark when it does not fit.

    ``middle``: its start and its end stay (in 30 cells or more), so two texts that differ only
    after the first ``width`` cells (two failure signatures, ``RuntimeError: upstream ...``)
    still read differently. Else its start: errors end alike ("(max attempts 3 exhausted)")."""
    flat = " ".join(text.split())
    if len(flat) <= width:
        return flat
    if not middle or width < 30:
        return flat[: max(width - 1, 0)] + "…"
    tail = width // 3
    return flat[: width - tail - 1] + "…" + flat[-tail:]
