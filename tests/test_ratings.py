"""playpen.ratings: exact Elo and OpenSkill updates on hand-made results, Bradley–Terry,
bootstrap intervals, the rating history and its plot, the table, bad input.

The OpenSkill numbers below are closed forms of Weng & Lin's Plackett–Luce update
(Algorithm 4) for the case at hand, written out in the comments, and the ratings playpen's
own implementation of the update gave on a fixed match list before the ``openskill``
package replaced it (issue 40).
"""
import json
import math
import random

import pytest

from playpen.ratings import (Elo, Match, OpenSkill, RatingError, RatingHistory,
                             bootstrap_bradley_terry, bootstrap_elo, elo_from_matches,
                             fit_bradley_terry, openskill_from_matches, plot_ratings, ratings_table)

EXACT = dict(rel=1e-12, abs=1e-12)


def simulate(strengths: dict[str, float], rounds: int, seed: int = 0) -> list[Match]:
    """A round robin, both seatings, `rounds` times; a wins with Elo's probability for the
    true strengths (no draws)."""
    rng = random.Random(seed)
    names = list(strengths)
    matches = []
    for r in range(rounds):
        for i, a in enumerate(names):
            for b in names[i + 1:]:
                for seat, (x, y) in enumerate(((a, b), (b, a))):
                    p = 1 / (1 + 10 ** ((strengths[y] - strengths[x]) / 400))
                    matches.append(Match(x, y, 1.0 if rng.random() < p else 0.0, "toy", f"i{r}", seat))
    return matches


TRUE = {"strong": 1200.0, "good": 1100.0, "fair": 1000.0, "weak": 900.0}


# ----------------------------------------------------------------------------- Elo

def test_elo_exact_updates():
    elo = Elo(initial=1000.0, k=32.0)
    # equal ratings: E = 1/2, so the winner gains k/2
    assert elo.expected("a", "b") == 0.5
    assert elo.update("a", "b", 1.0) == (1016.0, 984.0)
    # E_a = 1/(1 + 10^((984 − 1016)/400)) = 1/(1 + 10^−0.08) = 0.5459219227804837;
    # a loses: a = 1016 − 32·0.54592… = 998.5304984710245, b = 984 + 17.4695… = 1001.4695…
    assert elo.expected("a", "b") == pytest.approx(0.5459219227804837, **EXACT)
    new_a, new_b = elo.update("a", "b", 0.0)
    assert new_a == pytest.approx(998.5304984710245, **EXACT)
    assert new_b == pytest.approx(1001.4695015289755, **EXACT)
    assert sum(elo.ratings.values()) == pytest.approx(2000.0, **EXACT)  # zero-sum


def test_elo_draw_unknown_players_and_options():
    elo = Elo(initial=1500.0, k=10.0)
    elo.update("a", "b", 1.0)  # a 1505, b 1495
    # a draws newcomer c (1500): E_a = 1/(1 + 10^(−5/400)) = 0.5071950817090514, so a moves
    # by 10·(0.5 − E_a) = −0.071950817090514
    assert elo.expected("a", "c") == pytest.approx(0.5071950817090514, **EXACT)
    elo.update("a", "c", 0.5)
    assert elo.ratings["a"] == pytest.approx(1504.928049182909486, **EXACT)
    assert elo.ratings["c"] == pytest.approx(1500.071950817090514, **EXACT)
    assert elo.rating("never-seen") == 1500.0
    assert elo.expected("a", "c") + elo.expected("c", "a") == pytest.approx(1.0, **EXACT)


def test_elo_from_matches_replays_in_order():
    matches = [Match("a", "b", 1.0, "g", "0"), Match("a", "b", 0.0, "g", "1")]
    assert elo_from_matches(matches).ratings["a"] == pytest.approx(998.5304984710245, **EXACT)
    assert elo_from_matches(matches[::-1]).ratings["a"] == pytest.approx(1001.4695015289755, **EXACT)


# ----------------------------------------------------------------------------- OpenSkill

