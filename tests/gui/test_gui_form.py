"""The config form generated from JSON Schemas: widgets per type, defaults, changes, errors, dynamic algo_params."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from PySide6.QtWidgets import QCheckBox, QComboBox, QDoubleSpinBox, QLabel, QLineEdit, QSpinBox

from mosaic.clients.gui.new_run import restore_path
from mosaic.clients.gui.form_fields import CHANGED_MARK, FieldError
from mosaic.clients.gui.schema_form import SchemaForm
from mosaic.clients.gui.schema_paths import split_error, suggestions_from_envs, with_shared_choices

SCHEMA = {
    "type": "object",
    "properties": {
        "run_id": {"type": "string"},
        "seed": {"type": "integer", "default": 0, "minimum": 0, "description": "seeds everything"},
        "lr": {"type": "number", "default": 2.5e-4, "minimum": 0.0},
        "mode": {"type": "string", "enum": ["fast", "slow"], "default": "fast"},
        "render": {"type": "boolean", "default": False},
        "cap": {"anyOf": [{"type": "integer", "minimum": 1}, {"type": "null"}], "default": None},
        "name": {"type": "string", "default": "x"},
        "tags": {"type": "array", "default": ["a"]},
        "environment": {"type": "object", "properties": {
            "family": {"type": "string", "enum": ["mpe", "sisl"], "default": "mpe"},
            "env_id": {"type": "string", "default": "simple_spread_v3"}}},
        "algorithm": {"type": "string", "default": "ppo"},
        "algo_params": {"type": "object", "default": {}},
    },
}
PARAMS = {"ppo": {"type": "object", "properties": {"clip": {"type": "number", "default": 0.2},
                                                   "epochs": {"type": "integer", "default": 4, "minimum": 1}}},
          "dqn": {"type": "object", "properties": {"epsilon": {"type": "number", "default": 0.1}}}}
ENVS = {"mpe": ["simple_spread_v3", "simple_tag_v3"], "sisl": ["waterworld_v4"]}


def make_form(qtbot, values=None):
    schema = with_shared_choices(SCHEMA, {"capabilities": {"algorithms": list(PARAMS)}, "envs": ENVS})

    def params(_path, vals):
        return PARAMS.get(vals.get("algorithm"))

    form = SchemaForm(schema, values, hidden={"run_id"}, suggest=suggestions_from_envs(ENVS),
                      dynamic={"algo_params": params})
    qtbot.addWidget(form)
    return form


def test_each_schema_type_gets_its_widget_and_the_defaults(qtbot):
    form = make_form(qtbot)
    f = form.fields
    assert isinstance(f["seed"].editor, QSpinBox) and f["seed"].editor.minimum() == 0
    assert isinstance(f["lr"].editor, QDoubleSpinBox) and f["lr"].editor.text() == "0.00025"
    assert isinstance(f["mode"].editor, QComboBox) and not f["mode"].editor.isEditable()
    assert isinstance(f["render"].editor, QCheckBox)
    assert isinstance(f["cap"].toggle, QCheckBox) and not f["cap"].toggle.isChecked()
    assert isinstance(f["name"].editor, QLineEdit) and isinstance(f["tags"].editor, QLineEdit)
    assert isinstance(f["environment.env_id"].editor, QComboBox) and f["environment.env_id"].editor.isEditable()
    assert "run_id" not in f and "environment" in form.groups
    assert f["seed"].editor.toolTip() == "seeds everything"
    assert form.value() == {"seed": 0, "lr": 2.5e-4, "mode": "fast", "render": False, "cap": None, "name": "x",
                            "tags": ["a"], "environment": {"family": "mpe", "env_id": "simple_spread_v3"},
                            "algorithm": "ppo", "algo_params": {"clip": 0.2, "epochs": 4}}
    assert form.changed_paths() == []


def test_changed_values_are_marked_and_round_trip(qtbot):
    form = make_form(qtbot)
    form.fields["seed"].editor.setValue(7)
    form.fields["cap"].toggle.setChecked(True)
    form.fields["cap"].editor.setValue(25)
    form.fields["tags"].editor.setText('["b", 2]')
    assert form.value()["seed"] == 7 and form.value()["cap"] == 25 and form.value()["tags"] == ["b", 2]
    assert set(form.changed_paths()) == {"seed", "cap", "tags"}
    assert form.fields["seed"].mark.text() == CHANGED_MARK and form.labels["seed"].styleSheet()
    assert form.fields["lr"].mark.text() == "" and not form.labels["lr"].styleSheet()

    other = make_form(qtbot, form.value())
    assert other.value() == form.value()
    form.set_value({})  # back to the defaults
    assert form.changed_paths() == []


def test_spin_boxes_respect_bounds_and_bad_json_names_its_field(qtbot):
    form = make_form(qtbot)
    form.fields["seed"].editor.setValue(-5)
    assert form.value()["seed"] == 0  # clamped to the schema's minimum
    form.fields["tags"].editor.setText("[1, ")
    with pytest.raises(FieldError, match="^tags: not valid JSON"):
        form.value()


def test_env_ids_follow_the_family_and_algo_params_follow_the_algorithm(qtbot):
    form = make_form(qtbot)
    env_box = form.fields["environment.env_id"].editor
    assert [env_box.itemText(i) for i in range(env_box.count())] == ENVS["mpe"]
    form.fields["environment.family"].editor.setCurrentText("sisl")
    assert [env_box.itemText(i) for i in range(env_box.count())] == ENVS["sisl"]

    form._dynamic_forms["algo_params"].fields["epochs"].editor.setValue(9)
    assert form.value()["algo_params"] == {"clip": 0.2, "epochs": 9}
    assert "algo_params.epochs" in form.changed_paths()
    form.fields["algorithm"].editor.setCurrentText("dqn")
    assert form.value()["algo_params"] == {"epsilon": 0.1}  # the new algorithm's parameters, at their defaults
    algo_box = form.fields["algorithm"].editor
    assert [algo_box.itemText(i) for i in range(algo_box.count())] == ["ppo", "dqn"]


def test_loaded_params_the_algorithm_does_not_declare_are_kept_for_the_worker_to_refuse(qtbot):
    form = make_form(qtbot, {"algorithm": "ppo", "algo_params": {"clip": 0.3, "clp": 1}})
    assert form.value()["algo_params"] == {"clip": 0.3, "epochs": 4, "clp": 1}


def test_errors_go_under_the_field_they_name(qtbot):
    form = make_form(qtbot)
    assert form.show_error("environment.env_id", "'nope' is not an env id")
    assert form.errors() == {"environment.env_id": "'nope' is not an env id"}
    assert form.show_error("algo_params.epochs", "must be >= 1")
    assert form.errors()["algo_params.epochs"] == "must be >= 1"
    assert form.fields["environment.env_id"].error.isVisibleTo(form)
    assert form.show_error("tags.0", "not a string")  # the nearest field above the key named
    assert not form.show_error("nothing_like_it", "x")
    form.clear_errors()
    assert form.errors() == {}


def test_error_lines_split_into_field_and_message():
    assert split_error("environment.env_id: 'x' is not one of a, b", []) == \
        ("environment.env_id", "'x' is not one of a, b")
    assert split_error("worker 'x' could not check the config: boom", []) == (None, "worker 'x' could not check the config: boom")


def test_pickers_come_from_the_description_not_from_field_names():
    """The algorithm and env family pickers list what the worker describes; a field merely called
    'algorithm' somewhere else in the config gets no picker."""
    schema = {"properties": {
        "algorithm": {"type": "string"},
        "environment": {"type": "object", "properties": {"family": {"type": "string"},
                                                         "env_id": {"type": "string"}}},
        "players": {"type": "object", "properties": {"algorithm": {"type": "string"}}}}}
    picked = with_shared_choices(schema, {"capabilities": {"algorithms": ["ppo", "dqn"]}, "envs": ENVS})
    assert picked["properties"]["algorithm"]["enum"] == ["ppo", "dqn"]
    assert picked["properties"]["environment"]["properties"]["family"]["enum"] == ["mpe", "sisl"]
    assert "enum" not in picked["properties"]["players"]["properties"]["algorithm"]
    assert "enum" not in schema["properties"]["algorithm"]  # the worker's schema is not changed in place
    suggest = suggestions_from_envs(ENVS)
    assert suggest("environment.env_id", {"environment": {"family": "sisl"}}) == ["waterworld_v4"]
    assert suggest("players.env_id", {"environment": {"family": "sisl"}}) is None


def test_resume_goes_to_the_shared_restore_field_unless_the_worker_refuses_it():
    schema = {"properties": {"checkpoint": {"type": "object", "properties": {"restore_from": {}}}}}
    assert restore_path({"config_schema": schema, "shared_fields": {"refused": {}}}) == "checkpoint.restore_from"
    refused = {"refused": {"checkpoint.restore_from": "cannot resume"}}
    assert restore_path({"config_schema": schema, "shared_fields": refused}) is None


def test_setting_text_does_not_leak_references_to_none(qtbot):
    """The canary: PySide6 6.12.0 drops a reference to None per void call and CPython 3.11 aborts."""
    label = QLabel()
    qtbot.addWidget(label)
    before = sys.getrefcount(None)
    for i in range(200):
        label.setText(str(i))
        label.resize(100 + i % 3, 20)
    assert sys.getrefcount(None) >= before - 10


def test_a_number_or_a_word_is_picked_or_typed_and_anything_else_names_the_allowed_values(qtbot):
    """Tianshou's ``alpha`` (a number or "auto", anyOf with an enum) and RLlib's ``rollout_fragment_length`` (an
    integer or "auto", anyOf with a const): the word is offered in an editable combo, a number is typed."""
    schema = {"type": "object", "properties": {
        "alpha": {"default": 0.2, "anyOf": [{"type": "number"}, {"type": "string", "enum": ["auto"]}]},
        "fragment": {"type": ["integer", "string"], "default": "auto", "minimum": 1,
                     "anyOf": [{"type": "integer"}, {"const": "auto"}]}}}
    form = SchemaForm(schema)
    qtbot.addWidget(form)
    alpha, fragment = form.fields["alpha"], form.fields["fragment"]
    for field in (alpha, fragment):
        assert isinstance(field.editor, QComboBox) and field.editor.isEditable()
        assert [field.editor.itemText(i) for i in range(field.editor.count())] == ["auto"]
    assert form.value() == {"alpha": 0.2, "fragment": "auto"} and form.changed_paths() == []
    assert alpha.editor.currentText() == "0.2"

    alpha.editor.setCurrentIndex(0)  # picks "auto"
    fragment.editor.setCurrentText("64")
    assert form.value() == {"alpha": "auto", "fragment": 64} and set(form.changed_paths()) == {"alpha", "fragment"}
    assert isinstance(form.value()["fragment"], int)
    other = SchemaForm(schema, form.value())
    qtbot.addWidget(other)
    assert other.value() == form.value()

    alpha.editor.setCurrentText("1e-3")
    assert form.value()["alpha"] == 0.001
    fragment.editor.setCurrentText("6.5")
    with pytest.raises(FieldError, match=r"^fragment: '6.5' is not an integer; allowed: an integer or auto$"):
        form.value()
    fragment.editor.setCurrentText("auto")
    alpha.editor.setCurrentText("fast")
    with pytest.raises(FieldError, match=r"^alpha: 'fast' is not a number; allowed: a number or auto$"):
        form.value()
    alpha.editor.setCurrentText("nan")
    with pytest.raises(FieldError, match=r"^alpha: 'nan' is not a finite number"):
        form.value()


def test_every_number_or_word_field_of_the_workers_gets_the_combo():
    """Each field of a worker's description that takes a number or a word is recognised as one (so none falls back
    to a JSON line): Tianshou's alpha of sac, redq and cql; RLlib's rollout_fragment_length and target_entropy."""
    from mosaic.clients.gui.form_fields import _number_or_words

    found = set()
    for name in ("tianshou", "ray"):
        described = json.loads(subprocess.run([sys.executable, "-m", "mosaic", "workers", "show", name, "--json"],
                                              capture_output=True, text=True, check=True, timeout=300).stdout)
        for algorithm, params in described["algo_params_schemas"].items():
            for key, prop in params.get("properties", {}).items():
                options = prop.get("anyOf") or []
                if any("enum" in o or "const" in o for o in options):
                    assert _number_or_words(prop) is not None, (name, algorithm, key, prop)
                    found.add((name, key))
    assert found == {("tianshou", "alpha"), ("ray", "rollout_fragment_length"), ("ray", "target_entropy")}
