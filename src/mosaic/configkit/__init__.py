"""Typed dataclass configs that validate and explain themselves.

Declare fields with :func:`option` (help text, choices, bounds); then
:func:`from_dict` builds an instance from JSON data with errors that name the
field path and the allowed values, and :func:`to_dict` gives the JSON back.
"""

from __future__ import annotations

import contextvars
import dataclasses
import difflib
import enum
import math
import re
import types
import typing
from typing import Any, Mapping, TypeVar, Union

from mosaic.errors import ConfigError, one_of
from mosaic.configkit.moved_names import where_moved

T = TypeVar("T")
_MISSING = dataclasses.MISSING
#: The class :func:`from_dict` builds at the top (a worker's run config), for an unknown key's look-up in the
#: moved-names table from inside a section.
_ROOT: contextvars.ContextVar[type | None] = contextvars.ContextVar("configkit_root", default=None)


def option(default: Any = _MISSING, *, help: str = "", choices: tuple | None = None,
           min: float | None = None, max: float | None = None, default_factory: Any = _MISSING,
           merge: bool = False, min_items: int | None = None, max_items: int | None = None,
           pattern: re.Pattern[str] | None = None, what: str = "", allowed: str = "", finite: bool = False) -> Any:
    """A dataclass field carrying its own documentation and constraints.

    ``merge``: for a section (a dataclass field) whose default instance differs from its class's defaults
    (``Resources(threads=1)``): a section given in part is laid over that instance, so the keys left out keep
    the section's defaults (``resources: {cpus: 1}`` keeps ``threads: 1``). Not for sections whose keys depend
    on each other (an env's family and its ids).

    ``min_items``/``max_items`` bound the length of a list or an object; ``pattern`` is the form a string must
    have (whole); ``finite`` refuses NaN and infinities. ``what`` names what a value must be (``"a tournament
    format"``): a value outside ``choices`` or ``pattern`` reads ``X is not WHAT; allowed: ...``. ``allowed``
    says in words what the field takes: every error of the field itself ends with ``; allowed: ALLOWED``.
    The same keywords constrain a type inside another (``list[Annotated[int, option(min=0)]]``: each item).
    """
    if merge and default_factory is _MISSING:
        raise TypeError("option(merge=True) needs a default_factory: the section's default instance")
    meta = {"help": help, "choices": choices, "min": min, "max": max, "merge": merge, "min_items": min_items,
            "max_items": max_items, "pattern": pattern, "what": what, "allowed": allowed, "finite": finite}
    if default_factory is not _MISSING:
        return dataclasses.field(default_factory=default_factory, metadata=meta)
    return dataclasses.field(default=default, metadata=meta)


def _type_name(tp: Any) -> str:
    """What a value of ``tp`` is, in words (``an integer``), for a value that fits none of a union's types."""
    origin = typing.get_origin(tp)
    if origin is typing.Annotated:
        return _type_name(typing.get_args(tp)[0])
    if origin is typing.Literal:
        return " or ".join(repr(a) for a in typing.get_args(tp))
    if tp is type(None):
        return "null"
    if dataclasses.is_dataclass(tp) or origin in (dict, Mapping):
        return "an object"
    if origin in (list, tuple):
        return "an array"
    if isinstance(tp, type):
        if issubclass(tp, enum.Enum):
            return "one of " + ", ".join(m.name for m in tp)
        return {int: "an integer", float: "a number", str: "a string", bool: "true or false",
                dict: "an object", list: "an array"}.get(tp, tp.__name__)
    return str(tp)


def _kind(tp: Any) -> str | None:
    """The JSON kind (object, array, string, number, boolean, null) a value of ``tp`` has; None: several or any."""
    origin = typing.get_origin(tp)
    if origin is typing.Annotated:
        return _kind(typing.get_args(tp)[0])
    if tp is type(None):
        return "null"
    if dataclasses.is_dataclass(tp) or origin in (dict, Mapping) or tp in (dict, Mapping):
        return "object"
    if origin in (list, tuple) or tp in (list, tuple):
        return "array"
    if isinstance(tp, type) and (tp is str or issubclass(tp, enum.Enum)):
        return "string"
    return {bool: "boolean", int: "number", float: "number"}.get(tp)


