from __future__ import annotations

from django.http import JsonResponse
from django.urls import include, path
from django.views.generic import RedirectView


def healthz(request):  # noqa: ANN001, ANN201
    """Liveness only: the process answers. Memory health is `memory health`."""
    return JsonResponse({"status": "ok"})


urlpatterns = [
    path("healthz", healthz),
    # Browsers ask for /favicon.ico on their own (an API response, a JSON file): the inspector's icon answers.
    path("favicon.ico", RedirectView.as_view(url="/static/favicon.svg", permanent=True)),
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


def bad_request(request, exception=None):  # noqa: ANN001, ANN201
    """A request Django refused before any view (a Host header outside ALLOWED_HOSTS, a malformed request line):
    the error document under /api, Django's page elsewhere. Django logs it once, as one line (settings.LOGGING
    drops the traceback)."""
    from django.core.exceptions import DisallowedHost

    if request.path.startswith("/inspector/") or request.path.startswith("/static/"):
        from django.views.defaults import bad_request as page

        return page(request, exception)
    from memory.domain.errors import ValidationError

    reason = "host" if isinstance(exception, DisallowedHost) else "bad_request"
    message = "The Host header is not one this service answers to." if reason == "host" else "Bad request."
    return JsonResponse(ValidationError(message, details={"reason": reason}).to_dict(), status=400)


def server_error(request):  # noqa: ANN001, ANN201
    """An unhandled exception: still the error document (memory.internal) under /api, never an HTML page. The
    traceback is in the log."""
    if request.path.startswith("/inspector/") or request.path.startswith("/static/"):
        from django.views.defaults import server_error as page

        return page(request)
    from memory.domain.errors import CompozyError

    error = CompozyError("Internal error; the server log has the details.")
    return JsonResponse(error.to_dict(), status=500)


handler400 = bad_request
handler404 = not_found
handler500 = server_error
