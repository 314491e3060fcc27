"""The token noun: the API bearer token in $COMPOZY_HOME/token, which TCP clients send (the file and its writing
are the home's, `compozy/home.py`)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from compozy.home import rotate_token, token_path

from .inputs import Caller, Input
from .results import Result


class TokenInput(Input):
    action: Literal["rotate", "path"] = Field(description=(
        "rotate: replace the API bearer token (TCP clients must read the new one); path: print where it is."))


class TokenResult(Result):
    path: str
    rotated: bool


def token_manage(*, data: TokenInput, caller: Caller) -> TokenResult:
    if data.action == "rotate":
        rotate_token()
    return TokenResult(path=str(token_path()), rotated=data.action == "rotate")
