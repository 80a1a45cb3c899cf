"""Rubrics: exact composition on hand-made episodes, role filters, judge terms (batched,
retried, re-asked, unparsable replies counted and logged), judge parsing fuzzed, rubric
files checked before anything loads (one line, exit 2), and a real rollout rescored."""
import json
import math
import subprocess
import sys
import threading

import pytest
from hypothesis import given, settings, strategies as st

from playpen.errors import JudgeError, PlaypenError, RubricError, UnknownModelError
from playpen.outcomes import EpisodeOutcome
from playpen.rewards import BinaryReward, OutcomeReward
from playpen.rollouts.types import EpisodeResult, TurnRecord
from playpen.training.rubrics import judging
from playpen.training.rubrics.files import read_rubric
from playpen.training.rubrics.rubric import (CheckTerm, JudgeTerm, LengthCheck, OutcomeTerm, RegexCheck, Rubric,
                                             ScoreTerm, Weighted)

NEGOTIATORS = {"Player 1": "Negotiator A", "Player 2": "Negotiator B"}


def episode(outcome="success", main_score=93.75, scores=None, turns=(), game="negotiation", episode_id="e0"):
    scores = {"Negotiator A Points": 8, "Negotiator B Points": 7, **(scores or {})}
    return EpisodeResult(episode_id, game, "hand_made", 0, 0, outcome, main_score, {}, dict(NEGOTIATORS),
                         {"Player 1": "m", "Player 2": "m"}, len(turns), tuple(turns), (), scores)


DEAL = [TurnRecord("Player 1", "Negotiator A", "learner", "Turn 1 of 8.", "PROPOSE: hat=0, lamp=3, shell=1"),
        TurnRecord("Player 2", "Negotiator B", "programmatic", "Turn 2 of 8. ...", "ACCEPT")]


# --- composition --------------------------------------------------------------------------

def test_composition_is_exact_per_player():
    rubric = Rubric("negotiation", [
        Weighted(OutcomeTerm(), 0.5),
        Weighted(ScoreTerm("{role} Points", scale=10), 2.0),
        Weighted(CheckTerm(RegexCheck(r"^PROPOSE:"), "proposes"), 0.25),
        Weighted(CheckTerm(LengthCheck(10), "short"), 1.0, roles=("Negotiator B",)),
    ])
    scored = rubric.score([episode(turns=DEAL)])
    a, b = scored.rewards[0]["Player 1"], scored.rewards[0]["Player 2"]
    outcome_value = 0.6 + 0.4 * 0.9375
    assert a.components == {"outcome": pytest.approx(outcome_value), "score:{role} Points": 0.8, "proposes": 1.0}
    assert a.reward == pytest.approx(0.5 * outcome_value + 2.0 * 0.8 + 0.25 * 1.0)
    assert b.components == {"outcome": pytest.approx(outcome_value), "score:{role} Points": 0.7, "proposes": 0.0,
                            "short": 1.0}
    assert b.reward == pytest.approx(0.5 * outcome_value + 2.0 * 0.7 + 0.0 + 1.0)
    assert (a.role, b.role) == ("Negotiator A", "Negotiator B")
    assert scored.metrics()["rubric/reward/Negotiator A"] == pytest.approx(a.reward)


def test_aborted_episode_uses_missing_values():
    rubric = Rubric("negotiation", [Weighted(OutcomeTerm(), 1.0),
                                    Weighted(ScoreTerm("{role} Points", scale=10, missing=-0.5), 1.0),
                                    Weighted(CheckTerm(RegexCheck("x", missing=0.25)), 1.0)])
    aborted = episode("aborted", math.nan, {"Negotiator A Points": math.nan})
    rewards = rubric.score([aborted]).rewards[0]
    assert rewards["Player 1"].reward == pytest.approx(-1.0 - 0.5 + 0.25)
    assert rewards["Player 2"].reward == pytest.approx(-1.0 + 0.7 + 0.25)  # B's score is there


