"""Text rules of taboo and adversarial_taboo: words and stems, reply prefixes, taboo's
stem-based clue check and guess matching, adversarial taboo's "says the word" rule and the
Defender's declaration; and the outcome keys both masters log.

Pure functions (no game state) so that both game masters, the programmatic players and the
tests share exactly one implementation of every rule.
"""
import functools
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from clemcore.clemgame.errors import ParseError
from clemcore.clemgame.master import Outcome
from clemcore.clemgame.metrics import METRIC_ABORTED, METRIC_LOSE, METRIC_SUCCESS
from nltk.stem.snowball import SnowballStemmer

CLUE_PREFIX = "CLUE:"  # taboo: Describer
GUESS_PREFIX = "GUESS:"  # taboo: Guesser
ATTACK_PREFIX = "ATTACK:"  # adversarial_taboo: Attacker
DEFEND_PREFIX = "DEFEND:"  # adversarial_taboo: Defender
DECLARATION_OPENING = ("i", "know", "the", "word")

_RESOURCES = Path(__file__).resolve().parent / "resources"
_TOKEN = re.compile(r"[^\W_]+")  # runs of letters/digits (unicode aware); all else separates words
_DECLARED = re.compile(r"\bit(?:\s+is|\s*['\u2019]s)\b(.*)", re.IGNORECASE | re.DOTALL)
_ARTICLES = frozenset({"a", "an", "the"})


# --- words and stems (both games) ----------------------------------------------------------

@functools.lru_cache(maxsize=1)
def stopwords() -> frozenset:
    """The English stopwords (resources/stopwords_en.txt): dropped before taboo's clue check
    and ignored when the programmatic players match messages against the lexicon."""
    lines = (_RESOURCES / "stopwords_en.txt").read_text(encoding="utf-8").splitlines()
    return frozenset(line.strip() for line in lines if line.strip() and not line.startswith("#"))


@functools.lru_cache(maxsize=1)
def _stemmer() -> SnowballStemmer:
    return SnowballStemmer("english")


@functools.lru_cache(maxsize=100_000)
def stem(word: str) -> str:
    """Snowball (Porter2) stem of one lowercase word."""
    return _stemmer().stem(word)


def tokenize(text: str) -> list[str]:
    """Lowercase words of `text`; punctuation and other symbols act as separators."""
    return _TOKEN.findall(text.lower())


def content_words(text: str) -> list[str]:
    """The tokens of `text` that are not stopwords."""
    stop = stopwords()
    return [token for token in tokenize(text) if token not in stop]


def content_stems(text: str) -> list[str]:
    """Stems of the content words of `text`, in order."""
    return [stem(token) for token in content_words(text)]


def stems_of(texts: Iterable[str]) -> frozenset:
    """The content stems of all `texts` together (what a player has heard so far)."""
    return frozenset(s for text in texts for s in content_stems(text))


def mentions(text: str, word: str) -> bool:
    """Whether `text` contains `word` or a form of it (a token with the same stem)."""
    word_stem = stem(word.lower())
    return any(stem(token) == word_stem for token in tokenize(text))


# --- reply prefixes (both games) ------------------------------------------------------------

def parse_prefixed(response: str, prefix: str) -> str:
    """The text after `prefix` in a reply that must start with it (after leading whitespace).

    Raises ParseError when the reply is not text, lacks the exact (case-sensitive)
    prefix, or has nothing after it.
    """
    if not isinstance(response, str):
        raise ParseError(f"reply is not text but {type(response).__name__}", response=str(response),
                         key="not text")
    text = response.strip()
    if not text.startswith(prefix):
        raise ParseError(f"reply does not start with '{prefix}'", response=response, key="missing prefix")
    body = text[len(prefix):].strip()
    if not body:
        raise ParseError(f"nothing follows '{prefix}'", response=response, key="empty reply")
    return body


def text_after_last(message: str, prefix: str) -> str:
    """What follows the last `prefix` in a message (the whole message if none): the newest
    move inside a context that may start with the game's instructions."""
    position = message.rfind(prefix)
    return message if position < 0 else message[position + len(prefix):]


def received_messages(perspective: list[dict], context: dict) -> list[str]:
    """The contents of every message a player received, up to and including `context`
    (which a programmatic player may be asked to answer before it perceived it)."""
    received = [message["content"] for message in perspective if message["role"] == "user"]
    if not received or received[-1] != context["content"]:
        received.append(context["content"])
    return received


def outcome_keys(outcome: Outcome) -> dict[str, int]:
    """Aborted / Success / Lose of a finished episode (exactly one is 1), as both masters
    log them (clemcore logs none of them itself)."""
    return {METRIC_ABORTED: int(outcome is Outcome.ABORTED), METRIC_SUCCESS: int(outcome is Outcome.SUCCESS),
            METRIC_LOSE: int(outcome is Outcome.FAILURE)}


# --- taboo: the clue check and guess matching -----------------------------------------------

def forbidden_stems(target: str, related: list[str]) -> frozenset:
    """Stems a clue may not contain: those of the target and of every related word."""
    return frozenset(stem(token) for word in [target, *related] for token in tokenize(word))


def taboo_violations(clue: str, target: str, related: list[str]) -> list[str]:
    """The clue words whose stem equals the stem of the target or of a related word.

    The clue is lowercased, split at punctuation, stripped of stopwords and stemmed;
    an empty list means the clue is valid.
    """
    forbidden = forbidden_stems(target, related)
    return [word for word in content_words(clue) if stem(word) in forbidden]


def normalize_guess(guess: str) -> str:
    """Lowercase the guess, drop punctuation, collapse whitespace ("Winter!" -> "winter")."""
    return " ".join(tokenize(guess))


def is_correct_guess(guess: str, target: str) -> bool:
    """A guess is correct when, normalized, it equals the target exactly."""
    return normalize_guess(guess) == normalize_guess(target)


# --- adversarial_taboo: the Defender's declaration --------------------------------------------

@dataclass(frozen=True)
class DefenderMove:
    """A parsed Defender message: a declaration names `declared`, a normal answer does not."""
    text: str
    declared: str | None = None

    @property
    def is_declaration(self) -> bool:
        return self.declared is not None


def parse_defender_message(body: str) -> DefenderMove:
    """Classify the text after "DEFEND:".

    A message opening with "I know the word" (any case) is a declaration; the declared
    word is the first word after "It is" (or "It's"), skipping an article; quotes and
    backticks around it are fine. A declaration without such a word raises ParseError.
    """
    if tuple(tokenize(body)[:len(DECLARATION_OPENING)]) != DECLARATION_OPENING:
        return DefenderMove(text=body)
    match = _DECLARED.search(body)
    words = tokenize(match.group(1)) if match else []
    while words and words[0] in _ARTICLES:
        words = words[1:]
    if not words:
        raise ParseError("a declaration must read 'I know the word! It is <word>'", response=body,
                         key="malformed declaration")
    return DefenderMove(text=body, declared=words[0])


def is_correct_declaration(declared: str, target: str) -> bool:
    """A declaration is right when the declared word has the target's stem."""
    return stem(declared.lower()) == stem(target.lower())
