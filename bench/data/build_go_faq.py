"""Build `recall-go-faq/`, a second dev set of long technical answers, from go.dev (CC BY 4.0 / BSD).

Source, pinned: `_content/doc/` of https://github.com/golang/website at commit
b02076ae6df08ee9d495fe4b283f88ac18e51012: the Markdown behind https://go.dev/doc/ (the FAQ, Effective Go's
neighbours, every release note, the module and security guides). To rebuild:

    git -C website archive b02076ae6df08ee9d495fe4b283f88ac18e51012 _content/doc LICENSE | tar -x -C /tmp/go
    .venv/bin/python bench/data/build_go_faq.py /tmp/go

Questions are built exactly as `recall-python-faq/`'s (see `build_python_faq.py`): every question is a heading of
the Go FAQ as its authors wrote it, its memory the section under it without the heading, asked only when that
answer is MIN_BYTES to MAX_BYTES. Nothing is written by hand. The other memories, never asked, are every other
section of every Markdown page under `_content/doc/` (split at its headings, each page a session): an agent's
memory of a Go project holds many long notes on the same subjects, and with the FAQ's 85 answers alone plain bm25
already finds 0.875 of the answers in its first five. The whole site is one conversation (one workspace).
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from build_python_faq import MAX_BYTES, MIN_BYTES, write_set

OUT = Path(__file__).resolve().parent / "recall-go-faq"
FAQ = "faq.md"
# A section shorter than this is a heading's stub or a one-line pointer, not a note anyone would keep.
MIN_SECTION_BYTES = 100
_HEADING = re.compile(r"^(#{2,4}) (.+?)(?: \{#[^}]*\})?\s*$")
# The pages are Go templates: `{{raw `...`}}` passes HTML through; the memory keeps what the reader sees.
_RAW = re.compile(r"\{\{raw `(.*?)`\}\}", re.S)
_HIDDEN = re.compile(r"<!--.*?-->|<style>.*?</style>", re.S)


def sections(text: str) -> list[tuple[str, str, str]]:
    """(the `##` part it is in, heading, body without the heading) of every section headed `##` to `####`."""
    if text.startswith("---\n") or text.startswith("<!--{"):
        text = text.split("\n---\n", 1)[1] if text.startswith("---\n") else text.split("}-->", 1)[1]
    text = _HIDDEN.sub("", _RAW.sub(lambda match: match.group(1), text))
    found: list[tuple[str, str, str]] = []
    part, heading, body = "", "", []
    for line in [*text.splitlines(), "## end"]:
        match = _HEADING.match(line)
        if not match:
            body.append(line.rstrip())
            continue
        if heading:
            found.append((part, heading, "\n".join(body).strip()))
        level, title = match.groups()
        heading, body = " ".join(title.split()), []
        if level == "##":
            part = heading.lower().replace(" ", "-")
    return found


def build(doc: Path) -> tuple[list[dict], list[dict]]:
    turns: list[dict] = []
    questions: list[dict] = []

    def add(session: str, text: str) -> int:
        # Numbered as in the other sets (build_python_faq explains why the page is not in the id).
        turn = len(turns) + 1
        # The time only orders the memories (recall_eval adds a second per turn of a session).
        turns.append({"conv": "go-faq", "turn": turn, "role": "go.dev", "session": session, "text": text,
                      "time": "12:00 am on 1 January, 2026"})
        return turn

    for part, heading, answer in sections((doc / FAQ).read_text()):
        if heading.endswith("?") and answer:
            turn = add(f"faq/{part}", answer)
            if MIN_BYTES <= len(answer.encode()) <= MAX_BYTES:
                questions.append({"conv": "go-faq", "question": heading, "evidence": [turn], "category": part})
    for page in sorted(doc.rglob("*.md")):
        name = page.relative_to(doc).as_posix()
        if name == FAQ:
            continue
        for _part, _heading, body in sections(page.read_text()):
            if len(body.encode()) >= MIN_SECTION_BYTES:
                add(name.removesuffix(".md"), body)
    return turns, questions


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("website", type=Path, help="a directory holding golang/website's _content/doc and LICENSE")
    args = parser.parse_args()
    turns, questions = build(args.website / "_content" / "doc")
    notice = ("The text of go.dev is licensed under the Creative Commons Attribution 4.0 License\n"
              "(https://creativecommons.org/licenses/by/4.0/), and its code under the BSD licence below\n"
              "(golang/website, _content/copyright.md). Copyright 2009 The Go Authors.\n\n")
    write_set(OUT, turns, questions, notice + (args.website / "LICENSE").read_text())


if __name__ == "__main__":
    main()
