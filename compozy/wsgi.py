from __future__ import annotations

import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "compozy.settings")

from django.core.wsgi import get_wsgi_application  # noqa: E402

application = get_wsgi_application()

# A server is a process that can write: migrate a fresh home and replay unapplied decisions before serving.
from memory.bootstrap import bootstrap  # noqa: E402

bootstrap()
