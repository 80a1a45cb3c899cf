"""Bradley–Terry ratings: the maximum-likelihood fit of all matches at once, on the Elo
scale (order-independent)."""
from __future__ import annotations

import math
from typing import Iterable

from playpen.ratings.matches import (ELO_PER_LOGIT, Match, RatingError, _check_matches,
                                     _match_arrays, _players)


def _fit_logits(a, b, s, w, num_players: int, virtual_draws: float):
    """Penalised maximum likelihood of Bradley–Terry strengths θ (natural log-odds):
    ``Σ w (s log σ(θa − θb) + (1 − s) log σ(θb − θa))`` plus, per player, ``virtual_draws``
    draws against a reference player of strength 0. Damped Newton steps; with virtual draws
    the objective is strictly concave, so the maximum is unique. Without them the strengths
    are defined up to a constant (the steps keep their sum at 0) and finite only under
    Ford's condition (:func:`_beats_everyone_indirectly`): otherwise RatingError."""
    import numpy as np

    a, b, s, w = _by_pair(a, b, s, w)
    if virtual_draws == 0 and not _beats_everyone_indirectly(a, b, s, w, num_players):
        raise RatingError("Bradley–Terry without virtual draws has no finite ratings here: some "
                          "player never lost or never won against a group of others; use "
                          "virtual_draws > 0")

    def objective(theta):
        d = theta[a] - theta[b]
        # log σ(x) = −log(1 + e^−x), computed stably
        ll = np.sum(w * (s * -np.logaddexp(0.0, -d) + (1 - s) * -np.logaddexp(0.0, d)))
        prior = virtual_draws * np.sum(0.5 * -np.logaddexp(0.0, -theta) + 0.5 * -np.logaddexp(0.0, theta))
        return ll + prior

    theta = np.zeros(num_players)
    value = objective(theta)
    for _ in range(100):
        d = theta[a] - theta[b]
        p = 1.0 / (1.0 + np.exp(-d))
        r = w * (s - p)
        grad = np.bincount(a, r, num_players) - np.bincount(b, r, num_players)
        q = 1.0 / (1.0 + np.exp(-theta))
        grad += virtual_draws * (0.5 - q)
        curv = w * p * (1 - p)
        hess = np.zeros((num_players, num_players))
        np.add.at(hess, (a, a), curv)
        np.add.at(hess, (b, b), curv)
        np.add.at(hess, (a, b), -curv)
        np.add.at(hess, (b, a), -curv)
        hess[np.diag_indices(num_players)] += virtual_draws * q * (1 - q)
        if virtual_draws == 0:
            # the likelihood is flat along θ + const (hess·1 = 0, grad ⟂ 1): adding 1·1ᵀ makes
            # hess invertible and gives the step with sum 0
            hess += 1.0
        step = np.linalg.solve(hess, grad)  # hess is the negative Hessian: positive definite
        scale = 1.0
        while True:
            candidate = theta + scale * step
            new_value = objective(candidate)
            if new_value >= value - 1e-12 or scale < 1e-6:
                break
            scale /= 2
        theta, value = candidate, new_value
        if np.max(np.abs(scale * step)) < 1e-10:
            break
    return theta


def _by_pair(a, b, s, w):
    """The likelihood is linear in each match's weight, so the matches of one ordered pair
    of players add up: one row per pair, with the summed weight and the weighted mean score
    (a tournament of thousands of matches among a few players fits in a few rows)."""
    import numpy as np
    n = int(max(a.max(), b.max())) + 1
    pairs, inverse = np.unique(a * n + b, return_inverse=True)
    weight = np.bincount(inverse, w, len(pairs))
    total = np.bincount(inverse, w * s, len(pairs))
    keep = weight > 0
    return pairs[keep] // n, pairs[keep] % n, total[keep] / weight[keep], weight[keep]


def _beats_everyone_indirectly(a, b, s, w, num_players: int) -> bool:
    """Ford's (1957) condition for finite maximum-likelihood strengths: in the graph with an
    edge x → y whenever x scored against y (a win or a draw, in a match of weight > 0),
    every player reaches every other."""
    edges: list[set[int]] = [set() for _ in range(num_players)]
    back: list[set[int]] = [set() for _ in range(num_players)]
    for x, y, score, weight in zip(a.tolist(), b.tolist(), s.tolist(), w.tolist()):
        if weight <= 0:
            continue
        if score > 0:
            edges[x].add(y)
            back[y].add(x)
        if score < 1:
            edges[y].add(x)
            back[x].add(y)

    def reach(graph) -> int:
        seen, todo = {0}, [0]
        while todo:
            for nxt in graph[todo.pop()] - seen:
                seen.add(nxt)
                todo.append(nxt)
        return len(seen)

    return reach(edges) == num_players and reach(back) == num_players


def fit_bradley_terry(matches: Iterable[Match], initial: float = 1000.0,
                      virtual_draws: float = 1.0) -> dict[str, float]:
    """Maximum-likelihood Bradley–Terry ratings on the Elo scale:
    ``P(a beats b) = 1 / (1 + 10^((R_b − R_a) / 400))``, draws counting as half a win,
    shifted so that the mean rating is ``initial``. Unlike Elo, the result does not depend
    on the order of the matches.

    Each player is credited with ``virtual_draws`` draws against a reference player of
    average strength (a light prior): without it, a player that never lost has an infinite
    maximum-likelihood rating. One virtual draw moves a player with tens of matches by a
    few points; ``virtual_draws=0`` is the plain likelihood (only for players that both
    won and lost)."""
    import numpy as np

    matches = _check_matches(matches)
    if not matches:
        return {}
    if not (math.isfinite(virtual_draws) and virtual_draws >= 0):
        raise RatingError(f"virtual_draws must be >= 0, got {virtual_draws!r}")
    names = _players(matches)
    a, b, s = _match_arrays(matches, names)
    theta = _fit_logits(a, b, s, np.ones(len(matches)), len(names), virtual_draws)
    elo = initial + ELO_PER_LOGIT * (theta - theta.mean())
    return {name: float(r) for name, r in zip(names, elo)}