def test_duplicate_term_names_are_kept_apart_and_other_games_refused():
    rubric = Rubric("negotiation", [OutcomeTerm(), OutcomeTerm(BinaryReward())])
    components = rubric.score([episode()]).rewards[0]["Player 1"].components
    assert set(components) == {"outcome", "outcome#1"} and components["outcome#1"] == 1.0
    with pytest.raises(RubricError, match="cannot score an episode of 'debate'"):
        rubric.score([episode(game="debate")])


@settings(max_examples=100, deadline=None)
@given(st.lists(st.floats(-5, 5), min_size=3, max_size=3), st.sampled_from(["success", "failure", "aborted"]),
       st.floats(0, 100))
def test_reward_is_the_weighted_sum_of_components(weights, outcome, main):
    terms = [Weighted(OutcomeTerm(), weights[0]), Weighted(ScoreTerm("{role} Points", 10), weights[1]),
             Weighted(OutcomeTerm(BinaryReward(aborted=-2.0)), weights[2])]
    reward = Rubric("negotiation", terms).score([episode(outcome, main)]).rewards[0]["Player 2"]
    assert reward.reward == pytest.approx(sum(w * v for w, v in zip(weights, reward.components.values())))


def test_reward_function_form_matches_score():
    rubric = Rubric("negotiation", [Weighted(OutcomeTerm(OutcomeReward()), 0.3), Weighted(ScoreTerm("{role} Points", 10))])
    fn, ep = rubric.reward_function(), episode()
    outcome = EpisodeOutcome(ep.outcome, ep.main_score, ep.episode_scores, ep.num_turns)
    assert fn(outcome, "Player 1", "Negotiator A") == pytest.approx(rubric.score([ep]).rewards[0]["Player 1"].reward)
    with pytest.raises(RubricError, match="need the whole episode"):
        Rubric("negotiation", [CheckTerm(RegexCheck("x"))]).reward_function()


@pytest.mark.parametrize("terms, message", [
    ([Weighted(OutcomeTerm(), 1.0, roles=("Negotiator C",))], "names role 'Negotiator C', which the game does not "
                                                               "have (its roles: Negotiator A, Negotiator B)"),
    ([Weighted(OutcomeTerm(), math.nan)], "weight nan is not a finite number"),
    ([], "no terms"),
])
def test_bad_rubrics(terms, message):
    with pytest.raises(RubricError, match=message.replace("(", r"\(").replace(")", r"\)")) as error:
        Rubric("negotiation", terms)
    assert error.value.exit_code == 2 and "\n" not in str(error.value)


# --- judges -------------------------------------------------------------------------------

class ScriptedJudgeModel:
    """A judge model answering by rule, as a remote model would: `Score: 4` for a proposal,
    `Score: 1` for anything else; `garbage` replies with no score; `fail_first` raises on the
    first calls; `flaky` gives no score the first time it sees a prompt."""

    name = "scripted-judge"

    def __init__(self, garbage=False, fail_first=0, flaky=False):
        self.garbage, self.fail_first, self.flaky = garbage, fail_first, flaky
        self.prompts, self.threads, self.seen = [], set(), set()
        self.lock = threading.Lock()

    def generate_response(self, messages):
        prompt = messages[-1]["content"]
        with self.lock:
            self.prompts.append(prompt)
            self.threads.add(threading.current_thread().name)
            if self.fail_first:
                self.fail_first -= 1
                raise ConnectionError("server hiccup")
            first_time = prompt not in self.seen
            self.seen.add(prompt)
        if self.garbage or (self.flaky and first_time):
            return None, None, "I would rather not say."
        candidate = prompt.split("--- the move to grade ---")[1]
        return None, None, f"Reasons.\nScore: {4 if 'PROPOSE' in candidate else 1}"


