"""Expert iteration: what a round keeps (own turns of won episodes, never a partner's), the
rounds with a tiny model on a real game and real TRL SFT (the won answer gets likelier,
the adapter changes), the failure when nothing is won, bad options before any model loads."""
import json
import math
from pathlib import Path

import pytest
from rollout_helpers import p_yes
from test_grpo import toy_workspace  # noqa: F401  (the fixture: sayword asking "yes", relay, tiny-yesno)
from click.testing import CliRunner

from playpen.cli import cli
from playpen.rollouts.types import EpisodeResult, Trajectory
from playpen.training.expert_iteration.selection import kept_trajectories, record_of, training_row

REPO_ROOT = Path(__file__).resolve().parents[1]
TRAINER = REPO_ROOT / "examples" / "trl" / "expert_iteration_trainer_lora.py"


# ----------------------------------------------------------------------------- selection

def trajectory(episode_id, player, role, model, outcome, score, game_id=0, side_call=None):
    return Trajectory(episode_id=episode_id, game="relay", experiment="e", game_id=game_id, repeat=0,
                      player_name=player, role=role, model=model, prompt_ids=(1, 2), completion_ids=(7, 8, 3, 9),
                      env_mask=(1, 1, 0, 1), logprobs=(0.0,) * 4, num_turns=2, outcome=outcome, main_score=score,
                      reward=0.0, group_id=f"g{game_id}", messages=({"role": "user", "content": "hi"},),
                      side_call=side_call)


def episode(episode_id, outcome, score, trajectories, game_id=0):
    return EpisodeResult(episode_id=episode_id, game="relay", experiment="e", game_id=game_id, repeat=0,
                         outcome=outcome, main_score=score, rewards={}, roles={}, models={}, num_turns=2, turns=(),
                         trajectories=tuple(trajectories))


def test_only_the_learners_own_turns_of_won_episodes_are_kept():
    won = episode("a", "success", 50.0, [
        trajectory("a", "Player 2", "Listener", "me", "success", 50.0),
        trajectory("a", "Player 1", "Speaker", "partner-adapter", "success", 50.0),  # a partner on the same model
        trajectory("a", "Player 2", "Listener", "me", "success", 50.0, side_call=0)])  # a probe, not a turn
    lost = episode("b", "failure", 0.0, [trajectory("b", "Player 2", "Listener", "me", "failure", 0.0)])
    aborted = episode("c", "aborted", math.nan, [trajectory("c", "Player 2", "Listener", "me", "aborted", math.nan)])
    kept = kept_trajectories([won, lost, aborted], "me")
    assert [(t.episode_id, t.model, t.side_call) for t in kept] == [("a", "me", None)]
    # roles: the learner's trajectories of other roles stay out too (self-play, one role learned)
    selfplay = episode("d", "success", 100.0, [trajectory("d", "Player 1", "Speaker", "me", "success", 100.0),
                                               trajectory("d", "Player 2", "Listener", "me", "success", 100.0)])
    assert [t.role for t in kept_trajectories([selfplay], "me", roles=["Listener"])] == ["Listener"]
    assert len(kept_trajectories([selfplay], "me")) == 2


def test_top_k_keeps_the_best_scored_wins_per_instance():
    episodes = [episode(name, "success", score, [trajectory(name, "P", "R", "me", "success", score, game_id)],
                        game_id)
                for name, score, game_id in (("a", 30.0, 0), ("b", 90.0, 0), ("c", 60.0, 0), ("d", 10.0, 1))]
    assert [t.episode_id for t in kept_trajectories(episodes, "me", top_k=2)] == ["b", "c", "d"]
    assert [t.episode_id for t in kept_trajectories(episodes, "me")] == ["b", "c", "a", "d"]


def test_the_training_row_targets_only_generated_tokens():
    t = trajectory("a", "P", "R", "me", "success", 100.0)
    assert training_row(t) == {"input_ids": [1, 2, 7, 8, 3, 9], "assistant_masks": [0, 0, 1, 1, 0, 1]}
    assert training_row(t, max_length=3)["assistant_masks"] == [0, 0, 1]
    record = record_of(t, 2)
    assert record["meta"]["round"] == 2 and record["input_ids"] == training_row(t)["input_ids"]


def test_a_real_episode_with_a_partner_gives_only_the_learners_tokens(toy_workspace, tiny_pair):
    """relay, the learner as Listener with the programmatic Speaker (its lenient experiment
    re-prompts: several learner turns). The random model loses; marked won here, its
    episodes must give the Listener's own generated text and nothing of the Speaker's."""
    from dataclasses import replace

    from rollout_helpers import make_learner

    from playpen.rollouts import rollout
    result = rollout("relay", make_learner(tiny_pair), partners={"Speaker": "programmatic"}, roles=["Listener"],
                     instances=lambda row: row["experiment"]["name"] == "lenient", records_dir=None,
                     instances_file="instances", seed=0)
    assert not kept_trajectories(result.episodes, "tiny-random")  # nothing won: nothing kept
    won = [replace(e, outcome="success") for e in result.episodes]
    kept = kept_trajectories(won, "tiny-random")
    assert kept and all(t.role == "Listener" and t.player_name == "Player 2" for t in kept)
    tokenizer = tiny_pair[1]
    for episode in won:
        mine = [t for t in kept if t.episode_id == episode.episode_id]
        row = training_row(mine[0])
        generated = tokenizer.decode([i for i, m in zip(row["input_ids"], row["assistant_masks"]) if m])
        learner_turns = [turn.response for turn in episode.turns if turn.responder == "learner"]
        speaker_turns = [turn.response for turn in episode.turns if turn.responder != "learner"]
        assert len(learner_turns) >= 1 and all(text in generated for text in learner_turns)
        assert not any(text.strip() and text in generated for text in speaker_turns)


