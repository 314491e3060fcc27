"""Build `recall-peps/`, long technical conversations with natural questions, from the Python Enhancement Proposals
(each placed in the public domain, or under CC0-1.0, by its own Copyright section).

Source, pinned: `peps/` of https://github.com/python/peps at commit ba4deeb7969588d937da609008d05bb83a47b1ab.
To rebuild:

    git -C peps archive ba4deeb7969588d937da609008d05bb83a47b1ab peps | tar -x -C /tmp/peps
    .venv/bin/python bench/data/build_pep_questions.py /tmp/peps/peps

The shape this set exists for is the one the other long technical sets lack: a conversation of long technical
turns (a PEP's sections, in order, median 28 of them), questioned about one of its turns. Questions are built as
`recall-python-faq/`'s (see `build_python_faq.py`): every question is a section heading of a PEP as its authors
wrote it ("Why not just use conda?"), its memory the section under it without the heading, asked only when that
section is MIN_BYTES to MAX_BYTES. Nothing is written by hand. Each PEP holding such a question is a conversation
(one workspace, one session) whose memories are all of its sections of at least MIN_SECTION_BYTES; the category is
the PEP's type. Only PEPs whose Copyright section places them in the public domain are read (a few are under the
Open Publication License). Turns are numbered in order, as in the other sets.
"""

from __future__ import annotations

import argparse
import re
from datetime import datetime
from pathlib import Path

from build_python_faq import MAX_BYTES, MIN_BYTES, sections, write_set

OUT = Path(__file__).resolve().parent / "recall-peps"
COMMIT = "ba4deeb7969588d937da609008d05bb83a47b1ab"
# A section shorter than this is a stub or a one-line pointer (the Copyright section itself), not a note.
MIN_SECTION_BYTES = 100
_PUBLIC = re.compile(r"public domain", re.I)
_FIELD = re.compile(r"^(Type|Created):\s*(.+?)\s*$", re.M)


def created(value: str) -> str:
    """`13-Jul-2000` as recall_eval's time (`12:00 am on 13 July, 2000`); the time only orders the memories."""
    for pattern in ("%d-%b-%Y", "%d-%B-%Y"):
        try:
            return datetime.strptime(value.split()[0], pattern).strftime("12:00 am on %d %B, %Y")
        except ValueError:
            continue
    return value


def licence_of(found: list[tuple[str, str]]) -> str:
    """The body of the PEP's Copyright section among its sections ("" without one)."""
    return next((body for heading, body in found if heading == "Copyright"), "")


def build(source: Path) -> tuple[list[dict], list[dict]]:
    turns: list[dict] = []
    questions: list[dict] = []
    for path in sorted(source.glob("pep-*.rst")):
        text = path.read_text()
        found = sections(text)
        if not _PUBLIC.search(licence_of(found)):
            continue
        fields = dict(_FIELD.findall(text.split("\n\n", 1)[0]))
        kept = [(heading, body) for heading, body in found
                if heading != "Copyright" and len(body.encode()) >= MIN_SECTION_BYTES]
        asked = [heading.endswith("?") and MIN_BYTES <= len(body.encode()) <= MAX_BYTES for heading, body in kept]
        if not any(asked):
            continue
        conv = path.stem
        category = fields.get("Type", "unknown").lower().replace(" ", "-")
        for number, ((heading, body), ask) in enumerate(zip(kept, asked, strict=True), 1):
            turns.append({"conv": conv, "turn": number, "role": "PEP", "session": conv, "text": body,
                          "time": created(fields.get("Created", ""))})
            if ask:
                questions.append({"conv": conv, "question": heading, "evidence": [number], "category": category})
    return turns, questions


NOTICE = f"""Every text in this set is a section of a Python Enhancement Proposal from
https://github.com/python/peps (commit {COMMIT}).
Each PEP read was placed by its authors in the public domain, or under the CC0-1.0-Universal licence,
whichever is more permissive, as its own Copyright section states; PEPs under any other licence are left
out by the build script (bench/data/build_pep_questions.py). No copyright is claimed on the set.
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("source", type=Path, help="the peps/ directory of python/peps at the pinned commit")
    args = parser.parse_args()
    turns, questions = build(args.source)
    write_set(OUT, turns, questions, NOTICE)


if __name__ == "__main__":
    main()
