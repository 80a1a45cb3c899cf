"""negotiation: the move parser, the split arithmetic, the programmatic negotiator,
scripted episodes (deal / no deal / aborted) through the scorer, instance sets, and
clem run/score/eval end to end."""
import math
import statistics

import pytest
from hypothesis import given, settings, strategies as st

import gametest
from gametest import all_instances, context, outcome

GAME_DIR = gametest.BUILTIN_GAMES / "negotiation"
rules = gametest.load_module(GAME_DIR, "negotiation_rules")
policy = gametest.load_module(GAME_DIR, "negotiation_policy")
master = gametest.load_module(GAME_DIR, "negotiation_master", "master")
generator = gametest.load_module(GAME_DIR, "negotiation_instancegenerator", "instancegenerator")

from clemcore.backends.model_registry import CustomResponseModel  # noqa: E402
from clemcore.clemgame.errors import ParseError  # noqa: E402

EVAL = gametest.load_instances(GAME_DIR, "instances")
TRAIN = gametest.load_instances(GAME_DIR, "instances_train")
ITEMS, COUNTS = ["hat", "lamp", "shell"], [3, 4, 1]
# a hand-made game: A wants lamps and the shell, B wants hats and lamps
EXPERIMENT = {"name": "hand_made", "max_turns": 4}
INSTANCE = {"game_id": 0, "items": ITEMS, "counts": COUNTS, "values_a": [0, 2, 2], "values_b": [2, 1, 0],
            "best_joint_points": 16}


def benchmark():
    return gametest.benchmark(master.NegotiationBenchmark, GAME_DIR)


def play(responses=None, experiment=EXPERIMENT, instance=INSTANCE, models=None):
    _, interactions, scores, steps = gametest.play_episode(benchmark(), experiment, instance, responses,
                                                           models=models)
    return interactions, scores, steps


# --- parser ---------------------------------------------------------------------------------

@pytest.mark.parametrize("text, expected", [
    ("PROPOSE: hat=3, lamp=0, shell=1", ("PROPOSE", (3, 0, 1))),
    ("propose:lamp = 4 ,shell=0,hat=0", ("PROPOSE", (0, 4, 0))),
    ("  Propose : HAT=1, Lamp=2, shell=1 \n", ("PROPOSE", (1, 2, 1))),
    ("ACCEPT", ("ACCEPT", None)), ("accept.", ("ACCEPT", None)), (" Reject! ", ("REJECT", None)),
])
def test_parse_move_accepts(text, expected):
    assert rules.parse_move(text, ITEMS, COUNTS) == expected


@pytest.mark.parametrize("text", [
    "", "  ", "I accept", "ACCEPT\nREJECT", "PROPOSE: hat=3, lamp=0", "PROPOSE: hat=4, lamp=0, shell=1",
    "PROPOSE: hat=1, hat=1, lamp=0, shell=1", "PROPOSE: hat=1, lamp=0, shell=1, cup=0",
    "PROPOSE: hat=-1, lamp=0, shell=1", "PROPOSE: hat=one, lamp=0, shell=1", "PROPOSE: hats=1, lamp=0, shell=1",
    "PROPOSE hat=1, lamp=0, shell=1", "PROPOSE:", "Offer: hat=1, lamp=0, shell=1", "PROPOSE: hat=１, lamp=0, shell=1",
    "ＰＲＯＰＯＳＥ: hat=1, lamp=0, shell=1", "PROPOSE: hat=1; lamp=0; shell=1", "x" * 10_000, None, 7,
])
def test_parse_move_rejects(text):
    with pytest.raises(ParseError):
        rules.parse_move(text, ITEMS, COUNTS)


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_parse_move_raises_only_parse_errors(text):
    try:
        kind, taken = rules.parse_move(text, ITEMS, COUNTS)
    except ParseError:
        return
    assert kind in ("PROPOSE", "ACCEPT", "REJECT")
    assert taken is None or all(0 <= n <= c for n, c in zip(taken, COUNTS))


