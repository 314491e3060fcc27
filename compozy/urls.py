from __future__ import annotations

from django.http import JsonResponse
from django.urls import include, path
from django.views.generic import RedirectView


def healthz(request):  # noqa: ANN001, ANN201
    """Liveness only: the process answers. Memory health is `memory health`."""
    return JsonResponse({"status": "ok"})


urlpatterns = [
    path("healthz", healthz),
    path("", RedirectView.as_view(url="/inspector/", permanent=False)),
    path("inspector/", include("inspector.urls")),
    path("", include("memory.api.urls")),
]

handler404 = "memory.api.views.api_not_found"