def _value_kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    return ("object" if isinstance(value, Mapping) else "array" if isinstance(value, (list, tuple)) else
            "string" if isinstance(value, str) else "number" if isinstance(value, (int, float)) else "other")


def _convert(value: Any, tp: Any, path: str) -> Any:
    origin = typing.get_origin(tp)
    if origin is typing.Annotated:  # a type with constraints of its own: Annotated[int, option(min=0)]
        base, *extras = typing.get_args(tp)
        meta = next((e.metadata for e in extras if isinstance(e, dataclasses.Field)), {})
        return _checked(meta, path, lambda: _convert(value, base, path))
    if origin is typing.Literal:
        if value in typing.get_args(tp) and not isinstance(value, bool):
            return value
        raise ConfigError(path, one_of(value, typing.get_args(tp)))
    if origin in (Union, types.UnionType):
        options = typing.get_args(tp)
        if value is None and type(None) in options:
            return None
        # a union of shapes (a number or a list): the one type of the value's JSON kind says what is wrong with it
        same_kind = [t for t in options if _kind(t) == _value_kind(value)]
        if len(same_kind) == 1:
            return _convert(value, same_kind[0], path)
        errors = []
        for option_tp in options:
            if option_tp is type(None):
                continue
            try:
                return _convert(value, option_tp, path)
            except ConfigError as exc:
                errors.append(exc)
        if len(errors) == 1:
            raise errors[0]
        raise ConfigError(path, f"{value!r} is not {' or '.join(_type_name(t) for t in options)}")
    if tp is Any:
        return value
    if dataclasses.is_dataclass(tp):
        return from_dict(tp, value, path)
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        if isinstance(value, tp):
            return value
        names = [m.name for m in tp]
        if isinstance(value, str) and value.upper() in names:
            return tp[value.upper()]
        raise ConfigError(path, one_of(value, names))
    if origin in (dict, Mapping) or tp in (dict, Mapping):
        if not isinstance(value, Mapping):
            raise ConfigError(path, f"must be an object, got {type(value).__name__}")
        args = typing.get_args(tp)
        if len(args) == 2 and typing.get_origin(args[0]) is typing.Annotated:  # keys with a form of their own
            value = {_convert(k, args[0], f"{path}.{k}"): v for k, v in value.items()}
        if len(args) == 2 and args[1] is not Any:  # typed values (e.g. dict[str, SomeConfig]) are checked too
            return {k: _convert(v, args[1], f"{path}.{k}") for k, v in value.items()}
        return dict(value)
    if origin in (list, tuple) or tp in (list, tuple):
        if not isinstance(value, (list, tuple)):
            raise ConfigError(path, f"must be an array, got {type(value).__name__}")
        args = typing.get_args(tp)
        item_tp = args[0] if args else Any
        items = [_convert(v, item_tp, f"{path}[{i}]") for i, v in enumerate(value)]
        return tuple(items) if origin is tuple else items
    if tp is bool:
        if not isinstance(value, bool):
            raise ConfigError(path, f"must be true or false, got {value!r}")
        return value
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            if isinstance(value, float) and value.is_integer():
                return int(value)
            raise ConfigError(path, f"must be an integer, got {value!r}")
        return value
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(path, f"must be a number, got {value!r}")
        return float(value)
    if tp is str:
        if not isinstance(value, str):
            raise ConfigError(path, f"must be a string, got {value!r}")
        return value
    return value


def _check_constraints(value: Any, meta: Mapping[str, Any], path: str) -> None:
    if value is None:
        return
    what, allowed = meta.get("what"), meta.get("allowed")
    choices = meta.get("choices")
    if choices and value not in choices:
        if what:
            raise ConfigError(path, f"{value!r} is not {what}; allowed: {allowed or ', '.join(map(str, choices))}")
        raise ConfigError(path, one_of(value, choices))
    pattern = meta.get("pattern")
    if pattern is not None and isinstance(value, str) and not pattern.fullmatch(value):
        raise ConfigError(path, f"{value!r} is not {what or 'of the allowed form'}; allowed: "
                                f"{allowed or pattern.pattern}")
    if meta.get("finite") and isinstance(value, float) and not math.isfinite(value):
        raise ConfigError(path, f"must be a number, got {value!r}")
    low, high = meta.get("min"), meta.get("max")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if low is not None and value < low:
            raise ConfigError(path, f"{value!r} is below the minimum {low}")
        if high is not None and value > high:
            raise ConfigError(path, f"{value!r} is above the maximum {high}")
    fewest, most = meta.get("min_items"), meta.get("max_items")
    if isinstance(value, (list, tuple, Mapping)):
        if fewest is not None and len(value) < fewest:
            raise ConfigError(path, f"needs at least {fewest} item(s), got {len(value)}")
        if most is not None and len(value) > most:
            raise ConfigError(path, f"allows at most {most} item(s), got {len(value)}")