def test_openskill_two_players_exact():
    # tau = 0, fresh players: sigma² = 625/9, beta² = 625/36, c² = 2(sigma² + beta²) = 3125/18,
    # so sigma²/c² = 2/5. Winner: C = e + e, p = 1/2, Omega = sigma²/c · (1 − 1/2) =
    # (25/3)·√0.4 / 2 = (25/6)√0.4 = 2.635231383473650; the loser sums q = winner (−1/2) and
    # itself (1 − 1 = 0): −Omega. Delta = (sigma/c)(sigma²/c²)·p(1 − p) = √0.4 · 0.4 · 1/4
    # = 0.1·√0.4 for both, so sigma' = (25/3)·√(1 − 0.1·√0.4) = 8.065506316323548.
    model = OpenSkill(tau=0.0)
    model.update([["a"], ["b"]], [0, 1])
    assert model.ratings["a"][0] == pytest.approx(27.63523138347365, **EXACT)
    assert model.ratings["b"][0] == pytest.approx(22.36476861652635, **EXACT)
    assert model.ratings["a"][1] == pytest.approx(8.065506316323548, **EXACT)
    assert model.ratings["b"][1] == pytest.approx(8.065506316323548, **EXACT)
    assert model.ordinal("a") == pytest.approx(27.63523138347365 - 3 * 8.065506316323548, **EXACT)
    assert model.ordinal("a", z=0) == pytest.approx(27.63523138347365, **EXACT)


def test_openskill_default_tau_exact():
    # the default tau = 25/300 adds tau² = 1/144 to each variance first: sigma² = 625/9 + 1/144,
    # c = √(2(sigma² + 625/36)); mu = 25 ± sigma²/(2c); sigma' = √(sigma²(1 − (sigma/c)(sigma²/c²)/4))
    model = OpenSkill()
    assert (model.mu, model.sigma, model.beta, model.kappa, model.tau) == (25.0, 25 / 3, 25 / 6, 1e-4, 25 / 300)
    model.update([["b"], ["a"]], [1, 0])
    assert model.ratings["a"][0] == pytest.approx(27.635389493140497, **EXACT)
    assert model.ratings["b"][0] == pytest.approx(22.364610506859503, **EXACT)
    assert model.ratings["a"][1] == pytest.approx(8.06590141354368, **EXACT)


def test_openskill_three_players_exact():
    # tau = 0, fresh: c² = 3(sigma² + beta²) = 3125/12, sigma²/c² = 4/15; k = sigma²/c =
    # (25/3)√(4/15); g = (sigma/c)³ = (4/15)^1.5. Strengths equal, so C_1 = 3e, C_2 = 2e, C_3 = e:
    #   Omega_1 = k(1 − 1/3) = 2k/3              Delta_1 = g·(1/3)(2/3) = 2g/9
    #   Omega_2 = k(−1/3 + 1 − 1/2) = k/6        Delta_2 = g(2/9 + 1/4) = 17g/36
    #   Omega_3 = k(−1/3 − 1/2 + 0) = −5k/6      Delta_3 = g(2/9 + 1/4 + 0) = 17g/36
    model = OpenSkill(tau=0.0)
    model.update([["a"], ["b"], ["c"]], [0, 1, 2])
    k, g = (25 / 3) * math.sqrt(4 / 15), (4 / 15) ** 1.5
    assert model.ratings["a"] == pytest.approx((27.868876552746237, 8.204837030780652), **EXACT)
    assert model.ratings["b"] == pytest.approx((25.717219138186557, 8.057829747583874), **EXACT)
    assert model.ratings["c"] == pytest.approx((21.413904309067206, 8.057829747583874), **EXACT)
    assert model.ratings["a"][0] == pytest.approx(25 + 2 * k / 3, **EXACT)
    assert model.ratings["c"][1] == pytest.approx((25 / 3) * math.sqrt(1 - 17 * g / 36), **EXACT)


