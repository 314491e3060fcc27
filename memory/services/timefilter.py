"""`since` values: an RFC 3339 timestamp or a relative age such as 30m, 24h or 7d."""

from __future__ import annotations

import re
from datetime import datetime, timedelta

from memory.domain.errors import ValidationError
from memory.domain.models import utc_now

_RELATIVE = re.compile(r"^(\d+)([smhdw])$")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}
SINCE = "Only what happened at or after this moment: an RFC 3339 timestamp, or an age such as 30m, 24h or 7d."


def parse_since(value: str | None) -> datetime | None:
    if not value:
        return None
    text = value.strip()
    match = _RELATIVE.match(text)
    if match:
        return utc_now() - timedelta(**{_UNITS[match.group(2)]: int(match.group(1))})
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise ValidationError(
            f"since {value!r} is neither an RFC 3339 timestamp nor an age such as 24h or 7d.",
            details={"field": "since", "reason": "format"},
        ) from None
    if moment.tzinfo is None:
        from datetime import UTC

        moment = moment.replace(tzinfo=UTC)
    return moment