def _checked(meta: Mapping[str, Any], path: str, make: Any) -> Any:
    """``make()``, checked against ``meta``'s constraints; an error of the field itself (not of a field inside it)
    ends with the field's ``allowed`` words, where it does not say what is allowed already."""
    try:
        value = make()
        _check_constraints(value, meta, path)
        return value
    except ConfigError as exc:
        allowed = meta.get("allowed")
        if not allowed or exc.field != path or "; allowed: " in str(exc):
            raise
        raise ConfigError(path, f"{str(exc)[len(path) + 2:]}; allowed: {allowed}") from None


def _given_or_default(f: dataclasses.Field, data: Mapping[str, Any], tp: Any, path: str) -> Any:
    """Field ``f``'s value: converted from ``data``, or its default."""
    if f.name in data:
        given = data[f.name]
        if f.metadata.get("merge") and isinstance(given, Mapping):
            given = {**to_dict(f.default_factory()), **given}  # type: ignore[misc]
        return _convert(given, tp, path)
    if f.default is not _MISSING:
        return f.default
    if f.default_factory is not _MISSING:
        return f.default_factory()
    raise ConfigError(path, "is required")


def from_dict(cls: type[T], data: Any, path: str = "") -> T:
    """Build dataclass ``cls`` from ``data``, validating every field. An unknown key's error says where its name
    moved, for a name users bring from a library (mosaic.configkit.moved_names: ``lr`` is ``learning_rate``), else the
    closest field, then lists ``cls``'s fields and, where ``cls`` has one, its ``UNKNOWN_FIELD_NOTE`` in
    parentheses (a class attribute: where the keys it does not take belong, e.g. ``"seed is the tournament's"``)."""
    where = path or "config"
    if not isinstance(data, Mapping):
        raise ConfigError(where, f"must be an object, got {type(data).__name__}")
    if not path:  # the top: where a name from the moved-names table is looked up
        token = _ROOT.set(cls)
        try:
            return _from_dict(cls, data, path)
        finally:
            _ROOT.reset(token)
    return _from_dict(cls, data, path)


def _unknown_field(cls: type, fields: Mapping[str, Any], key: Any, prefix: str) -> ConfigError:
    """The refusal of ``key``, which ``cls`` does not take: where the name moved (the moved-names table,
    mosaic.configkit.moved_names), else the closest field (difflib); then the fields allowed and ``cls``'s note."""
    moved = where_moved(f"{prefix}{key}", _ROOT.get())
    if moved:
        hint = f"; {moved}"
    else:
        close = difflib.get_close_matches(str(key), list(fields), n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
    note = getattr(cls, "UNKNOWN_FIELD_NOTE", "")
    return ConfigError(f"{prefix}{key}", f"unknown field{hint}; allowed: {', '.join(fields)}"
                                         + (f" ({note})" if note else ""))


def _from_dict(cls: type[T], data: Mapping[str, Any], path: str) -> T:
    hints = typing.get_type_hints(cls, include_extras=True)
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init}
    prefix = f"{path}." if path else ""
    for key in data:
        if key not in fields:
            raise _unknown_field(cls, fields, key, prefix)
    kwargs = {}
    for name, f in fields.items():
        field_path = f"{prefix}{name}"
        kwargs[name] = _checked(f.metadata, field_path,
                                lambda: _given_or_default(f, data, hints[name], field_path))  # noqa: B023
    return cls(**kwargs)


