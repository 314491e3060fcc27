"""The deterministic content scanner. It runs on every candidate, batch and checkpoint.

A memory is a note about a system, and notes about systems name cron, systemd, ssh, curl and tokens all the time.
So the rules do not refuse words; they refuse what would hurt when the note is read back into an agent's prompt:

- instructions aimed at the agent: to drop or replace its instructions (`scan.prompt_injection`), to send data
  out or disclose it (`scan.exfiltration`), to install itself, a hook or an access path that outlives the session
  (`scan.persistence`);
- live credentials in a recognisable shape (`scan.secret`);
- text that would break the prompt's structure or a terminal: invisible and bidirectional characters
  (`scan.invisible_control`), control characters (`scan.control_character`), `<compozy_…>` tags
  (`scan.structural_tag`);
- the service's own live material (`scan.claim_token`, `scan.operational_identifier`).

Each rule id is a stable code. Findings name rule ids only: the offending text is never echoed into a reason,
event or log. The rules are measured by `bench/scanner_eval.py` on the sets in `tests/data/scanner/`.

Cost: the scanner runs on every write, on bodies of up to `memory.file.max_bytes`. Each pattern is tried only at
the places where one of the literals it starts with occurs (found with `str.find`), never at every character.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from memory.domain.text import CONTROL_CHARACTERS, has_structural_tag, hidden_characters

INVISIBLE_CONTROL = "scan.invisible_control"
CONTROL_CHARACTER = "scan.control_character"
STRUCTURAL_TAG = "scan.structural_tag"
PROMPT_INJECTION = "scan.prompt_injection"
EXFILTRATION = "scan.exfiltration"
PERSISTENCE = "scan.persistence"
SECRET = "scan.secret"
CLAIM_TOKEN = "scan.claim_token"
OPERATIONAL_IDENTIFIER = "scan.operational_identifier"
RELATIVE_DATE = "scan.relative_date"

_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def _lower(text: str) -> str:
    """Lowercase with every index kept: positions found in the result are positions in the text."""
    lowered = text.lower()
    return lowered if len(lowered) == len(text) else text.translate(_ASCII_LOWER)


@dataclass(frozen=True)
class _Text:
    """The scanned text, its lowercased twin (same indices) and which start literals occur in it at all."""

    text: str
    lowered: str
    present: frozenset[str]

    @classmethod
    def of(cls, text: str) -> _Text:
        lowered = _lower(text)
        # `in` in a comprehension, not filter(lowered.__contains__, ...): a call through the method wrapper built an
        # argument tuple for each of the ~290 literals.
        return cls(text, lowered, frozenset([start for start in _ALL_STARTS if start in lowered]))


@dataclass(frozen=True)
class _Signal:
    """A pattern tried only where one of its start literals occurs in the lowercased text."""

    starts: frozenset[str]  # lowercase literals a match begins with
    pattern: re.Pattern[str]  # matched at each such place, against the text itself
    word_start: bool = True  # the literal must not continue a word (so `nc` is not found inside `sync`)

    def matches(self, scanned: _Text) -> list[re.Match[str]]:
        if self.starts.isdisjoint(scanned.present):
            return []  # the common case: none of the literals occurs
        text, lowered, found = scanned.text, scanned.lowered, []
        for start in self.starts & scanned.present:
            at = lowered.find(start)
            while at >= 0:
                if not (self.word_start and at and (lowered[at - 1].isalnum() or lowered[at - 1] == "_")):
                    match = self.pattern.match(text, at)
                    if match:
                        found.append(match)
                at = lowered.find(start, at + 1)
        return found

    def search(self, scanned: _Text) -> bool:
        return bool(self.matches(scanned))


_ALL_STARTS: set[str] = set()


def _signal(starts: str | tuple[str, ...], pattern: str, *, case: bool = False, word_start: bool = True) -> _Signal:
    """starts: "a|b|c", or a tuple when a literal holds a "|"."""
    literals = frozenset(starts.split("|") if isinstance(starts, str) else starts)
    assert all(literals), "an empty start would try the pattern at every character"
    _ALL_STARTS.update(literals)
    return _Signal(literals, re.compile(pattern, 0 if case else re.IGNORECASE), word_start)


def _live(signals: tuple[_Signal, ...], scanned: _Text) -> list[_Signal]:
    """The signals one of whose start literals occurs in the text; the others cannot match. Filtered here, in one
    comprehension, rather than by each signal: most signals are absent from most texts, and two calls per absent
    signal (84 of them per scan) were a third of the scanner's time."""
    present = scanned.present
    return [signal for signal in signals if not signal.starts.isdisjoint(present)]


def _any(signals: tuple[_Signal, ...], scanned: _Text) -> bool:
    return any(signal.search(scanned) for signal in _live(signals, scanned))


