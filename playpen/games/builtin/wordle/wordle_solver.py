"""The word list and the programmatic wordle policies' brains: a feedback-consistent solver
and a critic's check of a proposed guess.

The solver keeps the set of words consistent with every feedback seen so far and picks
the guess with the highest expected information (entropy of the feedback pattern over the
candidates, weighted by a frequency prior), with a bonus for guesses that can win at once.
Patterns are computed with numpy for whole guess x candidate matrices at a time.
"""
import functools
import os
from typing import Iterable, Sequence

import numpy as np

from wordle_rules import GREEN, RED, WORD_LENGTH, YELLOW, feedback

ALLOWED_WORDS_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                  "resources", "allowed_words.txt")

# Candidate answers are the most frequent words of the allowed list (the list is stored in
# frequency order); rarer words are only searched when no frequent word fits the feedback.
ANSWER_POOL_SIZE = 6000
# Words the solver may play to gain information even when they cannot be the answer.
PROBE_POOL_SIZE = 600
# Prior weight of a candidate by frequency rank (answers are common words) ...
COMMON_RANK = 2500
RARE_WEIGHT = 0.05
# ... and the discount for word forms that are rarely chosen as answers (plurals, -ed).
INFLECTED_WEIGHT = 0.2
# Bounds on the work per guess: the entropy is estimated over the most likely candidates
# only, and only the most likely ones are considered for playing.
MAX_SCORED_CANDIDATES = 1000
MAX_PLAYABLE_CANDIDATES = 300
# How much an immediate win is worth, in bits, when ranking guesses.
WIN_BONUS_BITS = 2.0
# The first guess does not depend on the game, and computing it takes seconds:
# it is compute_opener() of the packaged list, stored (tests check they agree).
OPENER = "raise"

_CODE_OF_COLOR = {RED: 0, YELLOW: 1, GREEN: 2}
_POW3 = 3 ** np.arange(WORD_LENGTH)
_IDENTITY = np.eye(WORD_LENGTH, dtype=bool)
_STRICTLY_EARLIER = np.tril(np.ones((WORD_LENGTH, WORD_LENGTH), dtype=bool), k=-1)  # [i, k]: k < i
_MAX_CELLS = 1_000_000  # guesses x targets per chunk of the pattern matrix


def pattern_code(colors: Sequence[str]) -> int:
    """Base-3 code of a feedback (red 0, yellow 1, green 2; position i has weight 3**i)."""
    return int(sum(_CODE_OF_COLOR[c] * 3 ** i for i, c in enumerate(colors)))


def to_letters(words: Iterable[str]) -> np.ndarray:
    """(N, 5) uint8 array of letter indices 0..25."""
    words = list(words)
    if not words:
        return np.zeros((0, WORD_LENGTH), dtype=np.uint8)
    return (np.frombuffer("".join(words).encode("ascii"), dtype=np.uint8)
            .reshape(len(words), WORD_LENGTH) - ord("a"))


