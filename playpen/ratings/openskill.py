"""OpenSkill ratings: the Plackett–Luce model of Weng & Lin (2011) for any number of
teams, with ties, computed by the ``openskill`` package; this module keeps playpen's
players by name and checks their games."""
from __future__ import annotations

import math
from typing import Iterable, Sequence, Union

from openskill.models import PlackettLuce

from playpen.ratings.matches import Match, RatingError, _check_matches, _check_name, _check_pair


class OpenSkill:
    """Bayesian ratings, a belief ``(mu, sigma)`` per player, updated by the ``openskill``
    package's :class:`~openskill.models.PlackettLuce` (Weng & Lin 2011, Algorithm 4): any
    number of teams per game, ties. Until issue 40 playpen wrote the update itself;
    ``tests/test_ratings.py`` keeps that version's ratings on a fixed match list and checks
    the package gives them.

    The defaults are the package's (TrueSkill's conventions): ``mu = 25``, ``sigma = 25/3``
    (a new player is anywhere in 0..50 at three sigma), ``beta = 25/6`` (the spread of one
    performance around the skill: the gap that wins about 76 % of two-player games),
    ``kappa = 1e-4`` (the smallest factor a variance may shrink by in one update) and
    ``tau = 25/300``, a hundredth of the prior sigma (``tau²`` is added to every variance
    before a game, so sigma never freezes and a learner that keeps improving is followed;
    ``tau=0`` gives the static model). Change ``sigma``, ``beta`` and ``tau`` with ``mu`` to
    use another scale.
    """

    def __init__(self, mu: float = 25.0, sigma: float = 25.0 / 3.0, beta: float = 25.0 / 6.0,
                 kappa: float = 1e-4, tau: float = 25.0 / 300.0):
        for label, value in (("mu", mu), ("sigma", sigma), ("beta", beta), ("kappa", kappa), ("tau", tau)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise RatingError(f"OpenSkill's {label} must be a finite number, got {value!r}")
        if sigma <= 0 or beta <= 0 or kappa <= 0 or tau < 0:
            raise RatingError("OpenSkill needs sigma > 0, beta > 0, kappa > 0 and tau >= 0")
        self.mu, self.sigma, self.beta = float(mu), float(sigma), float(beta)
        self.kappa, self.tau = float(kappa), float(tau)
        self.model = PlackettLuce(mu=self.mu, sigma=self.sigma, beta=self.beta, kappa=self.kappa, tau=self.tau)
        self.ratings: dict[str, tuple[float, float]] = {}

    def rating(self, name: str) -> tuple[float, float]:
        """``(mu, sigma)`` of a player (the prior for a player not seen yet)."""
        return self.ratings.get(name, (self.mu, self.sigma))

    def ordinal(self, name: str, z: float = 3.0) -> float:
        """``mu − z·sigma``: a rating the player exceeds with high probability (z = 3:
        99.9 %), so an unseen or rarely seen player ranks low until it has shown its skill."""
        mu, sigma = self.rating(name)
        return mu - z * sigma

    def update(self, teams: Sequence[Sequence[str]], ranks: Sequence[Union[int, float]]) -> None:
        """Record one game: ``teams[i]`` finished at ``ranks[i]`` (lower is better, equal
        ranks tie). Two or more teams, each with at least one player, nobody twice."""
        self._check(teams, ranks)
        beliefs = [[self.model.rating(*self.rating(name), name=name) for name in team] for team in teams]
        for team in self.model.rate(beliefs, ranks=[float(r) for r in ranks]):
            for player in team:
                self.ratings[player.name] = (player.mu, player.sigma)

    def update_match(self, a: str, b: str, score_a: float) -> None:
        """A two-player match in Elo's terms: a win, a draw (0.5) or a loss for ``a``."""
        score_a = _check_pair(a, b, score_a)
        self.update([[a], [b]], Match(a, b, score_a, "", "").ranks)

    @staticmethod
    def _check(teams, ranks) -> None:
        if isinstance(teams, (str, bytes)) or not isinstance(teams, Sequence):
            raise RatingError(f"teams must be a list of lists of player names, got {teams!r}")
        if len(teams) < 2:
            raise RatingError(f"a game needs at least two teams, got {len(teams)}")
        if isinstance(ranks, (str, bytes)) or not isinstance(ranks, Sequence) or len(ranks) != len(teams):
            raise RatingError(f"ranks must give one rank per team: {len(teams)} teams, ranks {ranks!r}")
        for r in ranks:
            if isinstance(r, bool) or not isinstance(r, (int, float)) or not math.isfinite(r):
                raise RatingError(f"ranks must be numbers (lower is better), got {ranks!r}")
        seen: set[str] = set()
        for team in teams:
            if isinstance(team, (str, bytes)) or not isinstance(team, Sequence):
                raise RatingError(f"each team must be a list of player names, got {team!r}")
            if not team:
                raise RatingError("a team must have at least one player, got an empty team")
            for name in team:
                _check_name(name)
                if name in seen:
                    raise RatingError(f"player {name!r} appears twice in one game")
                seen.add(name)


def openskill_from_matches(matches: Iterable[Match], **params) -> OpenSkill:
    """An :class:`OpenSkill` with ``matches`` played in the given order (``params`` go to
    its constructor)."""
    model = OpenSkill(**params)
    for m in _check_matches(matches):
        model.update([[m.a], [m.b]], m.ranks)
    return model