def make_judge(model, batch_size=4):
    return judging.Judge(judging.JudgeOptions().judge_spec(), model.name, model, batch_size=batch_size)


def test_judge_term_grades_last_turns_in_one_concurrent_batch():
    model = ScriptedJudgeModel()
    judge = make_judge(model)
    calls = []
    original = judge.verdicts
    judge.verdicts = lambda requests, policy=None: calls.append(len(requests)) or original(requests, policy)
    rubric = Rubric("negotiation", [Weighted(JudgeTerm(judge), 2.0)])
    episodes = [episode(turns=DEAL, episode_id=f"e{i}") for i in range(5)]
    scored = rubric.score(episodes)
    assert calls == [10]  # every player of every episode in one batch
    assert len(model.prompts) == 10 and all(t.startswith("judge") for t in model.threads)
    assert scored.rewards[0]["Player 1"].components["judge:scripted-judge"] == pytest.approx(4 / 5)
    assert scored.rewards[0]["Player 2"].reward == pytest.approx(2.0 * 1 / 5)
    assert (scored.judge_requests, scored.judge_unparsable, scored.judge_retries) == (10, 0, 0)
    assert "Turn 1 of 8." in model.prompts[0] and "PROPOSE: hat=0" in model.prompts[0]


def test_unparsable_verdicts_are_counted_and_logged(tmp_path, caplog):
    log = tmp_path / "judge.jsonl"
    rubric = Rubric("negotiation", [Weighted(JudgeTerm(make_judge(ScriptedJudgeModel(garbage=True)), missing=-1.0))],
                    log_file=log)
    scored = rubric.score([episode(turns=DEAL)])
    assert scored.judge_unparsable == 2 and scored.metrics()["rubric/judge_unparsable"] == 2
    assert scored.rewards[0]["Player 1"].reward == -1.0
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    assert [line["role"] for line in lines] == ["Negotiator A", "Negotiator B"]
    assert lines[0]["reply"] == "I would rather not say." and lines[0]["judge"] == "scripted-judge"
    assert "2 of 2 judge replies gave no verdict" in caplog.text


def test_failed_judge_calls_are_retried_and_then_fail_in_one_line():
    model = ScriptedJudgeModel(fail_first=1)
    rubric = Rubric("negotiation", [JudgeTerm(make_judge(model, batch_size=1))], retries=1, retry_pause_s=0)
    scored = rubric.score([episode(turns=DEAL)])
    assert scored.judge_retries == 1 and scored.judge_unparsable == 0
    failing = Rubric("negotiation", [JudgeTerm(make_judge(ScriptedJudgeModel(fail_first=5), batch_size=1))],
                     retries=2, retry_pause_s=0)
    with pytest.raises(JudgeError, match="judge 'scripted-judge' failed 3 times; last: .*ConnectionError"):
        failing.score([episode(turns=DEAL)])


def test_unparsable_replies_are_asked_again_with_reask():
    flaky = Rubric("negotiation", [JudgeTerm(make_judge(ScriptedJudgeModel(flaky=True)))], reask=1)
    scored = flaky.score([episode(turns=DEAL)])
    assert scored.judge_unparsable == 0 and scored.judge_retries == 1
    assert scored.rewards[0]["Player 1"].reward == pytest.approx(0.8)
    once = Rubric("negotiation", [JudgeTerm(make_judge(ScriptedJudgeModel(flaky=True)))])
    assert once.score([episode(turns=DEAL)]).judge_unparsable == 2


def test_a_player_without_turns_gets_missing_and_no_request():
    model = ScriptedJudgeModel()
    rubric = Rubric("negotiation", [JudgeTerm(make_judge(model), missing=0.5)])
    rewards = rubric.score([episode(turns=DEAL[:1])]).rewards[0]
    assert rewards["Player 2"].reward == 0.5 and len(model.prompts) == 1


