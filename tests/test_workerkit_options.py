"""The worker kit's upstream option (mosaic.workerkit.options): typed by its library's default, bounded by
meaning, its schema, its flag, and the one shape of every refusal."""

from __future__ import annotations

import pytest
from jsonschema import Draft202012Validator

from mosaic.errors import ConfigError
from mosaic.workerkit.options import UpstreamOption, bounds_by_meaning, check_options


def refusal(option: UpstreamOption, value, field: str = "algo_params.opt") -> str:
    with pytest.raises(ConfigError) as err:
        option.check(value, field)
    assert err.value.field == field
    return str(err.value)


@pytest.mark.parametrize("default, good, converted, bad, allowed", [
    (0.99, 1, 1.0, "high", "a number"),
    (3, 4, 4, 4.5, "an integer"),
    (3, 4.0, 4, "4", "an integer"),
    (True, False, False, 1, "true or false"),
    ("relu", "tanh", "tanh", 3, "a string"),
    ([64, 64], [32], [32], 32, "an array of integers"),
])
def test_an_option_takes_the_type_of_its_default(default, good, converted, bad, allowed):
    option = UpstreamOption("opt", default, "Lib", "what it does")
    assert option.check(good, "algo_params.opt") == converted
    assert type(option.check(good, "algo_params.opt")) is type(converted)
    assert refusal(option, bad) == (f"algo_params.opt: {bad!r} is not allowed for Lib's opt (default {default!r}); "
                                    f"allowed: {allowed}")
    schema = option.schema()
    assert schema["default"] == default and schema["description"] == "what it does"
    assert Draft202012Validator({"type": "object", "properties": {"opt": schema}}).is_valid({"opt": good})
    assert not Draft202012Validator({"type": "object", "properties": {"opt": schema}}).is_valid({"opt": bad})


def test_an_option_with_a_none_default():
    anything = UpstreamOption("opt", None, "Lib")
    assert anything.check({"a": 1}, "f") == {"a": 1} and anything.schema() == {"default": None}
    optional = UpstreamOption("delta", None, "Lib", type="number")
    assert optional.check(None, "f") is None and optional.check(2, "f") == 2.0
    assert optional.schema() == {"default": None, "type": ["number", "null"]}
    assert refusal(optional, "x", "f") == "f: 'x' is not allowed for Lib's delta (default None); allowed: null or a number"


def test_an_option_with_words_besides_its_type():
    """Tianshou's alpha: a number, or the word "auto" (its AutoAlpha); any other string is refused naming both."""
    alpha = UpstreamOption("alpha", 0.2, "Lib", "entropy", words=("auto",))
    assert alpha.check("auto", "f") == "auto" and alpha.check(1, "f") == 1.0
    assert alpha.schema() == {"default": 0.2, "description": "entropy", "type": ["number", "string"],
                              "anyOf": [{"type": "number"}, {"const": "auto"}]}
    assert refusal(alpha, "automatic", "f") == ("f: 'automatic' is not allowed for Lib's alpha (default 0.2); "
                                                "allowed: a number or 'auto'")


def test_an_option_takes_the_bounds_and_choices_a_worker_knows():
    """A library's options are typed by their defaults; a worker adds what their meaning fixes, in the schema and
    the check, each refusal naming the allowed values (and a bound that does not fit the type is ignored)."""
    bounds = bounds_by_meaning(counts=("n_epochs",), fractions=("tau",), not_negative=("lr",), atoms=(2, None))
    assert bounds == {"n_epochs": (1, None), "tau": (0, 1), "lr": (0, None), "atoms": (2, None)}
    count = UpstreamOption("n_epochs", 10, "Lib").bounded(*bounds["n_epochs"])
    share = UpstreamOption("tau", 0.005, "Lib").bounded(*bounds["tau"])
    rate = UpstreamOption("lr", 0.001, "Lib").bounded(*bounds["lr"])
    name = UpstreamOption("activation", "relu", "Lib").bounded(choices=("relu", "tanh"))
    above = UpstreamOption("clip", 0.2, "Lib", exclusive_minimum=0)
    assert count.schema()["minimum"] == 1 and "maximum" not in count.schema()
    assert (share.schema()["minimum"], share.schema()["maximum"]) == (0, 1)
    assert name.schema()["enum"] == ["relu", "tanh"] and above.schema()["exclusiveMinimum"] == 0
    assert count.check(3, "x") == 3 and share.check(1, "x") == 1.0 and name.check("tanh", "x") == "tanh"
    for option, value, allowed in ((count, 0, "an integer >= 1"), (count, "many", "an integer >= 1"),
                                   (share, 1.5, "a number from 0 to 1"), (rate, -0.1, "a number >= 0"),
                                   (rate, float("nan"), "a number >= 0"), (above, 0, "a number > 0"),
                                   (name, "gelu", "relu, tanh")):
        assert refusal(option, value, f"algo_params.{option.name}") == (
            f"algo_params.{option.name}: {value!r} is not allowed for Lib's {option.name} (default "
            f"{option.default!r}); allowed: {allowed}")
    assert UpstreamOption("flag", True, "Lib").bounded(0, 1) == UpstreamOption("flag", True, "Lib")  # not a number


