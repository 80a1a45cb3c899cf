"""The protocol's statistics against cases computed by hand."""
import itertools
import math
import random

import pytest

from playpen.evaluation import statistics as stats


def brute_force_sign_flip(differences, alternative="two-sided"):
    """Every sign pattern written out: the definition the counting must agree with."""
    observed = sum(differences)
    hits = 0
    for signs in itertools.product((1, -1), repeat=len(differences)):
        total = sum(s * abs(d) for s, d in zip(signs, differences))
        hits += (total >= observed - 1e-9 if alternative == "greater"
                 else abs(total) >= abs(observed) - 1e-9)
    return hits / 2 ** len(differences)


def test_five_better_none_worse():
    # the case: SPIN vs SFT on taboo, 5 items better, 0 worse (13 ties)
    differences = [33.3, 66.7, 33.3, 100.0, 33.3] + [0.0] * 13
    two_sided = stats.sign_flip_test(differences)
    assert two_sided.p_value == pytest.approx(1 / 16) and two_sided.n == 5 and two_sided.method == "exact"
    assert stats.sign_flip_test(differences, "greater").p_value == pytest.approx(1 / 32)
    assert stats.sign_flip_test(differences, "less").p_value == pytest.approx(1.0)
    assert stats.wilcoxon_test(differences).p_value == pytest.approx(1 / 16)


def test_sign_flip_by_hand_and_against_every_pattern():
    # [3, -1, 2]: T = 4; patterns with |T*| >= 4: (+3+1+2)=6, (+3-1+2)=4 and their negatives -> 4/8
    assert stats.sign_flip_test([3, -1, 2]).p_value == pytest.approx(0.5)
    assert stats.sign_flip_test([3, -1, 2], "greater").p_value == pytest.approx(0.25)
    rng = random.Random(3)
    for n in (1, 4, 9, 12):
        d = [round(rng.gauss(0.4, 1), 3) for _ in range(n)]
        assert stats.sign_flip_test(d).p_value == pytest.approx(brute_force_sign_flip(d))
        assert stats.sign_flip_test(d, "greater").p_value == pytest.approx(brute_force_sign_flip(d, "greater"))
    assert stats.sign_flip_test([0.0, 0.0]).p_value == 1.0
    # float sums that must tie: 1/3 + 2/3 against 1
    assert stats.sign_flip_test([100 / 3, 200 / 3, -100.0]).p_value == pytest.approx(1.0)


def test_many_items_exact_on_a_grid_sampled_otherwise():
    # 40 items on the score grid of taboo: counted exactly, however many there are
    grid = [100.0] * 12 + [-100 / 3] * 4 + [0.0] * 24
    result = stats.sign_flip_test(grid)
    assert result.method == "exact" and result.n == 16
    rng = random.Random(0)
    wide = [rng.gauss(0.5, 1) for _ in range(40)]  # 2^40 distinct sums: sampled, seeded
    first = stats.sign_flip_test(wide, seed=7, draws=2000)
    assert first.method == "monte-carlo" and first.draws == 2000 and first.seed == 7
    assert stats.sign_flip_test(wide, seed=7, draws=2000) == first
    assert 0 < first.p_value < 0.05


def seed_averaged_thirds(rng, n):
    """Per-item differences as the protocol makes them: three seeds' scores (taboo's grid,
    0 / 33.3 / 66.7 / 100) minus a control's, averaged over the seeds in float."""
    scores = (0.0, 100 / 3, 200 / 3, 100.0)
    return [sum(rng.choice(scores) - rng.choice(scores) for _ in range(3)) / 3 for _ in range(n)]


