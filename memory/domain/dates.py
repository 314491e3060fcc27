"""Relative dates resolved against the time they were said.

"I went to the support group yesterday", said on 8 May 2023 and read a month later, no longer says when. Text kept
from a session (an extracted memory, a checkpoint item, a ledger turn shown in a recall block) is given the
calendar meaning beside each relative phrase, in words a later question can match:

    yesterday            → yesterday (7 May 2023)
    last Friday          → last Friday (14 July 2023, the Friday before 15 July 2023)
    last week            → last week (the week before 9 June 2023)
    next month           → next month (June 2023)
    two weeks ago        → two weeks ago (two weeks before 8 May 2023)
    three years ago      → three years ago (2020)

The phrase itself stays (the sentence still reads as it was said); a phrase already followed by a parenthesis is
left alone, so resolving twice changes nothing. Pure: no clock is read, the reference time is always given.
"""

from __future__ import annotations

import re
from datetime import date, datetime, timedelta

WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
          "November", "December")
NUMBERS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
           "eight": 8, "nine": 9, "ten": 10, "a couple of": 2, "couple of": 2, "a few": 3, "few": 3}

_NUMBER = r"(?P<n>\d{1,2}|a couple of|couple of|a few|few|an?|one|two|three|four|five|six|seven|eight|nine|ten)"
_PATTERN = re.compile(
    r"\b(?:"
    r"(?P<day>yesterday|today|tonight|tomorrow|this morning|this afternoon|this evening|last night)"
    r"|(?P<dir>last|next|this past|this coming|past) (?P<unit>week|weekend|month|year|"
    + "|".join(WEEKDAYS) + r")"
    r"|(?P<this>this) (?P<thisunit>week|weekend|month|year)"
    r"|" + _NUMBER + r" (?P<agounit>days?|weeks?|weekends?|months?|years?) ago"
    r")\b(?! ?\()",
    re.IGNORECASE,
)


def day_text(value: date) -> str:
    """8 May 2023: the day without padding, the month in words (what people write and ask)."""
    return f"{value.day} {MONTHS[value.month - 1]} {value.year}"


def month_text(year: int, month: int) -> str:
    return f"{MONTHS[month - 1]} {year}"


def _shift_month(value: date, months: int) -> tuple[int, int]:
    index = value.year * 12 + value.month - 1 + months
    return index // 12, index % 12 + 1


def _meaning(match: re.Match[str], when: date) -> str | None:
    said = day_text(when)
    if match.group("day"):
        word = match.group("day").lower()
        if word == "yesterday" or word == "last night":
            return day_text(when - timedelta(days=1))
        if word == "tomorrow":
            return day_text(when + timedelta(days=1))
        return said
    if match.group("this"):
        unit = match.group("thisunit").lower()
        if unit == "month":
            return month_text(when.year, when.month)
        if unit == "year":
            return str(when.year)
        return f"the {unit} of {said}"
    if match.group("dir"):
        direction = match.group("dir").lower()
        forward = direction in ("next", "this coming")
        unit = match.group("unit").lower()
        if unit == "month":
            return month_text(*_shift_month(when, 1 if forward else -1))
        if unit == "year":
            return str(when.year + (1 if forward else -1))
        if unit in WEEKDAYS:
            target = WEEKDAYS.index(unit)
            if forward:
                offset = (target - when.weekday()) % 7 or 7
                return f"{day_text(when + timedelta(days=offset))}, the {unit.capitalize()} after {said}"
            offset = (when.weekday() - target) % 7 or 7
            return f"{day_text(when - timedelta(days=offset))}, the {unit.capitalize()} before {said}"
        return f"the {unit} {'after' if forward else 'before'} {said}"
    count_text = match.group("n").lower()
    count = int(count_text) if count_text.isdigit() else NUMBERS.get(count_text, 1)
    unit = match.group("agounit").lower().rstrip("s")
    if "few" in count_text or "couple" in count_text:
        return f"{count_text} {unit}s before {said}"  # vague: no single day, month or year to name
    if unit == "day":
        return day_text(when - timedelta(days=count))
    if unit == "month":
        return month_text(*_shift_month(when, -count))
    if unit == "year":
        return str(when.year - count)
    return f"{count_text} {unit}{'s' if count != 1 else ''} before {said}"


def resolve_relative_dates(text: str, when: datetime | date) -> str:
    """`text` with the calendar meaning of each relative date phrase added after it, as said at `when`."""
    said = when.date() if isinstance(when, datetime) else when

    def replace(match: re.Match[str]) -> str:
        meaning = _meaning(match, said)
        return f"{match.group(0)} ({meaning})" if meaning else match.group(0)

    return _PATTERN.sub(replace, text)
