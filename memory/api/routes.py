"""The REST routes, generated from the verbs' declarations (`memory.verbs`): one DRF view per path, one handler
per method, each parsing the path, the query (GET, DELETE) or the JSON body (POST, PATCH) into the verb's input
model, calling its service once and returning its result model as JSON."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from django.urls import URLPattern, path
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from memory.verbs import Route, Verb, all_verbs

from .schema import documented
from .views import body, caller_of, query_params


def _handler(verb: Verb, route: Route) -> Any:
    def handle(self: APIView, request: Request, **path_fields: str) -> Response:
        fields = body(request) if route.has_body else query_params(request)
        return Response(verb.run({**fields, **path_fields}, caller_of(request)).to_json())

    handle.__name__ = route.method.lower()
    return documented(verb, route)(handle)


def _django_path(route_path: str) -> str:
    # A filename is captured whole (slashes and dots included) so the service refuses traversal with
    # memory.validation instead of the router answering 404.
    converted = route_path.lstrip("/").replace("{filename}", "<path:filename>")
    return converted.replace("{", "<str:").replace("}", ">")


def urlpatterns() -> list[URLPattern]:
    by_path: dict[str, dict[str, Any]] = defaultdict(dict)
    for verb in all_verbs():
        for route in verb.routes:
            by_path[route.path][route.method.lower()] = _handler(verb, route)
    patterns = []
    any_id = []
    # Literal paths first and the catch-all filename last, so /api/memory/search is never read as a filename.
    for route_path in sorted(by_path, key=lambda p: ("{filename}" in p, p.count("{"), p)):
        name = "".join(part.title() for part in route_path.replace("{", "").replace("}", "").split("/")[2:])
        view = type(f"{name or 'Root'}View", (APIView,), by_path[route_path])
        if "{filename}" in route_path:
            patterns.extend(any_id)
            any_id = []
        patterns.append(path(_django_path(route_path), view.as_view(), name=route_path))
        if route_path.endswith("}") and "{filename}" not in route_path:
            # An id with an encoded slash (`decisions/..%2f..%2fx`) is still this route's id, which its input
            # refuses: it must never fall through to the memory-item catch-all. Left out of the schema, which
            # already documents the route.
            catch_all = type(f"{name}AnyIdView", (view,), {"schema": None})
            any_id.append(path(_django_path(route_path).replace("<str:", "<path:"), catch_all.as_view(),
                               name=f"{route_path}#any"))
    return patterns + any_id