def test_the_final_evaluation_seats_the_learner_in_its_role(capsys):
    from types import SimpleNamespace

    from playpen.training.expert_iteration import ExpertIterationConfig, ExpertIterationTrainer
    learner, teacher = SimpleNamespace(name="me"), SimpleNamespace(name="programmatic")
    game_roles = {"taboo": ["Describer", "Guesser"], "privateshared": ["Answerer"]}

    def players(games, roles):
        trainer = ExpertIterationTrainer(learner, teacher, config=ExpertIterationConfig(games=games, roles=roles),
                                         progress=False)
        return trainer._players(SimpleNamespace(roles=roles.split(","), game_roles=game_roles))
    assert players("taboo", "Guesser") == [teacher, learner]
    assert players("privateshared", "Answerer") == [learner]
    assert players("taboo,privateshared", "Guesser,Answerer") == [learner, teacher]  # no order fits both
    assert "in taboo that is not its role" in capsys.readouterr().out


# ----------------------------------------------------------------------------- the trainer

def load_trainer(learner_name, teacher=None, **config):
    from playpen.cli.run import load_trainer_class
    from playpen.models import load_model_by_name
    cls = load_trainer_class(TRAINER)
    learner = load_model_by_name(learner_name, gen_args=dict(temperature=1.0, max_tokens=3), role="learner")
    partner = load_model_by_name(teacher, role="teacher") if teacher else None
    return cls(learner, partner, config=cls.config_class(**config), progress=False), learner


def test_rounds_imitate_the_won_episodes_and_the_win_gets_likelier(toy_workspace):
    from safetensors.torch import load_file
    trainer, learner = load_trainer("tiny-yesno", games="sayword", train_instances="instances", rounds=2,
                                    max_steps=6, instances_per_round=0, samples_per_instance=8, batch_size=4,
                                    learning_rate=3e-3, lora_r=8, lora_dropout=0.0, save_steps=100,
                                    eval_max_instances=1, eval_sets="none", eval_static=False)
    before = p_yes(learner.model, learner.tokenizer)
    trainer.learn(None)
    after = p_yes(learner.model, learner.tokenizer)  # the learner carries the trained adapter
    assert after > before + 0.02, (before, after)
    run_dir = toy_workspace / "models" / "expert-iteration+lora" / "tiny-yesno"
    weights = load_file(run_dir / "checkpoint-6" / "adapter_model.safetensors")
    assert any(w.abs().sum() > 0 for n, w in weights.items() if "lora_B" in n)  # the adapter was trained
    log = [json.loads(line) for line in (run_dir / "playpen-log.jsonl").read_text().splitlines()]
    assert [row["step"] for row in log] == [1, 2, 3, 4, 5, 6]
    assert [row["expert/round"] for row in log] == [1, 1, 1, 2, 2, 2]
    for round_ in (1, 2):
        records = [json.loads(line) for line in (run_dir / f"round-{round_}.jsonl").read_text().splitlines()]
        stats = next(row for row in log if row["expert/round"] == round_)
        # every won episode of the round, and only those: its share of the 32 episodes
        assert len(records) == stats["expert/kept"] == round(stats["expert/win_rate"] * 32 / 100) > 0
        for record in records:
            assert record["meta"]["outcome"] == "success" and record["meta"]["model"] == "tiny-yesno"
            target = [i for i, m in zip(record["input_ids"], record["assistant_masks"]) if m]
            assert learner.tokenizer.decode(target) == "yes<|im_end|>"  # the learner's own tokens, nothing else
        # the run's health (issue 39 §3): groups (an instance's 8 samples) without a win, episode
        # length, aborted share, and whether the round played the weights the last one trained
        won = {(r["meta"]["experiment"], r["meta"]["game_id"]) for r in records}
        assert stats["expert/no_win_groups"] == pytest.approx(100.0 * (1 - len(won) / (32 / 8)))
        assert stats["rollout/turns_mean"] >= 1 and 0 <= stats["rollout/aborted_rate"] <= 1
        assert stats.get("rollout/adapter_changed") == (None if round_ == 1 else 1.0)
    summary = json.loads((run_dir / "playpen-run.json").read_text())
    assert summary["kept_per_round"] == [stats["expert/kept"] for stats in
                                         [next(r for r in log if r["expert/round"] == k) for k in (1, 2)]]
    assert summary["eval"]["run_name"] == "tiny-yesno+expert-iteration+lora-checkpoint-6"


