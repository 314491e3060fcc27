from __future__ import annotations

import io
import os
from typing import Any

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "compozy.settings")

from django.conf import settings  # noqa: E402
from django.core.wsgi import get_wsgi_application  # noqa: E402

django_application = get_wsgi_application()


def application(environ: dict[str, Any], start_response: Any) -> Any:
    """Django reads a body by its Content-Length, which a chunked request does not send: its body was read as
    empty ("Missing content"). gunicorn has already decoded the chunks, so the body is read here, at most one byte
    past the 1 MiB limit, and handed on with its length: a body over the limit is then refused by Django's own
    check (413 memory.validation, reason too_large), exactly as when the client had sent a Content-Length."""
    if not environ.get("CONTENT_LENGTH") and "chunked" in environ.get("HTTP_TRANSFER_ENCODING", "").lower():
        body = environ["wsgi.input"].read(settings.DATA_UPLOAD_MAX_MEMORY_SIZE + 1)
        environ["wsgi.input"] = io.BytesIO(body)
        environ["CONTENT_LENGTH"] = str(len(body))
    return django_application(environ, start_response)


# A server is a process that can write: migrate a fresh home and replay unapplied decisions before serving.
from memory.bootstrap import bootstrap  # noqa: E402

bootstrap()
