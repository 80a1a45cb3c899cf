"""Text rules of taboo: reply prefixes, the stem-based clue check, guess matching.

Pure functions (no game state) so that the game master, the programmatic players
and the tests share exactly one implementation of every rule.
"""
import functools
import re
from pathlib import Path

from clemcore.clemgame.errors import ParseError
from nltk.stem.snowball import SnowballStemmer

CLUE_PREFIX = "CLUE:"
GUESS_PREFIX = "GUESS:"

_RESOURCES = Path(__file__).resolve().parent / "resources"
_TOKEN = re.compile(r"[^\W_]+")  # runs of letters/digits (unicode aware); all else separates words


@functools.lru_cache(maxsize=1)
def stopwords() -> frozenset:
    """The English stopwords removed before the clue check (resources/stopwords_en.txt)."""
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


def normalize_guess(guess: str) -> str:
    """Lowercase the guess, drop punctuation, collapse whitespace ("Winter!" -> "winter")."""
    return " ".join(tokenize(guess))


def is_correct_guess(guess: str, target: str) -> bool:
    """A guess is correct when, normalized, it equals the target exactly."""
    return normalize_guess(guess) == normalize_guess(target)
