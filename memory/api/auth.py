"""Who may call the API. TCP requests need the bearer token in $COMPOZY_HOME/token (created on first use, mode
0600; the file is the home's, `compozy/home.py`). Requests over the Unix socket are trusted: the socket file is
0600, so reaching it is the credential."""

from __future__ import annotations

import hmac
import socket

from rest_framework.authentication import BaseAuthentication
from rest_framework.exceptions import AuthenticationFailed
from rest_framework.request import Request

from compozy.home import read_or_create_token
from memory.domain.enums import Origin


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
