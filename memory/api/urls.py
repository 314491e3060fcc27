from __future__ import annotations

from django.urls import path
from drf_spectacular.views import SpectacularAPIView

from . import views

urlpatterns = [
    path("api/schema", SpectacularAPIView.as_view(), name="api-schema"),
    path("api/memory", views.MemoryCollection.as_view(), name="memory-collection"),
    path("api/memory/search", views.Search.as_view(), name="memory-search"),
    path("api/memory/decisions", views.DecisionCollection.as_view(), name="memory-decisions"),
    path("api/memory/decisions/prune", views.DecisionPrune.as_view(), name="memory-decisions-prune"),
    path("api/memory/decisions/<str:decision_id>", views.DecisionItem.as_view(), name="memory-decision"),
    path("api/memory/decisions/<str:decision_id>/revert", views.DecisionRevert.as_view(), name="memory-revert"),
    path("api/memory/history", views.History.as_view(), name="memory-history"),
    path("api/memory/health", views.Health.as_view(), name="memory-health"),
    path("api/memory/reindex", views.Reindex.as_view(), name="memory-reindex"),
    path("api/memory/promote", views.Promote.as_view(), name="memory-promote"),
    path("api/memory/ad-hoc", views.Note.as_view(), name="memory-note"),
    # Last: the filename is captured whole (slashes and dots included) so the service rejects traversal with
    # memory.validation instead of the router answering 404.
    path("api/memory/<path:filename>", views.MemoryItem.as_view(), name="memory-item"),
]
