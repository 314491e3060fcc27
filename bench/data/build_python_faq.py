"""Build `recall-python-faq/`, a dev set of long technical answers, from the Python FAQ (PSF licence).

Source, pinned: Debian 12's `python3.11-doc` 3.11.2-6+deb12u9 (sha256
5b3594189d6ef9a6963ce0347fd307a1cc67620ad697e144db366070e2e146be), which ships the reStructuredText of CPython
v3.11.2's `Doc/faq/*.rst` as `usr/share/doc/python3.11/html/_sources/faq/*.rst.txt`. To rebuild:

    apt-get download python3.11-doc && dpkg-deb -x python3.11-doc_3.11.2-6+deb12u9_all.deb /tmp/pydoc
    .venv/bin/python bench/data/build_python_faq.py /tmp/pydoc/usr/share/doc/python3.11/html/_sources

The set is committed; nothing is fetched when a bench runs. Nothing is written by hand: every question is a FAQ
heading as its authors wrote it (a heading that ends with "?"), its memory the section under that heading without
the heading, as reStructuredText. Questions are asked only of sections of MIN_BYTES to MAX_BYTES: the shape this set
exists for is a natural question answered by a long technical passage. Every other answered question of the FAQ
(the short answers) is a memory too, never asked: the long answers are found among all of the FAQ's answers, as
an agent's memory mixes long notes with short ones. The whole FAQ is one conversation (one workspace); each page
is a session of it and the category of its questions. Turns are numbered, as in the other sets: recall_eval puts a
turn's id in its memory's name, and an id holding the page's name ("design:7") gave every memory of a page a name
sharing the words of its category's questions, which neither the source nor the other sets' names hold.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

MIN_BYTES = 1000
MAX_BYTES = 5000
PAGES = ("design", "extending", "general", "gui", "installed", "library", "programming", "windows")
OUT = Path(__file__).resolve().parent / "recall-python-faq"
_UNDERLINE = re.compile(r"^([=\-~^\"'`*+#])\1{2,}\s*$")


def sections(text: str) -> list[tuple[str, str]]:
    """(heading, body) of every section, body without its heading and stripped, headings of any level."""
    lines = text.splitlines()
    heads = [index for index in range(len(lines) - 1)
             if lines[index].strip() and _UNDERLINE.match(lines[index + 1])
             and len(lines[index + 1].rstrip()) >= len(lines[index].rstrip())
             and not _UNDERLINE.match(lines[index])]
    found = []
    for number, index in enumerate(heads):
        end = heads[number + 1] if number + 1 < len(heads) else len(lines)
        body = lines[index + 2:end]
        # The next heading's overline (a title drawn above and below) belongs to it.
        if body and _UNDERLINE.match(body[-1]):
            body = body[:-1]
        found.append((" ".join(lines[index].split()), "\n".join(line.rstrip() for line in body).strip()))
    return found


def build(sources: Path) -> tuple[list[dict], list[dict]]:
    turns: list[dict] = []
    questions: list[dict] = []
    for page in PAGES:
        answered = [(heading, body) for heading, body in sections((sources / "faq" / f"{page}.rst.txt").read_text())
                    if heading.endswith("?") and body]
        for heading, body in answered:
            turn = len(turns) + 1
            # The time only orders the memories (recall_eval adds a second per turn of a session).
            turns.append({"conv": "python-faq", "turn": turn, "role": "Python FAQ", "session": page, "text": body,
                          "time": "12:00 am on 8 February, 2023"})
            if MIN_BYTES <= len(body.encode()) <= MAX_BYTES:
                questions.append({"conv": "python-faq", "question": heading, "evidence": [turn], "category": page})
    return turns, questions


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("sources", type=Path, help="the extracted html/_sources directory of python3.11-doc")
    args = parser.parse_args()
    turns, questions = build(args.sources)
    write_set(OUT, turns, questions, (args.sources / "license.rst.txt").read_text())


def write_set(out: Path, turns: list[dict], questions: list[dict], licence: str) -> None:
    """Write a FAQ set (turns, questions, the source's licence) and print how many of each, by category."""
    out.mkdir(exist_ok=True)
    for name, rows in (("turns.jsonl", turns), ("questions.jsonl", questions)):
        (out / name).write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows))
    (out / "LICENSE").write_text(licence)
    by_category: dict[str, int] = {}
    for question in questions:
        by_category[question["category"]] = by_category.get(question["category"], 0) + 1
    print(json.dumps({"turns": len(turns), "questions": len(questions), "by_category": by_category}))


if __name__ == "__main__":
    main()
