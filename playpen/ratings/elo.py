"""Elo ratings, updated match by match."""
from __future__ import annotations

import math
from typing import Iterable

from playpen.ratings.matches import ELO_SCALE, Match, RatingError, _check_matches, _check_pair


class Elo:
    """Elo ratings: after a match, ``r_a += k (s_a − E_a)`` and ``r_b −= k (s_a − E_a)``
    with ``E_a = 1 / (1 + 10^((r_b − r_a) / 400))``. A name not seen before starts at
    ``initial``."""

    def __init__(self, initial: float = 1000.0, k: float = 32.0):
        if not math.isfinite(initial):
            raise RatingError(f"the initial Elo rating must be a finite number, got {initial!r}")
        if not (math.isfinite(k) and k > 0):
            raise RatingError(f"Elo's K must be a positive number, got {k!r}")
        self.initial = float(initial)
        self.k = float(k)
        self.ratings: dict[str, float] = {}

    def rating(self, name: str) -> float:
        """The current rating (``initial`` for a player not seen yet)."""
        return self.ratings.get(name, self.initial)

    def expected(self, a: str, b: str) -> float:
        """The expected score of ``a`` against ``b`` (the probability of a win, draws
        counting half)."""
        return 1.0 / (1.0 + 10.0 ** ((self.rating(b) - self.rating(a)) / ELO_SCALE))

    def update(self, a: str, b: str, score_a: float) -> tuple[float, float]:
        """Record one match; returns the new ratings of ``a`` and ``b``."""
        score_a = _check_pair(a, b, score_a)
        delta = self.k * (score_a - self.expected(a, b))
        self.ratings[a] = self.rating(a) + delta
        self.ratings[b] = self.rating(b) - delta
        return self.ratings[a], self.ratings[b]


def elo_from_matches(matches: Iterable[Match], initial: float = 1000.0, k: float = 32.0) -> Elo:
    """An :class:`Elo` with ``matches`` played in the given order."""
    elo = Elo(initial, k)
    for m in _check_matches(matches):
        elo.update(m.a, m.b, m.score_a)
    return elo
