"""New run: pick a worker, fill the form generated from its schemas, validate through the daemon, submit.

The form (``schema_form.SchemaForm``) and the **Advanced JSON** tab edit the
same config: a change in the form rewrites the JSON, and the JSON, once it
parses and passes the worker's schema, is applied to the form ("Apply").
Validation and submission go through the daemon (the main window does the
calls); a field-named error is shown under its field and nothing is
submitted. A run can be **forked**: its config loaded for editing, optionally
resuming from one of its checkpoints. Configs save to and load from JSON files.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
from PySide6.QtCore import Signal
from PySide6.QtWidgets import (QComboBox, QFileDialog, QHBoxLayout, QLabel, QPlainTextEdit, QPushButton,
                               QScrollArea, QTabWidget, QVBoxLayout, QWidget)

from mosaic.clients.gui.form_fields import FieldError
from mosaic.clients.gui.schema_form import SchemaForm
from mosaic.clients.gui.schema_paths import (ALGO_PARAMS_PATH, ALGORITHM_PATH, RESTORE_PATH, split_error,
                                             suggestions_from_envs, with_shared_choices)
from mosaic.configkit import set_path
from mosaic.runs import CONFIG_FILE, RunDir

HIDDEN = frozenset({"run_id", "worker"})
ERROR_STYLE = "color: #c62828;"


def restore_path(document: dict) -> str | None:
    """``checkpoint.restore_from``, unless the worker refuses it (it cannot resume)."""
    refused = (document.get("shared_fields") or {}).get("refused") or {}
    props = ((document.get("config_schema") or {}).get("properties") or {})
    checkpoint = (props.get("checkpoint") or {}).get("properties") or {}
    return RESTORE_PATH if "restore_from" in checkpoint and RESTORE_PATH not in refused else None


def checkpoints_of(run_dir: Path) -> list[Path]:
    """A run's checkpoint folders, oldest first."""
    folder = run_dir / "checkpoints"
    if not folder.is_dir():
        return []
    return sorted((p for p in folder.iterdir() if p.is_dir()), key=lambda p: p.stat().st_mtime)


