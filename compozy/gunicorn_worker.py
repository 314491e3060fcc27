"""The gthread worker `compozy serve` runs: gunicorn's own, with the errors gunicorn answers itself (a request line
over its limit: 414, too many or too large headers: 431, a malformed request: 400) written as the service's
`{code, message, details}` JSON like every other error, in place of gunicorn's HTML page."""

from __future__ import annotations

import json
from typing import Any

from gunicorn import util
from gunicorn.workers.gthread import ThreadWorker

from memory.domain.errors import CompozyError, ValidationError

# gunicorn's reason phrase → the `reason` in details, for the refusals a client can act on.
_REASONS = {414: "uri_too_long", 431: "headers_too_large", 417: "expectation_failed", 501: "transfer_coding",
            403: "forbidden", 400: "bad_request"}


class _Captured:
    """Stands in for the client socket while gunicorn writes its HTML error: keeps the bytes instead."""

    def __init__(self) -> None:
        self.data = b""

    def gettimeout(self) -> float:
        return 0.0

    def sendall(self, data: bytes) -> None:
        self.data += data

    def send(self, data: bytes) -> int:
        self.data += data
        return len(data)


def _status(response: bytes) -> tuple[int, str]:
    """The status code and reason phrase of gunicorn's error response."""
    first = response.split(b"\r\n", 1)[0].decode("latin-1").split(" ", 2)
    try:
        return int(first[1]), first[2] if len(first) > 2 else ""
    except (IndexError, ValueError):
        return 500, "Internal Server Error"


def error_document(status: int, reason: str, exc: BaseException) -> dict[str, Any]:
    if status >= 500 and status != 501:
        return CompozyError("Internal error; the server log has the details.").to_dict()
    message = f"{reason}: {exc}" if str(exc) else reason
    return ValidationError(message[:500], details={"reason": _REASONS.get(status, "bad_request")}).to_dict()


class JsonErrorWorker(ThreadWorker):
    def handle_error(self, req: Any, client: Any, addr: Any, exc: BaseException) -> None:
        # gunicorn decides the status and logs the error exactly as it always does; only the page it would have
        # written is replaced.
        captured = _Captured()
        super().handle_error(req, captured, addr, exc)
        status, reason = _status(captured.data)
        body = json.dumps(error_document(status, reason, exc), ensure_ascii=True).encode("ascii")
        head = (f"HTTP/1.1 {status} {reason}\r\nConnection: close\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(body)}\r\n\r\n").encode("latin-1")
        try:
            util.write_nonblock(client, head + body)
        except Exception:  # noqa: BLE001 - the client may be gone already, as gunicorn itself allows for
            self.log.debug("Failed to send error message.")
