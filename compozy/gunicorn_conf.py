"""gunicorn settings for `compozy serve`. The Unix socket must be private to its owner."""

from __future__ import annotations

import os

umask = 0o177  # the socket file is created 0600: access to it is the UDS credential
worker_class = "gthread"
workers = 2  # both cores; threads absorb slow requests without a worker timeout killing them
threads = 4
timeout = 60
accesslog = None
# gunicorn 27 opens a control socket under $HOME by default; two instances would fight over it.
control_socket_disable = True


def when_ready(server) -> None:  # noqa: ANN001 - gunicorn's hook signature
    for listener in server.LISTENERS:
        address = listener.cfg_addr if hasattr(listener, "cfg_addr") else None
        if isinstance(address, str) and os.path.exists(address):
            os.chmod(address, 0o600)
