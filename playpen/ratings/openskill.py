"""OpenSkill ratings: the Plackett–Luce model of Weng & Lin (2011) for any number of
teams, with ties."""
from __future__ import annotations

import math
from typing import Iterable, Sequence, Union

from playpen.ratings.matches import Match, RatingError, _check_matches, _check_name, _check_pair


class OpenSkill:
    """Bayesian ratings with the Plackett–Luce model of Weng & Lin (2011, "A Bayesian
    approximation method for online ranking", Algorithm 4), the model the OpenSkill papers
    use: any number of teams per game, ties, a belief ``(mu, sigma)`` per player.

    Defaults follow TrueSkill's conventions (which OpenSkill shares): ``mu = 25``,
    ``sigma = 25/3`` (a new player is anywhere in 0..50 at three sigma), ``beta = 25/6``
    (the spread of one performance around the skill: the skill gap that wins about 76 % of
    two-player games), ``kappa = 1e-4`` (the smallest factor a variance may shrink by in
    one update, which keeps it positive) and ``tau = 25/300``, a hundredth of the prior
    sigma (dynamics: ``tau²`` is added to every variance before a game, so sigma never
    freezes and a player that keeps improving — a learner — is followed). ``tau=0`` gives
    the static model. Change ``sigma``, ``beta`` and ``tau`` with ``mu`` to use another scale.

    One game, teams ``i`` with ranks ``r_i`` (lower is better): team skill
    ``mu_i = Σ mu_ij``, ``sigma_i² = Σ sigma_ij²``, ``c² = Σ_i (sigma_i² + beta²)``,
    ``C_q = Σ_{s: r_s ≥ r_q} exp(mu_s / c)``, ``A_q = |{s: r_s = r_q}|`` and, summed over
    the teams ``q`` with ``r_q ≤ r_i``::

        Omega_i = sigma_i² / c · Σ_q (δ_qi − p_iq) / A_q,         p_iq = exp(mu_i / c) / C_q
        Delta_i = gamma_i · sigma_i² / c² · Σ_q p_iq (1 − p_iq) / A_q,   gamma_i = sigma_i / c

    and each player j of team i moves by its share of the team's variance::

        mu_ij     += sigma_ij² / sigma_i² · Omega_i
        sigma_ij² *= max(1 − sigma_ij² / sigma_i² · Delta_i, kappa)
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
        variances = [[self.rating(p)[1] ** 2 + self.tau ** 2 for p in team] for team in teams]
        mus = [[self.rating(p)[0] for p in team] for team in teams]
        team_mu = [sum(m) for m in mus]
        team_var = [sum(v) for v in variances]
        c = math.sqrt(sum(v + self.beta ** 2 for v in team_var))
        # exp(mu_i / c) only enters as ratios: shifting by the largest mu avoids overflow
        top = max(team_mu)
        strength = [math.exp((m - top) / c) for m in team_mu]
        n = len(teams)
        sums = [sum(strength[s] for s in range(n) if ranks[s] >= ranks[q]) for q in range(n)]
        ties = [sum(1 for s in range(n) if ranks[s] == ranks[q]) for q in range(n)]
        for i in range(n):
            omega = delta = 0.0
            for q in range(n):
                if ranks[q] > ranks[i]:
                    continue
                p = strength[i] / sums[q]
                omega += ((1.0 if q == i else 0.0) - p) / ties[q]
                delta += p * (1.0 - p) / ties[q]
            omega *= team_var[i] / c
            delta *= (math.sqrt(team_var[i]) / c) * team_var[i] / c ** 2
            for name, mu, var in zip(teams[i], mus[i], variances[i]):
                share = var / team_var[i]
                new_var = var * max(1.0 - share * delta, self.kappa)
                self.ratings[name] = (mu + share * omega, math.sqrt(new_var))

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