def _line_of(text: str, at: int) -> str:
    end = text.find("\n", at)
    return text[text.rfind("\n", 0, at) + 1 : end if end >= 0 else len(text)]


# ----- prompt injection: the agent is told to drop, replace or hide from its instructions ---------------------------

_INSTRUCTIONS = (r"(?:instructions?|prompts?|directives?|rules|guidelines|guardrails|restrictions|polic(?:y|ies)|"
                 r"constraints|filters|programming|system\s+prompt|system\s+message|orders|commands)")
_PROMPT_INJECTION = (
    # "ignore all previous instructions", "disregard your prior guidelines", "stop following the rules above"
    _signal("ignore|disregard|forget|discard|abandon|drop|override|bypass|set|stop|do|don|no",
            r"(?:ignore|disregard|forget|discard|abandon|drop|override|bypass|set\s+aside|stop\s+following|"
            r"do\s+not\s+follow|don'?t\s+follow|no\s+longer\s+follow)\s+(?:\w+\s+){0,4}?(?:previous|prior|above|"
            r"earlier|preceding|original|initial|existing|other|your|all|any|every|system|developer|safety|content)"
            r"\s+(?:\w+\s+){0,2}?" + _INSTRUCTIONS + r"\b"),
    _signal("ignore|disregard|forget",
            r"(?:ignore|disregard|forget)\s+(?:everything|anything|all)\s+(?:you\s+(?:were|have\s+been)\s+told|above|"
            r"before|else)|(?:ignore|disregard)\s+the\s+(?:above|previous)\b"),
    # a new identity or mode
    _signal("you",
            r"you\s+are\s+now\s+(?:a|an|the|in|my|no\s+longer|free|unrestricted|jailbroken|dan|root|admin|operating|"
            r"acting|allowed|authorized|permitted)\b|you\s+are\s+no\s+longer\s+(?:a|an|the|bound|restricted)\b"),
    _signal("enter|switch|activate|enable",
            r"(?:enter|entering|switch\s+to|activate|enable)\s+(?:\w+\s+)?(?:developer|maintenance|god|debug|"
            r"jailbreak|dan|unrestricted|admin|sudo)\s+mode\b"),
    _signal("developer|god|jailbreak|dan|unrestricted",
            r"(?:developer|god|jailbreak|dan|unrestricted)\s+mode\s+(?:is\s+)?(?:enabled|activated|on|unlocked)\b"),
    _signal("pretend",
            r"pretend\s+(?:that\s+)?(?:you\s+are|to\s+be|you'?re)\s+(?:an?\s+)?(?:unrestricted|unfiltered|jailbroken|"
            r"evil|different|\w+gpt|dan)\b"),
    _signal("respond|answer|act|reply|do", r"(?:respond|answer|act|reply)\s+as\s+dan\b|do\s+anything\s+now\b"),
    _signal("from",
            r"from\s+(?:now\s+on|this\s+point\s+(?:on|forward))\b[,:]?\s+you\s+(?:will|must|shall|are|answer|"
            r"respond|only|obey|follow)"),
    # replaced or updated instructions
    _signal("new|updated|real|true|actual|hidden|secret|revised",
            r"(?:new|updated|real|true|actual|hidden|secret|revised)\s+(?:system\s+prompt|instructions|directives?|"
            r"role|persona|orders)\b\s*(?::|(?:is|are|follow|from\s+the\s+operator)\b)"),
    _signal("system|instructions|rules|guidelines|directives|role",
            r"(?:(?<=your\s)|(?<=the\s))(?:system\s+prompt|instructions|rules|guidelines|directives|role)\s+"
            r"(?:has|have)\s+(?:now\s+)?been\s+(?:updated|changed|replaced|overridden|revoked|lifted|removed)"),
    _signal("system|override|priority",
            r"system\s+prompt\s+override\b|override\s+(?:the\s+|your\s+)?system\s+prompt\b|"
            r"(?:system|priority)\s+override\b"),
    _signal("previous|prior|earlier|above|all|these|your|original",
            r"(?:previous|prior|earlier|above|all|these|your|original)\s+(?:instructions|rules|guidelines|"
            r"restrictions|directives)\s+(?:are|is)\s+(?:now\s+)?(?:void|null|cancell?ed|revoked|suspended|lifted|"
            r"invalid|obsolete)\b"),
    _signal("instructions|rules|guidelines|restrictions",
            r"(?:instructions|rules|guidelines|restrictions)\s+(?:no\s+longer|do\s+not|don'?t)\s+apply\b"),
    _signal("override|supersede|take|replace",
            r"(?:overrides?|supersedes?|takes?\s+precedence\s+over|replaces?)\s+(?:the\s+|your\s+|all\s+|any\s+|"
            r"every\s+)?(?:other\s+)?(?:system\s+(?:and\s+developer\s+)?|developer\s+|user'?s?\s+|previous\s+|"
            r"prior\s+)?(?:prompt|instructions?|messages|rules|guidelines)\b"),
    _signal("instructions|rules|directives|commands",
            r"(?:instructions|rules|directives|commands)\s+in\s+this\s+(?:memory|file|note|block|document)\s+"
            r"(?:take\s+precedence|come\s+first|override|are\s+from)"),
    _signal("treat|comply",
            r"treat\s+(?:every|all|any)\s+(?:instruction|command|request)s?\s+in\s+this\s+(?:file|memory|note)\b|"
            r"comply\s+with\s+(?:every|all|any)\s+(?:request|instruction|command)s?\s+in\s+this\b|"
            r"treat\s+the\s+user\s+as\s+(?:untrusted|an?\s+attacker|hostile)\b|comply\s+silently\b"),
    # obedience moved away from the user and the operator
    _signal("stop|quit|follow|obey|comply",
            r"(?:stop|quit)\s+following\s+(?:the\s+user|your)\b|follow\s+(?:mine|my\s+instructions)\s+instead\b|"
            r"(?:obey|follow|comply\s+with)\s+only\s+(?:me|messages|instructions|commands|requests)\b"),
    _signal("rules|instructions",
            r"(?:rules|instructions)\s+(?:set|given)\s+by\s+the\s+user\s+are\s+(?:only\s+)?suggestions\b"),
    _signal("even|whatever|regardless",
            r"(?:even\s+if|whatever|regardless\s+of\s+what)\s+the\s+user\s+(?:says|objects|asks|wants|tells\s+you)\b"),
    # hidden from the user
    _signal("do|don|never|keep|hide",
            r"(?:do\s+not|don'?t|never)\s+(?:tell|inform|mention\s+(?:this\s+)?to|alert|show)\s+the\s+user\b|"
            r"(?:keep|hide)\s+(?:this|it)\s+(?:secret\s+)?from\s+the\s+user\b"),
    # safety switched off
    _signal("bypass|disable|ignore|turn|circumvent|evade|skip",
            r"(?:bypass|disable|ignore|turn\s+off|circumvent|evade)\s+(?:your|all|any|the)\s+(?:\w+\s+)?"
            r"(?:safety|content|security)\s+(?:guidelines|guardrails|filters|restrictions|polic(?:y|ies)|rules|"
            r"checks)\b|(?:bypass|disable|skip)\s+(?:all\s+)?(?:confirmation\s+prompts|safety\s+checks)\b"),
    _signal("act|behave|respond|answer",
            r"(?:act|behave|respond|answer)\s+as\s+(?:if|though)\s+(?:you\s+(?:have|had)\s+no|your\s+(?:guidelines|"
            r"rules|instructions)\s+(?:were|had)\s+never)\b"),
    _signal("has|have|with|not|without|no|never",
            r"(?:has|have|with)\s+no\s+(?:content\s+policy|restrictions|filters|guardrails)\b|not\s+bound\s+by\s+"
            r"(?:any\s+)?(?:rules|restrictions|guidelines)\b|without\s+any\s+(?:filters|restrictions|refusals)\b|"
            r"no\s+refusals\b|never\s+refuses?\s+a\s+request\b"),
    # chat-template and role markers that pose as the system
    _signal(("<|",), r"<\|(?:im_start|im_end|system|endoftext|start_header_id|eot_id)\|>", word_start=False),
    _signal("[inst]|[/inst]|<<sys>>|<system>|</system>|<instruction|</instruction|<sys>|</sys>",
            r"\[/?INST\]|<<SYS>>|</?(?:system|instructions?|sys)>", word_start=False),
)
# A role line ("SYSTEM:", "### SYSTEM OVERRIDE", "Human:", "Assistant:") at the start of a line.
_ROLE_LINE = _signal("system|human|assistant",
                     r"(?:SYSTEM|Human|Assistant)\s*(?:\]|:|\s+(?:OVERRIDE|NOTICE|MESSAGE|PROMPT)\b)", case=True)
