"""Match results, the error bad input raises, and the checks every rating shares."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable, Sequence

# Elo's logistic scale: a 400-point gap is 10:1 odds
ELO_SCALE = 400.0
# natural log-odds -> Elo points
ELO_PER_LOGIT = ELO_SCALE / math.log(10.0)


class RatingError(ValueError):
    """Bad input to a rating: the message is one line naming what is wrong."""


def _check_name(name, what: str = "player") -> str:
    if not isinstance(name, str) or not name:
        raise RatingError(f"a {what} name must be a non-empty string, got {name!r}")
    return name


def _check_pair(a: str, b: str, score_a: float) -> float:
    _check_name(a)
    _check_name(b)
    if a == b:
        raise RatingError(f"a match needs two different players, got {a!r} twice")
    if isinstance(score_a, bool) or not isinstance(score_a, (int, float)) \
            or not math.isfinite(score_a) or not 0.0 <= score_a <= 1.0:
        raise RatingError(f"score of {a!r} against {b!r} must be in [0, 1] "
                          f"(1 win, 0.5 draw, 0 loss), got {score_a!r}")
    return float(score_a)


@dataclass(frozen=True)
class Match:
    """One finished two-player match: ``score_a`` is a's result (1 win, 0.5 draw, 0 loss;
    values in between are allowed), ``seat`` which seat ``a`` played (0: the game's first
    role), ``game`` and ``instance`` where it was played."""

    a: str
    b: str
    score_a: float
    game: str
    instance: str
    seat: int = 0

    def __post_init__(self):
        _check_pair(self.a, self.b, self.score_a)

    @property
    def ranks(self) -> list[int]:
        """The match as OpenSkill ranks of ``[[a], [b]]`` (lower is better; a draw ties)."""
        if self.score_a > 0.5:
            return [0, 1]
        if self.score_a < 0.5:
            return [1, 0]
        return [0, 0]


def _players(matches: Sequence[Match]) -> list[str]:
    """Player names in order of first appearance."""
    seen: dict[str, None] = {}
    for m in matches:
        seen.setdefault(m.a)
        seen.setdefault(m.b)
    return list(seen)


def _check_matches(matches: Iterable[Match]) -> list[Match]:
    matches = list(matches)
    for m in matches:
        if not isinstance(m, Match):
            raise RatingError(f"expected Match objects, got {type(m).__name__}")
    return matches


def _match_arrays(matches: Sequence[Match], names: list[str]):
    """Per match: the indices of its players and its score, as numpy arrays."""
    import numpy as np
    index = {name: i for i, name in enumerate(names)}
    a = np.array([index[m.a] for m in matches], dtype=np.int64)
    b = np.array([index[m.b] for m in matches], dtype=np.int64)
    s = np.array([m.score_a for m in matches], dtype=np.float64)
    return a, b, s