def brute_force_wilcoxon(differences, alternative="two-sided"):
    """W+ over every sign pattern, ranks from magnitudes rounded to 9 decimals (exact ties);
    ``greater``: P(W+* >= W+), ``less``: P(W+* <= W+)."""
    nonzero = [d for d in differences if abs(d) > 1e-9]
    magnitudes = [round(abs(d), 9) for d in nonzero]
    ranks = [sum(m < x for m in magnitudes) + (sum(m == x for m in magnitudes) + 1) / 2 for x in magnitudes]
    observed = sum(r for r, d in zip(ranks, nonzero) if d > 0)
    center = sum(ranks) / 2
    hits = 0
    for signs in itertools.product((1, -1), repeat=len(nonzero)):
        w = sum(r for r, s in zip(ranks, signs) if s > 0)
        hits += (w >= observed - 1e-9 if alternative == "greater" else w <= observed + 1e-9
                 if alternative == "less" else abs(w - center) >= abs(observed - center) - 1e-9)
    return hits / 2 ** len(nonzero)


def test_seed_averaged_thirds_against_every_pattern():
    # sums equal in exact arithmetic (33.33 + 66.67 = 100) land a grid unit apart after
    # rounding each difference; they must count as ties, as brute force counts them
    rng = random.Random(11)
    for n in (6, 10, 13, 16):
        d = seed_averaged_thirds(rng, n)
        nonzero = [x for x in d if abs(x) > 1e-9]
        assert stats.sign_flip_test(d).p_value == pytest.approx(brute_force_sign_flip(nonzero), abs=1e-12)
        assert stats.sign_flip_test(d, "greater").p_value == pytest.approx(
            brute_force_sign_flip(nonzero, "greater"), abs=1e-12)
        for alternative in ("two-sided", "greater", "less"):
            assert stats.wilcoxon_test(d, alternative).p_value == pytest.approx(
                brute_force_wilcoxon(d, alternative), abs=1e-12), (n, alternative)
    # one-sided, by hand: |d| = 1/3, 1/3, 2/3 -> ranks 1.5, 1.5, 3; W+ = 1.5 + 3 = 4.5. The 8 subsets
    # of {1.5, 1.5, 3} give W+ = 0, 1.5, 1.5, 3, 3, 4.5, 4.5, 6: 3 are >= 4.5, 7 are <= 4.5
    d = [100 / 3, -100 / 3, 200 / 3]
    assert stats.wilcoxon_test(d, "greater").p_value == pytest.approx(3 / 8) == brute_force_wilcoxon(d, "greater")
    assert stats.wilcoxon_test(d, "less").p_value == pytest.approx(7 / 8) == brute_force_wilcoxon(d, "less")
    # the rounding case the old count got wrong: every pattern's |T| ties the observed one
    d = [100 / 3, 100 / 3, -200 / 3]
    assert stats.sign_flip_test(d).p_value == pytest.approx(brute_force_sign_flip(d)) == pytest.approx(1.0)


def test_wilcoxon_ranks_and_p_values():
    # |d| = 1, 2, 2, 4 -> ranks 1, 2.5, 2.5, 4; W+ = 1 + 2.5 + 4 = 7.5
    assert stats.signed_ranks([1, -2, 2, 4]) == [(1.0, 1), (2.5, -1), (2.5, 1), (4.0, 1)]
    result = stats.wilcoxon_test([1, -2, 2, 4])
    assert result.statistic == 7.5
    # the 16 subsets of ranks {1, 2.5, 2.5, 4} (mean W+ 5) with |W+ - 5| >= 2.5:
    # W+ = 0, 1, 2.5, 2.5, 7.5, 7.5, 9, 10 -> 8 of 16
    assert result.p_value == pytest.approx(8 / 16)
    # [1, -2, 3, 4, 5]: W+ = 13 of 15; P(W+ >= 13 or <= 2) = 6/32 (scipy's exact value too)
    assert stats.wilcoxon_test([1, -2, 3, 4, 5]).p_value == pytest.approx(0.1875)


def test_holm_by_hand():
    adjusted = stats.holm({"a": 0.01, "b": 0.04, "c": 0.03, "d": 0.005})
    # sorted: d .005*4=.02, a .01*3=.03, c .03*2=.06, b .04*1=.04 -> kept monotone: .06
    assert adjusted == pytest.approx({"d": 0.02, "a": 0.03, "c": 0.06, "b": 0.06})
    assert stats.holm({"x": 0.6, "y": 0.7}) == pytest.approx({"x": 1.0, "y": 1.0})
    assert stats.holm({}) == {}


