"""What the inspector's tests share: a client signed in the way a person signs in, and reading its pages."""

from __future__ import annotations

import re

from django.test import Client

from inspector.signin import create_link
from memory.domain.enums import Origin
from memory.services import snapshots
from memory.services.inputs import Caller

HOST = "127.0.0.1"


def csrf_token_of(page: str) -> str:
    return re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page).group(1)


def signed_in_client(**kwargs) -> Client:
    """Signs in the way a person does: open the link, press the button (with the form's CSRF token)."""
    client = Client(HTTP_HOST=HOST, **kwargs)
    token = create_link(f"http://{HOST}").split("token=")[1]
    opened = client.get(f"/inspector/signin?token={token}")
    response = client.post("/inspector/signin", {"token": token, "next": "/inspector/",
                                                 "csrfmiddlewaretoken": csrf_token_of(opened.content.decode())})
    assert response.status_code == 302 and response.headers["Location"] == "/inspector/"
    return client


def page_text(response) -> str:
    # A file name's <wbr> line-break hints are presentation only; the assertions read the text around them.
    return response.content.decode().replace("<wbr>", "")


def start_session(cwd, session_id: str, **fields) -> None:
    """What a session start does: assemble the snapshot for `session_id` at `cwd`."""
    snapshots.snapshot_assemble(data=snapshots.SnapshotInput.parse({"session_id": session_id, **fields}),
                                caller=Caller(origin=Origin.CLI, cwd=cwd))
