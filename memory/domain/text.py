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

# The snapshot, recall and checkpoint assemblers wrap their sections in `<compozy_…>` tags. Text taken from a memory
# (body, name, description) must never open or close one of them, or a memory could end the section it sits in and
# speak as the system. A "<" that starts such a tag, in any letter case and with whitespace, slashes or invisible
# format characters before the name (a model reading the prompt may ignore those), is written as "&lt;" instead.
_STRUCTURAL_TAG = re.compile(r"<(?=[\s/\u00ad\u200b-\u200f\u2060\ufeff]*compozy_)", re.IGNORECASE)


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
# one-character CSI for some terminals), and the invisible and bidirectional formatting characters the content
# scanner refuses. The scanner refuses all of them on write; a file placed by hand bypasses it, so printers escape.
CONTROL_CHARACTERS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")
INVISIBLE_CHARACTERS = re.compile("[\u200b-\u200d\u2060\ufeff\u202a-\u202e]")
UNPRINTABLE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b-\u200d\u2060\ufeff\u202a-\u202e]")


def _visible(match: re.Match[str]) -> str:
    code = ord(match.group(0))
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def escape_control_characters(text: str) -> str:
    """The text with each control, invisible or bidirectional character written as a visible `\\xNN` or `\\uNNNN`
    escape. Newline and tab are kept. Pure and the identity on clean text."""
    return UNPRINTABLE.sub(_visible, text)


def prompt_safe(text: str) -> str:
    """Memory text as it may appear inside an assembled prompt: no structural tags, no control characters."""
    return escape_structural_tags(escape_control_characters(text))
