"""Who may call the API. TCP requests need the bearer token in $COMPOZY_HOME/token (created on first use, mode
0600). Requests over the Unix socket are trusted: the socket file is 0600, so reaching it is the credential."""

from __future__ import annotations

import hmac
import os
import secrets
import socket
from pathlib import Path

from rest_framework.authentication import BaseAuthentication
from rest_framework.exceptions import AuthenticationFailed
from rest_framework.request import Request

from compozy.config import compozy_home
from compozy.home import private_dir
from memory.domain.enums import Origin


def token_path() -> Path:
    return compozy_home() / "token"


_cached: dict[str, tuple[int, str]] = {}


def read_or_create_token() -> str:
    """The token, re-read only when the file changes (a rotation takes effect on the next request)."""
    path = token_path()
    try:
        stamp = path.stat().st_mtime_ns
    except FileNotFoundError:
        rotate_token()
        stamp = path.stat().st_mtime_ns
    cached = _cached.get(str(path))
    if cached is not None and cached[0] == stamp:
        return cached[1]
    token = path.read_text().strip()
    _cached[str(path)] = (stamp, token)
    return token


def rotate_token() -> str:
    """Write a new token atomically, readable by its owner only."""
    path = token_path()
    private_dir(path.parent)
    token = secrets.token_urlsafe(32)
    temp = path.with_name(f".token.{os.getpid()}.{secrets.token_hex(4)}.compozy-tmp")
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(token + "\n")
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temp, path)
    return token


def request_origin(request) -> Origin:  # noqa: ANN001 - a Django or DRF request
    environ = getattr(request, "META", {})
    sock = environ.get("gunicorn.socket")
    if sock is not None and getattr(sock, "family", None) == socket.AF_UNIX:
        return Origin.UDS
    return Origin.HTTP


class LocalPrincipal:
    is_authenticated = True

    def __init__(self, origin: Origin) -> None:
        self.origin = origin


class BearerOrSocketAuthentication(BaseAuthentication):
    def authenticate(self, request: Request):  # noqa: ANN201
        origin = request_origin(request._request)
        if origin is Origin.UDS:
            return LocalPrincipal(origin), None
        header = request.META.get("HTTP_AUTHORIZATION", "")
        scheme, _, supplied = header.partition(" ")
        if scheme.lower() != "bearer" or not supplied:
            return None
        if not hmac.compare_digest(supplied.strip().encode(), read_or_create_token().encode()):
            raise AuthenticationFailed("The bearer token is not valid.")
        return LocalPrincipal(origin), supplied

    def authenticate_header(self, request: Request) -> str:
        return 'Bearer realm="compozy"'
