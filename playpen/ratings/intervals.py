"""95 % bootstrap intervals of Elo and Bradley–Terry ratings."""
from __future__ import annotations

import math
from typing import Iterable

from playpen.ratings.bradley_terry import _fit_logits, fit_bradley_terry
from playpen.ratings.elo import Elo
from playpen.ratings.matches import (ELO_PER_LOGIT, ELO_SCALE, Match, RatingError, _check_matches,
                                     _match_arrays, _players)


def _summarise(samples, present, names, points=None) -> dict[str, tuple[float, float, float]]:
    """(point, 2.5 %, 97.5 %) per player over the resamples it appears in (the median as
    the point unless ``points`` are given; NaN where a player is in no resample at all,
    which takes very few resamples)."""
    import numpy as np
    result = {}
    for j, name in enumerate(names):
        values = samples[present[:, j], j]
        if values.size == 0:
            result[name] = (math.nan,) * 3 if points is None else (points[name], math.nan, math.nan)
            continue
        lo, median, hi = np.quantile(values, [0.025, 0.5, 0.975])
        point = median if points is None else points[name]
        result[name] = (float(point), float(lo), float(hi))
    return result


def bootstrap_elo(matches: Iterable[Match], num_samples: int = 1000, seed: int = 0,
                  initial: float = 1000.0, k: float = 32.0) -> dict[str, tuple[float, float, float]]:
    """Elo ratings with 95 % bootstrap intervals: ``{player: (rating, low, high)}``.

    Each of ``num_samples`` resamples draws ``len(matches)`` matches with replacement and
    replays them through a fresh :class:`Elo` in the order drawn — and a sequence of
    independent draws is in a uniformly random order. Why a random order: Elo weighs recent
    matches more, so one fixed order (the order a round robin happened to be scheduled in)
    would bias the ratings towards whoever played well at the end; replaying in random orders
    makes the spread cover both the sampling noise of the results and Elo's dependence on
    order. ``rating`` is the median over the resamples, ``low``/``high`` their 2.5 % and
    97.5 % quantiles, each over the resamples in which the player appears.

    With a fixed K the interval does not narrow much with more matches: Elo keeps moving
    by about K per match. For a finished tournament, :func:`bootstrap_bradley_terry`
    gives intervals that shrink as matches accumulate."""
    import numpy as np

    matches = _check_matches(matches)
    if not matches:
        return {}
    if num_samples < 1:
        raise RatingError(f"num_samples must be at least 1, got {num_samples}")
    Elo(initial, k)  # validates initial and k
    names = _players(matches)
    a, b, s = _match_arrays(matches, names)
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, len(matches), size=(num_samples, len(matches)))
    ratings = np.full((num_samples, len(names)), float(initial))
    present = np.zeros((num_samples, len(names)), dtype=bool)
    rows = np.arange(num_samples)
    # one step per position in the replay, all resamples at once
    for t in range(len(matches)):
        pick = draws[:, t]
        ia, ib, score = a[pick], b[pick], s[pick]
        ra, rb = ratings[rows, ia], ratings[rows, ib]
        delta = k * (score - 1.0 / (1.0 + 10.0 ** ((rb - ra) / ELO_SCALE)))
        ratings[rows, ia] = ra + delta
        ratings[rows, ib] = rb - delta
        present[rows, ia] = True
        present[rows, ib] = True
    return _summarise(ratings, present, names)


def bootstrap_bradley_terry(matches: Iterable[Match], num_samples: int = 1000, seed: int = 0,
                            initial: float = 1000.0, virtual_draws: float = 1.0
                            ) -> dict[str, tuple[float, float, float]]:
    """Bradley–Terry ratings (:func:`fit_bradley_terry` on all matches) with 95 % bootstrap
    intervals: the 2.5 % and 97.5 % quantiles of the fits to ``num_samples`` resamples of
    the matches (drawn with replacement). The order of matches plays no part, so the
    interval narrows like 1/√(matches)."""
    import numpy as np

    matches = _check_matches(matches)
    if not matches:
        return {}
    if num_samples < 1:
        raise RatingError(f"num_samples must be at least 1, got {num_samples}")
    points = fit_bradley_terry(matches, initial, virtual_draws)
    names = _players(matches)
    a, b, s = _match_arrays(matches, names)
    rng = np.random.default_rng(seed)
    samples = np.empty((num_samples, len(names)))
    present = np.zeros((num_samples, len(names)), dtype=bool)
    for i in range(num_samples):
        weights = rng.multinomial(len(matches), np.full(len(matches), 1.0 / len(matches))).astype(float)
        # a player absent from a resample keeps only its virtual draws: not a rating of it
        played = (np.bincount(a, weights, len(names)) + np.bincount(b, weights, len(names))) > 0
        theta = _fit_logits(a, b, s, weights, len(names), virtual_draws)
        mean = theta[played].mean()
        samples[i] = initial + ELO_PER_LOGIT * (theta - mean)
        present[i] = played
    return _summarise(samples, present, names, points)
