"""The API's one body parser: DRF's JSON parser, with input it cannot decode turned into a parse error."""

from __future__ import annotations

from typing import Any

from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser


class SafeJSONParser(JSONParser):
    """JSON nested deeper than the interpreter's recursion limit (`[` × 100,000 fits in 1 MiB) makes the json
    module raise RecursionError, which DRF does not catch: it became an HTML 500. It is malformed input like any
    other, so it is a 400 `memory.validation` (reason `json`)."""

    def parse(self, stream: Any, media_type: str | None = None, parser_context: dict[str, Any] | None = None) -> Any:
        try:
            return super().parse(stream, media_type, parser_context)
        except RecursionError:
            raise ParseError("JSON nested too deeply.") from None