def test_openskill_ties_exact():
    # ranks [0, 0, 1]: A = 2 for the tied pair, C_1 = C_2 = 3e, C_3 = e (k, g as above):
    #   Omega_1 = Omega_2 = k((1 − 1/3)/2 + (−1/3)/2) = k/6, Omega_3 = k(−1/6 − 1/6 + 0) = −k/3
    #   Delta = g·(2/9)/2·2 = 2g/9 for all three
    model = OpenSkill(tau=0.0)
    model.update([["a"], ["b"], ["c"]], [0, 0, 1])
    assert model.ratings["a"] == pytest.approx((25.717219138186557, 8.204837030780652), **EXACT)
    assert model.ratings["b"] == model.ratings["a"]
    assert model.ratings["c"] == pytest.approx((23.56556172362688, 8.204837030780652), **EXACT)
    # a two-player draw moves neither mean
    draw = OpenSkill(tau=0.0)
    draw.update_match("x", "y", 0.5)
    assert draw.ratings["x"][0] == pytest.approx(25.0, **EXACT)
    assert draw.ratings["x"] == draw.ratings["y"]


def test_openskill_teams_exact():
    # team [a, b] (mu 50, sigma² 1250/9) beats [c] (25, 625/9), tau = 0:
    # c² = 1250/9 + 625/9 + 2·625/36 = 4375/18; p = P(team 1 first) = 1/(1 + e^(−25/c)) = 0.83251…
    #   Omega_1 = (1250/9)(1 − p)/c, each teammate gets half (its share of the team variance):
    #   mu_a = 25 + (625/9)(1 − p)/c = 25.746031269963787
    #   sigma_a² = (625/9)(1 − ½ (sigma_1/c)(sigma_1²/c²) p(1 − p))  → 8.206896387427937
    #   Omega_2 = −(625/9)(1 − p)/c: mu_c = 24.253968730036213
    #   sigma_c² = (625/9)(1 − (sigma_2/c)(sigma_2²/c²) p(1 − p))    → 8.244129715689962
    model = OpenSkill(tau=0.0)
    model.update([["a", "b"], ["c"]], [0, 1])
    c = math.sqrt(4375 / 18)
    p = 1 / (1 + math.exp(-25 / c))
    assert p == pytest.approx(0.8325163952785395, **EXACT)
    assert model.ratings["a"] == pytest.approx((25.746031269963787, 8.206896387427937), **EXACT)
    assert model.ratings["b"] == model.ratings["a"]
    assert model.ratings["c"] == pytest.approx((24.253968730036213, 8.244129715689962), **EXACT)
    assert model.ratings["c"][0] == pytest.approx(25 - (625 / 9) * (1 - p) / c, **EXACT)


def test_openskill_symmetry():
    # the order in which teams are listed does not matter, only their ranks
    one, two = OpenSkill(), OpenSkill()
    one.update([["a"], ["b", "c"], ["d"]], [2, 0, 1])
    two.update([["d"], ["b", "c"], ["a"]], [1, 0, 2])
    for name in "abcd":
        assert one.ratings[name] == pytest.approx(two.ratings[name], **EXACT)
    # mirrored results: the winner gains what the loser loses, and the winner of the
    # mirror gets exactly the first winner's rating
    first, mirror = OpenSkill(), OpenSkill()
    first.update_match("a", "b", 1.0)
    mirror.update_match("a", "b", 0.0)
    assert first.ratings["a"] == pytest.approx(mirror.ratings["b"], **EXACT)
    assert first.ratings["a"][0] + first.ratings["b"][0] == pytest.approx(50.0, **EXACT)


def test_openskill_sigma_shrinks():
    for tau in (0.0, 25 / 300):
        model = OpenSkill(tau=tau)
        sigmas = [model.rating("a")[1]]
        for i in range(30):
            model.update([["a"], [f"opponent{i % 3}"]], [i % 2, 1 - i % 2])
            sigmas.append(model.ratings["a"][1])
        assert all(later < earlier for earlier, later in zip(sigmas, sigmas[1:])), tau
        assert sigmas[-1] < 0.6 * sigmas[0]


