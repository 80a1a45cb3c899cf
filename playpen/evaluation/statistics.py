"""Paired comparisons of two policies on the same held-out items: exact sign-flip and
Wilcoxon signed-rank p-values, Holm's correction over a family of comparisons, bootstrap
intervals clustered by item (and seed), and the smallest effect a test split can detect.

Why these: a learning comparison evaluates every method on the SAME items, so the unit of
evidence is the per-item difference against the control. A percentile bootstrap over a
handful of items is too lenient (with 5 items better and 0 worse it "excludes 0", while
the exact two-sided sign-flip p is 1/16 = 0.0625); an exact test over the 2^n sign
patterns of the differences is what a reviewer can recompute. Items that are not
independent (a referencegame target at three grid positions; one item under several
seeds) are resampled together, as clusters.

Plain Python (no torch, no numpy): the statistics of a results file can be recomputed
anywhere, and each function is small enough to check by hand.
"""
from __future__ import annotations

import math
import random
from dataclasses import dataclass
from statistics import NormalDist
from typing import Hashable, Iterable, Mapping, Optional, Sequence

MAX_STATES = 1 << 20
"""Distinct sums the sign-flip null distribution may hold and still be counted exactly:
every sign pattern of up to 20 differences (2^20), and of any number of differences that
lie on a coarse grid, as game scores do (0, 33.3, 100); beyond it, sampling."""
MONTE_CARLO_DRAWS = 100_000
RESOLUTION = 1e-6
"""Differences are counted on this grid. Each rounds to it by at most half a unit, so two
sums of n differences that are equal in exact arithmetic (a seed-averaged 33.33... + 66.66...
and 100.0) may land up to n units apart: sums within n units are counted as ties. Game
scores differ by far more than n millionths, so no genuinely distinct sums are merged."""


@dataclass(frozen=True)
class TestResult:
    """A p-value and how it was obtained (``exact`` or ``monte-carlo``, with
    the draws and seed of the latter), the statistic and the number of differences used."""

    p_value: float
    statistic: float
    n: int
    method: str
    alternative: str
    draws: int = 0
    seed: Optional[int] = None


def _check_alternative(alternative: str) -> None:
    if alternative not in ("two-sided", "greater", "less"):
        raise ValueError(f"alternative must be two-sided, greater or less, not {alternative!r}")


def _grid(values: Iterable[float]) -> list[int]:
    return [int(round(abs(v) / RESOLUTION)) for v in values]


def _tail(counts: Mapping[int, int], total: int, observed: int, alternative: str, center: int = 0,
          tolerance: int = 0) -> float:
    """P(T >= obs), P(T <= obs) or P(|T - c| >= |obs - c|) from a count per value of T; values
    within ``tolerance`` of the bound count as ties (they are equal before rounding)."""
    if alternative == "greater":
        hits = sum(c for t, c in counts.items() if t >= observed - tolerance)
    elif alternative == "less":
        hits = sum(c for t, c in counts.items() if t <= observed + tolerance)
    else:
        hits = sum(c for t, c in counts.items() if abs(t - center) >= abs(observed - center) - tolerance)
    return hits / total


