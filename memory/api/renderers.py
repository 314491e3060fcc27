"""The API's one renderer: DRF's JSON renderer, which never fails on text that is not valid Unicode."""

from __future__ import annotations

import json
from typing import Any

from rest_framework.renderers import JSONRenderer


class SafeJSONRenderer(JSONRenderer):
    """A lone surrogate anywhere in a document (an error echoing what the client sent, a value read back) cannot be
    encoded as UTF-8: the renderer raised, and the answer became an HTML 500 in place of the document. Such a
    document is written with JSON's ASCII escapes instead, which any JSON reader decodes."""

    def render(self, data: Any, accepted_media_type: str | None = None, renderer_context: Any = None) -> bytes:
        try:
            return super().render(data, accepted_media_type, renderer_context)
        except UnicodeEncodeError:
            return json.dumps(data, ensure_ascii=True, cls=self.encoder_class,
                              separators=(",", ":")).encode("ascii")
