"""Text rules of adversarial taboo: reply prefixes, the Defender's declaration, and
whether a message says the target word (same stem).

Pure functions shared by the game master, the programmatic players and the tests.
"""
import functools
import re
from dataclasses import dataclass
from pathlib import Path

from clemcore.clemgame.errors import ParseError
from nltk.stem.snowball import SnowballStemmer

ATTACK_PREFIX = "ATTACK:"
DEFEND_PREFIX = "DEFEND:"
DECLARATION_OPENING = ("i", "know", "the", "word")

_RESOURCES = Path(__file__).resolve().parent / "resources"
_TOKEN = re.compile(r"[^\W_]+")  # runs of letters/digits (unicode aware); all else separates words
_DECLARED = re.compile(r"\bit(?:\s+is|\s*['\u2019]s)\b(.*)", re.IGNORECASE | re.DOTALL)
_ARTICLES = frozenset({"a", "an", "the"})


@functools.lru_cache(maxsize=1)
def stopwords() -> frozenset:
    """English stopwords (resources/stopwords_en.txt), ignored when matching hints."""
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


def content_stems(text: str) -> list[str]:
    """Stems of the non-stopword tokens of `text`, in order."""
    stop = stopwords()
    return [stem(token) for token in tokenize(text) if token not in stop]


def mentions(text: str, word: str) -> bool:
    """Whether `text` contains `word` or a form of it (a token with the same stem)."""
    word_stem = stem(word.lower())
    return any(stem(token) == word_stem for token in tokenize(text))


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
