"""Errors the daemon reports to clients, mapped to gRPC status codes by the service."""

from __future__ import annotations

import re

from mosaic.errors import UserError

_FIELD = re.compile(r"^([A-Za-z_][\w.\[\]-]*): (.+)$", re.S)


class NotFound(UserError):
    """No such run (NOT_FOUND)."""


class Conflict(UserError):
    """The run is not in a state that allows this (FAILED_PRECONDITION)."""


class ConfigRejected(UserError):
    """A submitted config is invalid; no run was created (INVALID_ARGUMENT)."""

    def __init__(self, errors: list[tuple[str, str]]) -> None:
        self.errors = errors
        super().__init__("; ".join(f"{f}: {m}" if f else m for f, m in errors))


def split_field(message: str, default: str = "config") -> tuple[str, str]:
    """``"training.lr: must be > 0"`` → ``("training.lr", "must be > 0")``."""
    match = _FIELD.match(message.strip())
    return (match.group(1), match.group(2)) if match else (default, message.strip())