def sign_flip_test(differences: Sequence[float], alternative: str = "two-sided", *,
                   seed: int = 0, draws: int = MONTE_CARLO_DRAWS) -> TestResult:
    """The paired sign-flip (permutation) test of the mean of `differences` (method minus
    control, one per item): under the null each difference is as likely positive as
    negative, so the null distribution of their sum T is that of all 2^n sign patterns.

    ``alternative``: ``two-sided`` (P(|T*| >= |T|)), ``greater`` (the method is better:
    P(T* >= T)) or ``less``. Zero differences carry no sign and are dropped. The 2^n
    patterns are counted by their sums, one difference at a time (``exact``: every pattern
    of up to 20 differences, and more whenever the sums take at most :data:`MAX_STATES`
    values); otherwise ``draws`` random patterns from ``seed`` estimate it (``monte-carlo``:
    p = (1 + hits) / (1 + draws), never 0). Sums equal before rounding to the
    :data:`RESOLUTION` grid count as ties (within n grid units), so seed-averaged differences
    (thirds) give the p of exact arithmetic. With no nonzero difference p is 1. Example:
    5 items better and none worse give one-sided 1/32 and two-sided 1/16.
    """
    _check_alternative(alternative)
    magnitudes = [m for m in _grid(differences) if m]
    signs = [1 if d > 0 else -1 for d in differences if int(round(abs(d) / RESOLUTION))]
    observed = sum(s * m for s, m in zip(signs, magnitudes))
    n = len(magnitudes)
    statistic = observed * RESOLUTION
    if n == 0:
        return TestResult(1.0, 0.0, 0, "exact", alternative)
    counts = {0: 1}
    for m in magnitudes:  # the distribution of the sum, one difference at a time
        step: dict[int, int] = {}
        for total, count in counts.items():
            step[total + m] = step.get(total + m, 0) + count
            step[total - m] = step.get(total - m, 0) + count
        counts = step
        if len(counts) > MAX_STATES:
            break
    else:
        return TestResult(_tail(counts, 1 << n, observed, alternative, tolerance=n), statistic, n, "exact",
                          alternative)
    rng = random.Random(seed)
    hits = 0
    for _ in range(draws):
        total = sum(m if rng.random() < 0.5 else -m for m in magnitudes)
        hits += (total >= observed - n if alternative == "greater" else total <= observed + n
                 if alternative == "less" else abs(total) >= abs(observed) - n)
    return TestResult((1 + hits) / (1 + draws), statistic, n, "monte-carlo", alternative, draws, seed)


def signed_ranks(differences: Sequence[float]) -> list[tuple[float, int]]:
    """(rank of |d|, sign) of every nonzero difference; tied magnitudes (equal on the
    :data:`RESOLUTION` grid up to one unit of rounding) share their mean rank."""
    nonzero = [(m, 1 if d > 0 else -1) for d, m in zip(differences, _grid(differences)) if m]
    order = sorted(range(len(nonzero)), key=lambda i: nonzero[i][0])
    ranks = [0.0] * len(nonzero)
    i = 0
    while i < len(order):  # magnitudes within one grid unit of a tie group's first are tied
        j = i
        while j + 1 < len(order) and nonzero[order[j + 1]][0] - nonzero[order[i]][0] <= 1:
            j += 1
        for k in range(i, j + 1):
            ranks[order[k]] = (i + j) / 2 + 1
        i = j + 1
    return [(rank, sign) for rank, (_, sign) in zip(ranks, nonzero)]


def wilcoxon_test(differences: Sequence[float], alternative: str = "two-sided") -> TestResult:
    """Wilcoxon's signed-rank test, exact: the statistic is W+ (the sum of the ranks of the
    positive differences), its null distribution counted over every sign pattern of the
    ranks (tied magnitudes share a mean rank; zeros are dropped, as Wilcoxon did). Less
    sensitive than the sign-flip test to one large difference, more to many small ones."""
    _check_alternative(alternative)
    ranked = signed_ranks(differences)
    n = len(ranked)
    if n == 0:
        return TestResult(1.0, 0.0, 0, "exact", alternative)
    doubled = [int(round(2 * r)) for r, _ in ranked]  # mean ranks are halves: count in halves
    observed = sum(r for r, (_, s) in zip(doubled, ranked) if s > 0)
    counts = {0: 1}
    for r in doubled:
        step: dict[int, int] = {}
        for total, count in counts.items():
            step[total] = step.get(total, 0) + count
            step[total + r] = step.get(total + r, 0) + count
        counts = step
    # in quarters (keys 4 W+): E[W+] = sum(ranks) / 2 is then the integer sum(doubled)
    p = _tail({2 * t: c for t, c in counts.items()}, 1 << n, 2 * observed, alternative, sum(doubled))
    return TestResult(p, observed / 2, n, "exact", alternative)


def holm(p_values: Mapping[Hashable, float]) -> dict[Hashable, float]:
    """Holm's step-down adjusted p-values over a family (e.g. methods × games): the i-th
    smallest of m p-values is multiplied by m - i + 1 (i from 1), made monotone and capped
    at 1. Reject a hypothesis at level α when its adjusted p is below α; this controls the
    chance of any false rejection in the family at α."""
    ordered = sorted(p_values.items(), key=lambda item: item[1])
    m, running, out = len(ordered), 0.0, {}
    for i, (key, p) in enumerate(ordered):
        running = max(running, min(1.0, (m - i) * p))
        out[key] = running
    return out


