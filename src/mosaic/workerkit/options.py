"""An option a worker passes through to its library, and the one check of a table of them.

A training worker exposes its library's own hyperparameters as ``algo_params``: XuanCe's yaml keys,
Tianshou's keyword arguments, a CleanRL script's flags, Jumanji's yaml sections, RLlib's settings. Each is an
:class:`UpstreamOption`: its name, its default (whose JSON type is the option's, unless the worker says
otherwise), the bounds its meaning fixes (:func:`bounds_by_meaning`: the libraries check none), the values a
string may take, its JSON Schema, and its flag where a script takes options on its command line.
:func:`check_options` checks what a config gives against a worker's table; every refusal has one shape::

    algo_params.lr: -0.1 is not allowed for RLlib's lr (default 0.0003); allowed: a number > 0 and <= 1
    algo_params.lrr: is not an option of RLlib's PPO (did you mean 'lr'?); allowed: lr, gamma, ...
"""

from __future__ import annotations

import dataclasses
import difflib
import math
from typing import Any, Mapping, Sequence

from mosaic.errors import ConfigError

__all__ = ["UpstreamOption", "bounds_by_meaning", "check_options", "unknown_option"]

_JSON_TYPES = ("number", "integer", "boolean", "string", "array", "null", "any")
_WORDS = {"number": "a number", "integer": "an integer", "boolean": "true or false", "string": "a string",
          "array": "an array", "any": "any value"}


def bounds_by_meaning(counts: Sequence[str] = (), fractions: Sequence[str] = (), not_negative: Sequence[str] = (),
                      **others: tuple[float | None, float | None]) -> dict[str, tuple[float | None, float | None]]:
    """``name -> (minimum, maximum)`` for a library's options whose meaning fixes their range (the libraries check
    none of them): counts at least 1, fractions (probabilities, discounts) from 0 to 1, rates and coefficients
    not negative, and any other by name (``num_atoms=(2, None)``)."""
    return {**{n: (1, None) for n in counts}, **{n: (0, 1) for n in fractions},
            **{n: (0, None) for n in not_negative}, **others}


def _json_type_of(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, (list, tuple)):
        return "array"
    return "any"


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


