"""A config form generated from a worker's JSON Schema.

Every worker describes its whole config as a JSON Schema (``--describe``), and
each algorithm's ``algo_params`` as another one. :class:`SchemaForm` turns such
a schema into widgets, one per property:

===========================  =============================================
schema                       widget
===========================  =============================================
integer / number             spin box, bounded by minimum / maximum
``enum``                     combo box
boolean                      check box
``[T, null]`` / ``anyOf``    a "set" toggle in front of T's widget
string                       line edit (an editable combo when the form is
                             given suggestions for it, e.g. env ids)
object with properties       a group of its own
anything else                one line of JSON
===========================  =============================================

Descriptions become tooltips, defaults are filled in, and a field whose value
differs from its default is marked and its label coloured. Errors are shown under
the field they name (``show_error("environment.env_id", ...)``). Two fields
follow the worker contract's conventions: an ``algorithm`` string offers the
algorithms the worker describes, and a sibling ``algo_params`` object is
rebuilt from that algorithm's schema whenever the algorithm changes; an
``env_id`` string suggests the env ids of the sibling ``family``.

The form holds no worker knowledge of its own: everything comes from the
schemas and the describe document it is given.
"""

from __future__ import annotations

import json
import math
from typing import Any, Callable

from PySide6.QtCore import Signal
from PySide6.QtWidgets import (QCheckBox, QComboBox, QDoubleSpinBox, QFormLayout, QGroupBox, QHBoxLayout,
                               QLabel, QLineEdit, QSpinBox, QVBoxLayout, QWidget)

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
        if self.suggest is None or not isinstance(self.editor, QComboBox) or not self.editor.isEditable():
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


