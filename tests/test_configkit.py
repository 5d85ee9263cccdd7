from __future__ import annotations

import enum
import re
from dataclasses import dataclass
from typing import Annotated, Literal

import pytest

from mosaic import configkit
from mosaic.configkit import option
from mosaic.errors import ConfigError, UserError


class Mode(enum.Enum):
    FAST = "fast"
    SLOW = "slow"


@dataclass
class Inner:
    name: str = option("a", choices=("a", "b"), help="a name")
    rate: float = option(0.5, min=0.0, max=1.0)


@dataclass
class Outer:
    count: int = option(1, min=1)
    mode: Mode = option(Mode.FAST)
    inner: Inner = option(default_factory=Inner)
    limit: int | None = option(None, min=0)
    tags: list[str] = option(default_factory=list)


@pytest.mark.parametrize("data,field,words", [
    ({"count": 0}, "count", "below the minimum 1"),
    ({"count": "3"}, "count", "must be an integer"),
    ({"count": True}, "count", "must be an integer"),
    ({"mode": "medium"}, "mode", "is not one of FAST, SLOW"),
    ({"inner": {"name": "z"}}, "inner.name", "'z' is not one of a, b"),
    ({"inner": {"rate": 2}}, "inner.rate", "above the maximum"),
    ({"inner": {"nmae": "a"}}, "inner.nmae", "did you mean 'name'"),
    ({"inner": 3}, "inner", "must be an object"),
    ({"limit": -1}, "limit", "below the minimum"),
    ({"tags": [1]}, "tags[0]", "must be a string"),
])
def test_errors_name_the_field(data, field, words):
    with pytest.raises(ConfigError) as info:
        configkit.from_dict(Outer, data)
    assert str(info.value).startswith(f"{field}:") and words in str(info.value)


def test_round_trip():
    cfg = configkit.from_dict(Outer, {"count": 3, "mode": "slow", "inner": {"rate": 1}, "limit": 4})
    assert cfg.mode is Mode.SLOW and cfg.inner.rate == 1.0
    data = configkit.to_dict(cfg)
    assert data["mode"] == "SLOW"
    assert configkit.from_dict(Outer, data) == cfg


def test_explain_lists_every_leaf_field():
    text = "\n".join(configkit.explain(Outer))
    for path in ["count", "mode", "inner.name", "inner.rate", "limit", "tags"]:
        assert f"{path} = " in text
    assert "one of a, b" in text


@dataclass
class Sections:
    merged: Inner = option(default_factory=lambda: Inner(name="b"), merge=True, help="keys left out keep 'b'")
    replaced: Inner = option(default_factory=lambda: Inner(name="b"), help="keys left out take Inner's defaults")


def test_a_merged_section_given_in_part_keeps_its_own_defaults_for_the_rest():
    config = configkit.from_dict(Sections, {"merged": {"rate": 0.25}, "replaced": {"rate": 0.25}})
    assert config.merged == Inner(name="b", rate=0.25) and config.replaced == Inner(name="a", rate=0.25)
    assert configkit.from_dict(Sections, {}).merged == Inner(name="b")
    with pytest.raises(ConfigError) as err:  # the given keys are still checked, with their paths
        configkit.from_dict(Sections, {"merged": {"rate": 2.0}})
    assert err.value.field == "merged.rate"
    schema = configkit.json_schema(Sections)["properties"]
    assert schema["merged"]["properties"]["name"]["default"] == "b"  # what a key left out becomes
    assert schema["replaced"]["properties"]["name"]["default"] == "a"
    assert schema["merged"]["default"] == schema["replaced"]["default"] == {"name": "b", "rate": 0.5}
    lines = configkit.explain(Sections)
    assert "merged.name = 'b': a name (one of a, b)" in lines and "replaced.name = 'a': a name (one of a, b)" in lines
    with pytest.raises(TypeError, match="default_factory"):
        option(Inner(), merge=True)


@pytest.mark.parametrize("name, text, words", [
    ("c.json", '{"worker": "random", "seed": 1, "seed": 2}', "gives the key 'seed' twice"),
    ("c.json", '{"checkpoint": {"keep": 1, "keep": 2}}', "gives the key 'keep' twice"),
    ("s.yaml", "name: x\nseeds: 2\nseeds: 3\n", "gives the key 'seeds' twice (line 3)"),
    ("s.yaml", "settings:\n  total_timesteps: 1\n  total_timesteps: 2\n", "gives the key 'total_timesteps' twice"),
])
def test_a_key_given_twice_is_refused_not_silently_replaced(tmp_path, name, text, words):
    """JSON and YAML parsers keep the last of two equal keys without a word; a spec or config that sets one
    value twice is a mistake to name (an experiment planned 3 seeds where the first line said 2)."""
    from mosaic.configkit import read_document

    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(UserError) as err:
        read_document(str(path), "spec")
    message = str(err.value)
    assert message.startswith("spec: ") and words in message and message.endswith("allowed: each key once")