@dataclasses.dataclass(frozen=True)
class UpstreamOption:
    """One option of an upstream library, typed by the library's own default.

    ``type`` is the JSON type a value must have (``integer``, ``number``, ``string``, ``boolean``, ``array``,
    ``any``); empty: the default's. ``null``: null is taken too, as it is where a ``None`` default has a
    ``type`` (an optional number); a ``None`` default without one takes anything. ``words`` are strings accepted besides a value of the type (``"auto"``); ``choices``
    the only values a string (or an array's item) may take. Bounds are inclusive (``minimum``) or exclusive
    (``exclusive_minimum``); for an array they bound each item, ``min_items`` its length. ``flag`` is the
    option's flag where a script takes it on its command line (:meth:`argv`). ``library`` names upstream in
    errors, ``owner`` where upstream declares the option (a class, a yaml file); ``annotations`` are further
    schema keywords of the worker's own (``x-rllib``: where RLlib reads it).
    """

    name: str
    default: Any
    library: str
    description: str = ""
    owner: str = ""
    type: str = ""
    null: bool = False
    words: tuple[str, ...] = ()
    choices: tuple[Any, ...] = ()
    minimum: float | None = None
    maximum: float | None = None
    exclusive_minimum: float | None = None
    exclusive_maximum: float | None = None
    min_items: int | None = None
    flag: str = ""
    annotations: Mapping[str, Any] = dataclasses.field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        if self.kind not in _JSON_TYPES:
            raise ValueError(f"{self.library}'s {self.name}: type {self.kind!r} is not one of "
                             f"{', '.join(_JSON_TYPES)}")

    # -- what it takes -------------------------------------------------------------------------
    @property
    def kind(self) -> str:
        """The JSON type a value must have (``any``: no check)."""
        return self.type or _json_type_of(self.default)

    @property
    def nullable(self) -> bool:
        """Whether null is accepted besides ``kind``: ``null``, or a ``None`` default of a known type."""
        return self.null or (self.default is None and self.kind != "any")

    @property
    def numeric(self) -> bool:
        return self.kind in ("integer", "number") or (self.kind == "array" and self._item_kind() in
                                                       ("integer", "number"))

    def _item_kind(self) -> str:
        """The JSON type of an array's items: its default's (numbers where integers and floats mix)."""
        kinds = {_json_type_of(item) for item in self.default} if isinstance(self.default, (list, tuple)) else set()
        if kinds and kinds <= {"integer", "number"}:
            return "integer" if kinds == {"integer"} else "number"
        return kinds.pop() if len(kinds) == 1 else "any"

    def bounded(self, minimum: float | None = None, maximum: float | None = None,
                choices: Sequence[Any] = ()) -> "UpstreamOption":
        """This option with bounds or choices added (only those that fit its type)."""
        if self.kind in ("integer", "number"):
            return dataclasses.replace(self, minimum=minimum, maximum=maximum)
        if self.kind == "string" and choices:
            return dataclasses.replace(self, choices=tuple(choices))
        return self

    def _range(self) -> str:
        low = (f">= {self.minimum:g}" if self.minimum is not None else
               f"> {self.exclusive_minimum:g}" if self.exclusive_minimum is not None else "")
        high = (f"<= {self.maximum:g}" if self.maximum is not None else
                f"< {self.exclusive_maximum:g}" if self.exclusive_maximum is not None else "")
        if self.minimum is not None and self.maximum is not None:
            return f"from {self.minimum:g} to {self.maximum:g}"
        return " and ".join(part for part in (low, high) if part)

    def allowed(self) -> str:
        """The values this option takes, in words."""
        null = "null, " if self.nullable else ""
        if self.choices:
            return null + ", ".join("null" if c is None else str(c) for c in self.choices)
        if self.kind == "boolean":
            return "true or false"
        kind = self.kind
        if kind == "array":
            item = self._item_kind()
            words = f"an array of {_WORDS.get(item, 'values')}"
            words = words.replace("an array of an ", "an array of ").replace("an array of a ", "an array of ")
            words += "s" if item in ("integer", "number", "string") else ""
            if self._range():
                words += f" {self._range()}"
            if self.min_items:
                words += f", at least {self.min_items} item{'s' if self.min_items > 1 else ''}"
        else:
            words = _WORDS[kind] + (f" {self._range()}" if self._range() else "")
        words += "".join(f" or {w!r}" for w in self.words)
        return ("null or " if self.nullable else "") + words

    # -- the check ---------------------------------------------------------------------------
    def refuse(self, value: Any, field: str) -> ConfigError:
        """The one refusal of a value of this option."""
        return ConfigError(field, f"{value!r} is not allowed for {self.library}'s {self.name} (default "
                                  f"{_shown(self.default)}); allowed: {self.allowed()}")

    def _in_range(self, value: float) -> bool:
        return not ((self.minimum is not None and value < self.minimum)
                    or (self.maximum is not None and value > self.maximum)
                    or (self.exclusive_minimum is not None and value <= self.exclusive_minimum)
                    or (self.exclusive_maximum is not None and value >= self.exclusive_maximum))

    def _scalar(self, value: Any, kind: str) -> tuple[bool, Any]:
        """(whether ``value`` is of ``kind`` within the bounds and choices, the value normalised)."""
        if kind in ("integer", "number"):
            if not _number(value) or not math.isfinite(value):
                return False, value
            if kind == "integer":
                if isinstance(value, float) and not value.is_integer():
                    return False, value
                value = int(value)
            else:
                value = float(value)
            return self._in_range(value), value
        if kind == "string":
            return isinstance(value, str) and (not self.choices or value in self.choices), value
        if kind == "boolean":
            return isinstance(value, bool), value
        return True, value

    def check(self, value: Any, field: str) -> Any:
        """``value`` if this option takes it (an integral number where an integer is wanted becomes an int, an
        integer where a number is wanted a float, a tuple a list); :meth:`refuse` otherwise."""
        if value is None and (self.nullable or self.kind == "any"):
            return None
        if isinstance(value, str) and value in self.words:
            return value
        if self.kind == "array":
            if not isinstance(value, (list, tuple)) or (self.min_items is not None and len(value) < self.min_items):
                raise self.refuse(value, field)
            out = []
            for i, item in enumerate(value):
                ok, checked = self._scalar(item, self._item_kind())
                if not ok:
                    raise self.refuse(item, f"{field}[{i}]")
                out.append(checked)
            return out
        ok, checked = self._scalar(value, self.kind)
        if not ok:
            raise self.refuse(value, field)
        return checked

    # -- schema and command line ---------------------------------------------------------------
    def schema(self) -> dict[str, Any]:
        """The option's JSON Schema (2020-12)."""
        kind = self.kind
        out: dict[str, Any] = {}
        if kind != "any":
            types = [kind, *(["null"] if self.nullable else []), *(["string"] if self.words else [])]
            out["type"] = types[0] if len(types) == 1 else types
        out["default"] = list(self.default) if isinstance(self.default, tuple) else self.default
        if self.words:
            out["anyOf"] = [{"type": [kind, "null"] if self.nullable else kind}, *({"const": w} for w in self.words)]
        bounds = {"minimum": self.minimum, "maximum": self.maximum, "exclusiveMinimum": self.exclusive_minimum,
                  "exclusiveMaximum": self.exclusive_maximum}
        bounds = {k: v for k, v in bounds.items() if v is not None}
        if kind == "array":
            item = self._item_kind()
            if item != "any" or bounds:
                out["items"] = {**({"type": item} if item != "any" else {}), **bounds}
            if self.min_items is not None:
                out["minItems"] = self.min_items
        else:
            out.update(bounds)
        if self.choices:
            out["enum"] = [*([None] if self.nullable else []), *self.choices]
        if self.description:
            out["description"] = self.description
        out.update(self.annotations)
        return out

    @classmethod
    def from_schema(cls, name: str, schema: Mapping[str, Any], library: str) -> "UpstreamOption":
        """The option a JSON Schema property describes (the keywords :meth:`schema` writes; ``x-`` keywords are
        kept as annotations); ``ValueError`` for one it cannot express."""
        known = {"type", "default", "description", "anyOf", "const", "enum", "minimum", "maximum",
                 "exclusiveMinimum", "exclusiveMaximum", "items", "minItems"}
        odd = [k for k in schema if k not in known and not k.startswith("x-")]
        if odd:
            raise ValueError(f"{name}: schema keywords {', '.join(odd)} are not an upstream option's")
        declared = schema.get("type", "any")
        types = [declared] if isinstance(declared, str) else list(declared)
        words: list[str] = []
        for branch in schema.get("anyOf", ()):
            words += [branch["const"]] if "const" in branch else list(branch.get("enum", ()))
        main = [t for t in types if t != "null" and not (t == "string" and words)]
        if len(main) > 1 or any(t not in _JSON_TYPES for t in types):
            raise ValueError(f"{name}: type must be among {', '.join(_JSON_TYPES)} (one, and null)")
        kind = main[0] if main else ("string" if words else "any")
        items = dict(schema.get("items") or {})
        bounds = items if kind == "array" else schema
        return cls(name, schema.get("default"), library, schema.get("description", ""), type=kind,
                   null="null" in types, words=tuple(words), choices=tuple(c for c in schema.get("enum", ()) if c is not None),
                   minimum=bounds.get("minimum"), maximum=bounds.get("maximum"),
                   exclusive_minimum=bounds.get("exclusiveMinimum"),
                   exclusive_maximum=bounds.get("exclusiveMaximum"), min_items=schema.get("minItems"),
                   annotations={k: v for k, v in schema.items() if k.startswith("x-")})

    def argv(self, value: Any) -> list[str]:
        """The script's command-line words that set this option to ``value`` (none for null)."""
        if value is None:
            return []
        if not self.flag:
            raise ValueError(f"{self.library}'s {self.name} has no command-line flag")
        return [self.flag, ("True" if value else "False") if self.kind == "boolean" else str(value)]


