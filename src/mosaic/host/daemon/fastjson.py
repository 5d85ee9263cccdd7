"""A faster :func:`mosaic.workerkit.telemetry.parse_line` for the daemon's hot path.

Parsing is most of what the telemetry proxy spends per event. When orjson is
installed (it comes with the ``daemon`` extra) well-formed events are parsed
with it; everything it does not accept (NaN, huge integers, lone surrogates,
deep nesting, non-events, garbage) goes to the core parser, so the result is
the same event either way. Without orjson this is ``parse_line`` itself.
"""

from __future__ import annotations

from typing import Any, Callable

from mosaic.workerkit.telemetry import MAX_LINE_BYTES, parse_line


def _make() -> Callable[[bytes | str], dict[str, Any]]:
    try:
        import orjson
    except ImportError:
        return parse_line
    loads, error = orjson.loads, orjson.JSONDecodeError

    def parse(line: bytes | str) -> dict[str, Any]:
        if len(line) <= MAX_LINE_BYTES:
            try:
                event = loads(line)
            except error:
                return parse_line(line)
            if type(event) is dict and type(event.get("type")) is str:
                return event
        return parse_line(line)

    return parse


parse_event_line = _make()