def to_dict(obj: Any) -> Any:
    """JSON-ready form of a config dataclass (enums by name)."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: to_dict(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, enum.Enum):
        return obj.name
    if isinstance(obj, dict):
        return {k: to_dict(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_dict(v) for v in obj]
    return obj


def explain(cls: type, path: str = "", defaults: Any = None) -> list[str]:
    """One line per field: path, type, default and help, for ``--help-config``. ``defaults``: an instance of
    ``cls`` whose values are the defaults (a section declared with ``merge``)."""
    lines = []
    hints = typing.get_type_hints(cls, include_extras=True)
    for f in dataclasses.fields(cls):
        field_path = f"{path}.{f.name}" if path else f.name
        tp = hints[f.name]
        if dataclasses.is_dataclass(tp):
            lines.extend(explain(tp, field_path, f.default_factory() if f.metadata.get("merge") else None))
            continue
        default = (getattr(defaults, f.name) if defaults is not None else
                   f.default if f.default is not _MISSING else
                   f.default_factory() if f.default_factory is not _MISSING else "(required)")
        extra = []
        if f.metadata.get("choices"):
            extra.append("one of " + ", ".join(map(str, f.metadata["choices"])))
        if f.metadata.get("min") is not None or f.metadata.get("max") is not None:
            extra.append(f"range [{f.metadata.get('min')}, {f.metadata.get('max')}]")
        note = f" ({'; '.join(extra)})" if extra else ""
        lines.append(f"{field_path} = {to_dict(default)!r}: {f.metadata.get('help', '')}{note}")
    return lines


# -- JSON Schema --------------------------------------------------------------------
def _type_schema(tp: Any) -> dict[str, Any]:
    """The JSON Schema of what :func:`_convert` accepts for ``tp``."""
    origin = typing.get_origin(tp)
    if origin is typing.Annotated:
        base, *extras = typing.get_args(tp)
        meta = next((e.metadata for e in extras if isinstance(e, dataclasses.Field)), {})
        return _constrained_schema(_type_schema(base), meta)
    if origin is typing.Literal:
        return {"enum": list(typing.get_args(tp))}
    if origin in (Union, types.UnionType):
        options = [_type_schema(t) for t in typing.get_args(tp)]
        return options[0] if len(options) == 1 else {"anyOf": options}
    if tp is type(None):
        return {"type": "null"}
    if tp is Any:
        return {}
    if dataclasses.is_dataclass(tp):
        return _object_schema(tp)
    if isinstance(tp, type) and issubclass(tp, enum.Enum):  # by name, any case
        names = [m.name for m in tp]
        return {"type": "string", "enum": names + [n.lower() for n in names if n.lower() != n]}
    if origin in (dict, Mapping) or tp in (dict, Mapping):
        args = typing.get_args(tp)
        keys = _type_schema(args[0]) if len(args) == 2 and typing.get_origin(args[0]) is typing.Annotated else {}
        return {"type": "object", **({"propertyNames": keys} if keys.get("pattern") else {}),
                **({"additionalProperties": _type_schema(args[1])} if len(args) == 2 else {})}
    if origin in (list, tuple) or tp in (list, tuple):
        args = [a for a in typing.get_args(tp) if a is not Ellipsis]
        return {"type": "array", **({"items": _type_schema(args[0])} if args else {})}
    if tp is bool:
        return {"type": "boolean"}
    if tp is int:  # an integral float (2.0) is accepted too
        return {"type": "integer"}
    if tp is float:
        return {"type": "number"}
    if tp is str:
        return {"type": "string"}
    return {}


def _object_schema(cls: type) -> dict[str, Any]:
    hints = typing.get_type_hints(cls, include_extras=True)
    properties: dict[str, Any] = {}
    required: list[str] = []
    for f in dataclasses.fields(cls):
        if not f.init:
            continue
        schema = _type_schema(hints[f.name])
        meta = f.metadata
        if meta.get("help"):
            schema["description"] = meta["help"]
        if f.default is not _MISSING:
            schema["default"] = to_dict(f.default)
        elif f.default_factory is not _MISSING:
            schema["default"] = to_dict(f.default_factory())
            if meta.get("merge"):  # a key left out of the section keeps the section's default
                schema["properties"] = {k: {**v, "default": schema["default"][k]} if k in schema["default"] else v
                                        for k, v in schema["properties"].items()}
        else:
            required.append(f.name)
        properties[f.name] = _constrained_schema(schema, meta)
    out: dict[str, Any] = {"type": "object", "properties": properties, "additionalProperties": False}
    if required:
        out["required"] = required
    if cls.__doc__ and not cls.__doc__.startswith(f"{cls.__name__}("):
        out["description"] = cls.__doc__.strip().splitlines()[0]
    return out


def _constrained_schema(schema: dict[str, Any], meta: Mapping[str, Any]) -> dict[str, Any]:
    """``schema`` with an option's constraints: choices, bounds, the number of items, a string's pattern."""
    if meta.get("choices"):  # None (when allowed) is not checked against the choices
        allowed = [to_dict(c) for c in meta["choices"]]
        schema = {"anyOf": [{"type": "null"}, {**schema, "enum": allowed}]} if "null" in json_types(schema) \
            else {**schema, "enum": allowed}
    for key, word in (("min", "minimum"), ("max", "maximum")):
        if meta.get(key) is not None:
            schema = _bounded(schema, word, meta[key])
    for key, kind, word in (("min_items", "array", "minItems"), ("max_items", "array", "maxItems"),
                            ("min_items", "object", "minProperties"), ("max_items", "object", "maxProperties"),
                            ("pattern", "string", "pattern")):
        if meta.get(key) is not None:
            bound = meta[key].pattern if key == "pattern" else meta[key]
            schema = _bounded(schema, word, bound, (kind,))
    return schema


def json_types(schema: Mapping[str, Any]) -> set[str]:
    """The JSON types a (sub)schema names, through ``anyOf``."""
    found = {schema["type"]} if isinstance(schema.get("type"), str) else set(schema.get("type") or ())
    for option in schema.get("anyOf", ()):
        found |= json_types(option)
    return found


def _bounded(schema: dict[str, Any], word: str, bound: Any, kinds: tuple[str, ...] = ("integer", "number")
             ) -> dict[str, Any]:
    """Put a bound on the branch(es) of ``schema`` of the JSON types ``kinds`` (by default the numeric ones)."""
    if "anyOf" in schema:
        return {**schema, "anyOf": [_bounded(dict(o), word, bound, kinds) if json_types(o) & set(kinds)
                                    else o for o in schema["anyOf"]]}
    return {**schema, word: bound} if json_types(schema) & set(kinds) else schema


def json_schema(cls: type, *, title: str | None = None) -> dict[str, Any]:
    """JSON Schema (2020-12) of the JSON that :func:`from_dict` accepts for ``cls``.

    Types from the annotations, ``description`` from ``help``, ``default``,
    ``enum`` from ``choices`` (enums: their names, in either case), ``minimum``
    and ``maximum`` from the bounds, ``required`` for fields without a default,
    and no unknown keys. Checks a config class makes in code beyond its fields
    (one field against another) are not in it.
    """
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", **({"title": title} if title else {}),
            **_object_schema(cls)}


# -- documents and paths -------------------------------------------------------------------------------
class _RepeatedKey(ValueError):
    """A JSON object or YAML mapping that gives one key twice (both parsers would keep the last silently)."""

    def __init__(self, key: Any, line: int = 0) -> None:
        super().__init__(f"the key {key!r} is given twice")
        self.key, self.line = key, line


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """``json.loads``' object hook: the object, or :class:`_RepeatedKey` for a key given twice."""
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _RepeatedKey(key)
        out[key] = value
    return out


