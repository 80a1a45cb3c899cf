"""``--rubric FILE`` in the GRPO trainers (self-play, teacher, hierarchical): bad files are
one line and exit 2 before any model loads; a rubric replaces its game's rewards per player
in the rows TRL trains on; the ``reward`` term keeps what the rollout gave (a proposer's
hierarchical reward)."""
import json
import math

import pytest
from click.testing import CliRunner

from playpen.cli import cli
from playpen.errors import PlaypenError, RubricError
from playpen.outcomes import EpisodeOutcome
from playpen.rewards import OutcomeReward
from playpen.rollouts.types import EpisodeResult
from playpen.training.rubrics.rubric import RewardTerm, Rubric, ScoreTerm, Weighted

SP, MP, HIER = "grpo", "grpo-teacher", "hierarchical-grpo"  # packaged trainers (playpen run --list)
# per trainer: the options that make it train a game the rubric below is for
RUNS = {SP: ["--games", "negotiation"], MP: ["-t", "programmatic", "--games", "negotiation"], HIER: []}
GAME = {SP: "negotiation", MP: "negotiation", HIER: "arith_solver"}
ROLE = {SP: "Negotiator B", MP: "Negotiator B", HIER: "Solver"}


def write(folder, data, name="rubric.json"):
    path = folder / name
    path.write_text(data if isinstance(data, str) else json.dumps(data), encoding="utf-8")
    return path


def good(trainer):
    return {"game": GAME[trainer], "terms": [{"kind": "outcome", "weight": 0.5},
                                             {"kind": "check", "check": "max_chars", "max_chars": 40,
                                              "roles": [ROLE[trainer]]}]}


def bad_role(trainer):
    data = good(trainer)
    data["terms"][1]["roles"] = [ROLE[trainer] + "x"]
    return data, f"unknown role '{ROLE[trainer]}x' for game '{GAME[trainer]}'"


def bad_judge(trainer):
    data = good(trainer)
    data["terms"].append({"kind": "judge", "model": "no-such-judge"})
    return data, "term 3 (judge): "


def other_game(trainer):
    data = good(trainer)
    data["game"], data["terms"] = "debate", [{"kind": "outcome"}]
    return data, "option --rubric: rubric rubric.json is for game 'debate', which this run does not train"


CASES = {
    "missing": lambda t: (None, "option --rubric: rubric nowhere.json: no such file"),
    "malformed": lambda t: ('{"game": "negotiation",\n "terms": [}', "rubric.json:2: malformed JSON"),
    "unknown role": bad_role,
    "judge not registered": bad_judge,
    "game not trained": other_game,
    "unknown kind": lambda t: ({"game": GAME[t], "terms": [{"kind": "vibes"}]}, "kind 'vibes' is not one of"),
}


@pytest.mark.parametrize("trainer", [SP, MP, HIER], ids=["sp", "mp", "hierarchical"])
@pytest.mark.parametrize("case", list(CASES))
def test_bad_rubric_is_one_line_exit_2_before_any_model_loads(tiny_workspace, monkeypatch, trainer, case):
    from playpen import models
    monkeypatch.setattr(models, "load_model_by_name", lambda *a, **k: pytest.fail("a model was loaded"))
    data, expected = CASES[case](trainer)
    path = "nowhere.json" if data is None else write(tiny_workspace, data).name
    result = CliRunner().invoke(cli, ["run", str(trainer), "-l", "tiny-random", *RUNS[trainer], "--rubric", path])
    assert result.exit_code == 2, result.output
    errors = [line for line in result.output.splitlines() if line.strip()]
    assert len(errors) == 1 and errors[0].startswith("playpen: error: option --rubric: "), result.output
    assert expected in errors[0], result.output
    assert not (tiny_workspace / "models").exists() and not (tiny_workspace / "playpen-records").exists()


def test_a_good_rubric_passes_and_chance_baseline_is_refused(tiny_workspace, monkeypatch):
    from playpen.cli.run import prepare
    path = write(tiny_workspace, good(SP))
    cls, config = prepare(str(SP), learner="tiny-random", teacher=None,
                          extra_args=["--games", "negotiation", "--rubric", str(path)])
    assert config.rubric == str(path)
    monkeypatch.setattr("playpen.training.grpo.options.chance_level", lambda game: 0.5)
    with pytest.raises(PlaypenError, match="--baseline chance is the chance level"):
        prepare(str(SP), learner="tiny-random", teacher=None,
                extra_args=["--games", "negotiation", "--rubric", str(path), "--baseline", "chance"])


def test_help_lists_the_option():
    for trainer in (SP, MP, HIER):
        result = CliRunner().invoke(cli, ["run", str(trainer), "--help"])
        assert result.exit_code == 0 and "--rubric" in result.output and "docs/rubrics.md" in result.output


# --- the reward term ----------------------------------------------------------------------

def episode(rewards, game="negotiation"):
    return EpisodeResult(episode_id="e0", game=game, experiment="x", game_id=0, repeat=0, outcome="success",
                         main_score=50.0, episode_scores={"Negotiator A Points": 7.0}, rewards=rewards,
                         roles={"Player 1": "Negotiator A", "Player 2": "Negotiator B"}, models={},
                         trajectories=(), turns=(), num_turns=2)