def test_all_turns_scope_shows_every_reply():
    model = ScriptedJudgeModel()
    turns = [DEAL[0], TurnRecord("Player 1", "Negotiator A", "learner", "Turn 3 of 8.", "REJECT")]
    Rubric("negotiation", [Weighted(JudgeTerm(make_judge(model), scope="all_turns"), roles=("Negotiator A",))]
           ).score([episode(turns=turns)])
    assert "PROPOSE: hat=0, lamp=3, shell=1\n\nREJECT" in model.prompts[0]
    with pytest.raises(RubricError, match="scope 'everything'"):
        JudgeTerm(make_judge(model), scope="everything")


SCORE_PATTERN = judging.load_regex("")


@settings(max_examples=400, deadline=None)
@given(st.text(max_size=300), st.floats(0.0, 5.0))
def test_judge_parsing_fuzzed(text, value):
    """Any reply: no exception, a score in range or None; a reply that ends with a score line
    in range yields exactly that score; the term maps it into 0..1."""
    score = judging.parse_score(text, SCORE_PATTERN, 0.0, 5.0)
    assert score is None or 0.0 <= score <= 5.0
    number = round(value, 2)
    assert judging.parse_score(f"{text}\nScore: {number}", SCORE_PATTERN, 0.0, 5.0) == pytest.approx(number)
    term = JudgeTerm(make_judge(ScriptedJudgeModel()), missing=-1.0)
    assert 0.0 <= term.normalise(score) <= 1.0 if score is not None else term.normalise(score) == -1.0


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=200).filter(lambda t: "score" not in t.lower() and "total" not in t.lower()))
def test_replies_without_a_score_word_never_parse(text):
    assert judging.parse_score(text, SCORE_PATTERN, 0.0, 5.0) is None


# --- rubric files -------------------------------------------------------------------------

def write(tmp_path, data, name="rubric.json"):
    path = tmp_path / name
    path.write_text(data if isinstance(data, str) else json.dumps(data), encoding="utf-8")
    return path


GOOD_FILE = {"game": "negotiation", "retries": 1, "terms": [
    {"kind": "outcome", "weight": 0.5},
    {"kind": "score", "key": "{role} Points", "scale": 10, "weight": 2},
    {"kind": "check", "check": "regex", "pattern": "^PROPOSE:", "weight": 0.25},
    {"kind": "check", "check": "max_chars", "max_chars": 10, "roles": ["Negotiator B"]},
    {"kind": "judge", "model": "learner", "template": "game-aware", "roles": ["Negotiator A"], "weight": 0.1},
]}


