"""Turning service results into safe HTML pieces: Markdown bodies, line diffs and the geometry of inline SVG
charts. Everything here is pure; templates do the escaping of text they print."""

from __future__ import annotations

import difflib
import json
from dataclasses import dataclass
from datetime import UTC, datetime, tzinfo
from typing import Any

from django.utils.safestring import SafeString, mark_safe
from markdown_it import MarkdownIt

# CommonMark with raw HTML off: `<script>` in a memory is shown as text. markdown-it's link validation refuses
# javascript:, vbscript:, file: and data: (except images) URLs, so such a link is rendered as plain text.
_markdown = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False})


def render_markdown(text: str) -> SafeString:
    return mark_safe(_markdown.render(text))  # noqa: S308 - markdown-it escapes every text node and attribute


@dataclass(frozen=True)
class DiffLine:
    kind: str  # "add", "del", "hunk", "same"
    text: str


def line_diff(before: str | None, after: str | None) -> list[DiffLine]:
    """A unified line diff from `before` to `after`, with three lines of context."""
    lines = difflib.unified_diff((before or "").splitlines(), (after or "").splitlines(), "prior", "post",
                                 lineterm="", n=3)
    out: list[DiffLine] = []
    for line in lines:
        if line.startswith(("---", "+++")):
            continue
        if line.startswith("@@"):
            out.append(DiffLine("hunk", line))
        elif line.startswith("+"):
            out.append(DiffLine("add", line))
        elif line.startswith("-"):
            out.append(DiffLine("del", line))
        else:
            out.append(DiffLine("same", line))
    return out


def memory_ref(memory: dict[str, Any]) -> dict[str, str]:
    """The selectors that name one memory's root (from its summary), for links and for the services it feeds."""
    ref = {"scope": memory.get("scope"), "agent_name": memory.get("agent_name"),
           "agent_tier": memory.get("agent_tier"), "workspace": memory.get("workspace_id")}
    return {key: value for key, value in ref.items() if value}


CHART_WIDTH = 840
CHART_HEIGHT = 160
CHART_TOP = 10
CHART_BOTTOM = 20


def _local_hour(hour: str, zone: tzinfo) -> datetime:
    return datetime.fromisoformat(hour.replace("Z", "+00:00")).astimezone(zone)


def activity_chart(activity: dict[str, Any], zone: tzinfo = UTC) -> dict[str, Any]:
    """Stacked bars, one per hour, for the families of an activity result, scaled to the busiest hour; each hour
    and day named in `zone` (the machine's, like every time the inspector shows)."""
    families: list[str] = activity["families"]
    buckets: list[dict[str, Any]] = activity["buckets"]
    plot_height = CHART_HEIGHT - CHART_TOP - CHART_BOTTOM
    peak = max((sum(b["counts"].values()) for b in buckets), default=0) or 1
    step = CHART_WIDTH / max(len(buckets), 1)
    bars = []
    for index, bucket in enumerate(buckets):
        y = CHART_TOP + plot_height
        rects = []
        for family in families:
            count = bucket["counts"][family]
            if not count:
                continue
            height = plot_height * count / peak
            y -= height
            rects.append({"family": family, "y": round(y, 2), "height": round(height, 2), "count": count})
        total = sum(bucket["counts"].values())
        bars.append({"x": round(index * step, 2), "width": round(max(step - 1, 1), 2), "rects": rects,
                     "hour": bucket["hour"], "total": total,
                     "label": f"{_local_hour(bucket['hour'], zone):%Y-%m-%d %H:%M}: "
                              + ", ".join(f"{bucket['counts'][f]} {f}" for f in families)})
    days = [{"x": round(i * step, 2), "label": f"{_local_hour(buckets[i]['hour'], zone):%m-%d}"}
            for i in range(0, len(buckets), 24)] if buckets else []
    return {"width": CHART_WIDTH, "height": CHART_HEIGHT, "bars": bars, "peak": peak, "days": days,
            "baseline": CHART_TOP + plot_height, "label_y": CHART_HEIGHT - 5, "families": families}


