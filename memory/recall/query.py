"""From a natural-language question to FTS5 expressions. User text never reaches MATCH as syntax: every term is
a quoted string literal built by `catalog.fts.quote_term`."""

from __future__ import annotations

from dataclasses import dataclass

from memory.catalog.fts import quote_term
from memory.domain.text import meaningful_words

# One meaningful word is a query ("docs"); only text with none at all (stopwords, one-letter words) is skipped.
MIN_MEANINGFUL_TERMS = 1
MAX_TERMS = 24

# Longest first. A suffix is stripped only when at least three letters remain.
_SUFFIXES = tuple(sorted(
    ("ational", "ization", "fulness", "ousness", "iveness", "ations", "ation", "ments", "ment", "ness", "ings",
     "ing", "edly", "ed", "ies", "ied", "es", "s", "ly", "ers", "er", "est", "ful", "able", "ible", "ive", "ous",
     "ity", "ions", "ion"),
    key=len, reverse=True,
))


def stem(word: str) -> str:
    """A light suffix stripper. Its output is only ever used as a prefix (of a query on the unstemmed session
    turns' index, or of a query term found in a text), so it need not be a real word: "camping" → "camp" matches
    camp, camps, camped and camping."""
    if len(word) <= 4 or not word.isalpha():
        return word
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            base = word[: -len(suffix)]
            if suffix in ("ing", "ed", "er", "est", "ers") and len(base) >= 4 and base[-1] == base[-2] \
                    and base[-1] not in "lsz":
                base = base[:-1]  # running → run
            return base
    return word


def ngrams(word: str, size: int = 4) -> list[str]:
    return [word[index : index + size] for index in range(len(word) - size + 1)]


@dataclass(frozen=True)
class RecallQuery:
    text: str
    terms: tuple[str, ...]

    @property
    def trivial(self) -> bool:
        return len(self.terms) < MIN_MEANINGFUL_TERMS

    def unicode_form(self, term: str) -> str:
        """A term as the word index is asked for it: quoted, and stemmed by the index's own tokenizer (porter), so
        it matches the word's inflections as porter conflates them, not every word that begins the same way."""
        return quote_term(term)

    def unicode_expression(self, common: set[str] | frozenset[str] = frozenset()) -> str | None:
        """The terms OR-joined: a memory needs only some of the words of a question, and bm25 ranks the ones that
        share more of them higher. Terms in `common` (found in most memories, so bm25 gives them almost no
        weight while they make every memory a match) are left out unless nothing else is left."""
        kept = [term for term in self.terms if term not in common] or list(self.terms)
        return " OR ".join(dict.fromkeys(self.unicode_form(term) for term in kept)) or None

    def prefix_expression(self) -> str | None:
        """The terms OR-joined for an unstemmed index (the session turns'): longer terms as a prefix of their
        light stem ("camping" → `"camp"*`), short ones exact."""
        forms = (f"{quote_term(stem(term))}*" if len(term) >= 4 and term.isalnum() else quote_term(term)
                 for term in self.terms)
        return " OR ".join(dict.fromkeys(forms)) or None

    def unseen_grams(self, unfound: set[str]) -> list[str]:
        """The 4-grams the trigram query would add for these (unfound) terms, in order."""
        return list(dict.fromkeys(gram for term in self.terms if term in unfound and len(term) >= 5
                                  for gram in ngrams(term)))

    def trigram_expression(self, rare: set[str], unfound: set[str],
                           common_grams: set[str] | frozenset[str] = frozenset()) -> str | None:
        """The trigram index is for partial words and typos. Rare terms go in as substrings (a common one would
        make the query scan most of the catalog for little gain); terms the word index cannot find in any
        inflection (`unfound`: a typo, a word no memory holds, a word held only inside longer ones) go in as
        substrings and, when long enough, by their 4-grams, which still meet a misspelt word. A term the word index
        finds is already matched there: its 4-grams ("ment", "tion") would only make hundreds of memories a weak
        match, at most of the trigram query's cost."""
        parts: list[str] = []
        for term in self.terms:
            if len(term) < 3 or term not in rare | unfound:
                continue
            parts.append(quote_term(term))
            if term in unfound and len(term) >= 5:
                parts.extend(quote_term(gram) for gram in ngrams(term) if gram not in common_grams)
        return " OR ".join(dict.fromkeys(parts)) or None


def parse_query(text: str) -> RecallQuery:
    return RecallQuery(text=text, terms=tuple(meaningful_words(text)[:MAX_TERMS]))