@dataclass(frozen=True)
class Interval:
    """A mean difference with its percentile interval and how it was resampled."""

    mean: float
    low: float
    high: float
    level: float
    resamples: int
    clusters: int
    seeds: int


def cluster_resamples(differences: Mapping[tuple[Hashable, Hashable], float], *,
                      cluster_of: Optional[Mapping[Hashable, Hashable]] = None,
                      resamples: int = 2000, seed: int = 0) -> list[float]:
    """The means of `resamples` two-level bootstrap resamples of ``{(seed, item): d}``:
    each draws the item clusters with replacement (every item of a drawn cluster comes
    along: ``cluster_of`` maps item -> cluster, default each item its own) and, when there
    are several, the training seeds with replacement, and averages d over every drawn
    (seed, item). Seeds and clusters vary both: the interval holds the evaluation noise of
    the items and the training noise of the seeds."""
    if not differences:
        raise ValueError("no differences to resample")
    seeds = sorted({s for s, _ in differences}, key=repr)
    items = sorted({i for _, i in differences}, key=repr)
    cluster_of = dict(cluster_of or {})
    members: dict[Hashable, list] = {}
    for item in items:
        members.setdefault(cluster_of.get(item, item), []).append(item)
    clusters = sorted(members, key=repr)
    rng = random.Random(seed)
    means = []
    for _ in range(resamples):
        drawn_seeds = [rng.choice(seeds) for _ in seeds] if len(seeds) > 1 else seeds
        drawn = [i for _ in clusters for i in members[rng.choice(clusters)]]
        values = [differences[(s, i)] for s in drawn_seeds for i in drawn if (s, i) in differences]
        means.append(sum(values) / len(values))
    return means


def clustered_interval(differences: Mapping[tuple[Hashable, Hashable], float], *,
                       cluster_of: Optional[Mapping[Hashable, Hashable]] = None, level: float = 0.95,
                       resamples: int = 2000, seed: int = 0) -> Interval:
    """The mean of ``{(seed, item): d}`` with its percentile interval from
    :func:`cluster_resamples` (clusters and seeds resampled)."""
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), not {level}")
    means = sorted(cluster_resamples(differences, cluster_of=cluster_of, resamples=resamples, seed=seed))
    tail = (1 - level) / 2
    low = means[min(len(means) - 1, int(math.floor(tail * len(means))))]
    high = means[max(0, int(math.ceil((1 - tail) * len(means))) - 1)]
    items = {i for _, i in differences}
    clusters = {(cluster_of or {}).get(i, i) for i in items}
    return Interval(sum(differences.values()) / len(differences), low, high, level, resamples,
                    len(clusters), len({s for s, _ in differences}))


def detectable_effect(sd: float, n: int, *, alpha: float = 0.05, power: float = 0.8,
                      alternative: str = "two-sided") -> float:
    """The smallest true mean difference a paired test on `n` items detects with
    probability `power` at level `alpha`, when the per-item differences have standard
    deviation `sd`: (z(1 - α/2) + z(power)) · sd / √n (normal approximation; 2.80 · sd/√n at
    α = 0.05, power 0.8). Only `n` large enough can reach small p at all: see
    :func:`smallest_p_value`."""
    _check_alternative(alternative)
    if n < 1:
        raise ValueError(f"n must be >= 1, not {n}")
    z = NormalDist()
    critical = z.inv_cdf(1 - alpha / 2) if alternative == "two-sided" else z.inv_cdf(1 - alpha)
    return (critical + z.inv_cdf(power)) * sd / math.sqrt(n)


def smallest_p_value(n: int, alternative: str = "two-sided") -> float:
    """The smallest p-value an exact sign-flip test on `n` nonzero differences can give
    (all of one sign): 2 / 2^n two-sided — below 0.05 only from n = 6 on."""
    _check_alternative(alternative)
    return (2.0 if alternative == "two-sided" else 1.0) / (1 << n)


def sample_sd(values: Sequence[float]) -> float:
    """The sample standard deviation (n - 1); 0 for fewer than two values."""
    if len(values) < 2:
        return 0.0
    mean = sum(values) / len(values)
    return math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))
