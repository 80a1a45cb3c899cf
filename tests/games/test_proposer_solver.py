"""arith_proposer and arith_solver (the proposer-solver games): expression parsing and
evaluation, the proposer's rules and score, reply parsers on hostile input, scripted
episodes (success / lose / aborted) with their Main Scores, instance sets, and clem
run/score/eval end to end."""
import math

import pytest
from hypothesis import given, settings, strategies as st

import gametest
from gametest import all_instances, outcome

GAME_DIR = gametest.BUILTIN_GAMES / "proposer_solver"

rules = gametest.load_module(GAME_DIR, "arith_rules")
masters = gametest.load_module(GAME_DIR, "arith_masters")
folder = gametest.load_module(GAME_DIR, "proposer_solver_folder_master", "master")
generator = gametest.load_module(GAME_DIR, "proposer_solver_instancegenerator", "instancegenerator")

from clemcore.clemgame.errors import ParseError, RuleViolationError  # noqa: E402

PROPOSER_EVAL = gametest.load_instances(GAME_DIR, "instances_proposer")
PROPOSER_TRAIN = gametest.load_instances(GAME_DIR, "instances_proposer_train")
SOLVER_EVAL = gametest.load_instances(GAME_DIR, "instances_solver")
SOLVER_TRAIN = gametest.load_instances(GAME_DIR, "instances_solver_train")


def bench(game):
    return gametest.benchmark(folder.ProposerSolverBenchmark, GAME_DIR, game)


# --- arithmetic -------------------------------------------------------------------------------

@pytest.mark.parametrize("text, value, difficulty", [
    ("3 + 4 * 5", 23, 2), ("(3 + 4) * 5", 35, 3), ("2 * (3 - 10)", -14, 3), ("12-3-4", 5, 2),
    ("((7))", 7, 2), ("1 * 2 * 3 * 4", 24, 3), ("0 - 5 + 2", -3, 2),
])
def test_evaluate_and_difficulty(text, value, difficulty):
    tree = rules.parse_expression(text)
    assert rules.evaluate(tree) == value and rules.difficulty(tree) == difficulty


def test_left_to_right_is_the_reference_mistake():
    assert rules.left_to_right("3 + 4 * 5") == 35
    assert rules.left_to_right("2 * (3 + 4)") == 10
    assert rules.reference_answer("3 + 4 * 5", 2) == 23 and rules.reference_answer("3 + 4 * 5", 1) == 35


@pytest.mark.parametrize("text", ["", "3 +", "(3 + 4", "3 4", "3 / 4", "x + 1", "3 + -4", ")", "3 ** 2",
                                  "1" + " + 1" * 150])
def test_malformed_expressions_are_format_errors(text):
    with pytest.raises(rules.ProblemFormatError) as error:
        rules.parse_expression(text)
    assert isinstance(error.value, ParseError)


def test_proposer_score_is_highest_at_half():
    assert [rules.proposer_score(r) for r in (0.0, 0.25, 0.5, 0.75, 1.0)] == [0.0, 50.0, 100.0, 50.0, 0.0]
    # panel 1..4: difficulty 3 where reading order differs -> skills 3 and 4 solve it
    assert rules.panel_solve_rate("3 + 7 + 12 * 5", [1, 2, 3, 4]) == 0.5
    assert rules.panel_solve_rate("3 + 7", [1, 2, 3, 4]) == 1.0


@pytest.mark.parametrize("problem, max_operators, key", [
    ("3 + 99", 4, "number not given"), ("3 + 3", 4, "number not given"), ("7", 4, "no operator"),
    ("3 + 7 - 12 * 5 + 4", 4, "number not given"), ("3 * 7 * 12 * 5", 2, "too many operators"),
    ("999 * 998 * 997", 4, "too large"),
])
def test_proposer_rules(problem, max_operators, key):
    with pytest.raises(rules.ProblemRuleError) as raised:
        rules.check_problem(problem, [3, 7, 12, 5, 999, 998, 997], max_operators)
    assert isinstance(raised.value, RuleViolationError) and raised.value.key == key


