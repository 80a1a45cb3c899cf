"""Wordle rules shared by the three variants: letter feedback, reply parsers, scores.

Pure functions over strings (stdlib + clemcore's error classes only), so they are easy
to test in isolation. Parsers raise only ``ParseError`` subclasses, whatever the input.
"""
import re
from collections import Counter
from typing import NamedTuple

from clemcore.clemgame.errors import ParseError, RuleViolationError

WORD_LENGTH = 5
MAX_ATTEMPTS = 6
# A well-formed five-letter word that is not in the allowed-guess list is answered with a
# re-prompt; a game allows this MAX_REPROMPTS times in total, the next invalid word aborts.
MAX_REPROMPTS = 5

GREEN, YELLOW, RED = "green", "yellow", "red"
COLORS = (GREEN, YELLOW, RED)

VARIANT_WORDLE = "wordle"
VARIANT_WITHCLUE = "wordle_withclue"
VARIANT_WITHCRITIC = "wordle_withcritic"
VARIANTS = (VARIANT_WORDLE, VARIANT_WITHCLUE, VARIANT_WITHCRITIC)

EXPLANATION_KEY = "explanation:"
GUESS_KEY = "guess:"
AGREEMENT_KEY = "agreement:"

_WORD_RE = re.compile(r"[a-z]{5}")
_FEEDBACK_TOKEN_RE = re.compile(r"([a-z])<(green|yellow|red)>")
# Lines made of whitespace only carry nothing; every other line counts.
_LINE_SPLIT_RE = re.compile(r"\r\n|\r|\n")


class FormatError(ParseError):
    """A reply that breaks the two-line format (the episode is aborted)."""


class InvalidWordError(RuleViolationError):
    """A well-formed five-letter guess that is not in the allowed-guess list."""

    def __init__(self, word: str):
        super().__init__(reason=f"'{word}' is not a valid word for this game", response=word,
                         key="invalid_word")
        self.word = word


class GuessReply(NamedTuple):
    explanation: str
    guess: str


class CriticReply(NamedTuple):
    explanation: str
    agrees: bool


def feedback(guess: str, target: str) -> tuple[str, ...]:
    """Colour of each letter of `guess` against `target` (two words of equal length).

    Greens are assigned first; the remaining target letters are then consumed left to
    right by yellows, so a letter is never marked (green or yellow) more often than it
    occurs in the target.
    """
    if len(guess) != len(target):
        raise ValueError(f"guess and target differ in length: {guess!r}, {target!r}")
    colors = [RED] * len(guess)
    unmatched = Counter()
    for i, (g, t) in enumerate(zip(guess, target)):
        if g == t:
            colors[i] = GREEN
        else:
            unmatched[t] += 1
    for i, g in enumerate(guess):
        if colors[i] != GREEN and unmatched[g] > 0:
            colors[i] = YELLOW
            unmatched[g] -= 1
    return tuple(colors)


def format_feedback(guess: str, colors: tuple[str, ...]) -> str:
    """'c<red> r<green> ...' — the feedback string shown to the players."""
    return " ".join(f"{letter}<{color}>" for letter, color in zip(guess, colors))


def parse_feedback_lines(text: str) -> list[tuple[str, tuple[str, ...]]]:
    """The (guess, colors) pairs of the `guess_feedback:` lines that open `text`.

    The game master puts feedback lines first in its messages; a feedback-like line
    later in a message (such as the example in the instructions) is not feedback.
    Used by the programmatic players to rebuild what they know from their dialogue.
    """
    found = []
    for line in _LINE_SPLIT_RE.split(text if isinstance(text, str) else ""):
        line = line.strip()
        if not line:
            continue
        if not line.lower().startswith("guess_feedback:"):
            break
        tokens = _FEEDBACK_TOKEN_RE.findall(line[len("guess_feedback:"):])
        if len(tokens) != WORD_LENGTH:
            break
        found.append(("".join(t[0] for t in tokens), tuple(t[1] for t in tokens)))
    return found


def _content_lines(response) -> list[str]:
    if not isinstance(response, str):
        raise FormatError(reason=f"the reply is not text but {type(response).__name__}",
                          response=repr(response)[:200], key="not_text")
    return [line.strip() for line in _LINE_SPLIT_RE.split(response) if line.strip()]


def _split_two_lines(response, second_key: str) -> tuple[str, str]:
    """The values of the `explanation:` line and the `second_key` line."""
    lines = _content_lines(response)
    if len(lines) != 2:
        raise FormatError(reason=f"the reply must have exactly two lines "
                                 f"('{EXPLANATION_KEY}' and '{second_key}'), not {len(lines)}",
                          response=response, key="line_count")
    first, second = lines
    if not first.lower().startswith(EXPLANATION_KEY):
        raise FormatError(reason=f"the first line must start with '{EXPLANATION_KEY}'",
                          response=response, key="missing_explanation")
    if not second.lower().startswith(second_key):
        raise FormatError(reason=f"the second line must start with '{second_key}'",
                          response=response, key=f"missing_{second_key[:-1]}")
    return first[len(EXPLANATION_KEY):].strip(), second[len(second_key):].strip()


def parse_guess_reply(response) -> GuessReply:
    """Parse a guesser reply: `explanation: ...` then `guess: <five letters>`.

    Keywords and the guess are case-insensitive (the guess is lowercased); blank lines
    and surrounding whitespace are ignored. Anything else — another line count, a missing
    keyword, a guess that is not exactly five letters a-z — raises FormatError.
    """
    explanation, value = _split_two_lines(response, GUESS_KEY)
    guess = value.lower()
    if len(guess) != WORD_LENGTH:
        raise FormatError(reason=f"the guess must have {WORD_LENGTH} letters, "
                                 f"'{value[:50]}' has {len(value)}", response=response, key="length")
    if not _WORD_RE.fullmatch(guess):
        raise FormatError(reason=f"the guess must only use the letters a-z: '{value}'",
                          response=response, key="non_alphabetic")
    return GuessReply(explanation, guess)


def parse_critic_reply(response) -> CriticReply:
    """Parse a critic reply: `explanation: ...` then `agreement: yes|no` (case-insensitive)."""
    explanation, value = _split_two_lines(response, AGREEMENT_KEY)
    verdict = value.lower()
    if verdict not in ("yes", "no"):
        raise FormatError(reason=f"the agreement must be 'yes' or 'no', not '{value[:50]}'",
                          response=response, key="agreement_value")
    return CriticReply(explanation, verdict == "yes")


def main_score(variant: str, num_guesses: int, solved: bool) -> float:
    """Main Score of a played (not aborted) episode.

    wordle rewards speed with a table (1-3 guesses 100, 4: 50, 5: 30, 6: 20); the clue and
    critic variants score 100 / number of guesses. A lost game scores 0.
    """
    if variant not in VARIANTS:
        raise ValueError(f"unknown wordle variant {variant!r}; expected one of {VARIANTS}")
    if not solved:
        return 0.0
    if not 1 <= num_guesses <= MAX_ATTEMPTS:
        raise ValueError(f"a solved game has 1..{MAX_ATTEMPTS} guesses, not {num_guesses}")
    if variant == VARIANT_WORDLE:
        return {1: 100.0, 2: 100.0, 3: 100.0, 4: 50.0, 5: 30.0, 6: 20.0}[num_guesses]
    return 100.0 / num_guesses