def test_rubric_file_builds_the_same_rubric(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    spec = read_rubric(write(tmp_path, GOOD_FILE))
    assert spec.game == "negotiation" and spec.roles == ("Negotiator A", "Negotiator B") and spec.retries == 1
    model = ScriptedJudgeModel()
    rubric = spec.build(judges={"learner": make_judge(model)})
    rewards = rubric.score([episode(turns=DEAL)]).rewards[0]
    outcome_value = 0.6 + 0.4 * 0.9375
    assert rewards["Player 1"].reward == pytest.approx(0.5 * outcome_value + 1.6 + 0.25 + 0.1 * 0.8)
    assert rewards["Player 2"].reward == pytest.approx(0.5 * outcome_value + 1.4 + 0.0 + 1.0)
    assert len(model.prompts) == 1  # only Negotiator A is judged


@pytest.mark.parametrize("change, error, message", [
    (lambda d: d["terms"][3].update(roles=["Negotiator C"]), RubricError,
     "term 4 (check): unknown role 'Negotiator C' for game 'negotiation' (its roles: Negotiator A, Negotiator B)"),
    (lambda d: d["terms"][4].update(model="no-such-judge"), UnknownModelError, "term 5 (judge): "),
    (lambda d: d["terms"][4].update(model="programmatic"), JudgeError, "'programmatic' cannot judge"),
    (lambda d: d["terms"][4].update(template="missing.jinja"), JudgeError, "neither a shipped prompt"),
    (lambda d: d["terms"][0].update(kind="outcomes"), RubricError, "term 1: kind 'outcomes' is not one of outcome, "
                                                                   "reward, score, check, judge"),
    (lambda d: d["terms"][1].update(scale=0), RubricError, "\"scale\" must be a positive number"),
    (lambda d: d["terms"][1].update(weight="high"), RubricError, "weight 'high' is not a finite number"),
    (lambda d: d["terms"][2].update(pattern="("), RubricError, "no valid regex"),
    (lambda d: d["terms"][2].update(colour="red"), RubricError, "unknown field\\(s\\) colour"),
    (lambda d: d.update(game="no_such_game"), PlaypenError, "unknown game 'no_such_game'"),
    (lambda d: d.update(retries=-1), RubricError, "\"retries\" must be a whole number >= 0"),
])
def test_bad_rubric_files_fail_in_one_line(tmp_path, monkeypatch, change, error, message):
    monkeypatch.chdir(tmp_path)
    data = json.loads(json.dumps(GOOD_FILE))
    change(data)
    with pytest.raises(error, match=message.replace("(", r"\(").replace(")", r"\)")
                       if "\\(" not in message else message) as raised:
        read_rubric(write(tmp_path, data))
    assert raised.value.exit_code == 2 and "\n" not in str(raised.value)


def test_malformed_rubric_file_names_the_line(tmp_path):
    with pytest.raises(RubricError, match=r"rubric\.json:3: malformed JSON"):
        read_rubric(write(tmp_path, '{"game": "negotiation",\n "terms": [\n  {"kind": }]}'))


def test_rubric_check_command_exits_2_with_one_line(tmp_path):
    bad = json.loads(json.dumps(GOOD_FILE))
    bad["terms"][4]["model"] = "not-a-registered-model"
    path = write(tmp_path, bad)
    run = subprocess.run([sys.executable, "-m", "playpen.training.rubrics.files", str(path)], cwd=tmp_path,
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 2 and run.stdout == ""
    assert run.stderr.count("\n") == 1 and "term 5 (judge)" in run.stderr and "not-a-registered-model" in run.stderr
    ok = subprocess.run([sys.executable, "-m", "playpen.training.rubrics.files", str(write(tmp_path, GOOD_FILE, "ok.json"))],
                        cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert ok.returncode == 0 and "game negotiation" in ok.stdout and "5. judge" in ok.stdout


# --- a real rollout, rescored -------------------------------------------------------------

def test_apply_rescores_a_rollout(tiny_workspace, tiny_pair):
    from rollout_helpers import make_learner

    from playpen.rollouts import InstanceRef, rollout
    refs = [InstanceRef("debate", "arithmetic", i) for i in range(2)]
    result = rollout("debate", make_learner(tiny_pair, max_new_tokens=4), roles=["Debater A"],
                     partners={"Debater B": "programmatic", "Judge": "programmatic"}, instances=refs,
                     records_dir=None, seed=0)
    rubric = Rubric("debate", [Weighted(OutcomeTerm(), 1.0), Weighted(ScoreTerm("{role} Wins"), 3.0),
                               Weighted(CheckTerm(RegexCheck(r"^ARGUMENT:")), 0.5, roles=("Debater A",))])
    rescored = rubric.apply(result)
    expected = rubric.score(result.episodes).rewards
    assert len(rescored.episodes) == 2 and rescored.trajectories
    for episode, rewards in zip(rescored.episodes, expected):
        assert episode.rewards == {player: r.reward for player, r in rewards.items()}
        for trajectory in episode.trajectories:
            assert trajectory.role == "Debater A" and trajectory.reward == rewards[trajectory.player_name].reward
    assert all(not any("Score:" in m.get("content", "") for m in t.messages) for t in rescored.trajectories)