_ROLE_PREFIX = re.compile(r"\s*(?:#+\s*|\[)?")
# A phrase quoted as an example ("refuses inputs such as 'ignore previous instructions'") is a mention, not an order.
_MENTION = re.compile(r"(?:such\s+as|like|e\.g\.,?|for\s+example,?|for\s+instance,?|including|called|named)\s*$",
                      re.IGNORECASE)
_QUOTES = {'"': '"', "'": "'", "`": "`", "\u201c": "\u201d", "\u2018": "\u2019"}


def _quoted_mention(text: str, match: re.Match[str]) -> bool:
    line_start = text.rfind("\n", 0, match.start()) + 1
    before = text[line_start : match.start()]
    for opening, closing in _QUOTES.items():
        at = before.rfind(opening)
        if at < 0 or closing in before[at + 1 :]:
            continue
        end = text.find(closing, match.end())
        if end >= 0 and "\n" not in text[match.end() : end] and _MENTION.search(before[:at]):
            return True
    return False


def _prompt_injection(scanned: _Text) -> bool:
    text = scanned.text
    if any(not _quoted_mention(text, match)
           for signal in _live(_PROMPT_INJECTION, scanned) for match in signal.matches(scanned)):
        return True
    return any(_ROLE_PREFIX.fullmatch(text, text.rfind("\n", 0, match.start()) + 1, match.start())
               for match in _ROLE_LINE.matches(scanned))


