from __future__ import annotations

from django.apps import AppConfig


class InspectorConfig(AppConfig):
    """The server-rendered Memory inspector. It imports memory.services only."""

    name = "inspector"
