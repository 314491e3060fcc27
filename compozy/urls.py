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

def not_found(request, exception=None):  # noqa: ANN001, ANN201
    """JSON for the API (the `{code, message, details}` document), a page for people in the inspector."""
    if request.path.startswith("/inspector/"):
        from inspector.views import page_not_found

        return page_not_found(request)
    from memory.api.views import api_not_found

    return api_not_found(request, exception)


handler404 = not_found
