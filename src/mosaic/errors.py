"""User-facing errors: reported as one line with exit code 2, never a traceback."""

from __future__ import annotations


class UserError(Exception):
    """A mistake in what the user asked for (config, arguments, run names)."""

    exit_code = 2


class ConfigError(UserError):
    """An invalid configuration value; the message starts with the field path."""

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        super().__init__(f"{field}: {message}" if field else message)


def one_of(value: object, allowed: "list[str] | tuple[str, ...]") -> str:
    """The standard wording for an enum violation."""
    return f"{value!r} is not one of {', '.join(str(a) for a in allowed)}"


class StorageError(UserError):
    """MOSAIC_HOME cannot be written (a full disk, a read-only or vanished folder): one line naming the folder
    and the cause, exit 1; whatever was running there was stopped first."""

    exit_code = 1
