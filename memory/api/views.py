"""What every HTTP and UDS handler shares: who is calling, the query and body as fields, and the JSON 404. The
handlers themselves are generated from the verbs' declarations (`memory.api.routes`)."""

from __future__ import annotations

from typing import Any

from django.http import JsonResponse
from rest_framework.request import Request

from memory.domain.errors import NotFound, ValidationError
from memory.services.inputs import Caller

from .auth import request_origin


def caller_of(request: Request) -> Caller:
    session = request.META.get("HTTP_X_COMPOZY_SESSION") or None
    return Caller(origin=request_origin(request._request), cwd=None, session_id=session)


def query_params(request: Request) -> dict[str, Any]:
    params: dict[str, Any] = {}
    for key in request.query_params:
        values = request.query_params.getlist(key)
        params[key] = values[0] if len(values) == 1 else values
    return params


def body(request: Request) -> dict[str, Any]:
    data = request.data
    if not isinstance(data, dict):
        raise ValidationError("The request body must be a JSON object.", details={"reason": "json_type"})
    return dict(data)


def api_not_found(request, exception=None):  # noqa: ANN001, ANN201
    error = NotFound("No such route.", details={"reason": "route", "path": request.path})
    return JsonResponse(error.to_dict(), status=404)