class NewRunView(QWidget):
    worker_chosen = Signal(str)      # the main window answers with show_worker(document)
    validate_requested = Signal(dict)  # ... with show_validation(ok, error)
    submit_requested = Signal(dict)  # ... with submitted(run_id) or show_validation(False, error)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.document: dict[str, Any] | None = None
        self.form: SchemaForm | None = None
        self._pending: dict[str, Any] | None = None  # values to show once the worker's schema arrives
        self.workers = QComboBox()
        self.workers.currentTextChanged.connect(self._choose)
        self.checkpoint = QComboBox()
        self.checkpoint.setToolTip("resume from a checkpoint of the forked run")
        self.checkpoint.currentIndexChanged.connect(self._checkpoint_chosen)
        self.checkpoint.hide()
        self.checkpoint_label = QLabel("resume from")
        self.checkpoint_label.hide()
        top = QHBoxLayout()
        top.addWidget(QLabel("worker"))
        top.addWidget(self.workers, 1)
        top.addWidget(self.checkpoint_label)
        top.addWidget(self.checkpoint, 1)

        self.tabs = QTabWidget()
        self.scroll = QScrollArea()
        self.scroll.setWidgetResizable(True)
        self.tabs.addTab(self.scroll, "Form")
        self.json = QPlainTextEdit()
        self.json_error = QLabel()
        self.json_error.setStyleSheet(ERROR_STYLE)
        self.json_error.setWordWrap(True)
        apply = QPushButton("Apply JSON to the form")
        apply.clicked.connect(self.apply_json)
        advanced = QWidget()
        box = QVBoxLayout(advanced)
        box.addWidget(self.json, 1)
        box.addWidget(self.json_error)
        box.addWidget(apply)
        self.tabs.addTab(advanced, "Advanced JSON")

        self.error = QLabel()
        self.error.setStyleSheet(ERROR_STYLE)
        self.error.setWordWrap(True)
        self.message = QLabel()
        self.message.setWordWrap(True)
        self.buttons = {name: QPushButton(name) for name in ("Validate", "Submit", "Save…", "Load…", "Reset")}
        self.buttons["Validate"].clicked.connect(lambda: self._request(self.validate_requested))
        self.buttons["Submit"].clicked.connect(lambda: self._request(self.submit_requested))
        self.buttons["Save…"].clicked.connect(self._save_dialog)
        self.buttons["Load…"].clicked.connect(self._load_dialog)
        self.buttons["Reset"].clicked.connect(self.reset)
        row = QHBoxLayout()
        for button in self.buttons.values():
            row.addWidget(button)
        row.addStretch(1)
        layout = QVBoxLayout(self)
        layout.addLayout(top)
        layout.addWidget(self.tabs, 1)
        layout.addWidget(self.error)
        layout.addWidget(self.message)
        layout.addLayout(row)

    # -- the worker and its form ----------------------------------------------------------
    def set_workers(self, names: list[str]) -> None:
        current = self.workers.currentText()
        self.workers.blockSignals(True)
        self.workers.clear()
        self.workers.addItems(names)
        self.workers.blockSignals(False)
        if current in names:
            self.workers.setCurrentText(current)
        elif names:
            self._choose(names[0])

    def _choose(self, name: str) -> None:
        if name and (self.document is None or self.document.get("worker") != name):
            self.message.setText(f"describing {name}…")
            self.worker_chosen.emit(name)

    def show_worker(self, document: dict[str, Any]) -> None:
        """Build the form of ``document`` (a worker's describe document)."""
        self.document = document
        schema = with_shared_choices(document["config_schema"], document)
        schemas = document.get("algo_params_schemas") or {}
        params_path = ALGO_PARAMS_PATH if schemas else None

        def params_schema(_path: str, values: dict) -> dict | None:
            name = values.get(ALGORITHM_PATH) if isinstance(values, dict) else None
            return schemas.get(name) if isinstance(name, str) else None

        values = self._pending if self._pending is not None else document.get("default_config") or {}
        self._pending = None
        form = SchemaForm(schema, values, hidden=HIDDEN, suggest=suggestions_from_envs(document.get("envs") or {}),
                          dynamic={params_path: params_schema} if params_path else None)
        form.changed.connect(self._form_changed)
        self.form = form
        self.scroll.setWidget(form)  # the scroll area deletes the previous form
        if self.workers.currentText() != document["worker"]:
            self.workers.blockSignals(True)
            self.workers.setCurrentText(document["worker"])
            self.workers.blockSignals(False)
        self.message.setText(f"{document['worker']}: {document['metadata'].get('description', '')}")
        self.error.clear()
        self._form_changed()

    def _form_changed(self) -> None:
        if self.form is None:
            return
        try:
            text = json.dumps(self.config(), indent=2)
        except FieldError as exc:
            self.json_error.setText(str(exc))
            return
        self.json.blockSignals(True)
        self.json.setPlainText(text)
        self.json.blockSignals(False)
        self.json_error.clear()

    def config(self) -> dict[str, Any]:
        """The config to submit; raises FieldError for a field that does not parse."""
        assert self.form is not None and self.document is not None
        return {"worker": self.document["worker"], **self.form.value()}

    def reset(self) -> None:
        if self.document is not None:
            self.form.set_value(self.document.get("default_config") or {})
            self._clear_fork()

    # -- Advanced JSON ----------------------------------------------------------------------
    def apply_json(self) -> bool:
        """Parse the JSON tab, check it against the worker's schema, and show it in the form."""
        if self.form is None or self.document is None:
            return False
        try:
            data = json.loads(self.json.toPlainText())
        except ValueError as exc:
            self.json_error.setText(f"not valid JSON: {exc}")
            return False
        if not isinstance(data, dict):
            self.json_error.setText("the config must be a JSON object")
            return False
        if data.get("worker", self.document["worker"]) != self.document["worker"]:
            self.json_error.setText(f"worker: this form is {self.document['worker']!r}; choose "
                                    f"{data.get('worker')!r} above to edit its config")
            return False
        checked = {"run_id": "new-run", **{k: v for k, v in data.items() if k != "worker"}}  # MOSAIC sets run_id
        problems = sorted(jsonschema.Draft202012Validator(self.document["config_schema"]).iter_errors(checked),
                          key=lambda e: [str(p) for p in e.absolute_path])
        if problems:
            first = problems[0]
            where = ".".join(str(p) for p in first.absolute_path) or "config"
            self.json_error.setText(f"{where}: {first.message}")
            return False
        self.form.set_value(data)
        self.json_error.clear()
        return True

    # -- files and forks ------------------------------------------------------------------
    def load_config(self, data: dict[str, Any]) -> None:
        """Show ``data`` (a config naming its worker); the worker is described first if need be."""
        data = {k: v for k, v in data.items() if k != "run_id"}
        worker = data.get("worker")
        if self.document is not None and worker in (None, self.document["worker"]):
            self.form.set_value(data)
            return
        names = [self.workers.itemText(i) for i in range(self.workers.count())]
        if worker not in names:
            self.error.setText(f"worker: {worker!r} is not installed here (installed: {', '.join(names)})")
            return
        self._pending = data
        if self.workers.currentText() != worker:
            self.workers.setCurrentText(worker)  # describes it (_choose), then shows the pending values
        else:
            self.worker_chosen.emit(worker)

    def load_from(self, path: Path) -> None:
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            self.error.setText(f"{path}: cannot load ({exc})")
            return
        if not isinstance(data, dict) or not isinstance(data.get("worker", ""), str):
            self.error.setText(f"{path}: not a config (a JSON object naming its worker)")
            return
        self._clear_fork()
        self.load_config(data)
        self.message.setText(f"loaded {path}")

    def save_to(self, path: Path) -> None:
        try:
            Path(path).write_text(json.dumps(self.config(), indent=2) + "\n", encoding="utf-8")
        except FieldError as exc:
            self.error.setText(str(exc))
            return
        self.message.setText(f"saved {path}")

    def fork(self, run_dir: Path) -> None:
        """Edit a copy of the run's config; its checkpoints are offered to resume from."""
        run_dir = Path(run_dir)
        try:
            data = RunDir(run_dir).read_config()
        except (OSError, ValueError) as exc:
            self.error.setText(f"cannot fork {run_dir.name}: {exc}")
            return
        self.checkpoint.blockSignals(True)
        self.checkpoint.clear()
        self.checkpoint.addItem("no: start afresh", None)
        for folder in checkpoints_of(run_dir):
            self.checkpoint.addItem(folder.name, str(folder))
        self.checkpoint.blockSignals(False)
        shown = self.checkpoint.count() > 1
        self.checkpoint.setVisible(shown)
        self.checkpoint_label.setVisible(shown)
        self.load_config(data)
        self.message.setText(f"forked {run_dir.name}" + ("; pick a checkpoint to resume from" if shown else ""))

    def _checkpoint_chosen(self, _index: int) -> None:
        if self.form is None or self.document is None:
            return
        where = restore_path(self.document)
        if where is None:
            self.error.setText(f"{self.document['worker']} cannot resume from a checkpoint")
            return
        values = self.config()
        set_path(values, where, self.checkpoint.currentData())
        self.form.set_value(values)

    def _clear_fork(self) -> None:
        self.checkpoint.clear()
        self.checkpoint.hide()
        self.checkpoint_label.hide()

    def _save_dialog(self) -> None:
        path, _ = QFileDialog.getSaveFileName(self, "Save config", CONFIG_FILE, "JSON (*.json)")
        if path:
            self.save_to(Path(path))

    def _load_dialog(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Load config", "", "JSON (*.json)")
        if path:
            self.load_from(Path(path))

    # -- validation and submission ----------------------------------------------------------
    def _request(self, signal: Signal) -> None:
        if self.form is None:
            return
        self.form.clear_errors()
        self.error.clear()
        try:
            config = self.config()
        except FieldError as exc:
            self.form.show_error(exc.path, str(exc).split(": ", 1)[1])
            self.error.setText(str(exc))
            return
        self.message.setText("checking with the daemon…")
        signal.emit(config)

    def show_validation(self, ok: bool, error: str = "") -> None:
        """The daemon's answer: a field-named error goes under its field (and in the status line)."""
        if ok:
            self.message.setText("the worker accepts this config")
            self.error.clear()
            return
        self.message.clear()
        path, message = split_error(error, list(self.form.fields) if self.form else [])
        if path is None or self.form is None or not self.form.show_error(path, message):
            path = None
        self.error.setText(error if path is None else f"{path}: {message}")

    def submitted(self, run_id: str) -> None:
        self.error.clear()
        self.message.setText(f"submitted {run_id}")