# Forty two-player results (`>` a win for the left player, `<` a loss, `=` a draw) and a few
# games of teams with ties; the ratings after them are those playpen's hand-written
# Plackett–Luce update (deleted in issue 40) gave, printed with repr before it was deleted.
FIXED_MATCHES = ("T<L F2<F1 F2>P L>F1 F1>T F1>F2 F2<P P>L L=F2 F1=P F1=F2 T<F1 F1>T P<L P<F1 P>L T>F2 F1>P T>L "
                 "F2=T P>F1 L<F1 T>F1 L<T P>L T<F1 T<F1 F1=F2 L=F1 F1>P F1>P P<F1 T>P F2<P F1>L L<F1 F2=L F2>T "
                 "F2<L P<F2")
OLD_DEFAULTS = {"L": (20.719247737878266, 5.657031050244734), "F1": (35.320195344391074, 5.152384137156972),
                "F2": (21.4971456600741, 5.684862922567989), "T": (23.632629901440875, 5.790921983810305),
                "P": (22.42108325821338, 5.422604690617438)}
OLD_OTHER_PARAMS = {"L": (16.498549650560612, 4.571654431624756), "F1": (28.390624052755797, 4.14058769297144),
                    "F2": (17.149942659212797, 4.587141702853447), "T": (18.904813943274345, 4.680070897308873),
                    "P": (17.86420958022984, 4.3520207549338386)}
TEAM_GAMES = [([["a"], ["b", "c"], ["d"]], [2, 0, 1]), ([["a"], ["b"], ["c"]], [0, 0, 1]),
              ([["d"], ["a", "b"]], [0, 1]), ([["c"], ["d"], ["a"], ["b"]], [1, 0, 1, 2]),
              ([["a", "d"], ["b", "c"]], [0, 0])]
OLD_TEAM_GAMES = {"a": (19.566975004360835, 7.685768995079303), "b": (21.6699082871275, 7.682466483609721),
                  "c": (24.686161529594138, 7.783119413043236), "d": (31.95975916449732, 7.859770067071509)}


def fixed_matches() -> list[Match]:
    score = {">": 1.0, "<": 0.0, "=": 0.5}
    out = []
    for i, text in enumerate(FIXED_MATCHES.split()):
        sign = next(c for c in text if c in score)
        a, b = text.split(sign)
        out.append(Match(a, b, score[sign], "g", str(i)))
    return out


def flat(ratings: dict) -> dict:
    return {(name, part): value for name, pair in ratings.items() for part, value in zip("ms", pair)}


def test_openskill_gives_the_ratings_of_the_hand_written_update_it_replaced():
    from openskill.models import PlackettLuce
    matches = fixed_matches()
    assert len(matches) == 40 and sum(m.score_a == 0.5 for m in matches) == 7
    for params, old in (({}, OLD_DEFAULTS),
                        (dict(mu=20.0, sigma=7.0, beta=3.0, kappa=1e-3, tau=0.0), OLD_OTHER_PARAMS)):
        model = openskill_from_matches(matches, **params)
        assert flat(model.ratings) == pytest.approx(flat(old), rel=1e-12, abs=1e-12)
        # the same numbers from the package used directly, with the same defaults
        package, beliefs = PlackettLuce(**params), {}
        for m in matches:
            ranks = [0, 0] if m.score_a == 0.5 else [1 - m.score_a, m.score_a]
            (a,), (b,) = package.rate([[beliefs.get(m.a, package.rating())], [beliefs.get(m.b, package.rating())]],
                                      ranks=ranks)
            beliefs[m.a], beliefs[m.b] = a, b
        assert flat({n: (r.mu, r.sigma) for n, r in beliefs.items()}) == pytest.approx(flat(old), rel=1e-12, abs=1e-12)
    teams = OpenSkill()
    for players, ranks in TEAM_GAMES:
        teams.update(players, ranks)
    assert flat(teams.ratings) == pytest.approx(flat(OLD_TEAM_GAMES), rel=1e-12, abs=1e-12)


