"""Word handling shared by the controller's lexical rule and recall's query builder."""

from __future__ import annotations

import functools
import re

_WORD = re.compile(r"[^\W_]+", re.UNICODE)

# Function words carry no topic: they neither make two memories "overlap" nor count as meaningful query terms.
STOPWORDS = frozenset(
    ["a", "about", "above", "after", "again", "against", "all", "am", "an", "and", "any", "are", "as", "at", "be",
     "because", "been", "before", "being", "below", "between", "both", "but", "by", "can", "could", "did", "do",
     "does", "doing", "down", "during", "each", "few", "for", "from", "further", "had", "has", "have", "having", "he",
     "her", "here", "hers", "herself", "him", "himself", "his", "how", "i", "if", "in", "into", "is", "it", "its",
     "itself", "just", "me", "more", "most", "my", "myself", "no", "nor", "not", "now", "of", "off", "on", "once",
     "only", "or", "other", "our", "ours", "ourselves", "out", "over", "own", "same", "she", "should", "so", "some",
     "such", "than", "that", "the", "their", "theirs", "them", "themselves", "then", "there", "these", "they", "this",
     "those", "through", "to", "too", "under", "until", "up", "very", "was", "we", "were", "what", "when", "where",
     "which", "while", "who", "whom", "why", "will", "with", "would", "you", "your", "yours", "yourself", "yourselves",
     "also", "did", "didn", "doesn", "don", "isn", "wasn", "weren", "won", "wouldn", "shouldn", "couldn", "hasn",
     "haven", "hadn", "aren", "ain", "let", "lets", "via", "per", "etc"]
)


def words(text: str) -> list[str]:
    """Lowercased alphanumeric runs, in order, with repeats."""
    return [match.group(0).lower() for match in _WORD.finditer(text)]


def meaningful_words(text: str, *, min_length: int = 2) -> list[str]:
    """Distinct non-stopwords of at least min_length characters, in first-seen order."""
    seen: dict[str, None] = {}
    for word in words(text):
        if len(word) >= min_length and word not in STOPWORDS:
            seen.setdefault(word, None)
    return list(seen)


def overlap_words(text: str) -> frozenset[str]:
    """The words the lexical-overlap rule compares: 3+ characters, not function words.

    Cached: the rule compares each candidate with a pool of existing memories, and the same memories come back
    in the pools of one session's candidates, so their words are read once, not once per candidate."""
    return _overlap_words(text)


@functools.lru_cache(maxsize=2048)
def _overlap_words(text: str) -> frozenset[str]:
    return frozenset(meaningful_words(text, min_length=3))


# ----- text that reaches a prompt or a terminal -----------------------------------------------------------------

# Characters a reader does not see. Which are refused and which are kept, by class (the scanner refuses on write,
# a hand-edited file holding a refused one is invalid, and printers escape them):
# - always refused: Unicode tag characters (U+E0000-E007F: they spell hidden ASCII text, "ASCII smuggling"; the
#   only legitimate use, subdivision flags, is not worth that), bidirectional controls (U+200E/F, U+202A-202E,
#   U+2066-2069, U+061C: the text shown is not the text read), and the other invisible format characters (ZWSP,
#   word joiner, invisible operators U+2061-2064, U+180E, BOM, soft hyphen, interlinear annotation, deprecated
#   format controls, musical and hieroglyph format controls), the combining grapheme joiner U+034F and the Hangul
#   fillers: none carries meaning in a note, and each can hide a tag or split a word the scanner looks for;
# - kept in context: ZWJ and ZWNJ between two non-ASCII characters (emoji sequences such as a woman technologist,
#   Persian and Indic spelling), and variation selectors (U+FE00-FE0F, U+E0100-E01EF, Mongolian U+180B-180D) right
#   after a non-ASCII character or a keycap base (0-9, #, *): an emoji's presentation, an ideograph's variant.
#   Anywhere else (after "<" or a Latin letter, at the start) they are refused like the first class.
# Stripping was not chosen for either class: silently changing what someone wrote is worse than telling them.
_ALWAYS = ("\u00ad\u034f\u061c\u115f\u1160\u180e\u200b\u200e\u200f\u202a-\u202e\u2060-\u2064\u2066-\u206f"
           "\u3164\ufeff\uffa0\ufff9-\ufffb\U00013430-\U0001343f\U0001bca0-\U0001bca3\U0001d173-\U0001d17a"
           "\U000e0000-\U000e007f")