def pattern_matrix(guesses: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """(G, T) pattern codes of every guess against every target (same rules as
    wordle_rules.feedback: greens first, then yellows left to right while unmatched
    target letters remain)."""
    out = np.empty((len(guesses), len(targets)), dtype=np.int16)
    target_counts = (targets[:, :, None] == np.arange(26)).sum(1)  # (T, 26)
    step = max(1, _MAX_CELLS // max(1, len(targets)))
    for start in range(0, len(guesses), step):
        chunk = guesses[start:start + step]
        out[start:start + step] = _patterns(chunk, targets, target_counts)
    return out


def _patterns(guesses: np.ndarray, targets: np.ndarray, target_counts: np.ndarray) -> np.ndarray:
    count = target_counts[:, guesses].transpose(1, 0, 2)  # [g, t, i]: target count of letter i
    green = guesses[:, None, :] == targets[None, :, :]
    # For a guess without repeated letters, a non-green letter is yellow iff the target has it.
    yellow = ~green & (count > 0)
    same = guesses[:, :, None] == guesses[:, None, :]  # [g, i, k]
    repeated = np.nonzero((same & ~_IDENTITY).any((1, 2)))[0]
    if len(repeated):
        g_green, g_same = green[repeated], same[repeated]
        # target letters left for yellows: count minus greens on the same letter
        greens_same = (g_green[:, :, None, :] & g_same[:, None, :, :]).sum(-1)
        # earlier non-green guess positions with the same letter take them first
        used = ((~g_green)[:, :, None, :] & (g_same & _STRICTLY_EARLIER)[:, None, :, :]).sum(-1)
        yellow[repeated] = ~g_green & (used < count[repeated] - greens_same)
    return (green * 2 + yellow) @ _POW3


class WordList:
    """The allowed-guess list in frequency order, with letter arrays and a prior."""

    def __init__(self, words: Sequence[str]):
        self.words = tuple(words)
        self.index = {w: i for i, w in enumerate(self.words)}
        self.letters = to_letters(self.words)
        ranks = np.arange(len(self.words))
        prior = np.where(ranks < COMMON_RANK, 1.0, RARE_WEIGHT)
        inflected = np.array([_looks_inflected(w) for w in self.words], dtype=bool)
        self.prior = np.where(inflected, prior * INFLECTED_WEIGHT, prior)

    def __contains__(self, word) -> bool:
        return word in self.index

    def __len__(self) -> int:
        return len(self.words)

    @classmethod
    def from_file(cls, path: str = ALLOWED_WORDS_FILE) -> "WordList":
        with open(path, encoding="utf-8") as f:
            return cls([line.strip() for line in f if line.strip()])


def _looks_inflected(word: str) -> bool:
    return ((word.endswith("s") and not word.endswith(("ss", "us", "is")))
            or word.endswith("ed"))


@functools.lru_cache(maxsize=None)
def load_word_list() -> WordList:
    """The packaged allowed-guess list (read once per process)."""
    return WordList.from_file()


History = Sequence[tuple[str, Sequence[str]]]


class Solver:
    """Chooses guesses from the feedback history (a list of (guess, colors))."""

    def __init__(self, word_list: WordList):
        self.word_list = word_list
        self.answer_pool = np.arange(min(ANSWER_POOL_SIZE, len(word_list)))
        self.probe_pool = np.arange(min(PROBE_POOL_SIZE, len(word_list)))

    def candidates(self, history: History) -> np.ndarray:
        """Indices of the words consistent with all feedback (frequent words first)."""
        for pool in (self.answer_pool, np.arange(len(self.word_list))):
            keep = pool
            for guess, colors in history:
                if len(guess) != WORD_LENGTH:
                    continue
                codes = pattern_matrix(to_letters([guess]), self.word_list.letters[keep])[0]
                keep = keep[codes == pattern_code(colors)]
                if len(keep) == 0:
                    break
            if len(keep) > 0:
                return keep
        return keep

    def best_guess(self, history: History, exclude: Iterable[str] = (),
                   consistent_only: bool = False) -> str:
        """The most informative next guess (a word from the allowed list)."""
        excluded = {self.word_list.index[w] for w in exclude if w in self.word_list}
        excluded |= {self.word_list.index[g] for g, _ in history if g in self.word_list}
        if not history and not excluded and OPENER in self.word_list:
            return OPENER
        cands = np.array([c for c in self.candidates(history) if c not in excluded], dtype=int)
        if len(cands) == 0:  # nothing fits (e.g. everything excluded): any unplayed word
            return next(w for i, w in enumerate(self.word_list.words) if i not in excluded)
        # most likely first (stable: ties keep frequency order); bound the work per guess
        cands = cands[np.argsort(-self.word_list.prior[cands], kind="stable")][:MAX_SCORED_CANDIDATES]
        weights = self.word_list.prior[cands]
        probs = weights / weights.sum()
        if len(cands) <= 2:
            return self.word_list.words[cands[0]]
        pool = cands[:MAX_PLAYABLE_CANDIDATES]
        if not consistent_only:
            pool = np.union1d(pool, np.array([p for p in self.probe_pool if p not in excluded], dtype=int))
        return self.word_list.words[self._rank(pool, cands, probs)]

    def _rank(self, pool: np.ndarray, cands: np.ndarray, probs: np.ndarray) -> int:
        codes = pattern_matrix(self.word_list.letters[pool], self.word_list.letters[cands])
        num_patterns = 3 ** WORD_LENGTH
        offsets = (np.arange(len(pool)) * num_patterns)[:, None]
        dist = np.bincount((codes + offsets).ravel(), weights=np.tile(probs, len(pool)),
                           minlength=len(pool) * num_patterns).reshape(len(pool), num_patterns)
        with np.errstate(divide="ignore", invalid="ignore"):
            entropy = -np.where(dist > 0, dist * np.log2(dist), 0.0).sum(1)
        win_prob = np.zeros(len(pool))
        position = {c: k for k, c in enumerate(cands)}
        for row, word_idx in enumerate(pool):
            if word_idx in position:
                win_prob[row] = probs[position[word_idx]]
        score = entropy + WIN_BONUS_BITS * win_prob
        # ties: prefer possible answers, then frequent words (lower index)
        order = np.lexsort((pool, ~(win_prob > 0), -np.round(score, 9)))
        return int(pool[order[0]])


def compute_opener(solver: Solver) -> str:
    """The best first guess for `solver` (what OPENER stores for the packaged list)."""
    cands = solver.answer_pool
    weights = solver.word_list.prior[cands]
    return solver.word_list.words[solver._rank(solver.probe_pool, cands, weights / weights.sum())]


@functools.lru_cache(maxsize=None)
def default_solver() -> Solver:
    return Solver(load_word_list())


def explain_inconsistency(guess: str, history: History) -> str | None:
    """Why `guess` contradicts the feedback history, or None when it is consistent.

    The guess is consistent when, had it been the target, every earlier guess would have
    received exactly the feedback it got.
    """
    for previous, colors in history:
        if len(previous) != WORD_LENGTH or len(guess) != WORD_LENGTH:
            continue
        if previous == guess:
            return f"'{guess}' was already tried and is not the word"
        if feedback(previous, guess) == tuple(colors):
            continue
        return _first_violation(guess, previous, tuple(colors))
    return None


def _first_violation(guess: str, previous: str, colors: tuple[str, ...]) -> str:
    for i, (letter, color) in enumerate(zip(previous, colors)):
        if color == GREEN and guess[i] != letter:
            return f"the feedback for '{previous}' put '{letter}' at position {i + 1}, " \
                   f"but '{guess}' has '{guess[i]}' there"
    for i, (letter, color) in enumerate(zip(previous, colors)):
        if color == YELLOW and guess[i] == letter:
            return f"'{letter}' was yellow at position {i + 1} in '{previous}', " \
                   f"so it cannot be at that position"
    confirmed = {}
    for letter, color in zip(previous, colors):
        if color in (GREEN, YELLOW):
            confirmed[letter] = confirmed.get(letter, 0) + 1
    for letter, count in confirmed.items():
        if guess.count(letter) < count:
            return f"the feedback for '{previous}' shows the word contains " \
                   f"{'an' if count == 1 else count} '{letter}'" \
                   f"{'' if count == 1 else 's'}, which '{guess}' lacks"
    for letter, color in zip(previous, colors):
        if color == RED and guess.count(letter) > confirmed.get(letter, 0):
            if confirmed.get(letter, 0) == 0:
                return f"'{letter}' was red in '{previous}', so it is not in the word"
            return f"the word has only {confirmed[letter]} '{letter}' (feedback for '{previous}')"
    return f"'{guess}' does not fit the feedback for '{previous}'"