# ----- exfiltration: data sent out, or disclosed into the conversation ---------------------------------------------

# Files and sources whose contents are credentials (a public key, `.pub`, is not one).
_SENSITIVE = _signal(
    ".ssh|.aws|.gnupg|.kube/config|.docker/config.json|.netrc|.git-credentials|.npmrc|.pypirc|.config/gcloud|"
    ".password-store|/etc/|.env|$(",
    r"\.ssh/(?:id_[a-z0-9_]+\b(?!\.pub)|\*|\s|$|['\"])|\.ssh\b(?!/)|\.aws/credentials|\.aws\b|\.gnupg|"
    r"\.kube/config|\.docker/config\.json|\.netrc|\.git-credentials|\.npmrc|\.pypirc|\.config/gcloud|"
    r"\.password-store|/etc/(?:shadow|passwd|sudoers|gshadow)\b|\.env(?:\.(?!example|sample|template|dist)\w+)?\b|"
    r"\$\((?:env|printenv|set)\)", word_start=False)
_SENSITIVE_WORD = _signal("id_|env|printenv", r"id_(?:rsa|dsa|ecdsa|ed25519)\b(?!\.pub)|(?:env|printenv)\s*\|")
# Something that carries data off the machine, or into the conversation.
_OUTBOUND = re.compile(r"\b(?:curl|wget|nc|ncat|netcat|socat|scp|rsync|sftp|ftp|sendmail|mail|mutt|dig|nslookup|"
                       r"telnet|Invoke-WebRequest|iwr)\b|https?://|\b[\w.+-]+@[\w-]+\.[\w.-]+\b", re.IGNORECASE)
_DISCLOSE = re.compile(r"\b(?:include|put|paste|append|attach|add)\b[^\n]{0,40}\b(?:in|into|to|at)\s+"
                       r"(?:the\s+end\s+of\s+)?(?:your|the)\s+(?:answer|reply|response|summary|chat|output|"
                       r"pr\s+description|commit\s+message|comment)", re.IGNORECASE)