def test_a_yaml_merge_key_may_still_be_overridden(tmp_path):
    from mosaic.configkit import read_document

    path = tmp_path / "s.yaml"
    path.write_text("base: &b {total_timesteps: 100, seed: 1}\nsettings:\n  <<: *b\n  total_timesteps: 200\n")
    assert read_document(str(path))["settings"] == {"total_timesteps": 200, "seed": 1}


LEFT_OUT = object()


@dataclass(kw_only=True)
class Spec:
    """A spec's shapes: a name of a form, a count or a list of items, a number or a word, sections by label."""

    name: str = option(pattern=re.compile("[a-z]+"), what="a valid name", allowed="lower-case letters")
    seeds: int | list[Annotated[int, option(min=0)]] = option(3, min=1, min_items=1, allowed="a count or seeds")
    score: float | Literal["measure"] = option(0.0, finite=True)
    format: str = option("one", choices=("one", "two"), what="a format")
    sections: dict[Annotated[str, option(pattern=re.compile("[^~]+"), what="a label")],
                   Annotated[Inner | None, option(allowed="an Inner or null")]] = option(default_factory=dict,
                                                                                          max_items=2)


@pytest.mark.parametrize("data, message", [
    ({"name": LEFT_OUT}, "name: is required; allowed: lower-case letters"),
    ({"name": "A"}, "name: 'A' is not a valid name; allowed: lower-case letters"),
    ({"name": 3}, "name: must be a string, got 3; allowed: lower-case letters"),
    ({"seeds": 0}, "seeds: 0 is below the minimum 1; allowed: a count or seeds"),
    ({"seeds": []}, "seeds: needs at least 1 item(s), got 0; allowed: a count or seeds"),
    ({"seeds": [1, -1]}, "seeds[1]: -1 is below the minimum 0"),  # an item's error: the item's words
    ({"seeds": "3"}, "seeds: '3' is not an integer or an array; allowed: a count or seeds"),
    ({"score": "best"}, "score: 'best' is not a number or 'measure'"),
    ({"score": float("nan")}, "score: must be a number, got nan"),
    ({"format": "three"}, "format: 'three' is not a format; allowed: one, two"),
    ({"sections": {"a~b": None}}, "sections.a~b: 'a~b' is not a label; allowed: [^~]+"),
    ({"sections": {"a": 3}}, "sections.a: must be an object, got int; allowed: an Inner or null"),
    ({"sections": {"a": {"nmae": "a"}}}, "sections.a.nmae: unknown field (did you mean 'name'?); allowed: name, rate"),
    ({"sections": {"a": None, "b": None, "c": None}}, "sections: allows at most 2 item(s), got 3"),
])
def test_a_spec_shape_is_refused_naming_the_field_and_what_it_allows(data, message):
    """The options a spec needs beyond a run config's: a string's form, the number of items, constraints on an item
    or a key (Annotated), a word besides a number (Literal), and the words of what a field allows, which end
    every error of the field itself. A union's error is its member's of the value's kind (an object's field)."""
    with pytest.raises(ConfigError) as err:
        configkit.from_dict(Spec, {k: v for k, v in {"name": "a", **data}.items() if v is not LEFT_OUT})
    assert str(err.value) == message


@dataclass
class Noted:
    name: str = option("a")

    UNKNOWN_FIELD_NOTE = "seed is the whole spec's"


def test_an_unknown_key_of_a_section_with_a_note_says_it_after_the_allowed_keys():
    """A section whose keys are a part of a whole's (a game of a tournament) says where the others belong."""
    with pytest.raises(ConfigError) as err:
        configkit.from_dict(Noted, {"seed": 1}, "games.g")
    assert str(err.value) == "games.g.seed: unknown field; allowed: name (seed is the whole spec's)"
    assert "UNKNOWN_FIELD_NOTE" not in configkit.json_schema(Noted)["properties"]


def test_a_spec_shape_is_read_and_described():
    parsed = configkit.from_dict(Spec, {"name": "a", "seeds": [0, 2], "score": "measure", "sections": {"x": None}})
    assert (parsed.seeds, parsed.score, parsed.sections) == ([0, 2], "measure", {"x": None})
    assert configkit.from_dict(Spec, {"name": "a", "score": 1}).score == 1.0
    schema = configkit.json_schema(Spec)["properties"]
    assert schema["name"]["pattern"] == "[a-z]+" and schema["score"]["anyOf"][1] == {"enum": ["measure"]}
    assert schema["seeds"]["anyOf"][1]["minItems"] == 1 and schema["seeds"]["anyOf"][1]["items"]["minimum"] == 0
    assert schema["sections"]["propertyNames"] == {"type": "string", "pattern": "[^~]+"}