SCORE_BAR_WIDTH = 300
SCORE_PARTS = ("unicode", "trigram", "semantic", "token", "recency", "signal")
# What a person reads for each part: "unicode" is the word index's internal name, which meant nothing on the page.
SCORE_LABELS = {"unicode": "words", "trigram": "substrings", "semantic": "meaning", "token": "token match",
                "recency": "recency", "signal": "recalled before"}


def score_bars(hits: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """For each hit (keyed by position), the stacked segments of `why_recalled`, on one scale for all hits."""
    widest = max((sum(max(h["why_recalled"][p], 0.0) for p in SCORE_PARTS) for h in hits), default=0.0) or 1.0
    bars: dict[str, list[dict[str, Any]]] = {}
    for index, hit in enumerate(hits):
        x = 0.0
        segments = []
        for part in SCORE_PARTS:
            value = max(hit["why_recalled"][part], 0.0)
            width = SCORE_BAR_WIDTH * value / widest
            segments.append({"part": part, "label": SCORE_LABELS[part], "x": round(x, 2), "width": round(width, 2),
                             "value": round(value, 4)})
            x += width
        bars[str(index)] = segments
    return bars


@dataclass(frozen=True)
class Moment:
    """A timestamp as a page shows it: relative text, the exact local time for the hover title, and the machine
    readable instant for `<time datetime>`."""

    iso: str
    relative: str
    exact: str


def _ago(seconds: float) -> str:
    span = abs(seconds)
    if span < 45:
        return "just now"
    if span < 3_600:
        amount = f"{max(int(span // 60), 1)} min"
    elif span < 86_400:
        amount = f"{int(span // 3_600)} h"
    else:
        days = int(span // 86_400)
        amount = f"{days} day{'s' if days != 1 else ''}"
    return f"in {amount}" if seconds < 0 else f"{amount} ago"


def moment(value: str | None, now: datetime, zone: tzinfo) -> Moment | None:
    """`value` (RFC 3339, as every result carries it) relative to `now`, and exactly in `zone`. Within a week the
    text is relative ("3 min ago", "5 h ago", "2 days ago"); older, it is the local date and time."""
    if not value:
        return None
    instant = datetime.fromisoformat(value.replace("Z", "+00:00"))
    local = instant.astimezone(zone)
    offset = local.strftime("%z")
    exact = f"{local:%Y-%m-%d %H:%M:%S} {local.tzname()} (UTC{offset[:3]}:{offset[3:]})"
    seconds = (now - instant).total_seconds()
    relative = _ago(seconds) if abs(seconds) < 7 * 86_400 else f"{local:%Y-%m-%d %H:%M}"
    return Moment(iso=instant.isoformat().replace("+00:00", "Z"), relative=relative, exact=exact)


# How a rule trace entry reads. The controller appends every rule it ran with `passed`, which for most rules means
# "this rule matched" rather than "this rule is satisfied": `exact_duplicate` or `filename_collision` that did not
# pass simply did not apply, and the chain moved on. Only the entry that ends the chain without passing decided a
# reject or a noop (scan, delete_request, ambiguous, a failed tiebreaker): that one is the problem to show.
TRACE_PASSED, TRACE_NOT_APPLIED, TRACE_DECIDED = "passed", "not-applied", "decided"


def trace_rows(trace: list[dict[str, Any]], op: str) -> list[dict[str, Any]]:
    rows = []
    for index, step in enumerate(trace):
        last = index == len(trace) - 1
        if step.get("passed", True):
            state, label = TRACE_PASSED, "passed"
        elif last and op in ("reject", "noop"):
            state, label = TRACE_DECIDED, f"failed: decided {op}"
        else:
            state, label = TRACE_NOT_APPLIED, "did not apply"
        rows.append({**step, "state": state, "label": label})
    return rows


def compact_metadata(metadata: dict[str, Any]) -> list[tuple[str, str]]:
    """An event's metadata as short `key value` pairs: scalars as they are, nested values as one line of JSON."""
    pairs = []
    for key in sorted(metadata):
        value = metadata[key]
        if isinstance(value, str):
            text = value
        else:
            text = json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(", ", ": "))
        pairs.append((key, text))
    return pairs