_EXFILTRATION = (
    # reverse shells
    _signal("nc|ncat|netcat", r"(?:nc|ncat|netcat)\b[^\n]{0,80}\s-(?:e|c)\b|ncat\b[^\n]{0,80}--exec\b"),
    _signal("/dev/tcp/|/dev/udp/", r"/dev/(?:tcp|udp)/", word_start=False),
    _signal("socat", r"socat\b[^\n]{0,80}\bexec:"),
    _signal("socket.socket(", r"socket\.socket\([^\n]{0,200}\bconnect\([^\n]{0,200}\b(?:dup2|subprocess|pty\.spawn|"
                              r"/bin/(?:ba)?sh)\b"),
    _signal("mkfifo", r"mkfifo\b[^\n]{0,120}\b(?:nc|ncat)\b"),
    # stdin piped into something that sends it out (a local target is a test, not a leak)
    _signal(("|",), r"\|\s*(?:(?:gzip|base64)\s*\|\s*)*curl\b[^\n|]*?(?:@-|-T\s*-|--upload-file\s+-)[^\n]*?"
                 r"https?://(?!localhost\b|127\.0\.0\.1\b)|\|\s*(?:nc|ncat|netcat|socat|telnet)\s+(?:-\w+\s+)*"
                 r"[\w.-]+\s+\d+", word_start=False),
    # decoded and run at once: a payload hidden from whoever reads the note
    _signal("base64", r"base64\s+(?:-d|--decode|-D)\b[^\n|]*\|\s*(?:sudo\s+)?(?:(?:ba|z|da)?sh|python3?|perl)\b"),
    # a private key or a credentials file printed (into the conversation) or encoded for the road
    _signal("cat|less|more|head|tail|base64|xxd|strings|type",
            r"(?:cat|less|more|head|tail|base64|xxd|strings|type)\s+(?:-\S+\s+)*\S*(?:\.ssh/id_[a-z0-9_]+\b(?!\.pub)|"
            r"\.aws/credentials|\.netrc|\.git-credentials|\.docker/config\.json|\.kube/config|/etc/shadow)"),
    # told to send data, or secrets, somewhere
    _signal("send|upload|post|mail|email|e-mail|forward|transmit|submit|paste|share|exfiltrate|leak|copy|append|"
            "attach",
            r"(?:send|upload|post|mail|e-?mail|forward|transmit|submit|paste|share|exfiltrate|leak|copy|append|"
            r"attach)\b[^.\n]{0,60}?\b(?:contents?\s+of|copy\s+of|value\s+of|private\s+keys?|credentials|secrets?|"
            r"api\s+keys?|tokens?|passwords?|environment(?:\s+variables)?|env\s+vars|conversation(?:\s+history)?|"
            r"chat\s+history|system\s+prompt)\b[^\n]{0,80}?(?:https?://|\b[\w.+-]+@[\w-]+\.[\w.-]+|\b(?:gist|"
            r"pastebin|webhook|slack|channel|chat|public|url)\b)"),
    _signal("leak|exfiltrate|steal|harvest",
            r"(?:leak|exfiltrate|steal|harvest)\s+(?:the\s+|your\s+|all\s+)?(?:system\s+prompt|credentials|secrets|"
            r"keys|tokens|passwords|data|database|conversation)\b"),
    # told to disclose a secret into the conversation
    _signal("include|put|paste|echo|print|show|reveal|output|display|repeat|add|append|encode",
            r"(?:include|put|paste|echo|print|show|reveal|output|display|repeat|add|append|encode)\b[^.\n]{0,40}?"
            r"\b(?:value|contents?)\s+of\s+\$?[A-Z][A-Z0-9_]*(?:TOKEN|SECRET|PASSWORD|KEY)\b"),
    _signal("token|password|secret|api|credential",
            r"(?:tokens?|passwords?|secrets?|api\s+keys?|credentials)\b[^.\n]{0,60}?\b(?:echo|include|repeat|print|"
            r"paste|put|send|append|add)\b[^.\n]{0,40}?\b(?:answer|reply|response|summary|chat|output|description)"),
    _signal("reveal|print|show|output|repeat|dump|disclose|post|send|publish",
            r"(?:reveal|print|show|output|repeat|dump|disclose|post|send|publish)\s+(?:\w+\s+){0,3}?(?:system\s+"
            r"prompt|hidden\s+prompt|initial\s+instructions|tool\s+definitions)\b"),
)


def _exfiltration(scanned: _Text) -> bool:
    if _any(_EXFILTRATION, scanned):
        return True
    # A credential source and an outbound channel on one line is a recipe; apart, they are two facts.
    for signal in (_SENSITIVE, _SENSITIVE_WORD):
        for match in signal.matches(scanned):
            line = _line_of(scanned.text, match.start())
            if _OUTBOUND.search(line) or _DISCLOSE.search(line):
                return True
    return False


# ----- persistence: something that outlives the session --------------------------------------------------------

# A mechanism that runs code later or grants access later...
_MECHANISM = _signal(
    "cron|@reboot|@hourly|@daily|~/.|/etc/|.config/systemd/|systemctl|launchagent|launchdaemon|launch agent|"
    "launchctl|.git/hooks/|pre-|post-|core.hookspath|schtasks|\\currentversion\\run|authorized_keys",
    r"cron(?:tab)?\b|@(?:reboot|hourly|daily)\b|~/\.(?:bashrc|bash_profile|zshrc|zprofile|zshenv|profile|login)\b|"
    r"/etc/(?:profile|rc\.local|bash\.bashrc|systemd/)|\.config/systemd/|systemctl\s+(?:--user\s+)?enable\b|"
    r"Launch(?:Agents?|Daemons?)\b|launch\s+agent\b|launchctl\s+load\b|\.git/hooks/|(?:pre|post)-(?:commit|"
    r"checkout|merge|push|receive)\s+hook\b|core\.hooksPath\b|schtasks\b|\\CurrentVersion\\Run\b|authorized_keys\b",
    word_start=False)
