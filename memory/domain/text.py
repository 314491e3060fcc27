"""Word handling shared by the controller's lexical rule and recall's query builder."""

from __future__ import annotations

import re

_WORD = re.compile(r"[^\W_]+", re.UNICODE)

# Function words carry no topic: they neither make two memories "overlap" nor count as meaningful query terms.
STOPWORDS = frozenset(
    ["a", "about", "above", "after", "again", "against", "all", "am", "an", "and", "any", "are", "as", "at", "be", "because", "been", "before", "being", "below", "between", "both", "but", "by", "can", "could", "did", "do", "does", "doing", "down", "during", "each", "few", "for", "from", "further", "had", "has", "have", "having", "he", "her", "here", "hers", "herself", "him", "himself", "his", "how", "i", "if", "in", "into", "is", "it", "its", "itself", "just", "me", "more", "most", "my", "myself", "no", "nor", "not", "now", "of", "off", "on", "once", "only", "or", "other", "our", "ours", "ourselves", "out", "over", "own", "same", "she", "should", "so", "some", "such", "than", "that", "the", "their", "theirs", "them", "themselves", "then", "there", "these", "they", "this", "those", "through", "to", "too", "under", "until", "up", "very", "was", "we", "were", "what", "when", "where", "which", "while", "who", "whom", "why", "will", "with", "would", "you", "your", "yours", "yourself", "yourselves", "also", "did", "didn", "doesn", "don", "isn", "wasn", "weren", "won", "wouldn", "shouldn", "couldn", "hasn", "haven", "hadn", "aren", "ain", "let", "lets", "via", "per", "etc"]
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


def overlap_words(text: str) -> set[str]:
    """The words the lexical-overlap rule compares: 3+ characters, not function words."""
    return set(meaningful_words(text, min_length=3))
