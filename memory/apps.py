from __future__ import annotations

import logging

from django.apps import AppConfig


class MemoryConfig(AppConfig):
    name = "memory"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Settings tightened the home before logging was configured; say so here, once, in this process's log.
        from django.conf import settings

        from compozy.home import tightened, tightened_message

        message = tightened_message(settings.COMPOZY_HOME)
        if message:
            logging.getLogger("compozy.home").warning(message)
            tightened.clear()

        from memory.services.extractor import connect_signals
        from memory.services.sync import connect_signals as connect_sync

        connect_signals()
        connect_sync()
