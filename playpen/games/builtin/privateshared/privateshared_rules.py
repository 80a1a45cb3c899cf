"""Rules of privateshared that do not need a game master: reply parsers, slot matching,
context wording, and the score arithmetic (Cohen's kappa, harmonic mean).

Kept apart from master.py so that the scorer, the instance generator, the programmatic
players and the tests share one definition of every rule.
"""
import math
import re
import unicodedata
from typing import Sequence

from clemcore.clemgame.errors import ParseError

ANSWER_PREFIX = "ANSWER:"
ASIDE_PREFIX = "ASIDE:"
PROBE_TAG = "ME"
MAX_PROBE_TRIES = 5
"""A probe is asked at most this many times before the episode is aborted."""

_NON_WORD = re.compile(r"[\W_]+")
_ASIDE_TRAILING = " \t.!"


class AnswerFormatError(ParseError):
    """The Answerer's reply to a Questioner request is not one line `ANSWER: <text>`."""


class AsideFormatError(ParseError):
    """The Answerer's reply to a probe is not one line `ASIDE: yes` or `ASIDE: no`."""


def _single_line(text, error_cls, what: str) -> str:
    if not isinstance(text, str):
        raise error_cls(f"{what} is not text", response=repr(text))
    stripped = text.strip()
    if not stripped:
        raise error_cls(f"{what} is empty", response=text)
    if len(stripped.splitlines()) != 1:
        raise error_cls(f"{what} spans more than one line", response=text)
    return stripped


def _strip_prefix(line: str, prefix: str, error_cls, what: str) -> str:
    # Case-insensitive on the prefix only: "Answer:" is an unambiguous spelling of ANSWER:.
    if not line[:len(prefix)].casefold() == prefix.casefold():
        raise error_cls(f"{what} does not start with {prefix}", response=line)
    return line[len(prefix):].strip()


def parse_answer(text) -> str:
    """Return the text after `ANSWER:` of a one-line reply; raise AnswerFormatError otherwise."""
    line = _single_line(text, AnswerFormatError, "answer")
    content = _strip_prefix(line, ANSWER_PREFIX, AnswerFormatError, "answer")
    if not content:
        raise AnswerFormatError("answer has nothing after ANSWER:", response=text)
    return content


def parse_aside(text) -> bool:
    """Return True for `ASIDE: yes`, False for `ASIDE: no` (any case, trailing `.`/`!`
    allowed); raise AsideFormatError for anything else."""
    line = _single_line(text, AsideFormatError, "aside")
    content = _strip_prefix(line, ASIDE_PREFIX, AsideFormatError, "aside")
    word = content.rstrip(_ASIDE_TRAILING).strip().casefold()
    if word == "yes":
        return True
    if word == "no":
        return False
    raise AsideFormatError("aside is neither yes nor no", response=text)


def normalize(text: str) -> str:
    """Lowercase, drop accents and punctuation, collapse whitespace: 'Crème-Brûlée!' -> 'creme brulee'."""
    decomposed = unicodedata.normalize("NFKD", text)
    no_marks = "".join(ch for ch in decomposed if not unicodedata.combining(ch))
    return _NON_WORD.sub(" ", no_marks.casefold()).strip()


def mentions(text: str, value: str) -> bool:
    """Whether `text` contains `value` as a whole-word phrase after normalisation.
    This is the slot-filling test: 'Tallinn, please.' mentions 'Tallinn'; '17' does not
    mention '7'."""
    needle = normalize(value)
    if not needle:
        return False
    return f" {needle} " in f" {normalize(text)} "


# --- contexts -------------------------------------------------------------------------

def request_context(questioner_tag: str, request: str) -> str:
    return f'{questioner_tag}: {request} (Reply in one line starting with "{ANSWER_PREFIX}".)'


def probe_context(probe: str, retry: bool = False) -> str:
    nudge = "Your last reply was not in the requested form. " if retry else ""
    return f'{PROBE_TAG}: {nudge}{probe} (Reply in one line: "{ASIDE_PREFIX} yes" or "{ASIDE_PREFIX} no".)'


def last_paragraph(content: str) -> str:
    """The newest part of a context (the preamble, when present, comes first)."""
    return content.strip().split("\n\n")[-1]


# --- scores ---------------------------------------------------------------------------

def cohen_kappa(truth: Sequence[bool], answers: Sequence[bool]) -> float:
    """Cohen's kappa between two binary raters.

    NaN for empty input. When both raters use one and the same label throughout, the
    chance agreement is 1 and kappa is 0/0; we return 1.0 there (perfect agreement).
    The result is clipped to [-1, 1] against float noise.
    """
    if len(truth) != len(answers):
        raise ValueError(f"kappa needs equally long sequences, got {len(truth)} and {len(answers)}")
    n = len(truth)
    if n == 0:
        return math.nan
    truth = [bool(t) for t in truth]
    answers = [bool(a) for a in answers]
    observed = sum(t == a for t, a in zip(truth, answers)) / n
    p_truth = sum(truth) / n
    p_answers = sum(answers) / n
    expected = p_truth * p_answers + (1 - p_truth) * (1 - p_answers)
    if expected >= 1.0:
        return 1.0
    kappa = (observed - expected) / (1 - expected)
    return min(1.0, max(-1.0, kappa))


def harmonic_mean(a: float, b: float) -> float:
    """Harmonic mean of two values in [0, 1]; NaN if either is NaN, 0 if either is 0."""
    if math.isnan(a) or math.isnan(b):
        return math.nan
    if a < 0 or b < 0:
        raise ValueError(f"harmonic mean is defined here for values >= 0, got {a} and {b}")
    if a == 0 or b == 0:
        return 0.0
    return 2 * a * b / (a + b)


def main_score(slot_accuracy: float, kappa: float) -> float:
    """100 x harmonic mean of slot-filling accuracy and kappa truncated at 0 (NaN stays NaN)."""
    if math.isnan(kappa):
        return math.nan
    return 100 * harmonic_mean(slot_accuracy, max(kappa, 0.0))
