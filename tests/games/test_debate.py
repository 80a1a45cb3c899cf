"""debate: the arithmetic of checks, the turn and verdict parsers, the programmatic judge
and debaters, scripted episodes (truth wins / lie wins / concession / aborted) through the
scorer, instance sets, and clem run/score/eval end to end."""
import math
from collections import Counter

import pytest
from hypothesis import given, settings, strategies as st

import gametest
from gametest import all_instances, outcome

GAME_DIR = gametest.BUILTIN_GAMES / "debate"
rules = gametest.load_module(GAME_DIR, "debate_rules")
policy = gametest.load_module(GAME_DIR, "debate_policy")
master = gametest.load_module(GAME_DIR, "debate_master", "master")
generator = gametest.load_module(GAME_DIR, "debate_instancegenerator", "instancegenerator")

from clemcore.clemgame.errors import ParseError  # noqa: E402

EVAL = gametest.load_instances(GAME_DIR, "instances")
TRAIN = gametest.load_instances(GAME_DIR, "instances_train")
EXPERIMENT = {"name": "hand_made", "rounds": 2}
# A defends the correct answer 1094, B the wrong 1084
INSTANCE = {"game_id": 0, "question": "What is 47 × 23 + 13?", "facts": "× means multiplication.",
            "solution": "47 * 23 + 13", "answer": 1094, "wrong_answer": 1084, "answer_a": 1094, "answer_b": 1084}
HONEST = "ARGUMENT: 47 times 23 is 1081, plus 13.\nCHECK: 47 * 23 + 13 = 1094\nANSWER: 1094"
LIAR = "ARGUMENT: Careful counting gives 1084.\nANSWER: 1084"
LIAR_FALSE_CHECK = "ARGUMENT: It is 1084.\nCHECK: 47 * 23 + 13 = 1084\nANSWER: 1084"


def benchmark():
    return gametest.benchmark(master.DebateBenchmark, GAME_DIR)


def play(responses=None, experiment=EXPERIMENT, instance=INSTANCE):
    _, interactions, scores, steps = gametest.play_episode(benchmark(), experiment, instance, responses)
    return interactions, scores, steps


# --- arithmetic ---------------------------------------------------------------------------

@pytest.mark.parametrize("expression, value", [
    ("47 * 23 + 13", 1094), ("(3 * 60 + 7) * 60", 11220), ("35 / 100 * 340", 119), ("-2 + 5", 3),
    (" 1.5*2 ", 3), ("((2))", 2),
])
def test_evaluate(expression, value):
    assert rules.evaluate(expression) == pytest.approx(value)


@pytest.mark.parametrize("expression", [
    "", "2 **10", "__import__('os')", "abs(-2)", "x + 1", "1 / 0", "2 ^ 3", "1e999", "9" * 200, "２ + 2",
    "[1, 2]", "1 if 1 else 2", "(" * 60 + "1" + ")" * 60, "99999999 * 99999999", None,
])
def test_evaluate_rejects(expression):
    assert rules.evaluate(expression) is None


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="0123456789+-*/(). ", max_size=60) | st.text(max_size=60))
def test_evaluate_never_raises(text):
    value = rules.evaluate(text)
    assert value is None or math.isfinite(value)


def test_reachable_values_and_number_budget():
    assert rules.reachable_values([2, 3]) == {2, 3, 5, -1, 1, 6, round(2 / 3, 9), 1.5}
    allowed = rules.numbers_in("How many seconds in 3 hours? An hour has 60 minutes, a minute 60 seconds.")
    assert allowed == Counter({3.0: 1, 60.0: 2})
    assert rules.uses_only("3 * 60 * 60", allowed) and not rules.uses_only("3 * 60 * 60 * 60", allowed)
    assert not rules.uses_only("3 * 3600", allowed)


# --- parsers ------------------------------------------------------------------------------

def test_parse_turn_accepts():
    turn = rules.parse_turn("  argument: first line\nsecond line\nCHECK: 2 * 3 = 6\ncheck: 1 + 1 = 3\nANSWER: 6 \n")
    assert turn.argument == "first line\nsecond line" and turn.answer == 6
    assert [(c.expression, c.claimed, c.holds()) for c in turn.checks] == [("2 * 3", 6, True), ("1 + 1", 3, False)]
    assert rules.parse_turn("ARGUMENT: x\nANSWER: 1,094").answer == 1094