def test_reward_term_keeps_the_rollouts_reward_and_nan_stays_unscored():
    rubric = Rubric("negotiation", [Weighted(RewardTerm(missing=-5.0), 2.0),
                                    Weighted(ScoreTerm("{role} Points", scale=10), 1.0, roles=("Negotiator A",))])
    scored = rubric.score([episode({"Player 1": 0.25})]).rewards[0]
    assert scored["Player 1"].reward == pytest.approx(2 * 0.25 + 0.7)
    assert scored["Player 2"].reward == pytest.approx(-10.0)  # no reward for it: missing
    assert math.isnan(rubric.score([episode({"Player 1": math.nan, "Player 2": 1.0})]).rewards[0]["Player 1"].reward)
    with pytest.raises(RubricError, match="check, judge or reward terms"):
        rubric.reward_function()


def test_rubric_file_reward_kind(tmp_path, monkeypatch):
    from playpen.training.rubrics.files import read_rubric
    monkeypatch.chdir(tmp_path)
    spec = read_rubric(write(tmp_path, {"game": "negotiation", "terms": [{"kind": "reward", "missing": 0.5}]}))
    rubric = spec.build()
    assert isinstance(rubric.terms[0].term, RewardTerm) and rubric.terms[0].term.missing == 0.5
    with pytest.raises(RubricError, match=r"unknown field\(s\) key"):
        read_rubric(write(tmp_path, {"game": "negotiation", "terms": [{"kind": "reward", "key": "x"}]}))


# --- a rubric in the rollout function -----------------------------------------------------

def test_game_rollout_trains_on_the_rubrics_rewards(toy_workspace):
    """Self-play on relay with a rubric: Speaker rows get 2 x (replies <= 1000 chars) + 0.5 x the
    outcome reward, Listener rows 0.5 x the outcome reward; rubric metrics logged."""
    from playpen.models import load_model_by_name
    from playpen.rollouts import SamplingConfig
    from playpen.training.grpo import rollout_bridge
    from playpen.training.rubrics.files import read_rubric
    path = write(toy_workspace, {"game": "relay", "terms": [
        {"kind": "check", "check": "max_chars", "max_chars": 1000, "weight": 2.0, "roles": ["Speaker"]},
        {"kind": "outcome", "weight": 0.5}]})
    learner = load_model_by_name("tiny-random", gen_args=dict(temperature=1.0, max_tokens=4), role="learner")
    per_instance, roles = rollout_bridge.training_slots(["relay"], instances="instances")
    slots, group = per_instance[0], 2
    func = rollout_bridge.GameRollout("tiny-random", learner.tokenizer, num_generations=group, game_roles=roles,
                            sampling=SamplingConfig(temperature=1.0, max_new_tokens=4), records_dir=None,
                            instances="instances", rubric=read_rubric(path).build())

    class FakeTrainer:
        model = learner.model
        state = type("S", (), {"global_step": 0})()

    out = func([s.to_prompt() for s in slots for _ in range(group)], FakeTrainer())
    checked = 0
    for reward, role, outcome, main in zip(out["reward"], out["role"], out["outcome"], out["main_score"]):
        if math.isnan(reward):  # the role had no turn: out of every baseline, as without a rubric
            continue
        base = 0.5 * OutcomeReward()(EpisodeOutcome(outcome if outcome in ("success", "failure") else "aborted",
                                                    main))
        assert reward == pytest.approx(base + (2.0 if role == "Speaker" else 0.0)), (role, outcome)
        checked += 1
    assert checked and "rubric/reward/Speaker" in func.last_metrics
    assert func.last_metrics["rubric/judge_requests"] == 0


def test_hierarchical_trainer_with_a_rubric_logs_it(tiny_workspace):
    """A rubric for arith_proposer that keeps the hierarchical reward (kind reward) and adds a
    constant-ish check; the run trains and logs rubric/reward/Proposer."""
    path = write(tiny_workspace, {"game": "arith_proposer", "terms": [
        {"kind": "reward"}, {"kind": "check", "check": "max_chars", "max_chars": 10000, "weight": 0.25}]})
    args = ["run", str(HIER), "-l", "tiny-random", "-L", "3", "--max-steps", "1", "--num-generations", "2",
            "--no-evaluate", "--save-steps", "1", "--beta", "0", "--rubric", str(path)]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    run_dir = tiny_workspace / "models" / "hierarchical-grpo+lora" / "tiny-random" / "self"
    steps = [json.loads(line) for line in (run_dir / "playpen-log.jsonl").read_text().splitlines()]
    step = next(s for s in steps if "train/loss" in s)
    assert "rubric/reward/Proposer" in step and step["rubric/judge_requests"] == 0
    # every proposer turn is short: check = 1, so the rubric's reward is the hierarchy's + 0.25
    assert step["reward/0/Proposer/mean"] == pytest.approx(step["rubric/reward/Proposer"])