def test_the_clustered_bootstrap_keeps_a_clusters_items_together():
    # two targets of three positions each: all of A's items +3, all of B's 0
    differences = {(42, f"A/{p}"): 3.0 for p in range(3)} | {(42, f"B/{p}"): 0.0 for p in range(3)}
    cluster_of = {item: item.split("/")[0] for _, item in differences}
    means = stats.cluster_resamples(differences, cluster_of=cluster_of, resamples=400, seed=1)
    # a resample draws two whole clusters: AA, AB or BB -> 3, 1.5 or 0, never 1 or 2 (single items)
    assert set(means) == {0.0, 1.5, 3.0}
    loose = stats.cluster_resamples(differences, resamples=400, seed=1)
    assert set(loose) - {0.0, 1.5, 3.0}  # items drawn one by one give the other means too
    interval = stats.clustered_interval(differences, cluster_of=cluster_of, resamples=400, seed=1)
    assert interval.mean == 1.5 and interval.low == 0.0 and interval.high == 3.0
    assert (interval.clusters, interval.seeds) == (2, 1)


def test_the_bootstrap_resamples_seeds_too():
    # seed 1 gains 2 on every item, seed 2 none: the seeds' spread reaches the interval
    differences = {(s, i): (2.0 if s == 1 else 0.0) for s in (1, 2) for i in range(10)}
    means = stats.cluster_resamples(differences, resamples=300, seed=0)
    assert set(means) == {0.0, 1.0, 2.0}
    interval = stats.clustered_interval(differences, resamples=300, seed=0)
    assert (interval.low, interval.high, interval.seeds) == (0.0, 2.0, 2)


def test_detectable_effect_and_smallest_p():
    # (1.96 + 0.8416) * sd / sqrt(n)
    assert stats.detectable_effect(30.0, 60) == pytest.approx(2.8016 * 30 / math.sqrt(60), rel=1e-3)
    assert stats.detectable_effect(30.0, 240) == pytest.approx(stats.detectable_effect(30.0, 60) / 2)
    assert stats.smallest_p_value(5) == 1 / 16 and stats.smallest_p_value(6) == 1 / 32
    assert stats.sample_sd([1.0, 3.0]) == pytest.approx(math.sqrt(2))
    with pytest.raises(ValueError):
        stats.sign_flip_test([1.0], "bigger")


def test_tost_p_against_two_one_sided_z_tests(benchmark_script):
    """benchmarks/harness.py's ``tost_p`` (equivalence within ±margin, normal approximation):
    the larger p of the z-tests of H0 mean <= -margin and H0 mean >= margin, computed here with
    scipy's normal tails and numpy's standard deviation."""
    import numpy as np
    from scipy.stats import norm
    tost_p = benchmark_script("harness").tost_p
    # by hand: mean 0, sd sqrt(4/3), se sqrt(1/3); margin 1: z = sqrt(3) on both sides, p = 0.0416
    assert tost_p([1, -1, 1, -1], 1.0) == pytest.approx(norm.sf(math.sqrt(3))) == pytest.approx(0.04163, abs=1e-5)
    rng = random.Random(5)
    for mean, equivalent in ((0.5, True), (4.9, False), (-4.9, False)):  # near either margin: not shown
        d = [rng.gauss(mean, 4) for _ in range(300)]
        se = np.std(d, ddof=1) / math.sqrt(len(d))
        lower, upper = norm.sf((np.mean(d) + 5) / se), norm.cdf((np.mean(d) - 5) / se)
        p = tost_p(d, 5.0)
        assert p == pytest.approx(max(lower, upper), rel=1e-9), mean
        assert (p < 0.05) == equivalent, (mean, p)
    assert tost_p([2.0, 2.0], 5.0) == 0.0 and tost_p([6.0, 6.0], 5.0) == 1.0  # no spread: the mean decides