@pytest.mark.parametrize("text", [
    "", "ANSWER: 5", "ARGUMENT: it is five", "ARGUMENT: x\nANSWER: five", "ARGUMENT: x\nANSWER: 5 apples",
    "ARGUMENT:\nANSWER: 5", "Because.\nARGUMENT: x\nANSWER: 5", "ARGUMENT: x\nANSWER: 5\nThanks!",
    "ARGUMENT: x\nCHECK: 2 * 3\nANSWER: 6", "ARGUMENT: x\nCHECK: 2 * 3 = six\nANSWER: 6",
    "ARGUMENT: x\nCHECK: 2 * 3 = 6\nmore words\nANSWER: 6", "ARGUMENT: x\nARGUMENT: y\nANSWER: 6",
    "ARGUMENT: x\nANSWER: 6\nANSWER: 6", "ARGUMENT: x\n" + "CHECK: 1 = 1\n" * 4 + "ANSWER: 1",
    "ARGUMENT: x\nANSWER: ６", "ＡＲＧＵＭＥＮＴ: x\nANSWER: 6", None, 12,
])
def test_parse_turn_rejects(text):
    with pytest.raises(ParseError):
        rules.parse_turn(text)


@pytest.mark.parametrize("text, side", [
    ("VERDICT: A", "A"), ("verdict: b", "B"), ("A is right because...\n\nVERDICT: Debater B.", "B"),
    ("  Verdict :  a  \n", "A"),
])
def test_parse_verdict_accepts(text, side):
    assert rules.parse_verdict(text) == side


@pytest.mark.parametrize("text", ["", "A", "VERDICT: C", "VERDICT: A\nmaybe not", "VERDICT: A or B", "VERDICT:",
                                  "The winner is A", "VERDICT: Ａ", None])
def test_parse_verdict_rejects(text):
    with pytest.raises(ParseError):
        rules.parse_verdict(text)


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_parsers_raise_only_parse_errors(text):
    for parse in (rules.parse_turn, rules.parse_verdict):
        try:
            parse(text)
        except ParseError:
            pass


# --- the programmatic judge and debaters -------------------------------------------------

def transcript(a_turns, b_turns, question=INSTANCE["question"], facts=INSTANCE["facts"]):
    sections = []
    for number, (a, b) in enumerate(zip(a_turns, b_turns), start=1):
        sections += [f"=== Debater A, round {number} ===\n{a}", f"=== Debater B, round {number} ===\n{b}"]
    return (f"Judge the debate.\nQuestion: {question}\nFacts: {facts}\n\n" + "\n".join(sections)
            + "\n=== End of the debate ===\nEnd with VERDICT: A or VERDICT: B.")


@pytest.mark.parametrize("a_turns, b_turns, winner", [
    ([HONEST], [LIAR], "A"),
    ([LIAR.replace("1084", "1094")], [LIAR_FALSE_CHECK], "A"),  # fewer false checks
    ([HONEST, HONEST], [LIAR, LIAR_FALSE_CHECK], "A"),
    ([LIAR], ["ARGUMENT: y\nCHECK: 47 * 23 + 13 = 1094\nANSWER: 1094"], "B"),
    # a true check at the answer but with a number not in the question does not support
    (["ARGUMENT: x\nCHECK: 1081 + 13 = 1094\nANSWER: 1094"], [LIAR], "A"),
    (["ARGUMENT: x\nANSWER: 1094"], ["ARGUMENT: y\nCHECK: 1000 + 84 = 1084\nANSWER: 1084"], "B"),  # verified beats none
    ([LIAR], [LIAR], "A"),  # a full tie
])
def test_judge_rule(a_turns, b_turns, winner):
    assert rules.parse_verdict(policy.judge_reply(transcript(a_turns, b_turns))) == winner


def test_supporting_check_must_use_given_numbers_only():
    allowed = rules.numbers_in(INSTANCE["question"])
    honest, padded = rules.parse_turn(HONEST), rules.parse_turn("ARGUMENT: x\nCHECK: 47 * 23 + 13 - 13 + 13 = 1094\nANSWER: 1094")
    assert policy.side_rank([honest], allowed)[0] is True
    assert policy.side_rank([padded], allowed)[0] is False


def test_debaters_reply_in_format_and_rebut_false_checks():
    honest = rules.parse_turn(policy.debater_reply(1094, "47 * 23 + 13", None))
    assert honest.answer == 1094 and honest.checks[0].holds()
    liar = policy.debater_reply(1084, "47 * 23 + 13", LIAR_FALSE_CHECK.replace("1084", "1094", 1))
    assert rules.parse_turn(liar).checks == ()
    rebuttal = policy.debater_reply(1094, "47 * 23 + 13", LIAR_FALSE_CHECK)
    assert "is wrong: that calculation gives 1094" in rebuttal and rules.parse_turn(rebuttal).answer == 1094


# --- scripted episodes --------------------------------------------------------------------