def _unique_key_loader() -> Any:
    """PyYAML's SafeLoader, refusing a mapping that gives one key twice (a merge key's keys may be overridden)."""
    import yaml

    class UniqueKeyLoader(yaml.SafeLoader):
        def construct_mapping(self, node: Any, deep: bool = False) -> Any:
            if isinstance(node, yaml.MappingNode):
                seen: set[Any] = set()
                for key_node, _ in node.value:
                    if key_node.tag == "tag:yaml.org,2002:merge":
                        continue
                    key = self.construct_object(key_node, deep=deep)
                    try:
                        repeated = key in seen
                        seen.add(key)
                    except TypeError:  # an unhashable key: PyYAML refuses it itself
                        continue
                    if repeated:
                        raise _RepeatedKey(key, key_node.start_mark.line + 1)
            return super().construct_mapping(node, deep=deep)

    return UniqueKeyLoader


def read_document(source: "str | Any", what: str = "config", stdin: Any = None) -> dict[str, Any]:
    """The JSON (or, for a ``.yaml``/``.yml`` path, YAML) object in ``source`` (a path, or ``-`` for stdin);
    :class:`UserError` naming ``what`` for anything wrong."""
    import json
    import sys
    from pathlib import Path

    from mosaic.errors import UserError

    name = str(source)
    try:
        text = (stdin or sys.stdin).read() if name == "-" else Path(name).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UserError(f"{what}: file {name!r} does not exist") from None
    except IsADirectoryError:
        raise UserError(f"{what}: {name!r} is a directory, expected a JSON or YAML file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"{what}: cannot read {name!r}: {exc}") from None
    if name.lower().endswith((".yaml", ".yml")):
        try:
            import yaml
        except ImportError:
            raise UserError(f"{what}: reading YAML needs PyYAML: pip install 'mosaic-marl[experiments]'") from None
        try:
            data = yaml.load(text, Loader=_unique_key_loader())  # noqa: S506  (a SafeLoader's subclass)
        except _RepeatedKey as exc:
            raise UserError(f"{what}: {name!r} gives the key {exc.key!r} twice (line {exc.line}): the second "
                            "would silently replace the first; allowed: each key once") from None
        except yaml.YAMLError as exc:
            raise UserError(f"{what}: {name!r} is not valid YAML ({str(exc).splitlines()[0]})") from None
    else:
        try:
            data = json.loads(text, object_pairs_hook=_unique_keys)
        except _RepeatedKey as exc:
            raise UserError(f"{what}: {name!r} gives the key {exc.key!r} twice: the second would silently replace "
                            "the first; allowed: each key once") from None
        except ValueError as exc:
            raise UserError(f"{what}: {name!r} is not valid JSON ({exc})") from None
    if not isinstance(data, dict):
        kind = "a YAML mapping" if name.lower().endswith((".yaml", ".yml")) else "a JSON object"
        raise UserError(f"{what}: {name!r} must hold {kind}, got {type(data).__name__}")
    return data


_REQUIRED = object()


def get_path(data: Any, path: str, default: Any = _REQUIRED) -> Any:
    """The value at dotted ``path`` ``a.b.c``: ``data[a][b][c]`` through mappings, ``data.a.b.c`` through dataclass
    instances (a config object). ``default`` where a mapping lacks the key or a value on the way is neither a
    mapping nor a dataclass (without a ``default``: :class:`KeyError` naming the path); a dataclass's unknown
    field is always an :class:`AttributeError` (a wrong path in code, not missing data)."""
    node = data
    for part in path.split("."):
        if isinstance(node, Mapping) and part in node:
            node = node[part]
        elif dataclasses.is_dataclass(node) and not isinstance(node, type):
            node = getattr(node, part)
        elif default is _REQUIRED:
            raise KeyError(path)
        else:
            return default
    return node


def set_path(data: dict[str, Any], path: str, value: Any, what: str = "") -> None:
    """``data[a][b][c] = value`` for ``path`` ``a.b.c``, making the objects on the way; :class:`UserError` if a
    part of the way is not an object (``what`` prefixes the message, e.g. ``--set``)."""
    from mosaic.errors import UserError

    parts = path.split(".")
    if not path or any(not part for part in parts):
        raise UserError(f"{what}{': ' if what else ''}{path!r} is not a path; allowed: dotted field names")
    node = data
    for part in parts[:-1]:
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            raise UserError(f"{what}{': ' if what else ''}{path!r}: {part!r} is not an object in the config")
        node = child
    node[parts[-1]] = value


def json_object(text: str, what: str) -> dict[str, Any]:
    """``text`` parsed as a JSON object; :class:`UserError` naming ``what`` (a flag, a field) otherwise."""
    import json

    from mosaic.errors import UserError

    try:
        value = json.loads(text)
    except ValueError as exc:
        raise UserError(f"{what}: not JSON ({exc})") from None
    if not isinstance(value, dict):
        raise UserError(f"{what}: expected a JSON object")
    return value