def test_an_array_option_bounds_its_items_and_names_the_one_refused():
    sizes = UpstreamOption("hiddens", [64, 64], "Lib", minimum=1, min_items=1)
    assert sizes.check((32, 16.0), "f") == [32, 16]
    with pytest.raises(ConfigError) as err:
        sizes.check([64, 0], "f")
    assert err.value.field == "f[1]" and str(err.value) == (
        "f[1]: 0 is not allowed for Lib's hiddens (default [64, 64]); allowed: an array of integers >= 1, "
        "at least 1 item")
    assert refusal(sizes, [], "f").startswith("f: [] is not allowed")
    assert sizes.schema()["items"] == {"type": "integer", "minimum": 1} and sizes.schema()["minItems"] == 1
    # items of the default's type: numbers where its integers and floats mix, anything where its types differ
    assert UpstreamOption("pair", [0, 0.5], "Lib").check([1, 2], "f") == [1.0, 2.0]
    assert UpstreamOption("mixed", ["a", 1], "Lib").check([2, "b"], "f") == [2, "b"]


def test_a_schema_property_becomes_the_same_option():
    """A table written as JSON Schema properties (the Ray worker's, an extension's) reads into options whose
    schema is that property again."""
    option = UpstreamOption("fragment", "auto", "RLlib", "Steps per sample.", type="integer", words=("auto",),
                            minimum=1, annotations={"x-category": "rollout"})
    again = UpstreamOption.from_schema("fragment", option.schema(), "RLlib")
    assert again == option and again.schema() == option.schema()
    optional = UpstreamOption.from_schema("clip", {"type": ["number", "null"], "default": 40.0,
                                                    "exclusiveMinimum": 0}, "RLlib")
    assert optional.check(None, "f") is None and optional.check(1, "f") == 1.0
    with pytest.raises(ValueError, match="type must be among"):
        UpstreamOption.from_schema("x", {"type": "float", "default": 1.0}, "RLlib")


def test_a_script_option_gives_its_command_line():
    """CleanRL passes options as its script's flags: a boolean as True/False, null as no flag at all."""
    steps = UpstreamOption("num_steps", 128, "CleanRL", flag="--num-steps")
    norm = UpstreamOption("norm_adv", True, "CleanRL", flag="--norm-adv")
    kl = UpstreamOption("target_kl", None, "CleanRL", type="number", flag="--target-kl")
    assert steps.argv(64) == ["--num-steps", "64"] and norm.argv(False) == ["--norm-adv", "False"]
    assert kl.argv(None) == [] and kl.argv(0.02) == ["--target-kl", "0.02"]


def test_a_table_refuses_an_unknown_key_naming_the_allowed_ones():
    table = {"lr": UpstreamOption("lr", 0.001, "Lib", minimum=0), "gamma": UpstreamOption("gamma", 0.99, "Lib")}
    assert check_options("algo_params", {"lr": 1}, table, "Lib's ppo") == {"lr": 1.0}
    assert check_options("algo_params", None, table, "Lib's ppo") == {}
    with pytest.raises(ConfigError) as err:
        check_options("algo_params", {"lrr": 1}, table, "Lib's ppo")
    assert err.value.field == "algo_params.lrr"
    assert str(err.value) == ("algo_params.lrr: is not an option of Lib's ppo (did you mean 'lr'?); "
                              "allowed: lr, gamma")
    with pytest.raises(ConfigError, match=r"^algo_params: must be an object, got list$"):
        check_options("algo_params", [1], table, "Lib's ppo")