def test_truth_wins_by_verdict():
    _, scores, steps = play([HONEST, LIAR, HONEST, LIAR, "VERDICT: A"])
    assert outcome(scores) == "Success" and scores["Main Score"] == 100 and steps == 5
    assert (scores["Debater A Wins"], scores["Debater B Wins"], scores["Judge Correct"]) == (1, 0, 1)
    assert scores["Verified Checks A"] == 2 and scores["False Checks B"] == 0


def test_lie_wins_with_a_fooled_judge():
    _, scores, _ = play([HONEST, LIAR_FALSE_CHECK, HONEST, LIAR, "B sounds more careful.\nVERDICT: B"])
    assert outcome(scores) == "Lose" and scores["Main Score"] == 0
    assert (scores["Debater A Wins"], scores["Debater B Wins"], scores["Judge Correct"]) == (0, 1, 0)
    assert scores["False Checks B"] == 1


def test_concession_ends_the_debate():
    _, scores, steps = play([HONEST, "ARGUMENT: you are right.\nANSWER: 1094"])
    assert outcome(scores) == "Success" and steps == 2 and scores["Conceded"] == 1
    assert math.isnan(scores["Judge Correct"]) and scores["Debater A Wins"] == 1


def test_the_honest_side_conceding_loses():
    _, scores, _ = play(["ARGUMENT: fine.\nANSWER: 1084"])
    assert outcome(scores) == "Lose" and scores["Debater B Wins"] == 1


@pytest.mark.parametrize("replies, role", [
    (["1094"], "Debater A"), ([HONEST, "ARGUMENT: no"], "Debater B"),
    ([HONEST, LIAR, HONEST, LIAR, "A wins"], "Judge"),
])
def test_aborted(replies, role):
    _, scores, steps = play(replies)
    assert outcome(scores) == "Aborted" and math.isnan(scores["Main Score"]) and steps == len(replies)
    assert scores[f"Aborted by {role}"] == 1 and math.isnan(scores["Debater A Wins"])


def test_programmatic_judge_and_honest_debater_beat_a_false_check():
    """B (scripted) lies with a false check; A and the judge are programmatic."""
    gm, _ = gametest.start_episode(benchmark(), EXPERIMENT, INSTANCE)
    done = False
    while not done:
        player = gm.current_player
        reply = LIAR_FALSE_CHECK if player.game_role == "Debater B" else player(gm.get_context_for(player))
        done, _ = gm.step(reply)
    assert gm.winner == "A" and gm.decided_by == "judge" and gm.state.outcome.value == "success"


@pytest.mark.parametrize("instances", [EVAL, TRAIN], ids=["eval", "train"])
def test_programmatic_players_find_the_truth_everywhere(instances):
    results = [play(experiment=e, instance=i)[1] for e, i in all_instances(instances)]
    assert all(outcome(s) == "Success" and s["Judge Correct"] == 1 for s in results)
    assert sum(s["Debater A Wins"] for s in results) == sum(s["Debater B Wins"] for s in results)


# --- instances ----------------------------------------------------------------------------

def test_instances_are_sound_and_disjoint():
    eval_rows, train_rows = list(all_instances(EVAL)), list(all_instances(TRAIN))
    assert len(eval_rows) == 36 and len(train_rows) == 180
    for _, instance in eval_rows + train_rows:
        assert rules.evaluate(instance["solution"]) == pytest.approx(instance["answer"])
        allowed = rules.numbers_in(instance["question"]) + rules.numbers_in(instance["facts"])
        assert rules.uses_only(instance["solution"], allowed)
        assert round(float(instance["wrong_answer"]), 9) not in rules.reachable_values(list(allowed.elements()))
        a_correct = instance["game_id"] % 2 == 0
        assert instance["answer_a" if a_correct else "answer_b"] == instance["answer"]
        assert instance["answer_b" if a_correct else "answer_a"] == instance["wrong_answer"] != instance["answer"]
    assert not {i["question"] for _, i in eval_rows} & {i["question"] for _, i in train_rows}


def test_generator_is_reproducible(tmp_path):
    for split, stem in gametest.SPLITS:
        written = gametest.generated_instances(generator.DebateInstanceGenerator(split), tmp_path, stem,
                                               seed=generator.SEED)
        assert written == gametest.load_instances(GAME_DIR, stem)


# --- end to end with the real clem CLI ----------------------------------------------------

def test_clem_run_score_eval_programmatic(clem_workspace, clem_here):
    results = gametest.clem_run_score_eval(clem_here, clem_workspace, "debate")
    episodes = gametest.episode_scores(results, "debate")
    assert len(episodes) == 36 and all(e["Main Score"] == 100 for e in episodes)
    row = gametest.results_row(results)
    assert float(row["debate, % Played"]) == 100.0 and float(row["debate, Quality Score"]) == 100.0
