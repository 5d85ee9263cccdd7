"""Who may talk to the daemon: the token rules and the interceptor enforcing them.

On loopback the daemon is as private as the user's shell, so no token is
needed (unless asked for with ``--require-token``). Anything else needs one:
``MOSAIC_TOKEN``, else the token file under ``MOSAIC_HOME`` (created with a
fresh random token, mode 0600, if missing). A token that anyone else could
read is refused: the daemon does not start rather than serve with it.
"""

from __future__ import annotations

import hmac
import ipaddress
import os
import secrets
from pathlib import Path
from typing import Any, Awaitable, Callable, Mapping

import grpc

from mosaic.errors import UserError

METADATA_KEY = "authorization"
MIN_TOKEN_CHARS = 16


def is_loopback(host: str) -> bool:
    """True only for addresses that never leave this machine (127.0.0.0/8, ::1, localhost)."""
    if host.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def token_required(host: str, require_token: bool = False) -> bool:
    return require_token or not is_loopback(host)


def read_token_file(path: Path) -> str | None:
    """The stored token, or None if there is no file; refuses a file others can read."""
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        return None
    if mode & 0o077:
        raise UserError(f"token file {path} is readable by others (mode {mode & 0o777:o}); "
                        f"run `chmod 600 {path}`")
    token = path.read_text(encoding="utf-8").strip()
    if len(token) < MIN_TOKEN_CHARS:
        raise UserError(f"token file {path} holds no usable token (at least {MIN_TOKEN_CHARS} characters)")
    return token


def resolve_token(host: str, token_path: Path, require_token: bool = False,
                  env: Mapping[str, str] | None = None) -> str | None:
    """The token the daemon will demand, or None when calls need none."""
    if not token_required(host, require_token):
        return None
    env = os.environ if env is None else env
    token = env.get("MOSAIC_TOKEN")
    if token is not None:
        if len(token.strip()) < MIN_TOKEN_CHARS:
            raise UserError(f"MOSAIC_TOKEN: must be at least {MIN_TOKEN_CHARS} characters "
                            f"to serve on {host}")
        return token.strip()
    token = read_token_file(token_path)
    if token is not None:
        return token
    token_path.parent.mkdir(parents=True, exist_ok=True)
    token = secrets.token_urlsafe(32)
    fd = os.open(token_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(token + "\n")
    return token


def client_token(token_path: Path, env: Mapping[str, str] | None = None) -> str | None:
    """What a client on this machine sends: MOSAIC_TOKEN, else the daemon's token file."""
    env = os.environ if env is None else env
    if env.get("MOSAIC_TOKEN"):
        return env["MOSAIC_TOKEN"].strip()
    try:
        return read_token_file(token_path)
    except (UserError, OSError):
        return None


def call_metadata(token: str | None) -> tuple[tuple[str, str], ...]:
    return ((METADATA_KEY, f"Bearer {token}"),) if token else ()


class TokenInterceptor(grpc.aio.ServerInterceptor):
    """Rejects every call whose ``authorization`` metadata is not ``Bearer <token>``."""

    def __init__(self, token: str) -> None:
        self._expected = f"Bearer {token}".encode()

    async def intercept_service(
        self, continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:
        handler = await continuation(details)
        given = ""
        for key, value in details.invocation_metadata or ():
            if key == METADATA_KEY:
                given = value if isinstance(value, str) else value.decode("latin-1")
        if hmac.compare_digest(given.encode(), self._expected) or handler is None:
            return handler
        return _deny(handler)


def _deny(handler: grpc.RpcMethodHandler) -> grpc.RpcMethodHandler:
    message = "a valid token is required (metadata 'authorization: Bearer <token>')"

    async def deny(request: Any, context: grpc.aio.ServicerContext) -> Any:
        await context.abort(grpc.StatusCode.UNAUTHENTICATED, message)

    async def deny_stream(request: Any, context: grpc.aio.ServicerContext) -> Any:
        await context.abort(grpc.StatusCode.UNAUTHENTICATED, message)
        yield  # pragma: no cover  (makes this an async generator)

    if handler.response_streaming:
        return grpc.unary_stream_rpc_method_handler(
            deny_stream, request_deserializer=handler.request_deserializer,
            response_serializer=handler.response_serializer)
    return grpc.unary_unary_rpc_method_handler(
        deny, request_deserializer=handler.request_deserializer,
        response_serializer=handler.response_serializer)