# ----------------------------------------------------------------------------- Bradley–Terry

def test_bradley_terry_exact_and_order_independent():
    # a wins 3 of 4 against b, no prior: the odds are 3, so the Elo gap is 400·log10(3)
    # = 190.848501887865; anchored on the mean 1000
    matches = [Match("a", "b", s, "g", str(i)) for i, s in enumerate([1, 1, 0, 1])]
    fit = fit_bradley_terry(matches, virtual_draws=0.0)
    gap = 400 * math.log10(3)
    assert fit["a"] == pytest.approx(1000 + gap / 2, rel=1e-10)
    assert fit["b"] == pytest.approx(1000 - gap / 2, rel=1e-10)
    assert fit_bradley_terry(matches[::-1], virtual_draws=0.0) == pytest.approx(fit, rel=1e-12)
    # draws count half: 1 win + 2 draws + 1 loss is an even score
    even = [Match("a", "b", s, "g", str(i)) for i, s in enumerate([1, 0.5, 0.5, 0])]
    assert fit_bradley_terry(even) == pytest.approx({"a": 1000.0, "b": 1000.0}, abs=1e-9)
    # a beats b beats c beats a: everyone beat everyone indirectly, so the plain likelihood
    # has a finite maximum, and by symmetry it rates all three alike
    cycle = [Match("a", "b", 1, "g", "0"), Match("b", "c", 1, "g", "1"), Match("c", "a", 1, "g", "2")]
    assert fit_bradley_terry(cycle, virtual_draws=0) == pytest.approx({n: 1000.0 for n in "abc"}, abs=1e-9)


def test_bradley_terry_undefeated_player_stays_finite():
    # a wins all 5 against b; with one virtual draw each against strength 0, by symmetry
    # theta_a = −theta_b = t and t solves 5(1 − σ(2t)) + 1/2 − σ(t) = 0
    matches = [Match("a", "b", 1.0, "g", str(i)) for i in range(5)]
    fit = fit_bradley_terry(matches, initial=1500.0)
    t = (fit["a"] - 1500.0) * math.log(10) / 400
    sigmoid = lambda x: 1 / (1 + math.exp(-x))  # noqa: E731
    assert 5 * (1 - sigmoid(2 * t)) + 0.5 - sigmoid(t) == pytest.approx(0.0, abs=1e-9)
    assert fit["a"] + fit["b"] == pytest.approx(3000.0, **EXACT)
    assert 1500 < fit["a"] < 2000


# ----------------------------------------------------------------------------- bootstrap

def test_bootstrap_elo_contains_point_and_is_seeded():
    matches = simulate(TRUE, rounds=5)
    result = bootstrap_elo(matches, num_samples=300, seed=1)
    assert set(result) == set(TRUE)
    for rating, low, high in result.values():
        assert low < rating < high
    assert bootstrap_elo(matches, num_samples=300, seed=1) == result
    assert bootstrap_elo(matches, num_samples=300, seed=2) != result


def test_bootstrap_single_sample_replays_the_drawn_order():
    # one resample is one Elo replay of the drawn matches: with a single distinct match
    # repeated, every order is the same, so the rating is exactly Elo's
    matches = [Match("a", "b", 1.0, "g", "0")] * 3
    result = bootstrap_elo(matches, num_samples=1)
    elo = elo_from_matches(matches)
    assert result["a"] == pytest.approx((elo.ratings["a"],) * 3, **EXACT)


def test_bradley_terry_intervals_narrow_with_more_matches():
    few = bootstrap_bradley_terry(simulate(TRUE, rounds=5), num_samples=200, seed=0)
    many = bootstrap_bradley_terry(simulate(TRUE, rounds=80), num_samples=200, seed=0)
    for name in TRUE:
        for result in (few, many):
            rating, low, high = result[name]
            assert low < rating < high
        # 16× the matches: about 4× narrower (1/√n)
        assert (many[name][2] - many[name][1]) < 0.4 * (few[name][2] - few[name][1])


