"""HTTP and UDS adapters: parse the request into the service's input model, call one service, return its
result model as JSON. The body is the same document the CLI prints with `-o json`."""

from __future__ import annotations

from typing import Any

from django.http import JsonResponse
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from memory.domain.errors import NotFound, ValidationError
from memory.services import catalog, decisions, history, memories, promote, propose, recall
from memory.services import results as v
from memory.services.inputs import Caller

from .auth import request_origin
from .schema import documented


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


def ok(result: Any) -> Response:
    return Response(result.to_json())


class MemoryCollection(APIView):
    @documented(response=v.MemoryList, query=memories.ListInput, summary="List memories")
    def get(self, request: Request) -> Response:
        data = memories.ListInput.parse(query_params(request))
        return ok(memories.memory_list(data=data, caller=caller_of(request)))

    @documented(response=v.WriteResult, body=memories.WriteInput, summary="Write a memory")
    def post(self, request: Request) -> Response:
        data = memories.WriteInput.parse(body(request))
        return ok(memories.memory_write(data=data, caller=caller_of(request)))


class MemoryItem(APIView):
    @documented(response=v.MemoryShow, query=memories.ShowInput, path_fields={"filename"}, summary="Show a memory")
    def get(self, request: Request, filename: str) -> Response:
        data = memories.ShowInput.parse({**query_params(request), "filename": filename})
        return ok(memories.memory_show(data=data, caller=caller_of(request)))

    @documented(response=v.WriteResult, body=memories.EditInput, path_fields={"filename"}, summary="Edit a memory")
    def patch(self, request: Request, filename: str) -> Response:
        data = memories.EditInput.parse({**body(request), "filename": filename})
        return ok(memories.memory_edit(data=data, caller=caller_of(request)))

    @documented(response=v.WriteResult, query=memories.DeleteInput, path_fields={"filename"},
                summary="Delete a memory")
    def delete(self, request: Request, filename: str) -> Response:
        data = memories.DeleteInput.parse({**query_params(request), "filename": filename})
        return ok(memories.memory_delete(data=data, caller=caller_of(request)))


class Search(APIView):
    @documented(response=v.SearchResult, body=recall.SearchInput, summary="Recall memories for a query")
    def post(self, request: Request) -> Response:
        data = recall.SearchInput.parse(body(request))
        return ok(recall.memory_search(data=data, caller=caller_of(request)))


class DecisionCollection(APIView):
    @documented(response=v.DecisionList, query=decisions.DecisionListInput, summary="List decisions")
    def get(self, request: Request) -> Response:
        data = decisions.DecisionListInput.parse(query_params(request))
        return ok(decisions.decision_list(data=data, caller=caller_of(request)))


class DecisionItem(APIView):
    @documented(response=v.DecisionShow, query=decisions.DecisionIdInput, path_fields={"decision_id"},
                summary="Show a decision")
    def get(self, request: Request, decision_id: str) -> Response:
        data = decisions.DecisionIdInput.parse({**query_params(request), "decision_id": decision_id})
        return ok(decisions.decision_show(data=data, caller=caller_of(request)))


class DecisionRevert(APIView):
    @documented(response=v.RevertResult, body=decisions.RevertInput, path_fields={"decision_id"},
                summary="Revert a decision")
    def post(self, request: Request, decision_id: str) -> Response:
        data = decisions.RevertInput.parse({**body(request), "decision_id": decision_id})
        return ok(decisions.decision_revert(data=data, caller=caller_of(request)))


class DecisionPrune(APIView):
    @documented(response=v.PruneResult, body=decisions.PruneInput, summary="Prune old applied decisions")
    def post(self, request: Request) -> Response:
        data = decisions.PruneInput.parse(body(request))
        return ok(decisions.decision_prune(data=data, caller=caller_of(request)))


class History(APIView):
    @documented(response=v.HistoryList, query=history.HistoryInput, summary="Operation history")
    def get(self, request: Request) -> Response:
        data = history.HistoryInput.parse(query_params(request))
        return ok(history.history_list(data=data, caller=caller_of(request)))


class Health(APIView):
    @documented(response=v.Health, query=catalog.HealthInput, summary="Catalog health")
    def get(self, request: Request) -> Response:
        data = catalog.HealthInput.parse(query_params(request))
        return ok(catalog.health_get(data=data, caller=caller_of(request)))


class Reindex(APIView):
    @documented(response=v.ReindexResult, body=catalog.ReindexInput, summary="Reindex from disk")
    def post(self, request: Request) -> Response:
        data = catalog.ReindexInput.parse(body(request))
        return ok(catalog.catalog_reindex(data=data, caller=caller_of(request)))


class Promote(APIView):
    @documented(response=v.WriteResult, body=promote.PromoteInput, summary="Promote a memory to another scope")
    def post(self, request: Request) -> Response:
        data = promote.PromoteInput.parse(body(request))
        return ok(promote.memory_promote(data=data, caller=caller_of(request)))


class Note(APIView):
    @documented(response=v.WriteResult, body=propose.NoteInput, summary="Write an ad-hoc note")
    def post(self, request: Request) -> Response:
        data = propose.NoteInput.parse(body(request))
        return ok(propose.memory_note(data=data, caller=caller_of(request)))


def api_not_found(request, exception=None):  # noqa: ANN001, ANN201
    error = NotFound("No such route.", details={"reason": "route", "path": request.path})
    return JsonResponse(error.to_dict(), status=404)
