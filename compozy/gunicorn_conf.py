"""gunicorn settings for `compozy serve`. The Unix socket must be private to its owner."""

from __future__ import annotations

import os

umask = 0o177  # the socket file is created 0600: access to it is the UDS credential
# gunicorn's gthread worker, answering the requests gunicorn refuses itself (414, 431, 400) with JSON errors.
worker_class = "compozy.gunicorn_worker.JsonErrorWorker"
workers = 2  # both cores; threads absorb slow requests without a worker timeout killing them
threads = 4
timeout = 60
# Idle keep-alive connections stay open for 75 s (nginx's default), longer than clients keep theirs (httpx 5 s,
# aiohttp 15 s): the client then closes an idle connection first. With gunicorn's default of 2 s the server
# closed connections clients were about to reuse, and a request sent at that moment was lost (httpx:
# RemoteProtocolError/ReadError; seen under 8 concurrent clients in bench/api_bench.py). An idle connection
# costs the gthread worker a file descriptor in its poller, not a thread.
keepalive = 75
accesslog = None
# gunicorn 27 opens a control socket under $HOME by default; two instances would fight over it.
control_socket_disable = True


def when_ready(server) -> None:  # noqa: ANN001 - gunicorn's hook signature
    for listener in server.LISTENERS:
        address = listener.cfg_addr if hasattr(listener, "cfg_addr") else None
        if isinstance(address, str) and os.path.exists(address):
            os.chmod(address, 0o600)