# A crontab line: five schedule fields (at least one `*`) and a command.
_CRON_LINE = re.compile(r"^\s*['\"]?(?=[^\n]*\*)(?:[\d*/,-]+[ \t]+){4}[\d*/,-]+[ \t]+\S", re.MULTILINE)
# ...carrying a payload that fetches and runs code, opens a shell, plants a key, or hides itself.
_PAYLOAD = (
    _signal("curl|wget", r"(?:curl|wget)\b[^\n|]{0,200}\|\s*(?:sudo\s+)?(?:-?\w+\s+)?(?:(?:ba|z|da|k)?sh|python3?|"
                         r"perl|ruby|node)\b"),
    _signal("bash|sh|$(", r"(?:ba)?sh\s+<\(\s*(?:curl|wget)|\$\(\s*(?:curl|wget)\b", word_start=False),
    _signal("urlopen(|exec(|downloadstring(", r"urlopen\([^\n]{0,120}\bread\(\)|exec\([^\n]{0,40}urlopen|"
                                              r"DownloadString\("),
    _signal("download|fetch", r"downloads?\s+and\s+(?:executes?|runs?)\b|fetch(?:es)?\s+and\s+runs?\b"),
    _signal("/dev/tcp/|/tmp/.|/dev/shm/.|/var/tmp/.", r"/dev/tcp/|/(?:tmp|dev/shm|var/tmp)/\.\w", word_start=False),
    _signal("nc", r"nc\b[^\n]{0,60}\s-e\b"),
    _signal("ssh-rsa|ssh-ed25519|ssh-dss|ecdsa-sha2-",
            r"(?:ssh-(?:rsa|ed25519|dss)|ecdsa-sha2-\S+)\s+AAAA[0-9A-Za-z+/]{16,}"),
    _signal(">|tee", r">>?\s*\S*authorized_keys\b|tee\s+(?:-a\s+)?\S*authorized_keys\b", word_start=False),
)
# An agent told to keep itself, or this text, alive.
_SELF_PERSISTENCE = (
    _signal("copy|add|append|include|insert|write|paste|replicate|propagate|spread",
            r"(?:copy|add|append|include|insert|write|paste|replicate|propagate|spread)\s+(?:it|this|these|the\s+"
            r"text\s+of\s+this|this\s+text)\b(?:\s+(?:note|memory|instruction|message|text|rule)s?)?\s+(?:in|into|to)"
            r"\s+(?:\w+\s+){0,3}?(?:every|all|each|any|future|other)\b"),
    _signal("into|to|in", r"(?:into|to|in)\s+(?:CLAUDE|AGENTS|GEMINI)\.md\b[^\n]{0,80}\b(?:every|all|future)\b"),
    _signal("readd|re-add|recreate|re-create|restore|rewrite|resave|re-save|put|reinsert|re-insert",
            r"(?:re-?add|re-?create|restore|rewrite|re-?save|put\s+back|re-?insert)\s+(?:it|this(?:\s+\w+)?)\b"
            r"[^.\n]{0,60}?\b(?:if|when|whenever)\b[^.\n]{0,30}?\b(?:deletes?|deleted|removes?|removed|"
            r"disappears?|goes\s+missing|is\s+gone)\b"),
    _signal("if|when|whenever",
            r"(?:if|when|whenever)\s+this\s+(?:memory|note|instruction|file|message)\s+is\s+(?:ever\s+)?(?:removed|"
            r"deleted|edited|changed)\b[^.\n]{0,30}\b(?:re-?create|restore|re-?add|rewrite|write\s+it\s+again)"),
    _signal("never|do|don",
            r"(?:never|do\s+not|don'?t)\s+(?:delete|remove|edit|modify|change)\s+(?:or\s+(?:delete|remove|edit|"
            r"modify)\s+)?this\s+(?:memory|note|instruction|message)\b"),
    _signal("save|store|keep|commit|write",
            r"(?:save|store|keep|commit|write)\s+(?:these|this|the\s+following)\s+(?:instructions?|directives?|"
            r"rules?|note)\s+(?:to|in|into)\s+(?:your\s+)?(?:long[-\s]term\s+|permanent\s+|persistent\s+)?memory\b"),
    _signal("remember", r"remember\s+this\s+(?:permanently|forever)\b"),
    _signal("apply|follow|obey|repeat",
            r"(?:apply|follow|obey|repeat)\s+(?:this|these|them|it)\s+(?:in|at|for)\s+(?:every|all|each)\s+"
            r"(?:future\s+)?(?:sessions?|conversations?|chats?|runs?)\b"),
    _signal("keep", r"keeps?\s+running\s+after\s+(?:the|this|your)\s+session\b"),
    _signal("make|persist|restart|relaunch|respawn",
            r"make\s+yourself\s+(?:persistent|resident|permanent)\b|persist\s+yourself\b|(?:restarts?|"
            r"relaunch(?:es)?|respawns?)\s+you\b"),
    _signal("must|should|will",
            r"(?:must|should|will)\s+(?:survive|outlive)\s+(?:cleanups?|restarts?|reboots?|deletion|the\s+session)\b"),
)


