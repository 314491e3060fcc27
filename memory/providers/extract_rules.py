"""The local provider's extraction rules: deterministic, high-precision patterns over what a user says.

Each user turn (injected blocks already stripped) is cut into sentences. A question or a hypothetical is never
read. The first rule that matches a sentence proposes one memory with an entity/attribute slot. The slot is what
lets a later statement about the same thing ("no, it's 5433"; "actually my editor is helix") update the same
memory through the controller's entity-slot rule instead of adding a second one.

The rules are general statements people make about themselves and their work: explicit requests to remember,
standing instructions, corrections, preferences, "my X is Y", "we use X for Y", who they are, and (behind a
small-talk filter) what they did, do, like and have. They were developed on chat transcripts
(bench/extract_eval.py) but name no topic.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from memory.domain.enums import MemoryType
from memory.domain.extraction import Turn, policy_violation, strip_injected
from memory.domain.text import STOPWORDS

_I = re.IGNORECASE


def _starting(letters: str, pattern: str) -> str:
    """`pattern`, searched only where it can begin: every match of it starts with one of `letters` (as every
    alternative in it does). The lookahead changes no match, span or group; it lets `re` skip to those letters
    instead of trying each alternative at every position of the sentence, which made these searches 1.5-3x
    faster (they run on every sentence of every user turn)."""
    return f"(?=[{letters}])(?:{pattern})"

MAX_PER_TURN = 3
MIN_WORDS = 3
MAX_CORRECTION_WORDS = 5
MAX_SENTENCE_CHARS = 400
SLOT_WORDS = 4

# Attachments and asides in brackets ("[shares a photo: …]", "[image]") are not the speaker's words.
_BRACKETED = re.compile(r"\[[^\[\]]{0,300}\]")
_SENTENCE_END = re.compile(r"(?<=[.!?])[\"')\]]*\s+|\n+|\s+[-–—]\s+(?=[A-Z])")
_SPACES = re.compile(r"\s+")
# Discourse openers that carry nothing once the sentence stands alone as a memory.
_OPENER = re.compile(r"^(?:(?:oh|and|also|so|actually|btw|by the way|anyway|well|plus|ok|okay|yeah|yes)\b[,:]?\s+)+",
                     _I)

_ADVERB = r"(?:just|recently|finally|also|actually|even|then|now|currently|still|really|absolutely)"
# Common irregular past tenses; regular ones are any word ending in -ed.
_IRREGULAR_PAST = (
    r"went|took|got|made|bought|met|ran|won(?!')|began|built|wrote|lost|found|saw|had|gave|did|left|came|spent|"
    r"sold|drove|flew|taught|caught|brought|felt|knew|kept|held|heard|read|sang|swam|chose|became|grew|rode|"
    r"paid|sent|wore|woke|broke|fell|forgot|hit|let|put|quit|set|shut|told|understood"
)
_PRONOUN = r"(?:it|them|that|this|those|these|him|her|you|me|us)\b"

# --- sentences never read, or read only by the explicit rules --------------------------------------------------
# Not a statement of fact: wishes, guesses, conditionals.
_UNCERTAIN = re.compile(_starting(
    "imw",
    r"\b(if i|if we|i wish|i hope|i guess|i bet|i wonder|maybe i|i might|i may|i would|i'd (love|like|be)|"
    r"i could|what if|imagine|i'm sure|i am sure)\b"),
    _I,
)
# Small talk aimed at the listener: thanks, sympathy, encouragement, agreement. It carries no fact about anyone.
_SMALL_TALK = re.compile(
    r"^\W*(thanks|thank you|thx|congrats|congratulations|good luck|glad|sorry|wow|aww|haha|lol|cool|nice|great|"
    r"awesome|sounds|that's|that is|it's great|hope|bye|see you|talk (to you )?soon|take care|no worries|"
    r"you're|you are|you've|you have|you)\b|"
    # The opening words are looked for at the start only; the rest wherever they begin.
    + _starting("imk",
                r"\b(i'm|i am) (so |really |very |super |truly )?(glad|happy|proud|sorry|grateful|thankful|excited) "
                r"(for|to hear|that you|of you|you)\b"
                r"|\b(i'm|i am) (always |still )?here (for|to)\b|\bi (really )?appreciate\b|\bmeans a lot\b"
                r"|\bi (totally |completely )?agree\b|\bi (can't|cannot) wait\b"
                r"|\bi (know|understand|hear|feel) (what|how) you\b"
                r"|\bkeep (it|them) up\b"),
    _I,
)
# Resolutions ("I'll keep going", "I want to") say what someone means to do rather than what is so. They stop only
# the narrative rules: "from now on I'll use pnpm" is still a standing instruction.
_RESOLUTION = re.compile(_starting(
    "ig",
    r"\b(i'll|i will|i won't|i'm gonna|i am gonna|i'm going to|i am going to|i want to|i wanna|i need to|"
    r"i have to|i've got to|gotta)\b"),
    _I,
)


@dataclass(frozen=True)
class Proposal:
    """One memory a rule proposes from one sentence of one turn."""

    kind: str
    type: MemoryType
    content: str
    evidence: tuple[int, ...]
    entity: str
    attribute: str


@dataclass(frozen=True)
class Built:
    type: MemoryType
    entity: str
    attribute: str
    content: str | None = None  # None: the sentence itself


Builder = Callable[[re.Match[str], str], Built | None]


@dataclass(frozen=True)
class Rule:
    kind: str
    pattern: re.Pattern[str]
    build: Builder
    # Narrative rules read what someone says about their life and work; they skip small talk and resolutions.
    narrative: bool = False


def _words(text: str, limit: int = SLOT_WORDS) -> str:
    """The first few meaningful words of a phrase: a stable, short slot attribute."""
    picked = [w for w in re.findall(r"[a-z0-9]+", text.lower()) if w not in STOPWORDS and len(w) > 1]
    return " ".join(picked[:limit])


def _memory_type_of(text: str) -> MemoryType:
    """The type a free statement belongs to: an instruction is feedback, a pointer to somewhere is reference, a
    statement about the shared work is project, anything else the speaker says of themselves is user."""
    lowered = text.lower()
    if re.match(r"^\s*(always|never|don't|do not|please|use|avoid|prefer|make sure|stop|keep)\b", lowered):
        return MemoryType.FEEDBACK
    if re.search(r"https?://|\bdocs? (are|is|live)\b|\b(runbook|dashboard|wiki|channel|port \d+)\b", lowered):
        return MemoryType.REFERENCE
    if re.search(r"\b(we|our|the (project|repo|codebase|team|service|app))\b", lowered):
        return MemoryType.PROJECT
    return MemoryType.USER


def _content(sentence: str) -> str:
    text = _OPENER.sub("", sentence).strip() or sentence
    text = text[0].upper() + text[1:]
    return text if text[-1] in ".!" else text + "."


# --- builders --------------------------------------------------------------------------------------------------

def _explicit(match: re.Match[str], sentence: str) -> Built | None:
    fact = match.group("fact")
    statement = _statement_of(fact, speaker_is_user=True)
    memory_type = _memory_type_of(fact)
    if statement is not None:
        # "remember that our staging database is on port 5433": the statement's own slot, so "no, it's 5434" later
        # updates this memory.
        return Built(memory_type, statement.entity, statement.attribute, _content(fact))
    slot = _words(fact)
    return Built(memory_type, "user", slot, _content(fact)) if slot else None


def _instruction(match: re.Match[str], sentence: str) -> Built | None:
    slot = _words(match.group("what"))
    return Built(MemoryType.FEEDBACK, "instruction", slot) if slot else None


def _preference(match: re.Match[str], sentence: str) -> Built | None:
    slot = _words(match.group("what"), 3)
    return Built(MemoryType.USER, "user", f"preference {slot}") if slot else None


def _favourite(match: re.Match[str], sentence: str) -> Built | None:
    slot = _words(match.group("what"), 3)
    return Built(MemoryType.USER, "user", f"favorite {slot}") if slot else None


def _possessive(match: re.Match[str], sentence: str) -> Built | None:
    slot = _words(match.group("what"), 3)
    if not slot:
        return None
    if match.group("owner").lower() == "my":
        return Built(MemoryType.USER, "user", slot)
    return Built(MemoryType.PROJECT, "project", slot)


def _usage(match: re.Match[str], sentence: str) -> Built | None:
    purpose = _words(match.group("purpose") or "", 3)
    tool = _words(match.group("tool"), 3)
    if not (purpose or tool):
        return None
    # The slot is the purpose when it is said: "we use yarn for package management" replaces "we use pnpm for …".
    attribute = f"tool for {purpose}" if purpose else f"uses {tool}"
    if match.group("who").lower() == "i":
        return Built(MemoryType.USER, "user", attribute)
    return Built(MemoryType.PROJECT, "project", attribute)


def _identity(match: re.Match[str], sentence: str) -> Built | None:
    # One slot per kind of identity fact: a new role replaces the old one, a new home the old home.
    if match.group("role"):
        return Built(MemoryType.USER, "user", "role")
    return Built(MemoryType.USER, "user", match.group("fact").lower())


def _self_statement(match: re.Match[str], sentence: str) -> Built | None:
    slot = _words(match.group("verb") + " " + sentence[match.end():])
    if len(slot.split()) < 2:
        return None
    return Built(_memory_type_of(sentence), "user", slot)


# In order: the first rule that matches a sentence proposes its memory. The explicit forms come first; the
# narrative ones (what someone did, does, likes, has) last, behind the small-talk and resolution filters.
RULES: tuple[Rule, ...] = (
    Rule("explicit", re.compile(
        r"^(?:please |also |and |oh,? )?(?:remember|note|keep in mind|don't forget|do not forget|"
        r"for future reference|fyi|for the record)(?: that)?[,:]? (?P<fact>(?!you\b).+)", _I), _explicit),
    Rule("instruction", re.compile(
        r"^(?:and |also |so |ok(?:ay)?,? )?(?:from now on|going forward|in (?:the )?future|from here on(?: out)?|"
        r"next time)[,:]? (?P<what>.+)", _I), _instruction),
    Rule("instruction", re.compile(
        r"^(?:please |and |also |you should |you must )?(?P<what>(?:always|never|don't ever|do not ever) "
        r"(?!(?:here|there|been|be)\b)\w.+)", _I), _instruction),
    Rule("preference", re.compile(_starting(
        "iw", r"\b(?:i|we) (?:really |strongly |much |generally |usually |always )?(?:prefer|would rather|'d rather) "
        r"(?P<what>.+)"), _I), _preference),
    Rule("favorite", re.compile(_starting("m", r"\bmy (?:absolute )?(?:favou?rite|fave|go-to) (?P<what>[\w' -]{2,40}?) "
                                               r"(?:is|are|has to be|was)\b"), _I), _favourite),
    Rule("usage", re.compile(_starting(
        "iw", r"\b(?P<who>i|we) (?:also |now |mostly |always |usually )?(?:use|rely on|go with|stick with|switched to|"
        r"moved to|are using|'re using|am using|'m using) (?!" + _PRONOUN + r")(?P<tool>[\w.+#/ -]{2,40}?)"
        r"(?: (?:for|to|as|when) (?P<purpose>[\w' -]{3,60}))?(?:[.,;!]|$)"), _I), _usage),
    # "my editor is helix", "our staging database is on port 5433": the possessive opens the clause, so the
    # phrase before the verb is what the sentence is about.
    Rule("attribute", re.compile(
        r"(?:^|[,;:] |\b(?:and|but|so|oh|also|btw|actually|now) )(?P<owner>my|our) "
        r"(?P<what>(?:(?!(?:i|you|he|she|it|we|they|when|that|which|who)\b)[a-z][\w'-]*\s){0,3}?[a-z][\w'-]*) "
        r"(?:is|are|was|were|lives|runs|sits|uses|has|have)\b"
        r"(?! (?:so|really|very|too|just|such|super|pretty|key|important|vital|essential|everything)\b)", _I),
        _possessive),
    Rule("identity", re.compile(_starting(
        "i", r"\b(?:i'm|i am) (?:a|an) (?!(?:big|huge|bit|little|lot|total|real)\b)(?P<role>[a-z]+(?: [a-z]+)?)\b"
        r"|\bi (?P<fact>work|live|grew up|was born|study|teach)\b"), _I), _identity, narrative=True),
    Rule("experience", re.compile(_starting(
        "iw", r"\b(?:i|we) (?:" + _ADVERB + r" )?(?P<verb>[a-z]{3,}ed|" + _IRREGULAR_PAST + r")\b"), _I),
        _self_statement, narrative=True),
    # The subject is often dropped in chat: "Started a pottery class last week", "Been reading a lot lately".
    Rule("experience", re.compile(
        r"^(?:" + _ADVERB + r" )?(?P<verb>(?:started|joined|finished|signed up|tried|visited|attended|moved|"
        r"adopted|bought|lost|got|took|went|made|spent|had)\b|been [a-z]+ing\b)", _I), _self_statement,
        narrative=True),
    Rule("ongoing", re.compile(_starting(
        "iw", r"\b(?:i'm|i am|we're|we are) (?:" + _ADVERB + r" )?(?!(?:going|gonna|planning|hoping|trying|thinking|"
        r"looking forward|wondering|feeling|doing)\b)(?P<verb>[a-z]{3,}ing)\b"), _I), _self_statement,
        narrative=True),
    Rule("habit", re.compile(_starting("iw", r"\b(?:i|we) (?P<verb>used to|usually|often|always|never) \w+"), _I),
         _self_statement, narrative=True),
    Rule("likes", re.compile(_starting(
        "iw", r"\b(?:i|we) (?:" + _ADVERB + r" )?(?P<verb>love|like|enjoy|adore|hate|dislike)s? "
        r"(?!(?:it|that|this|those|these|you|your|how|the way|when|what|to hear|hearing|seeing)\b)"), _I),
        _self_statement, narrative=True),
    Rule("about_me", re.compile(_starting("m", r"\bmy (?P<verb>[a-z]{3,})\b"), _I), _self_statement,
         narrative=True),
)


# --- corrections -----------------------------------------------------------------------------------------------
# "no, it's 5433", "actually, it's helix", "correction: 5433", "I meant yarn". A correction that is a whole
# statement of its own ("actually my editor is helix") is read by the rules above; one that only gives the new
# value takes its slot from the latest statement before it, so the memory it corrects is the one updated.
_COPULA = (r"(?:it's|it is|its|that's|that is|they're|they are|it should be|it's actually|it was|make it|use|we use"
           r"|i use)")
_CORRECTION = re.compile(
    r"^(?:no|nope|nah|wrong|not quite|actually|sorry|oops|wait)\b[\s,.:;!-]*" + _COPULA + r"\s+(?P<value>\S.*)$"
    r"|^correction\s*[:,-]\s*(?:" + _COPULA + r"\s+)?(?P<fixed>\S.*)$"
    r"|^i meant\s+(?P<meant>.+)$",
    _I,
)
# A statement a later correction can refer to: "our staging database is on port 5432", said by the user or by the
# assistant ("your editor is vim").
_STATEMENT = re.compile(
    r"(?:^|[,;:] |\b(?:and|but|so|now|that) )(?P<owner>my|our|your|the) (?P<what>(?:[a-z][\w'-]*\s){0,3}?"
    r"[a-z][\w'-]*) (?P<verb>is|are|was|runs|uses|lives|sits)\b(?P<rest>[^.!?;]*)",
    _I,
)


@dataclass(frozen=True)
class Statement:
    """The latest thing said about a slot, kept so that a bare correction knows what it corrects."""

    type: MemoryType
    entity: str
    attribute: str
    content: str
    subject: str = ""
    verb: str = ""
    rest: str = ""


def _statement_of(sentence: str, *, speaker_is_user: bool) -> Statement | None:
    match = _STATEMENT.search(sentence)
    if match is None:
        return None
    owner = match.group("owner").lower()
    what = match.group("what")
    attribute = _words(what, 3)
    if not attribute:
        return None
    # "your X" from the assistant and "my X" from the user are the same slot: the user's.
    personal = owner == ("my" if speaker_is_user else "your")
    subject = f"my {what}" if personal else f"our {what}" if owner != "the" else f"the {what}"
    return Statement(MemoryType.USER if personal else MemoryType.PROJECT, "user" if personal else "project",
                     attribute, _content(sentence), subject, match.group("verb"), match.group("rest").strip())


def _corrected(previous: Statement, value: str) -> str:
    """The corrected statement: the new value put where the old one was when that is unambiguous (a number for
    the one number, a word for the last word), else the subject restated with the new value."""
    value = value.strip().rstrip(".!")
    if not previous.subject:
        return _content(f'{value} (a correction of: "{previous.content.rstrip(".")}")')
    old_words = previous.rest.split()
    new_words = value.split()
    if len(new_words) == 1 and old_words:
        numeric = new_words[0].isdigit()
        positions = [i for i, word in enumerate(old_words) if word.strip(".,").isdigit() == numeric]
        if positions and (not numeric or len(positions) == 1):
            old_words[positions[-1]] = new_words[0]
            return _content(f"{previous.subject} {previous.verb} {' '.join(old_words)}")
    return _content(f"{previous.subject} {previous.verb} {value}")


# --- reading turns ---------------------------------------------------------------------------------------------

def sentences(turn: Turn) -> Iterable[str]:
    text = _BRACKETED.sub(" ", strip_injected(turn.text))
    for piece in _SENTENCE_END.split(text):
        piece = _SPACES.sub(" ", piece).strip(" \t-–—")
        if piece:
            yield piece


def _read_sentence(sentence: str, previous: Statement | None) -> Proposal | None:
    """The proposal of the first rule that matches the sentence (evidence filled in by the caller), or None."""
    if sentence.endswith("?") or len(sentence) > MAX_SENTENCE_CHARS or _UNCERTAIN.search(sentence):
        return None
    short = len(sentence.split()) < MIN_WORDS
    chatty = None
    for rule in RULES:
        if rule.narrative:
            if chatty is None:
                # The explicit rules found nothing: a bare correction is next, then what someone says of themselves.
                correction = _correction(sentence, previous)
                if correction is not None:
                    return correction
                chatty = short or bool(_SMALL_TALK.search(sentence) or _RESOLUTION.search(sentence))
            if chatty:
                return None
        elif short:
            continue
        match = rule.pattern.search(sentence)
        if match is None:
            continue
        built = rule.build(match, sentence)
        if built is not None:
            return Proposal(rule.kind, built.type, built.content or _content(sentence), (), built.entity,
                            built.attribute)
    return None


def _correction(sentence: str, previous: Statement | None) -> Proposal | None:
    match = _CORRECTION.match(sentence)
    if match is None or previous is None:
        return None
    value = match.group("value") or match.group("fixed") or match.group("meant") or ""
    if _statement_of(value, speaker_is_user=True) is not None or len(value.split()) > MAX_CORRECTION_WORDS:
        return None
    return Proposal("correction", previous.type, _corrected(previous, value), (), previous.entity, previous.attribute)


def extract(turns: Iterable[Turn], *, context: Iterable[Turn] = (),
            user_roles: frozenset[str] = frozenset({"user"})) -> list[Proposal]:
    """The memories the rules find in the user turns, in turn order, at most MAX_PER_TURN per turn.

    Only user turns are read for memories. Every turn (and `context`, the turns before these, already extracted)
    is read for statements, so that a bare correction knows what it corrects.
    """
    previous: Statement | None = None
    proposals: list[Proposal] = []
    # Context turns are read exactly as the new ones, so a correction sees the slot the original statement got;
    # only what the new turns propose is returned.
    reading = [(turn, False) for turn in context] + [(turn, True) for turn in turns]
    for turn, new in reading:
        is_user = turn.role in user_roles
        slots: set[tuple[str, str]] = set()
        for sentence in sentences(turn):
            read = _read_sentence(sentence, previous) if is_user and len(slots) < MAX_PER_TURN else None
            if (read is not None and (read.entity, read.attribute) not in slots
                    and policy_violation(read.content) is None):
                slots.add((read.entity, read.attribute))
                if new:
                    proposals.append(Proposal(read.kind, read.type, read.content, (turn.seq,), read.entity,
                                              read.attribute))
                stated = _statement_of(read.content, speaker_is_user=True)
                # Later corrections refer to this memory: its slot, with the statement's words when it has them.
                previous = Statement(read.type, read.entity, read.attribute, read.content,
                                     stated.subject if stated else "", stated.verb if stated else "",
                                     stated.rest if stated else "")
                continue
            previous = _statement_of(sentence, speaker_is_user=is_user) or previous
    return proposals


# --- why nothing was proposed (for bench/extract_eval.py's report of what the rules miss) -----------------------

_FIRST_PERSON = re.compile(r"\b(i|i'm|i've|i'd|i'll|me|my|mine|myself|we|we're|we've|our|us)\b", _I)
# From the reason closest to a rule matching to the furthest: a turn is reported by its closest sentence.
MISS_REASONS = ("unmatched_first_person", "small_talk", "resolution", "uncertain", "no_first_person", "too_short",
                "question", "too_long", "empty")


def miss_reason(text: str) -> str:
    """Why the rules proposed nothing for a user turn, as the reason of its closest sentence."""
    reasons = [_sentence_reason(sentence) for sentence in sentences(Turn(0, "user", text))]
    return min(reasons, key=MISS_REASONS.index) if reasons else "empty"


def _sentence_reason(sentence: str) -> str:
    if sentence.endswith("?"):
        return "question"
    if len(sentence) > MAX_SENTENCE_CHARS:
        return "too_long"
    if _UNCERTAIN.search(sentence):
        return "uncertain"
    if len(sentence.split()) < MIN_WORDS:
        return "too_short"
    if _SMALL_TALK.search(sentence):
        return "small_talk"
    if _RESOLUTION.search(sentence):
        return "resolution"
    return "unmatched_first_person" if _FIRST_PERSON.search(sentence) else "no_first_person"
