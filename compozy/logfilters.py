"""Logging filters named in settings.LOGGING."""

from __future__ import annotations

import logging


class WithoutTraceback(logging.Filter):
    """Keeps the record's message and drops its traceback: for refusals that are expected, not failures."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.exc_info = None
        record.exc_text = None
        return True
