"""Build `recall-go-faq/`, a second dev set of long technical answers, from the Go FAQ (CC BY 4.0 / BSD).

Source, pinned: `_content/doc/faq.md` of https://github.com/golang/website at commit
fd82e1351b3c513e750e028ae21710366483b184 (the page's last change; the Markdown behind https://go.dev/doc/faq).
To rebuild, from a clone of that repository:

    git -C website show fd82e1351b3c513e750e028ae21710366483b184:_content/doc/faq.md > /tmp/faq.md
    git -C website show fd82e1351b3c513e750e028ae21710366483b184:LICENSE > /tmp/LICENSE
    .venv/bin/python bench/data/build_go_faq.py /tmp/faq.md /tmp/LICENSE

It is built exactly as `recall-python-faq/` (see `build_python_faq.py`), so the two sets differ only in their
source: a second language's FAQ, written by other people, in Markdown rather than reStructuredText. Every question
is a FAQ heading as its authors wrote it; its memory is the section under it without the heading. Questions are
asked only of answers of MIN_BYTES to MAX_BYTES; every other answer is a memory too, never asked. The whole FAQ is
one conversation; each `##` part (Origins, Design, Types, ...) is a session and its questions' category.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from build_python_faq import MAX_BYTES, MIN_BYTES, write_set

OUT = Path(__file__).resolve().parent / "recall-go-faq"
_HEADING = re.compile(r"^(#{2,3}) (.+?)(?: \{#[^}]*\})?\s*$")
# The page is a Go template: `{{raw `...`}}` passes HTML through. The memory keeps what the reader sees.
_RAW = re.compile(r"\{\{raw `(.*?)`\}\}", re.S)


def build(text: str) -> tuple[list[dict], list[dict]]:
    text = _RAW.sub(lambda match: match.group(1), text.split("\n---\n", 1)[1])
    turns: list[dict] = []
    questions: list[dict] = []
    part, heading, body, numbers = "", None, [], {}

    def close() -> None:
        answer = "\n".join(body).strip()
        if heading and heading.endswith("?") and answer:
            numbers[part] = numbers.get(part, 0) + 1
            turn = f"{part}:{numbers[part]}"
            turns.append({"conv": "go-faq", "turn": turn, "role": "Go FAQ", "session": part, "text": answer,
                          "time": "12:00 am on 1 January, 2024"})
            if MIN_BYTES <= len(answer.encode()) <= MAX_BYTES:
                questions.append({"conv": "go-faq", "question": heading, "evidence": [turn], "category": part})

    for line in text.splitlines():
        match = _HEADING.match(line)
        if not match:
            body.append(line.rstrip())
            continue
        close()
        level, title = match.groups()
        if level == "##":
            part, heading = title.lower().replace(" ", "-"), None
        else:
            heading = " ".join(title.split())
        body = []
    close()
    return turns, questions


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("faq", type=Path, help="_content/doc/faq.md of golang/website")
    parser.add_argument("licence", type=Path, help="LICENSE of golang/website")
    args = parser.parse_args()
    turns, questions = build(args.faq.read_text())
    notice = ("The text of the Go FAQ (go.dev/doc/faq) is licensed under the Creative Commons Attribution 4.0\n"
              "License (https://creativecommons.org/licenses/by/4.0/), and its code under the BSD licence below\n"
              "(golang/website, _content/copyright.md). Copyright 2009 The Go Authors.\n\n")
    write_set(OUT, turns, questions, notice + args.licence.read_text())


if __name__ == "__main__":
    main()