def test_demo_share_mixes_demonstrations_into_each_round(toy_workspace):
    """--demo-share 0.5: each round's rows are its own wins and as many demonstrations of the
    programmatic players (marked as such, never counted as the learner's wins)."""
    trainer, learner = load_trainer("tiny-yesno", games="sayword", train_instances="instances", rounds=2,
                                    max_steps=2, instances_per_round=0, samples_per_instance=4, batch_size=4,
                                    learning_rate=1e-3, demo_share=0.5, save_steps=100, evaluate=False)
    trainer.learn(None)
    run_dir = toy_workspace / "models" / "expert-iteration+lora" / "tiny-yesno"
    log = [json.loads(line) for line in (run_dir / "playpen-log.jsonl").read_text().splitlines()]
    summary = json.loads((run_dir / "playpen-run.json").read_text())
    for round_ in (1, 2):
        rows = [json.loads(line) for line in (run_dir / f"round-{round_}.jsonl").read_text().splitlines()]
        demos = [r for r in rows if r["meta"].get("demonstration")]
        own = [r for r in rows if not r["meta"].get("demonstration")]
        assert len(own) == summary["kept_per_round"][round_ - 1] > 0 and len(demos) == len(own)
        assert next(r for r in log if r["expert/round"] == round_)["expert/demonstrations"] == len(demos)
        for row in demos:  # the programmatic WordSayer's won turn: its word
            target = [i for i, m in zip(row["input_ids"], row["assistant_masks"]) if m]
            assert learner.tokenizer.decode(target).startswith("yes")
    demo_records = toy_workspace / "playpen-records" / "expert-iteration+lora" / "tiny-yesno" / "demonstrations"
    assert list(demo_records.rglob("interactions.json"))


def test_nothing_won_is_one_line_naming_what_to_do(toy_workspace):
    # relay's Listener must answer "GUESS: <word>": the random tiny model never does
    result = CliRunner().invoke(cli, ["run", str(TRAINER), "-l", "tiny-random", "-t", "programmatic", "-L", "4",
                                      "--games", "relay", "--train-instances", "instances", "--roles", "Listener", "--rounds", "1", "--max-steps", "1",
                                      "--samples-per-instance", "2", "--no-evaluate"])
    assert result.exit_code == 2, result.output
    assert "the learner won no episode in 1 round(s)" in result.output and "Traceback" not in result.output
    records = toy_workspace / "models" / "expert-iteration+lora" / "tiny-random" / "programmatic" / "round-1.jsonl"
    assert records.exists() and records.read_text() == ""


@pytest.mark.parametrize("args, expected", [
    (["--rounds", "0"], "option --rounds: 0 is not valid"),
    (["--top-k", "-1"], "option --top-k: -1 is not valid"),
    (["--samples-per-instance", "0"], "option --samples-per-instance: 0 is not valid"),
    (["--rounds", "4", "--max-steps", "3"], "--max-steps 3 is fewer than --rounds 4"),
    (["-t", "programmatic"], "with a teacher (-t programmatic) pass --roles"),
    (["--demo-share", "1"], "option --demo-share: 1.0 is not valid; expected a number in [0, 1)"),
    (["--demo-roles", "Guesser"], "option --demo-roles: needs --demo-share above 0"),
])
def test_bad_options_fail_in_one_line_before_any_model_loads(tiny_workspace, args, expected):
    result = CliRunner().invoke(cli, ["run", str(TRAINER), "-l", "tiny-random", "--games", "taboo", *args])
    assert result.exit_code == 2, result.output
    assert expected in result.output and "Traceback" not in result.output
    assert not (tiny_workspace / "models").exists()


def test_rounds_that_play_the_same_weights_are_named_once(toy_workspace):
    """Four rounds that win nothing train nothing: rounds 2 to 4 play round 1's weights although
    the learning rate is above 0. The console says so in one line, in rounds (each round's
    check is logged as ``rollout/adapter_changed``); the run then fails as one that won nothing."""
    result = CliRunner().invoke(cli, ["run", str(TRAINER), "-l", "tiny-random", "-t", "programmatic", "-L", "4",
                                      "--games", "relay", "--train-instances", "instances", "--roles", "Listener",
                                      "--rounds", "4", "--max-steps", "4", "--instances-per-round", "1",
                                      "--samples-per-instance", "1", "--no-evaluate"])
    assert result.exit_code == 2 and "the learner won no episode in 4 round(s)" in result.output, result.output
    # (the line may follow a progress bar's cursor codes on the same output line)
    said = [line[line.index("[playpen]"):] for line in result.output.splitlines()
            if "generated with the same weights" in line]
    assert said == ["[playpen] the rollouts of the last 4 rounds were generated with the same weights although the "
                    "learning rate is 0.0002: the generating model is not the one being trained, or every update "
                    "was 0 (no signal, or gradients dropped)"]