class SchemaForm(QWidget):
    """Widgets for a JSON Schema object; :meth:`value` is the config they hold."""

    changed = Signal()

    def __init__(self, schema: dict, values: dict | None = None, *, hidden: set[str] | frozenset = frozenset(),
                 suggest: Suggest | None = None, dynamic: dict[str, DynamicSchema] | None = None,
                 parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.schema = schema
        self.hidden = set(hidden)
        self.suggest = suggest
        self.dynamic = dict(dynamic or {})
        self.fields: dict[str, Field] = {}
        self.labels: dict[str, QLabel] = {}
        self.groups: dict[str, QGroupBox] = {}
        self._dynamic_schemas: dict[str, dict | None] = {}
        self._dynamic_forms: dict[str, SchemaForm] = {}
        self._unknown: dict[str, dict] = {}  # loaded keys the current algorithm does not declare
        self._extra: dict[str, Any] = {}  # values of hidden keys, kept as they came
        self._building = True
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        self._root = QFormLayout()
        layout.addLayout(self._root)
        self._build(schema, "", self._root, values if values is not None else self.defaults())
        self._building = False
        self._after_change()

    # -- building ----------------------------------------------------------------------
    def defaults(self) -> dict:
        return _defaults(self.schema)

    def _build(self, schema: dict, prefix: str, layout: QFormLayout, values: dict) -> None:
        for name, prop in (schema.get("properties") or {}).items():
            path = f"{prefix}{name}"
            if path in self.hidden:
                if name in values:
                    self._extra[path] = values[name]
                continue
            value = values.get(name, prop.get("default")) if isinstance(values, dict) else prop.get("default")
            if path in self.dynamic:
                box = QGroupBox(_label(name))
                box.setToolTip(prop.get("description", ""))
                box.setLayout(QVBoxLayout())
                self.groups[path] = box
                layout.addRow(box)
                self._dynamic_schemas[path] = None
                self._extra[path] = value if isinstance(value, dict) else {}
                continue
            if prop.get("type") == "object" and prop.get("properties"):
                box = QGroupBox(_label(name))
                box.setToolTip(prop.get("description", ""))
                inner = QFormLayout(box)
                self.groups[path] = box
                layout.addRow(box)
                self._build(prop, f"{path}.", inner, value if isinstance(value, dict) else {})
                continue
            default = _default_at(self.schema, path)
            suggests = (self.suggest is not None and _nullable(prop)[0].get("type") == "string"
                        and self.suggest(path, {}) is not None)
            field = Field(path, prop, default, self.suggest if suggests else None)
            if value != default:
                field.set_value(value)
            field.changed.connect(self._after_change)
            label = QLabel(_label(name))
            label.setToolTip(prop.get("description", ""))
            self.fields[path] = field
            self.labels[path] = label
            layout.addRow(label, field)

    def _after_change(self) -> None:
        if self._building:
            return
        values = self._raw_values()
        for field in self.fields.values():
            field.refresh_suggestions(values)
        for path, schema_for in self.dynamic.items():
            if path in self.groups:
                self._rebuild_dynamic(path, schema_for(path, values))
        for path, field in self.fields.items():
            differs = field.differs()
            field.mark.setText(CHANGED_MARK if differs else "")
            self.labels[path].setStyleSheet(CHANGED_STYLE if differs else "")
        self.changed.emit()

    def _rebuild_dynamic(self, path: str, schema: dict | None) -> None:
        if schema == self._dynamic_schemas.get(path) and path in self._dynamic_forms:
            return
        box = self.groups[path]
        old = self._dynamic_forms.pop(path, None)
        keep = self._extra.get(path, {})
        accepted = (schema or {}).get("properties", {})
        # keys loaded from a file stay (the worker names them in its error); a switch of algorithm drops them
        self._unknown[path] = {k: v for k, v in keep.items() if k not in accepted} if old is None else {}
        if old is not None:
            try:
                keep = {k: v for k, v in old.value().items() if k in (schema or {}).get("properties", {})}
            except FieldError:
                keep = {}
            old.setParent(None)
            old.deleteLater()
        self._dynamic_schemas[path] = schema
        if schema is None:
            self._extra[path] = keep
            return
        # only what the new algorithm accepts is carried over; the rest starts at its defaults
        values = {**_defaults(schema), **{k: v for k, v in keep.items() if k in schema.get("properties", {})}}
        form = SchemaForm(schema, values, suggest=self.suggest)
        form.changed.connect(self._after_change)
        box.layout().addWidget(form)
        self._dynamic_forms[path] = form
        self._extra.pop(path, None)

    # -- values ----------------------------------------------------------------------------
    def _raw_values(self) -> dict:
        out: dict = {}
        for path, field in self.fields.items():
            try:
                _put(out, path, field.value())
            except FieldError:
                _put(out, path, None)
        return out

    def value(self) -> dict:
        """The config the form holds; raises :class:`FieldError` naming a field that is not valid."""
        out: dict = {}
        for path, extra in self._extra.items():
            _put(out, path, extra)
        for path, field in self.fields.items():
            _put(out, path, field.value())
        for path, form in self._dynamic_forms.items():
            _put(out, path, {**form.value(), **self._unknown.get(path, {})})
        return out

    def set_value(self, values: dict) -> None:
        """Show ``values`` (missing keys: their defaults)."""
        self._building = True
        try:
            for path in list(self._extra):
                if path in self.hidden:
                    found = _get(values, path)
                    if found is not _MISSING:
                        self._extra[path] = found
                    else:
                        self._extra.pop(path)
            for path, field in self.fields.items():
                found = _get(values, path)
                field.set_value(field.default if found is _MISSING else found)
            for path in self.dynamic:
                if path in self.groups:
                    found = _get(values, path)
                    self._extra[path] = found if isinstance(found, dict) else {}
                    self._dynamic_schemas[path] = None
                    old = self._dynamic_forms.pop(path, None)
                    if old is not None:
                        old.setParent(None)
                        old.deleteLater()
        finally:
            self._building = False
        self._after_change()

    # -- errors ----------------------------------------------------------------------------
    def field_for(self, path: str) -> "Field | None":
        """The widget of ``path``, or of the nearest field above it (errors name the deepest key)."""
        parts = path.split(".")
        while parts:
            here = ".".join(parts)
            if here in self.fields:
                return self.fields[here]
            for dyn_path, form in self._dynamic_forms.items():
                if here.startswith(dyn_path + "."):
                    found = form.field_for(here[len(dyn_path) + 1:])
                    if found is not None:
                        return found
            parts.pop()
        return None

    def show_error(self, path: str, message: str) -> bool:
        """Show ``message`` under ``path``'s field; False when no field matches."""
        field = self.field_for(path)
        if field is None:
            return False
        field.show_error(message)
        return True

    def clear_errors(self) -> None:
        for field in self.fields.values():
            field.show_error("")
        for form in self._dynamic_forms.values():
            form.clear_errors()

    def errors(self) -> dict[str, str]:
        shown = {p: f.error.text() for p, f in self.fields.items() if f.error.text()}
        for path, form in self._dynamic_forms.items():
            shown.update({f"{path}.{p}": m for p, m in form.errors().items()})
        return shown

    def changed_paths(self) -> list[str]:
        """Fields whose value differs from the schema's default."""
        found = [p for p, f in self.fields.items() if f.differs()]
        for path, form in self._dynamic_forms.items():
            found += [f"{path}.{p}" for p in form.changed_paths()]
        return found


# -- plain helpers (no Qt) --------------------------------------------------------------
_MISSING = object()


def _defaults(schema: dict) -> dict:
    out = {}
    for name, prop in (schema.get("properties") or {}).items():
        if "default" in prop:
            out[name] = prop["default"]
        elif prop.get("type") == "object" and prop.get("properties"):
            out[name] = _defaults(prop)
    return out


def _default_at(schema: dict, path: str) -> Any:
    node: Any = schema
    default: Any = None
    for part in path.split("."):
        props = (node or {}).get("properties") or {}
        if part not in props:
            return None
        parent_default = default
        node = props[part]
        default = node.get("default", parent_default.get(part) if isinstance(parent_default, dict) else None)
    return default


def _put(out: dict, path: str, value: Any) -> None:
    parts = path.split(".")
    for part in parts[:-1]:
        out = out.setdefault(part, {})
    out[parts[-1]] = value


def _get(values: Any, path: str) -> Any:
    for part in path.split("."):
        if not isinstance(values, dict) or part not in values:
            return _MISSING
        values = values[part]
    return values


def split_error(message: str, paths: list[str]) -> tuple[str | None, str]:
    """("environment.env_id", "...") from a worker's "environment.env_id: ..." error line."""
    head, sep, rest = message.partition(": ")
    if sep and " " not in head and head:
        return head, rest
    for path in sorted(paths, key=len, reverse=True):
        if message.startswith(path):
            return path, message[len(path):].lstrip(": ")
    return None, message


#: Where every worker's config keeps what the form offers pickers for (mosaic.run_fields).
ALGORITHM_PATH = "algorithm"
ALGO_PARAMS_PATH = "algo_params"
FAMILY_PATH = "environment.family"
ENV_ID_PATH = "environment.env_id"
RESTORE_PATH = "checkpoint.restore_from"


def suggestions_from_envs(envs: dict[str, list[str]]) -> Suggest:
    """``environment.env_id`` suggests the ids of the chosen ``environment.family`` (all ids when none is)."""

    def suggest(path: str, values: dict) -> list[str] | None:
        if path != ENV_ID_PATH:
            return None
        family = _get(values, FAMILY_PATH)
        if isinstance(family, str) and family in envs:
            return list(envs[family])
        return sorted({e for ids in envs.values() for e in ids})

    return suggest


def _has(schema: dict, path: str) -> dict | None:
    node: Any = schema
    for part in path.split("."):
        node = (node.get("properties") or {}).get(part) if isinstance(node, dict) else None
        if node is None:
            return None
    return node


def with_shared_choices(schema: dict, document: dict) -> dict:
    """``schema`` with pickers from the worker's description: its algorithms and its env families.

    Nothing is guessed from field names: the shared fields (mosaic.run_fields) are where
    every worker keeps the algorithm and the env, and the describe document says what
    the worker offers.
    """
    schema = json.loads(json.dumps(schema))
    algorithms = list((document.get("capabilities") or {}).get("algorithms") or [])
    families = list(document.get("envs") or {})
    for path, choices in ((ALGORITHM_PATH, algorithms), (FAMILY_PATH, families)):
        prop = _has(schema, path)
        if prop is not None and choices and "enum" not in prop and "anyOf" not in prop:
            prop["enum"] = choices
    return schema