@settings(max_examples=100, deadline=None)
@given(st.tuples(*(st.integers(0, c) for c in COUNTS)))
def test_format_allocation_round_trip(taken):
    assert rules.parse_move("PROPOSE: " + rules.format_allocation(ITEMS, taken), ITEMS, COUNTS) == ("PROPOSE", taken)


def test_split_arithmetic():
    assert rules.best_joint(COUNTS, [0, 2, 2], [2, 1, 0]) == 3 * 2 + 4 * 2 + 1 * 2
    assert rules.points([0, 2, 2], (0, 4, 1)) == 10 and rules.rest(COUNTS, (0, 4, 1)) == (3, 0, 0)
    assert rules.is_pareto_optimal(COUNTS, [0, 2, 2], [2, 1, 0], (0, 4, 1))
    assert not rules.is_pareto_optimal(COUNTS, [0, 2, 2], [2, 1, 0], (1, 4, 1))  # a hat wasted on A
    assert len(list(rules.all_allocations(COUNTS))) == 4 * 5 * 2


# --- the programmatic negotiator ------------------------------------------------------------

def test_policy_demand_falls_and_estimate_follows_claims():
    assert policy.demand(1, 8) == 8 and policy.demand(8, 8) == 4
    estimate = policy.estimate_other_values(COUNTS, [(3, 0, 0)])
    assert estimate[0] > estimate[1] and math.isclose(sum(c * v for c, v in zip(COUNTS, estimate)), 10)


def test_policy_accepts_good_offers_and_the_last_chance():
    values = [0, 2, 2]
    # the other side takes the hats only: worth 10 to A -> accept at once
    assert policy.choose_move(ITEMS, COUNTS, values, 2, 8, [(3, 0, 0)], (3, 0, 0)) == "ACCEPT"
    # the other side takes everything but one lamp (2 points): refused early, taken on the last turn
    assert policy.choose_move(ITEMS, COUNTS, values, 2, 8, [(3, 3, 1)], (3, 3, 1)).startswith("PROPOSE")
    assert policy.choose_move(ITEMS, COUNTS, values, 8, 8, [(3, 3, 1)], (3, 3, 1)) == "ACCEPT"
    # worth nothing on the last turn: no deal is no worse, and a proposal could not be accepted
    assert policy.choose_move(ITEMS, COUNTS, values, 8, 8, [(3, 4, 1)], (3, 4, 1)) == "REJECT"


@settings(max_examples=100, deadline=None)
@given(st.text())
def test_negotiator_always_replies_in_format(text):
    player = master.Negotiator(CustomResponseModel(), "Negotiator A", ITEMS, COUNTS, [0, 2, 2])
    kind, _ = rules.parse_move(player._custom_response(context(text)), ITEMS, COUNTS)
    assert kind in ("PROPOSE", "REJECT")  # nothing is on the table in a text without a move


# --- scripted episodes ----------------------------------------------------------------------

def test_scripted_deal_scores_both_sides():
    interactions, scores, steps = play(["PROPOSE: hat=0, lamp=3, shell=1", "ACCEPT"])
    assert outcome(scores) == "Success" and steps == 2
    assert interactions["Deal"] == [0, 3, 1]
    assert scores["Negotiator A Points"] == 3 * 2 + 2 and scores["Negotiator B Points"] == 3 * 2 + 1
    assert scores["Main Score"] == pytest.approx(100 * 15 / 16)
    assert scores["Pareto Optimal"] == 1 and scores["Turns"] == 2


def test_scripted_deal_proposed_by_b():
    _, scores, _ = play(["PROPOSE: hat=0, lamp=4, shell=1", "PROPOSE: hat=3, lamp=2, shell=0", "ACCEPT"])
    assert outcome(scores) == "Success"
    assert (scores["Negotiator A Points"], scores["Negotiator B Points"]) == (2 * 2 + 2, 3 * 2 + 2)


def test_scripted_no_deal_at_turn_limit():
    replies = ["PROPOSE: hat=3, lamp=4, shell=1", "REJECT", "PROPOSE: hat=3, lamp=4, shell=1", "REJECT"]
    interactions, scores, steps = play(replies)
    assert outcome(scores) == "Lose" and steps == 4 and interactions["Deal"] is None
    assert scores["Main Score"] == 0 and scores["Negotiator A Points"] == scores["Negotiator B Points"] == 0


