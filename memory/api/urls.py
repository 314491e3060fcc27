from __future__ import annotations

from django.urls import path
from drf_spectacular.views import SpectacularAPIView

from . import routes

urlpatterns = [
    path("api/schema", SpectacularAPIView.as_view(), name="api-schema"),
    *routes.urlpatterns(),
]
