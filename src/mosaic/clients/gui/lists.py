"""A list of names (experiments, tournaments) kept in step with the home without losing the selection."""

from __future__ import annotations

from typing import Any


def refill_names(widget: Any, names: list[str], current: str | None) -> str | None:
    """Show ``names`` in the QListWidget ``widget``, keeping ``current`` selected (else the first), without
    firing its selection signals; returns the name to show now when that is not ``current`` (else None).
    An unchanged list is left alone."""
    if names == [widget.item(i).text() for i in range(widget.count())]:
        return None
    wanted = current if current in names else (names[0] if names else "")
    widget.blockSignals(True)
    widget.clear()
    widget.addItems(names)
    if wanted:
        widget.setCurrentRow(names.index(wanted))
    widget.blockSignals(False)
    return wanted if wanted != (current or "") else None
