"""The one place HTTP turns errors into `{code, message, details}`, with the HTTP status each error class
declares (`memory/domain/errors.py`)."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import RequestDataTooBig
from rest_framework import exceptions as drf
from rest_framework.response import Response

from memory.domain.errors import CompozyError, NotFound, Unauthorized, ValidationError


def _body(error: CompozyError, status: int | None = None) -> Response:
    return Response(error.to_dict(), status=status or error.http_status)


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    if isinstance(exc, CompozyError):
        return _body(exc)
    if isinstance(exc, drf.NotAuthenticated | drf.AuthenticationFailed):
        response = _body(Unauthorized(str(exc.detail), details={"reason": "token"}))
        response["WWW-Authenticate"] = 'Bearer realm="compozy"'
        return response
    if isinstance(exc, drf.UnsupportedMediaType):
        return _body(ValidationError("Send JSON with Content-Type: application/json.",
                                     details={"reason": "content_type"}), 415)
    if isinstance(exc, drf.ParseError):
        return _body(ValidationError("The request body is not valid JSON.", details={"reason": "json"}), 400)
    if isinstance(exc, RequestDataTooBig):
        return _body(ValidationError("The request body is larger than 1 MiB.", details={"reason": "too_large"}), 413)
    if isinstance(exc, drf.MethodNotAllowed):
        return _body(ValidationError(f"Method {exc.args[0] if exc.args else ''} is not allowed here.",
                                     details={"reason": "method"}), 405)
    if isinstance(exc, drf.NotFound):
        return _body(NotFound("No such route.", details={"reason": "route"}))
    if isinstance(exc, drf.APIException):
        return _body(ValidationError(str(exc.detail), details={"reason": exc.default_code}), exc.status_code)
    return None  # unknown exceptions are real 500s
