"""A fake OpenAI-compatible /v1/embeddings endpoint on loopback, whose answers a test controls."""

from __future__ import annotations

import hashlib
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

DIMENSIONS = 8


def vector_for(text: str) -> list[float]:
    """A deterministic vector per text: its words hashed into DIMENSIONS buckets (texts sharing words are near)."""
    vector = [0.0] * DIMENSIONS
    for word in text.lower().split():
        vector[hashlib.sha256(word.encode()).digest()[0] % DIMENSIONS] += 1.0
    return vector


class FakeEmbeddings:
    """By default answers every request correctly (rows in reverse order, placed by their `index`). A test can
    set `raw` (bytes to answer instead), `status` or `delay` (seconds before answering)."""

    def __init__(self) -> None:
        self.raw: bytes | None = None
        self.status = 200
        self.delay = 0.0
        self.requests: list[dict] = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                fake.requests.append({"path": self.path, "body": body, "auth": self.headers.get("Authorization")})
                time.sleep(fake.delay)
                if fake.raw is not None:
                    payload = fake.raw
                else:
                    rows = [{"object": "embedding", "index": index, "embedding": vector_for(text)}
                            for index, text in enumerate(body["input"])]
                    payload = json.dumps({"object": "list", "data": rows[::-1], "model": body["model"]}).encode()
                try:
                    self.send_response(fake.status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (a timeout test)

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
