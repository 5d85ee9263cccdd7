"""One config field's widget: spin boxes, combo boxes (a number or a word too), check boxes, a null toggle, JSON
lines; its value, default, change mark and error."""

from __future__ import annotations

import json
import math
from typing import Any, Callable
from PySide6.QtCore import Signal
from PySide6.QtWidgets import (QCheckBox, QComboBox, QDoubleSpinBox, QHBoxLayout, QLabel, QLineEdit, QSpinBox,
                               QVBoxLayout, QWidget)


INT_LIMIT = 2**31 - 1


CHANGED_MARK = "●"  # drawn in front of a field that differs from its default


CHANGED_STYLE = "color: #0b5394;"  # and its label in this colour (not bold: labels keep their width)


ERROR_STYLE = "color: #c62828;"


#: Suggestions for a string field: (path, the form's current values) -> choices, or None.
Suggest = Callable[[str, dict], "list[str] | None"]


#: The schema of a dynamic object field: (path, the form's current values) -> schema, or None.
DynamicSchema = Callable[[str, dict], "dict | None"]


class FieldError(ValueError):
    """A field's text is not a valid value (bad JSON, say)."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"{path}: {message}")
        self.path = path


def _nullable(schema: dict) -> tuple[dict, bool]:
    """(the non-null schema, whether null is allowed)."""
    kind = schema.get("type")
    if isinstance(kind, list) and "null" in kind:
        rest = [t for t in kind if t != "null"]
        return {**schema, "type": rest[0] if len(rest) == 1 else rest}, True
    for key in ("anyOf", "oneOf"):
        options = schema.get(key)
        if isinstance(options, list) and any(o.get("type") == "null" for o in options):
            others = [o for o in options if o.get("type") != "null"]
            if len(others) == 1:
                merged = {k: v for k, v in schema.items() if k != key}
                return {**others[0], **merged}, True
    return schema, False


def _number_or_words(schema: dict) -> tuple[str, list[str]] | None:
    """("integer" or "number", the words) for a field that takes a number or one of a few words
    (``anyOf: [{"type": "number"}, {"enum": ["auto"]}]``, or ``{"const": "auto"}``), else None."""
    for key in ("anyOf", "oneOf"):
        options = schema.get(key)
        if not isinstance(options, list):
            continue
        numeric = [o.get("type") for o in options if o.get("type") in ("integer", "number")]
        words = [str(w) for o in options for w in (o.get("enum") or ([o["const"]] if "const" in o else []))]
        if len(numeric) == 1 and words and all(o.get("type") in ("integer", "number") or "enum" in o or "const" in o
                                               for o in options) and all(isinstance(w, str) for w in words):
            return numeric[0], words
    return None


def _label(name: str) -> str:
    return name.replace("_", " ")


class NumberBox(QDoubleSpinBox):
    """A spin box that shows numbers as Python would (2.5e-4, not 0.000250)."""

    def __init__(self) -> None:
        super().__init__()
        self.setDecimals(12)

    def textFromValue(self, value: float) -> str:  # noqa: N802  (Qt's name)
        return format(value, ".8g")

    def valueFromText(self, text: str) -> float:  # noqa: N802
        try:
            return float(text)
        except ValueError:
            return self.value()

    def validate(self, text: str, pos: int):  # noqa: D401  (Qt's signature)
        from PySide6.QtGui import QValidator

        stripped = text.strip()
        if stripped in ("", "-", "+", ".", "-.", "e", "E") or stripped.lower().endswith(("e", "e-", "e+")):
            return QValidator.State.Intermediate, text, pos
        try:
            float(stripped)
        except ValueError:
            return QValidator.State.Invalid, text, pos
        return QValidator.State.Acceptable, text, pos


class Field(QWidget):
    """One property: its editor, the "set" toggle when null is allowed, and an error line."""

    changed = Signal()

    def __init__(self, path: str, schema: dict, default: Any, suggest: Suggest | None) -> None:
        super().__init__()
        self.path = path
        self.schema, self.nullable = _nullable(schema)
        self.default = default
        self.suggest = suggest
        self.kind = self.schema.get("type")
        self.number_or_words = _number_or_words(self.schema)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        row = QHBoxLayout()
        row.setContentsMargins(0, 0, 0, 0)
        layout.addLayout(row)
        self.mark = QLabel()
        self.mark.setFixedWidth(self.mark.fontMetrics().horizontalAdvance(CHANGED_MARK) + 4)
        self.mark.setStyleSheet(CHANGED_STYLE)
        self.mark.setToolTip("changed from the default")
        row.addWidget(self.mark)
        self.toggle: QCheckBox | None = None
        if self.nullable:
            self.toggle = QCheckBox("set")
            self.toggle.setToolTip("unset means null: the worker's own default")
            self.toggle.toggled.connect(self._toggled)
            row.addWidget(self.toggle)
        self.editor = self._make_editor()
        row.addWidget(self.editor, 1)
        self.error = QLabel()
        self.error.setStyleSheet(ERROR_STYLE)
        self.error.setWordWrap(True)
        self.error.hide()
        layout.addWidget(self.error)
        description = schema.get("description")
        if description:
            self.setToolTip(description)
            self.editor.setToolTip(description)
        self.set_value(default)

    # -- the editor for each kind --------------------------------------------------
    def _make_editor(self) -> QWidget:
        schema = self.schema
        if self.number_or_words is not None:  # its words to pick, or a number typed in
            box = QComboBox()
            box.setEditable(True)
            box.setInsertPolicy(QComboBox.InsertPolicy.NoInsert)
            box.addItems(self.number_or_words[1])
            box.lineEdit().setPlaceholderText(f"{self.number_or_words[0]} or {' or '.join(self.number_or_words[1])}")
            box.currentTextChanged.connect(self.changed)
            return box
        if "enum" in schema:
            box = QComboBox()
            for option in schema["enum"]:
                box.addItem(str(option), option)
            box.currentIndexChanged.connect(self.changed)
            return box
        if self.kind == "boolean":
            box = QCheckBox()
            box.toggled.connect(self.changed)
            return box
        if self.kind == "integer":
            box = QSpinBox()
            box.setRange(int(max(schema.get("minimum", -INT_LIMIT), -INT_LIMIT)),
                         int(min(schema.get("maximum", INT_LIMIT), INT_LIMIT)))
            box.valueChanged.connect(self.changed)
            return box
        if self.kind == "number":
            box = NumberBox()
            box.setRange(float(schema.get("minimum", -1e300)), float(schema.get("maximum", 1e300)))
            box.valueChanged.connect(self.changed)
            return box
        if self.kind == "string" and self.suggest is not None:
            box = QComboBox()
            box.setEditable(True)
            box.setInsertPolicy(QComboBox.InsertPolicy.NoInsert)
            box.currentTextChanged.connect(self.changed)
            return box
        edit = QLineEdit()
        if self.kind != "string":
            edit.setPlaceholderText("JSON")
        edit.textChanged.connect(self.changed)
        return edit

    def _toggled(self, on: bool) -> None:
        self.editor.setEnabled(on)
        self.changed.emit()

    # -- values ----------------------------------------------------------------------
    def is_set(self) -> bool:
        return self.toggle is None or self.toggle.isChecked()

    def value(self) -> Any:
        if not self.is_set():
            return None
        editor = self.editor
        if isinstance(editor, QComboBox) and not editor.isEditable():
            return editor.currentData()
        if self.number_or_words is not None:
            return self._number_or_word(editor.currentText().strip())
        if isinstance(editor, QComboBox):
            return editor.currentText()
        if isinstance(editor, QCheckBox):
            return editor.isChecked()
        if isinstance(editor, QSpinBox):
            return editor.value()
        if isinstance(editor, QDoubleSpinBox):
            return float(editor.value())
        text = editor.text()
        if self.kind == "string":
            return text
        if not text.strip():
            return None
        try:
            return json.loads(text)
        except ValueError as exc:
            raise FieldError(self.path, f"not valid JSON ({exc.args[0].split(':')[0]})") from None

    def _number_or_word(self, text: str) -> Any:
        kind, words = self.number_or_words
        if text in words:
            return text
        try:
            number = int(text) if kind == "integer" else float(text)
        except ValueError:
            allowed = "an integer" if kind == "integer" else "a number"
            raise FieldError(self.path, f"{text!r} is not {allowed}; allowed: {allowed} or "
                                        + " or ".join(words)) from None
        if kind == "number" and not math.isfinite(number):
            raise FieldError(self.path, f"{text!r} is not a finite number; allowed: a number or " + " or ".join(words))
        return number

    def set_value(self, value: Any) -> None:
        editor = self.editor
        blocked = editor.blockSignals(True)
        try:
            if self.toggle is not None:
                self.toggle.blockSignals(True)
                self.toggle.setChecked(value is not None)
                self.toggle.blockSignals(False)
                editor.setEnabled(value is not None)
                if value is None:
                    return
            if isinstance(editor, QComboBox) and not editor.isEditable():
                index = editor.findData(value)
                if index < 0 and value is not None:
                    editor.addItem(str(value), value)  # a value the schema does not list: shown, not lost
                    index = editor.count() - 1
                editor.setCurrentIndex(max(index, 0))
            elif isinstance(editor, QComboBox) and self.number_or_words is not None:
                editor.setCurrentText(value if isinstance(value, str) else repr(value))  # repr: the exact float
            elif isinstance(editor, QComboBox):
                editor.setCurrentText("" if value is None else str(value))
            elif isinstance(editor, QCheckBox):
                editor.setChecked(bool(value))
            elif isinstance(editor, QSpinBox):
                editor.setValue(int(value) if isinstance(value, (int, float)) else 0)
            elif isinstance(editor, QDoubleSpinBox):
                editor.setValue(float(value) if isinstance(value, (int, float)) and math.isfinite(value) else 0.0)
            else:
                editor.setText("" if value is None else value if self.kind == "string" else json.dumps(value))
        finally:
            editor.blockSignals(blocked)

    def refresh_suggestions(self, values: dict) -> None:
        if (self.suggest is None or not isinstance(self.editor, QComboBox) or not self.editor.isEditable()
                or self.number_or_words is not None):
            return
        choices = self.suggest(self.path, values) or []
        current = self.editor.currentText()
        existing = [self.editor.itemText(i) for i in range(self.editor.count())]
        if existing == choices:
            return
        blocked = self.editor.blockSignals(True)
        self.editor.clear()
        self.editor.addItems(choices)
        self.editor.setCurrentText(current)
        self.editor.blockSignals(blocked)

    def differs(self) -> bool:
        try:
            return self.value() != self.default
        except FieldError:
            return True

    def show_error(self, message: str) -> None:
        self.error.setText(message)
        self.error.setVisible(bool(message))