@pytest.mark.parametrize("replies, who", [
    (["ACCEPT"], "Negotiator A"),  # nothing on the table
    (["PROPOSE: hat=3, lamp=4, shell=1", "REJECT", "REJECT"], "Negotiator A"),
    (["PROPOSE: hat=3, lamp=4"], "Negotiator A"),
    (["PROPOSE: hat=3, lamp=4, shell=1", "Sure, deal!"], "Negotiator B"),
])
def test_scripted_aborted(replies, who):
    _, scores, steps = play(replies)
    assert outcome(scores) == "Aborted" and math.isnan(scores["Main Score"]) and steps == len(replies)
    assert math.isnan(scores["Negotiator A Points"])
    assert scores[f"Aborted by {who}"] == 1 and sum(scores[f"Aborted by {r}"] for r in master.ROLES) == 1


def test_programmatic_side_refuses_a_greedy_opponent():
    """B (scripted) demands everything every turn: the programmatic A never accepts 0 points."""
    greedy = ["PROPOSE: hat=3, lamp=4, shell=1"] * 2

    bench = benchmark()
    gm, _ = gametest.start_episode(bench, EXPERIMENT, INSTANCE)
    done, b_replies = False, iter(greedy)
    while not done:
        player = gm.current_player
        reply = player(gm.get_context_for(player)) if player.game_role == "Negotiator A" else next(b_replies)
        done, _ = gm.step(reply)
    assert gm.deal is None and gm.state.outcome.value == "failure"


@pytest.mark.parametrize("instances", [EVAL, TRAIN], ids=["eval", "train"])
def test_programmatic_pair_strikes_good_deals(instances):
    results = [play(experiment=e, instance=i)[1] for e, i in all_instances(instances)]
    assert all(outcome(s) == "Success" for s in results)
    main = [s["Main Score"] for s in results]
    assert statistics.mean(main) > 90 and min(main) >= 50
    assert statistics.mean(s["Pareto Optimal"] for s in results) > 0.6


# --- instances ------------------------------------------------------------------------------

def test_instance_sets_shape_and_disjointness():
    def key(i):
        return repr((i["items"], i["counts"], i["values_a"], i["values_b"]))
    eval_rows, train_rows = list(all_instances(EVAL)), list(all_instances(TRAIN))
    assert len(eval_rows) == 40 and len(train_rows) == 200
    assert {e["name"]: e["max_turns"] for e in EVAL["experiments"]} == {"three_items": 8, "four_items": 10}
    for experiment, instance in eval_rows + train_rows:
        counts = instance["counts"]
        assert len(instance["items"]) == {"three_items": 3, "four_items": 4}[experiment["name"]]
        for values in (instance["values_a"], instance["values_b"]):
            assert rules.points(values, counts) == 10 and min(values) >= 0
        assert instance["best_joint_points"] == rules.best_joint(counts, instance["values_a"], instance["values_b"])
    assert not {key(i) for _, i in eval_rows} & {key(i) for _, i in train_rows}
    assert len({key(i) for _, i in eval_rows}) == 40


def test_generator_is_reproducible(tmp_path):
    for split, stem in gametest.SPLITS:
        written = gametest.generated_instances(generator.NegotiationInstanceGenerator(split), tmp_path, stem,
                                               seed=generator.SEED)
        assert written == gametest.load_instances(GAME_DIR, stem)


# --- end to end with the real clem CLI ------------------------------------------------------

def test_clem_run_score_eval_programmatic(clem_workspace, clem_here):
    results = gametest.clem_run_score_eval(clem_here, clem_workspace, "negotiation")
    episodes = gametest.episode_scores(results, "negotiation")
    assert len(episodes) == 40 and all(e["Success"] == 1 for e in episodes)
    row = gametest.results_row(results)
    assert float(row["negotiation, % Played"]) == 100.0
    assert float(row["negotiation, Quality Score"]) == pytest.approx(
        statistics.mean(e["Main Score"] for e in episodes), abs=0.01)
