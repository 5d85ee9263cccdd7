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
``anyOf`` a number or words  an editable combo: a word picked, or a number
                             typed (``alpha``: a number or ``auto``)
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

from typing import Any
from PySide6.QtCore import Signal
from PySide6.QtWidgets import QFormLayout, QGroupBox, QLabel, QVBoxLayout, QWidget

from mosaic.clients.gui.form_fields import CHANGED_MARK, CHANGED_STYLE, DynamicSchema, Field, FieldError, Suggest, _label, _nullable
from mosaic.clients.gui.schema_paths import _MISSING, _default_at, _defaults
from mosaic.configkit import get_path, set_path


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
                set_path(out, path, field.value())
            except FieldError:
                set_path(out, path, None)
        return out

    def value(self) -> dict:
        """The config the form holds; raises :class:`FieldError` naming a field that is not valid."""
        out: dict = {}
        for path, extra in self._extra.items():
            set_path(out, path, extra)
        for path, field in self.fields.items():
            set_path(out, path, field.value())
        for path, form in self._dynamic_forms.items():
            set_path(out, path, {**form.value(), **self._unknown.get(path, {})})
        return out

    def set_value(self, values: dict) -> None:
        """Show ``values`` (missing keys: their defaults)."""
        self._building = True
        try:
            for path in list(self._extra):
                if path in self.hidden:
                    found = get_path(values, path, _MISSING)
                    if found is not _MISSING:
                        self._extra[path] = found
                    else:
                        self._extra.pop(path)
            for path, field in self.fields.items():
                found = get_path(values, path, _MISSING)
                field.set_value(field.default if found is _MISSING else found)
            for path in self.dynamic:
                if path in self.groups:
                    found = get_path(values, path, _MISSING)
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