def test_elo_intervals_keep_a_floor_set_by_k():
    # documented behaviour: with a fixed K Elo keeps moving ~K per match, so its bootstrap
    # interval does not shrink like Bradley–Terry's (here 16× the matches: still > 100 points)
    many = bootstrap_elo(simulate(TRUE, rounds=80), num_samples=200, seed=0)
    assert all(high - low > 100 for _, low, high in many.values())


def test_ratings_recover_the_true_order():
    matches = simulate(TRUE, rounds=20, seed=3)
    order = list(TRUE)
    elo = bootstrap_elo(matches, num_samples=200, seed=0)
    bt = fit_bradley_terry(matches)
    skill = openskill_from_matches(matches)
    assert sorted(order, key=lambda n: -elo[n][0]) == order
    assert sorted(order, key=lambda n: -bt[n]) == order
    assert sorted(order, key=lambda n: -skill.ordinal(n)) == order
    # the mean is the anchor, and the fitted gaps are near the true 100 points
    assert sum(bt.values()) / len(bt) == pytest.approx(1000.0, **EXACT)
    assert bt["strong"] - bt["weak"] == pytest.approx(300, abs=120)


# ----------------------------------------------------------------------------- history, plot

def test_history_round_trip_and_plot(tmp_path):
    elo, skill, history = Elo(), OpenSkill(), RatingHistory()
    for epoch in range(3):
        elo.update("learner", f"past-{epoch}", 1.0)
        skill.update([["learner"], [f"past-{epoch}"]], [0, 1])
        history.record(epoch, elo, skill)
    history.record(1, elo, skill)  # a resumed epoch replaces its snapshot
    assert [s["epoch"] for s in history.snapshots] == [0, 1, 2]
    assert history.snapshots[0]["elo"] == {"learner": 1016.0, "past-0": 984.0}
    assert history.players() == ["learner", "past-0", "past-1", "past-2"]

    path = history.save(tmp_path / "ratings.json")
    assert json.loads(path.read_text())["format"] == "playpen-ratings"
    loaded = RatingHistory.load(path)
    assert loaded.snapshots == history.snapshots
    assert loaded.snapshots[2]["openskill"]["learner"] == list(skill.ratings["learner"])

    png = plot_ratings(loaded, tmp_path / "plots" / "ratings.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_history_load_errors(tmp_path):
    with pytest.raises(RatingError, match="cannot read"):
        RatingHistory.load(tmp_path / "missing.json")
    (tmp_path / "other.json").write_text('{"rows": []}')
    with pytest.raises(RatingError, match="not a rating history"):
        RatingHistory.load(tmp_path / "other.json")
    with pytest.raises(RatingError, match="empty"):
        plot_ratings(RatingHistory(), tmp_path / "x.png")
    assert not (tmp_path / "x.png").exists()


# ----------------------------------------------------------------------------- table

def test_ratings_table():
    matches = [Match("a", "b", 1.0, "g", "0"), Match("a", "c", 0.5, "g", "1"),
               Match("b", "c", 1.0, "g", "2")]
    # Elo in order: a 1016, b 984; a draws c: a 1015.26, c 1000.74; b beats c: b 1000.77, c 983.97
    table = ratings_table(matches).splitlines()
    assert table[0] == "| player | Elo | 95 % CI | mu | sigma | ordinal | wins | draws | losses | matches |"
    assert [row.split(" | ")[0:3] for row in table[2:]] == [["| a", "1015", "n/a"], ["| b", "1001", "n/a"],
                                                           ["| c", "984", "n/a"]]
    assert table[2].endswith("| 1 | 1 | 0 | 2 |")
    assert table[4].endswith("| 0 | 1 | 1 | 2 |")
    boot = {"a": (990.0, 900.4, 1100.6), "b": (1010.0, 950.0, 1050.0), "c": (1000.0, 980.0, 1020.0)}
    rows = ratings_table(matches, boot).splitlines()[2:]
    assert rows[0].startswith("| b | 1010 | 950 – 1050 |")
    assert rows[2].startswith("| a | 990 | 900 – 1101 |")
    bt = ratings_table(matches, {**boot, "a": (990.0, math.nan, math.nan)}, rating_name="Bradley–Terry")
    assert bt.startswith("| player | Bradley–Terry | 95 % CI |")
    assert "| a | 990 | n/a |" in bt
    assert "| x\\|y | 1000 |" in ratings_table([Match("x|y", "z", 0.5, "g", "0")])
    with pytest.raises(RatingError, match="no rating for c"):
        ratings_table(matches, {"a": boot["a"], "b": boot["b"]})


# ----------------------------------------------------------------------------- bad input

@pytest.mark.parametrize("make, message", [
    (lambda: Match("a", "a", 1.0, "g", "0"), "two different players"),
    (lambda: Match("a", "b", 1.5, "g", "0"), r"must be in \[0, 1\]"),
    (lambda: Match("a", "b", -0.1, "g", "0"), r"must be in \[0, 1\]"),
    (lambda: Match("a", "b", float("nan"), "g", "0"), r"must be in \[0, 1\]"),
    (lambda: Match("", "b", 1.0, "g", "0"), "non-empty string"),
    (lambda: Elo().update("a", "a", 0.5), "two different players"),
    (lambda: Elo().update("a", "b", 2), r"must be in \[0, 1\]"),
    (lambda: Elo(k=0), "positive"),
    (lambda: OpenSkill().update([["a"], ["b"]], [0]), "one rank per team"),
    (lambda: OpenSkill().update([["a"], []], [0, 1]), "empty team"),
    (lambda: OpenSkill().update([["a"]], [0]), "at least two teams"),
    (lambda: OpenSkill().update([["a", "b"], ["b"]], [0, 1]), "appears twice"),
    (lambda: OpenSkill().update([["a"], ["b"]], [0, "first"]), "ranks must be numbers"),
    (lambda: OpenSkill(sigma=0), "sigma > 0"),
    (lambda: bootstrap_elo([Match("a", "b", 1.0, "g", "0")], num_samples=0), "at least 1"),
    (lambda: fit_bradley_terry([("a", "b", 1.0)]), "expected Match objects"),
    (lambda: fit_bradley_terry([Match("a", "b", 1.0, "g", "0")], virtual_draws=0), "never lost or never won"),
    (lambda: fit_bradley_terry([Match("a", "b", 0.5, "g", "0"), Match("c", "d", 0.5, "g", "0")],
                               virtual_draws=0), "use virtual_draws > 0"),
])
def test_bad_input_is_one_clear_value_error(make, message):
    with pytest.raises(ValueError, match=message) as info:
        make()
    assert isinstance(info.value, RatingError)
    assert "\n" not in str(info.value)


def test_a_failed_update_changes_nothing():
    model = OpenSkill()
    model.update_match("a", "b", 1.0)
    before = dict(model.ratings)
    with pytest.raises(RatingError):
        model.update([["a"], ["b"], ["a"]], [0, 1, 2])
    assert model.ratings == before


def test_the_docs_example_runs(capsys):
    import re
    from pathlib import Path
    doc = (Path(__file__).resolve().parents[1] / "docs" / "populations.md").read_text(encoding="utf-8")
    section = doc.split("\n## Ratings\n", 1)[1].split("\n## ", 1)[0]
    (block,) = re.findall(r"```python\n(.*?)```", section, re.S)
    exec(compile(block, "docs/populations.md", "exec"), {})
    printed = capsys.readouterr().out.splitlines()
    assert printed[0].startswith("| player | Bradley–Terry | 95 % CI |")
    assert printed[2].startswith("| learner |") and printed[2].endswith("| 2 | 1 | 0 | 3 |")
    assert float(printed[-1]) > 25 - 3 * 25 / 3  # the winner's ordinal rose above the prior's (0)