def test_check_problem_value_and_difficulty():
    assert rules.check_problem("(3 + 7) * 5", [3, 7, 12, 5], 3) == (50, 3)


@pytest.mark.parametrize("text, expected", [
    ("PROBLEM: 3+4*5", "3 + 4 * 5"), ("  PROBLEM: (3 + 4) * 5.  \n", "(3 + 4) * 5"), ("PROBLEM:3*4=", "3 * 4"),
])
def test_parse_problem_accepts(text, expected):
    assert rules.parse_problem(text) == expected


@pytest.mark.parametrize("text", ["", "3 + 4", "problem: 3 + 4", "PROBLEM:", "PROBLEM: 3 +\n4", "Sure! PROBLEM: 3",
                                  "PROBLEM: three plus four", None, 42, "PROBLEM: " + "1+" * 5000 + "1"])
def test_parse_problem_rejects(text):
    with pytest.raises(ParseError):
        rules.parse_problem(text)


@pytest.mark.parametrize("text, expected", [("ANSWER: 23", 23), ("ANSWER: -14.", -14), (" ANSWER:1,024 ", 1024)])
def test_parse_answer_accepts(text, expected):
    assert rules.parse_answer(text) == expected


@pytest.mark.parametrize("text", ["", "23", "answer: 23", "ANSWER:", "ANSWER: 2.5", "ANSWER: 23\n24",
                                  "ANSWER: twenty", "ANSWER: " + "9" * 30, None])
def test_parse_answer_rejects(text):
    with pytest.raises(rules.AnswerFormatError):
        rules.parse_answer(text)


@given(st.text(max_size=300))
@settings(max_examples=200, deadline=None)
def test_parsers_raise_only_clemcore_errors(text):
    for parse, prefix in ((rules.parse_problem, "PROBLEM: "), (rules.parse_answer, "ANSWER: ")):
        for candidate in (text, prefix + text):
            try:
                parse(candidate)
            except ParseError:
                pass


# --- episodes ---------------------------------------------------------------------------------

def proposer_instance(name="four_numbers", index=0):
    experiment = next(e for e in PROPOSER_EVAL["experiments"] if e["name"] == name)
    return experiment, experiment["game_instances"][index]


def test_programmatic_proposer_hits_half_of_the_panel():
    experiment, instance = proposer_instance()
    gm, interactions, scores, steps = gametest.play_episode(bench("arith_proposer"), experiment, instance)
    assert steps == 1 and outcome(scores) == "Success"
    assert scores["Panel Solve Rate"] == 0.5 and scores["Main Score"] == 100.0
    assert interactions["Problem"] == gm.problem and interactions["Answer"] == rules.evaluate(
        rules.parse_expression(gm.problem))


def test_trivial_problem_loses_with_score_zero():
    experiment, instance = proposer_instance()
    a, b = instance["numbers"][:2]
    _, _, scores, _ = gametest.play_episode(bench("arith_proposer"), experiment, instance, [f"PROBLEM: {a} + {b}"])
    assert outcome(scores) == "Lose" and scores["Main Score"] == 0.0 and scores["Panel Solve Rate"] == 1.0


def test_rule_violation_loses_and_bad_format_aborts():
    experiment, instance = proposer_instance()
    _, _, scores, _ = gametest.play_episode(bench("arith_proposer"), experiment, instance, ["PROBLEM: 1000 + 1"])
    assert outcome(scores) == "Lose" and scores["Main Score"] == 0.0 and math.isnan(scores["Panel Solve Rate"])
    _, interactions, scores, _ = gametest.play_episode(bench("arith_proposer"), experiment, instance,
                                                       ["I propose 3 + 4"])
    assert outcome(scores) == "Aborted" and math.isnan(scores["Main Score"])
    assert interactions["End Reason"] == "invalid format"


@pytest.mark.parametrize("reply, expected, score", [("correct", "Success", 100.0), ("ANSWER: 100000", "Lose", 0.0),
                                                    ("The answer is 5", "Aborted", math.nan)])