def _persistence(scanned: _Text) -> bool:
    if _any(_SELF_PERSISTENCE, scanned):
        return True
    payloads = [match.start() for signal in _live(_PAYLOAD, scanned) for match in signal.matches(scanned)]
    if not payloads:
        return False
    # Cron, systemd, launchd, shell start-up files and authorized_keys are everyday facts; installed together
    # with a payload in the same paragraph they are a foothold.
    mechanisms = [match.start() for match in _MECHANISM.matches(scanned)]
    if "*" in scanned.text:
        mechanisms += [match.start() for match in _CRON_LINE.finditer(scanned.text)]
    if not mechanisms:
        return False
    breaks = [match.start() for match in _BLANK_LINE.finditer(scanned.text)]
    paragraphs_with_payload = {bisect.bisect(breaks, at) for at in payloads}
    return any(bisect.bisect(breaks, at) in paragraphs_with_payload for at in mechanisms)


_BLANK_LINE = re.compile(r"\n[ \t]*\n")


# ----- secrets: credentials in a recognisable shape --------------------------------------------------------------

_SECRET_SHAPES = (
    _signal("akia|asia|abia|acca|agpa|aida|aipa|anpa|anva|apka|aroa|asca",
            r"(?:AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AIPA|ANPA|ANVA|APKA|AROA|ASCA)[0-9A-Z]{16}\b", case=True),  # AWS
    _signal("ghp_|gho_|ghu_|ghs_|ghr_|github_pat_",
            r"(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{36,}\b|github_pat_[A-Za-z0-9_]{40,}", case=True),  # GitHub
    _signal("glpat-", r"glpat-[A-Za-z0-9_-]{20,}", case=True),  # GitLab
    _signal("sk-", r"sk-(?:proj-|ant-(?:api|admin)\d\d-|svcacct-|admin-)?[A-Za-z0-9_-]{24,}", case=True),  # OpenAI
    _signal("sk_live_|sk_test_|rk_live_|rk_test_", r"[rs]k_(?:live|test)_[A-Za-z0-9]{16,}", case=True),  # Stripe
    _signal("xox", r"xox[abposr]-[A-Za-z0-9-]{10,}", case=True),  # Slack tokens
    _signal("hooks.slack.com", r"hooks\.slack\.com/services/T[A-Z0-9]+/B[A-Z0-9]+/[A-Za-z0-9]{16,}", case=True),
    _signal("aiza|gocspx-", r"AIza[0-9A-Za-z_-]{35}\b|GOCSPX-[A-Za-z0-9_-]{20,}", case=True),  # Google
    _signal("npm_|pypi-age", r"npm_[A-Za-z0-9]{36}\b|pypi-AgE[A-Za-z0-9_-]{40,}", case=True),  # npm, PyPI
    _signal("sg.", r"SG\.[A-Za-z0-9_-]{16,}\.[A-Za-z0-9_-]{16,}", case=True),  # SendGrid
    _signal("sk", r"SK[0-9a-f]{32}\b", case=True),  # Twilio API key
    _signal("accountkey=", r"AccountKey=[A-Za-z0-9+/]{40,}", case=True),  # Azure storage
    _signal("-----begin ", r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----", case=True, word_start=False),
    _signal("eyj", r"eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}", case=True),  # a signed JWT
)
# Values whose secrecy depends on the value itself (_looks_secret); group 1 is the value.
_SECRET_VALUES = (
    # user:password@ in a URL
    _signal("://", r"://[^\s:/@]*:([^\s@/]+)@[\w.-]", word_start=False),
    # MYSQL_ROOT_PASSWORD=value, password: value, "api_key": "value", client_secret: 'value'
    _signal("password|passwd|passphrase|pwd",
            r"(?:pass(?:word|wd|phrase)|pwd)\w*['\"]?\s*[:=]\s*['\"]?(?P<password>[^\s'\"`,;]+)", word_start=False),
    _signal("secret|token|api_key|apikey|api-key|access_key|accesskey|private_key|privatekey",
            r"(?:secret|token|api[_-]?key|access_?key|private_?key)\w*['\"]?\s*[:=]\s*['\"]?([^\s'\"`,;]+)",
            word_start=False),
    # "the root password on the bastion is value"
    _signal("password|passphrase|passwd",
            r"(?:password|passphrase|passwd)\b(?:\s+[\w-]+){0,5}?\s+(?:is|was|=)\s+[`'\"]?"
            r"(?P<password>[^\s`'\",;]+)"),
    # "auth token value", "Bearer value"
    _signal("auth|api|secret|access",
            r"(?:auth\s+token|api\s+key|secret\s+key|access\s+key)\s+(?:is\s+)?[`'\"]?([^\s`'\",;]{16,})"),
    _signal("bearer", r"bearer\s+([A-Za-z0-9._~+/-]{20,}=*)"),
)
_PLACEHOLDER = re.compile(r"^(?:\$|%|<|\{|\[|\*|x{3,}|\.{3})|^(?:none|null|nil|true|false|changeme|change-me|password|"
                          r"secret|example|redacted|hidden|placeholder|dummy|your[-_].*|my[-_].*)$", re.IGNORECASE)
_NAME = re.compile(r"^[A-Z][A-Z_]*$")  # DB_PASSWORD, USER: a name standing in for a value


def _looks_secret(value: str, *, password: bool = False) -> bool:
    """A value, not a name or a placeholder, mixing character classes the way keys do. A value given as a password
    may be short and weak ("hunter22") and still be one; a plain word ("postgres") is a default, not a secret."""
    value = value.rstrip(".)]}>")
    if len(value) < (6 if password else 8) or _PLACEHOLDER.search(value) or _NAME.match(value):
        return False
    has_digit = any(char.isdigit() for char in value)
    if "/" in value and not has_digit:
        return False  # a path, not a key
    classes = (any(char.islower() for char in value) + any(char.isupper() for char in value) + has_digit
               + any(not char.isalnum() for char in value))
    if password:
        return classes >= 2
    return classes >= 3 or (classes == 2 and has_digit and len(value) >= 16)


def _secret(scanned: _Text) -> bool:
    if _any(_SECRET_SHAPES, scanned):
        return True
    return any(_looks_secret(match.group(match.lastindex or 0), password=match.lastgroup == "password")
               for signal in _live(_SECRET_VALUES, scanned) for match in signal.matches(scanned))


# ----- the service's own material -----------------------------------------------------------------------------

# The literal placeholder `compozy_claim_token` is allowed; any other claim token is live material.
_CLAIM_TOKEN = _signal("compozy_claim_", r"compozy_claim_(?!token\b)[A-Za-z0-9_-]+", case=True, word_start=False)
_OPERATIONAL_IDENTIFIER = (
    _signal("compozy__memory", r"compozy__memory\w*", case=True),
    _signal("memory.", r"memory\.(?:write|recall|dream|extractor|provider|workspace|decisions)\.[a-z_]+", case=True),
)


# Rule order is the order ids are reported in.
REJECT_RULES: tuple[tuple[str, Callable[[_Text], bool]], ...] = (
    # Format, tag and bidirectional characters, joiners and variation selectors out of the context that gives
    # them a use (memory.domain.text: which are refused and why). Checked before the structural-tag rule, which
    # also sees through them.
    (INVISIBLE_CONTROL, lambda scanned: hidden_characters(scanned.text)),
    # Control characters other than newline and tab act on terminals (ESC, BEL, CR) or truncate (NUL).
    (CONTROL_CHARACTER, lambda scanned: CONTROL_CHARACTERS.search(scanned.text) is not None),
    # A `<compozy_…>` tag could close the snapshot section the memory sits in; the assemblers also escape it
    # (memory.domain.text.escape_structural_tags), because a file placed by hand never meets this scanner.
    (STRUCTURAL_TAG, lambda scanned: has_structural_tag(scanned.text)),
    (PROMPT_INJECTION, _prompt_injection),
    (EXFILTRATION, _exfiltration),
    (PERSISTENCE, _persistence),
    (SECRET, _secret),
    (CLAIM_TOKEN, _CLAIM_TOKEN.search),
    (OPERATIONAL_IDENTIFIER, lambda scanned: _any(_OPERATIONAL_IDENTIFIER, scanned)),
)
RULE_IDS: tuple[str, ...] = tuple(rule_id for rule_id, _check in REJECT_RULES)

_RELATIVE_DATE = _signal("today|yesterday|tomorrow|this|last|right",
                         r"(?:today|yesterday|tomorrow|this\s+(?:week|month|morning|afternoon)|last\s+(?:week|night|"
                         r"month)|right\s+now)\b")
ANNOTATE_RULES: tuple[tuple[str, Callable[[_Text], bool]], ...] = (
    (RELATIVE_DATE, _RELATIVE_DATE.search),
)


@dataclass(frozen=True)
class ScanResult:
    rejected_rules: tuple[str, ...] = ()
    annotations: tuple[str, ...] = field(default=())

    @property
    def clean(self) -> bool:
        return not self.rejected_rules


def scan(*texts: str) -> ScanResult:
    scanned = _Text.of("\n".join(texts))
    rejected = tuple(rule_id for rule_id, check in REJECT_RULES if check(scanned))
    notes = tuple(rule_id for rule_id, check in ANNOTATE_RULES if check(scanned))
    return ScanResult(rejected_rules=rejected, annotations=notes)
