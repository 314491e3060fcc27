"""A fake OpenAI-compatible chat-completions endpoint on 127.0.0.1, for the HTTP provider's tests (the tiebreaker,
extraction, dreaming's synthesis). The test sets the next answer, or an `answer` function that picks the status and
content per request where one endpoint serves several tasks; every request is kept."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class FakeCompletions:
    def __init__(self) -> None:
        self.reply = "{}"  # the assistant message's content
        self.raw: bytes | None = None  # a body sent as is, instead of a completion wrapping `reply`
        self.status = 200
        self.delay = 0.0
        self.requests: list[dict] = []  # {"path", "body" (the JSON request), "auth" (the Authorization header)}
        # When set: request body -> (HTTP status, the assistant message's content), in place of status and reply.
        self.answer: Callable[[dict], tuple[int, str]] | None = None
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                fake.requests.append({"path": self.path, "body": request, "auth": self.headers.get("Authorization")})
                time.sleep(fake.delay)
                status, reply = fake.answer(request) if fake.answer else (fake.status, fake.reply)
                body = fake.raw if fake.raw is not None else json.dumps(
                    {"choices": [{"message": {"role": "assistant", "content": reply}}]}).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up waiting, as it should

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
