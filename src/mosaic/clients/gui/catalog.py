"""The workers the daemon found: what each can do, its upstream library and version; broken ones with their reason."""

from __future__ import annotations

from PySide6.QtGui import QColor
from PySide6.QtWidgets import (QAbstractItemView, QHeaderView, QLabel, QTableWidget, QTableWidgetItem, QVBoxLayout,
                               QWidget)

from mosaic.host.daemon.proto import mosaic_daemon_pb2 as pb

COLUMNS = ("worker", "library", "version", "algorithms", "env families", "policy configurations",
           "pause/resume", "checkpoints", "python")
BROKEN_COLOUR = QColor("#c62828")


class CatalogView(QWidget):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.heading = QLabel("asking the daemon for its workers…")
        self.table = QTableWidget(0, len(COLUMNS))
        self.table.setHorizontalHeaderLabels(COLUMNS)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        self.table.horizontalHeader().setStretchLastSection(True)
        layout = QVBoxLayout(self)
        layout.addWidget(self.heading)
        layout.addWidget(self.table, 1)
        self.reply: pb.ListWorkersReply | None = None

    def show_workers(self, reply: pb.ListWorkersReply) -> None:
        self.reply = reply
        rows = [(w.name, w.upstream_library, w.upstream_version or w.version, ", ".join(w.algorithms),
                 ", ".join(w.env_families), ", ".join(w.policy_configurations),
                 "yes" if w.supports_pause_resume else "no", "yes" if w.supports_checkpointing else "no", w.python)
                for w in reply.workers]
        self.table.setRowCount(len(rows) + len(reply.broken))
        for row, values in enumerate(rows):
            for col, value in enumerate(values):
                item = QTableWidgetItem(value)
                item.setToolTip(reply.workers[row].description if col == 0 else value)
                self.table.setItem(row, col, item)
        for offset, broken in enumerate(reply.broken):
            row = len(rows) + offset
            name = QTableWidgetItem(f"{broken.name} (broken)")
            reason = QTableWidgetItem(broken.reason)
            for item in (name, reason):
                item.setForeground(BROKEN_COLOUR)
                item.setToolTip(broken.reason)
            self.table.setItem(row, 0, name)
            self.table.setItem(row, 1, reason)
            self.table.setSpan(row, 1, 1, len(COLUMNS) - 1)
        self.heading.setText(f"{len(rows)} workers" + (f", {len(reply.broken)} broken" if reply.broken else ""))

    def names(self) -> list[str]:
        return [w.name for w in self.reply.workers] if self.reply else []