_CONTEXTUAL = "\u180b-\u180d\u200c\u200d\ufe00-\ufe0f\U000e0100-\U000e01ef"
_IGNORABLE = f"[{_ALWAYS}{_CONTEXTUAL}]"
_HIDDEN = re.compile(f"[{_ALWAYS}]|[{_CONTEXTUAL}]")
_JOINERS = "\u200c\u200d"
_KEYCAP_BASES = frozenset("0123456789#*")  # the only ASCII bases with a variation sequence (keycaps)


def _in_context(text: str, at: int) -> bool:
    """Whether the contextual character at `at` sits where it has a use."""
    char = text[at]
    before = text[at - 1] if at else ""
    if not before or _HIDDEN_ONE.fullmatch(before) or before.isspace():
        return False
    if char in _JOINERS:
        after = text[at + 1] if at + 1 < len(text) else ""
        return (not before.isascii() and bool(after) and not after.isascii() and not after.isspace()
                and not _HIDDEN_ONE.fullmatch(after))
    return before in _KEYCAP_BASES or not before.isascii()


_HIDDEN_ONE = re.compile(_IGNORABLE)


def hidden_characters(text: str) -> bool:
    """True when the text holds an invisible character out of the context that gives it a use (see above)."""
    if text.isascii():
        return False
    for match in _HIDDEN.finditer(text):
        if not ("\u180b" <= match.group(0) <= "\u180d" or match.group(0) in _JOINERS
                or "\ufe00" <= match.group(0) <= "\ufe0f" or "\U000e0100" <= match.group(0) <= "\U000e01ef"):
            return True
        if not _in_context(text, match.start()):
            return True
    return False


# The snapshot, recall and checkpoint assemblers wrap their sections in `<compozy_…>` tags. Text taken from a memory
# (body, name, description) must never open or close one of them, or a memory could end the section it sits in and
# speak as the system. A "<" that starts such a tag, in any letter case, with whitespace, slashes or invisible
# characters before the name or between its letters (a model reading the prompt may ignore those), is written as
# "&lt;" instead.
_STRUCTURAL_TAG = re.compile("<(?=(?:[\\s/]|" + _IGNORABLE + ")*" + (_IGNORABLE + "*").join("compozy_") + ")",
                             re.IGNORECASE)


def has_structural_tag(text: str) -> bool:
    """True when the text would open or close a `<compozy_…>` tag: what escape_structural_tags would change."""
    return _STRUCTURAL_TAG.search(text) is not None


def escape_structural_tags(text: str) -> str:
    """The text with every `<compozy_…>` / `</compozy_…>` tag opener turned into `&lt;`, so that assembled
    prompt text holds exactly the structural tags its assembler wrote. Pure, idempotent, and the identity on text
    without such a tag."""
    return _STRUCTURAL_TAG.sub("&lt;", text)


# Characters that act on a terminal or hide text rather than show it: C0 controls other than tab and newline
# (NUL truncates C strings, ESC starts escape sequences, CR rewrites the line), DEL, C1 controls (U+009B is a
# one-character CSI for some terminals), and the invisible and bidirectional characters refused above. The scanner
# refuses all of them on write; a file placed by hand bypasses it, so printers escape.
CONTROL_CHARACTERS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")
INVISIBLE_CHARACTERS = re.compile(f"[{_ALWAYS}]")
UNPRINTABLE = re.compile(f"[\x00-\x08\x0b-\x1f\x7f-\x9f{_ALWAYS}]")


def _visible(match: re.Match[str]) -> str:
    code = ord(match.group(0))
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def _visible_hidden(match: re.Match[str]) -> str:
    """A contextual character in its context is kept (an emoji stays whole); any other hidden one is shown."""
    char = match.group(0)
    if not INVISIBLE_CHARACTERS.fullmatch(char) and _in_context(match.string, match.start()):
        return char
    return _visible(match)


def escape_control_characters(text: str) -> str:
    """The text with each control, invisible or bidirectional character written as a visible `\\xNN`, `\\uNNNN` or
    `\\UNNNNNNNN` escape (a joiner or variation selector where it has a use is kept). Newline and tab are kept.
    Pure and the identity on clean text."""
    text = UNPRINTABLE.sub(_visible, text)
    return text if text.isascii() else _HIDDEN.sub(_visible_hidden, text)


def prompt_safe(text: str) -> str:
    """Memory text as it may appear inside an assembled prompt: no structural tags (also spelled with invisible
    characters), no control or hidden characters. Tags are escaped first, while the characters that hide them are
    still there to be seen through."""
    return escape_control_characters(escape_structural_tags(text))