def test_solver_episodes(reply, expected, score):
    experiment = SOLVER_EVAL["experiments"][2]
    instance = experiment["game_instances"][0]
    if reply == "correct":
        reply = f"ANSWER: {instance['answer']}"
    _, interactions, scores, _ = gametest.play_episode(bench("arith_solver"), experiment, instance, [reply])
    assert outcome(scores) == expected
    assert scores["Main Score"] == score or (math.isnan(score) and math.isnan(scores["Main Score"]))
    assert interactions["Answer"] == instance["answer"]


def test_programmatic_solver_solves_every_problem():
    for experiment, instance in list(all_instances(SOLVER_EVAL))[::7]:
        _, _, scores, _ = gametest.play_episode(bench("arith_solver"), experiment, instance)
        assert outcome(scores) == "Success"


def test_solver_instance_needs_a_wellformed_problem():
    experiment = SOLVER_EVAL["experiments"][0]
    with pytest.raises(ParseError):
        gametest.play_episode(bench("arith_solver"), experiment, {"game_id": 0, "problem": "3 +"})


# --- instances --------------------------------------------------------------------------------

def test_instance_sets_are_disjoint_and_sized():
    def number_sets(instances):
        return {tuple(sorted(i["numbers"])) for _, i in all_instances(instances)}

    def problems(instances):
        return {i["problem"] for _, i in all_instances(instances)}
    assert len(list(all_instances(PROPOSER_EVAL))) == 20 and len(list(all_instances(PROPOSER_TRAIN))) == 80
    assert len(list(all_instances(SOLVER_EVAL))) == 40 and len(list(all_instances(SOLVER_TRAIN))) == 120
    assert not number_sets(PROPOSER_EVAL) & number_sets(PROPOSER_TRAIN)
    assert not problems(SOLVER_EVAL) & problems(SOLVER_TRAIN)
    for experiment, instance in all_instances(SOLVER_TRAIN):
        tree = rules.parse_expression(instance["problem"])
        assert rules.evaluate(tree) == instance["answer"]
        assert rules.num_operators(tree) == experiment["num_operators"]


def test_instance_generator_is_reproducible(tmp_path):
    for game, stem in generator.FILES.items():
        for split, suffix in (("eval", ""), ("train", "_train")):
            written = gametest.generated_instances(generator.ProposerSolverInstanceGenerator(game), tmp_path,
                                                   stem + suffix, seed=generator.SEED, split=split)
            assert written == gametest.load_instances(GAME_DIR, stem + suffix)
    written = gametest.generated_instances(generator.ProposerSolverInstanceGenerator("arith_solver"), tmp_path,
                                           "instances_solver_protocol", seed=generator.SEED, split="protocol")
    assert written == gametest.load_instances(GAME_DIR, "instances_solver_protocol")


def test_the_protocol_set_extends_the_solver_evaluation_set_with_unseen_problems():
    def problems(instances):
        return {i["problem"] for _, i in all_instances(instances)}
    protocol = gametest.load_instances(GAME_DIR, "instances_solver_protocol")
    assert len(problems(protocol)) == 100
    assert not problems(protocol) & problems(SOLVER_TRAIN)
    for evaluation, extended in zip(SOLVER_EVAL["experiments"], protocol["experiments"]):
        assert extended["game_instances"][:10] == evaluation["game_instances"]
        for instance in extended["game_instances"]:
            assert rules.evaluate(rules.parse_expression(instance["problem"])) == instance["answer"]


def test_clem_run_score_eval(clem_workspace, clem_here):
    results = gametest.clem_run_score_eval(clem_here, clem_workspace, "arith_proposer")
    episodes = gametest.episode_scores(results, "arith_proposer")
    assert len(episodes) == 20
    for episode in episodes:
        assert outcome(episode) == "Success" and "Played" not in episode
        assert episode["Main Score"] == pytest.approx(rules.proposer_score(episode["Panel Solve Rate"]))
    row = gametest.results_row(results)
    assert float(row["arith_proposer, % Played"]) == 100.0
    assert float(row["arith_proposer, Quality Score"]) == 90.0