def _shown(default: Any) -> str:
    return repr(list(default) if isinstance(default, tuple) else default)


def unknown_option(field: str, key: Any, names: Sequence[str], owner: str, hint: str | None = None) -> ConfigError:
    """The refusal of a key no option of ``owner`` (``RLlib's PPO``) has; ``names`` the allowed ones, in the order
    they are listed. Said with it: where the library's name is in the run vocabulary, for a name a shared field
    sets (mosaic.configkit.moved_names: Jumanji's ``total_batch_size`` is ``num_envs``), unless ``hint``, the worker's own
    suggestion for this algorithm (a renamed or split-up option: RLlib's ``lr`` is SAC's ``actor_lr``, ...),
    says more; else the closest name."""
    from mosaic.configkit.moved_names import library_name

    moved = library_name(str(key), owner)
    if hint:
        pass
    elif moved:
        hint = f"; {moved}"
    else:
        close = difflib.get_close_matches(str(key), list(names), n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
    return ConfigError(f"{field}.{key}", f"is not an option of {owner}{hint}; allowed: {', '.join(names)}")


def check_options(field: str, given: Any, options: Mapping[str, UpstreamOption], owner: str,
                  hint: Any = None) -> dict[str, Any]:
    """``given`` (an object of option -> value) checked against a worker's table ``options``: each key one of
    them, each value one its option takes (normalised). ``owner`` names the table in errors (``XuanCe's
    mappo``); ``hint(key)``, where given, is a worker's own suggestion for an unknown key (else the closest
    name)."""
    if given is None:
        return {}
    if not isinstance(given, Mapping):
        raise ConfigError(field, f"must be an object, got {type(given).__name__}")
    out = {}
    for key, value in given.items():
        if key not in options:
            raise unknown_option(field, key, list(options), owner, hint(str(key)) if hint else None)
        out[key] = options[key].check(value, f"{field}.{key}")
    return out
