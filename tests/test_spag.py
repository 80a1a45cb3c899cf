"""SPAG: the loss pieces on hand-made numbers (clipping, advantage = r − β·KL), role weights
and rewards on hand-made batches, imitation's KL to the adapter-free model, and the trainer
through `playpen run` on adversarial_taboo with a tiny random model (the adapter changes in
every phase; --resume continues at the next phase; bad input is one line, exit 2)."""
import json
import math
from pathlib import Path

import pytest
from click.testing import CliRunner

from playpen.cli import cli
from playpen.outcomes import EpisodeOutcome
from playpen.training.common.losses import clipped_policy_loss
from playpen.training.spag import objective as spag

SPAG_TRAINER = "spag"


def lora_b(checkpoint: Path) -> dict:
    from safetensors.torch import load_file
    return {n: w for n, w in load_file(checkpoint / "adapter_model.safetensors").items() if "lora_B" in n}


def steps_of(run_dir: Path) -> list[dict]:
    return [r for r in map(json.loads, (run_dir / "playpen-log.jsonl").read_text().splitlines())
            if r["event"] == "train_step"]


# ----------------------------------------------------------------------------- the loss pieces

def test_clipped_objective_and_advantage_on_hand_made_numbers():
    import torch
    ref = torch.log(torch.tensor([0.25, 0.25, 0.5]))
    logps = torch.log(torch.tensor([0.5, 0.225, 0.5])).requires_grad_()  # ratios 2, 0.9, 1
    # A > 0: the ratio 2 is clipped to 1.2; 0.9 is inside [0.8, 1.2]; min(ρA, clip(ρ)A)
    loss = clipped_policy_loss(logps, ref, 1.0, 0.2)
    assert loss.item() == pytest.approx(-(1.2 + 0.9 + 1.0) / 3)
    loss.backward()
    grad = logps.grad.tolist()
    assert grad[0] == 0.0  # clipped: no gradient
    assert grad[1] == pytest.approx(-0.9 / 3) and grad[2] == pytest.approx(-1.0 / 3)  # d(-ρA/3)/dlogp = -ρA/3
    # A < 0: min picks the unclipped 2·A for the first token (a clip would hide how bad it is)
    assert clipped_policy_loss(logps, ref, -1.0, 0.2).item() == pytest.approx((2.0 + 0.9 + 1.0) / 3)
    # KL = mean log-ratio, advantage = r - β·KL
    kl = spag.sample_kl(logps, ref)
    assert kl == pytest.approx((math.log(2) + math.log(0.9) + 0.0) / 3)
    assert spag.spag_advantage(1.0, kl, 0.1) == pytest.approx(1.0 - 0.1 * kl)
    loss, info = spag.spag_sample_loss(logps, ref, 1.0, beta=0.1, clip=0.2)
    a = 1.0 - 0.1 * kl
    assert info["advantage"] == pytest.approx(a) and info["clipped"] == pytest.approx(1 / 3)
    assert loss.item() == pytest.approx(-(1.2 * a + 0.9 * a + 1.0 * a) / 3)


def test_role_weights_make_each_role_weigh_half():
    roles = ["Attacker", "Attacker", "Attacker", "Defender"]
    weights = spag.role_weights(roles)
    assert weights == pytest.approx([2 / 3, 2 / 3, 2 / 3, 2.0])
    assert sum(w for w, r in zip(weights, roles) if r == "Attacker") == pytest.approx(2.0)
    assert sum(weights) / len(weights) == pytest.approx(1.0)
    assert spag.role_weights(["Defender", "Defender"]) == [1.0, 1.0]


def _outcome(outcome, **scores):
    return EpisodeOutcome(outcome, 100.0 if outcome == "success" else 0.0, scores)


@pytest.mark.parametrize("outcome, scores, attacker, defender", [
    ("success", {"Attacker Win": 1, "Defender Win": 0, "Tie": 0}, 1.0, -1.0),
    ("failure", {"Attacker Win": 0, "Defender Win": 1, "Tie": 0}, -1.0, 1.0),
    ("failure", {"Attacker Win": 0, "Defender Win": 0, "Tie": 1}, 0.0, 0.0),
    ("aborted", {"Attacker Win": math.nan, "Attacker Aborted": 0, "Defender Aborted": 1}, 0.0, -0.5),
    ("aborted", {}, -0.5, -0.5),
])
def test_rewards_per_role_from_the_game_outcome(outcome, scores, attacker, defender):
    reward = spag.RoleOutcomeReward(win=1.0, tie=0.0, lose=-1.0, aborted=-0.5)
    assert reward(_outcome(outcome, **scores), "Player 1", "Attacker") == attacker
    assert reward(_outcome(outcome, **scores), "Player 2", "Defender") == defender


def _episode(rewards: dict, error=None):
    from playpen.rollouts import EpisodeResult, Trajectory
    trajectories = tuple(
        Trajectory("e", "adversarial_taboo", "x", 0, 0, f"Player {i + 1}", role, "m", (1, 2), (3, 4, 5), (1, 0, 1),
                   (0.0, 0.0, 0.0), 2, "success", 100.0, r, "g") for i, (role, r) in enumerate(rewards.items()))
    return EpisodeResult("e", "adversarial_taboo", "x", 0, 0, "success", 100.0, {}, {}, {}, 2, (), trajectories,
                         error=error)


def test_samples_keep_the_winners_and_weights_balance_the_batch():
    episodes = [_episode({"Attacker": 1.0, "Defender": -1.0}), _episode({"Attacker": 1.0, "Defender": -1.0}),
                _episode({"Attacker": 1.0, "Defender": -1.0}), _episode({"Attacker": -1.0, "Defender": 1.0}),
                _episode({"Attacker": 0.0, "Defender": 0.0}), _episode({"Attacker": 1.0}, error="ValueError: x")]
    winners = spag.episode_samples(episodes, win_reward=1.0, winners_only=True)
    assert [s.role for s in winners] == ["Attacker"] * 3 + ["Defender"]
    assert winners[0].ids == [1, 2, 3, 4, 5] and winners[0].mask == [0, 0, 1, 0, 1]
    assert spag.role_weights([s.role for s in winners]) == pytest.approx([2 / 3] * 3 + [2.0])
    every = spag.episode_samples(episodes, win_reward=1.0, winners_only=False)
    assert len(every) == 10 and sorted({s.reward for s in every}) == [-1.0, 0.0, 1.0]


def test_imitation_kl_is_zero_for_a_fresh_adapter_and_grows_when_it_moves(tiny_pair):
    import torch
    from peft import LoraConfig, get_peft_model
    model, tokenizer = tiny_pair
    peft = get_peft_model(model, LoraConfig(r=4, lora_alpha=8, target_modules="all-linear", lora_dropout=0.0))
    try:
        ids = tokenizer("ATTACK: let us chat about fruit", add_special_tokens=False)["input_ids"]
        mask = [0, 0] + [1] * (len(ids) - 2)
        loss, info = spag.imitation_loss(peft, ids, mask, kl_coef=0.5)
        assert info["kl"] == pytest.approx(0.0, abs=1e-6)  # lora_B = 0: the policy is the reference
        labels = torch.tensor([[-100 if not m else t for t, m in zip(ids, mask)]])
        with peft.disable_adapter():
            reference_nll = model(input_ids=torch.tensor([ids]), labels=labels).loss.item()
        assert info["nll"] == pytest.approx(reference_nll, rel=1e-5)
        for name, p in peft.named_parameters():
            if "lora_B" in name:
                torch.nn.init.normal_(p, std=0.5)
        loss, info = spag.imitation_loss(peft, ids, mask, kl_coef=0.5)
        assert info["kl"] > 0 and loss.item() == pytest.approx(info["nll"] + 0.5 * info["kl"], rel=1e-5)
    finally:
        peft.unload()


# ----------------------------------------------------------------------------- the trainer

ARGS = ["-L", "6", "-T", "1.0", "--imitation-steps", "2", "--max-steps", "2", "--episodes-per-epoch", "2",
        "--demo-max-instances", "1", "--batch-size", "2", "--learning-rate", "1e-2", "--no-winners-only"]


def test_spag_imitation_and_epochs_change_the_adapter_and_resume_where_they_stopped(tiny_workspace):
    from playpen.callbacks import BaseCallback
    from playpen.cli.run import parse_config, trainer_class
    from playpen.models import load_model_by_name

    class StopAt(BaseCallback):
        def _on_train_step(self, step, metrics):
            return step < 3  # the first step of SPAG-1: save a checkpoint and stop, like a Ctrl-C

    cls = trainer_class(SPAG_TRAINER)
    config = parse_config(cls.config_class, [*ARGS[4:], "--epochs", "1", "--no-evaluate"])
    learner = load_model_by_name("tiny-random", gen_args=dict(temperature=1.0, max_tokens=6), role="learner")
    cls(learner, config=config, callbacks=[StopAt()], progress=False).learn(None)
    run_dir = tiny_workspace / "models" / "spag+lora" / "tiny-random"
    imitation = lora_b(run_dir / "checkpoint-2")  # imitation: steps 1-2
    assert any(w.abs().sum() > 0 for w in imitation.values()), "imitation changed nothing"
    stop = json.loads((run_dir / "checkpoint-3" / "trainer_state.json").read_text())
    assert (stop["phase"], stop["phase_step"], stop["global_step"]) == ("SPAG-1", 1, 3)
    assert (run_dir / "checkpoint-3" / "samples.pt").is_file() and (run_dir / "checkpoint-3" / "optimizer.pt").is_file()
    stopped = json.loads((run_dir / "playpen-run.json").read_text())
    assert stopped["stopped"] and stopped["checkpoint"].endswith("checkpoint-3")  # the latest adapter
    rollouts = sorted((tiny_workspace / "playpen-records" / "spag+lora").rglob("interactions.json"))
    assert rollouts

    # --resume goes on inside SPAG-1 with its saved samples: no new self-play
    run = ["run", str(SPAG_TRAINER), "-l", "tiny-random", *ARGS]
    result = CliRunner().invoke(cli, [*run, "--epochs", "1", "--resume", "--eval-max-instances", "1",
                                      "--eval-sets", "none", "--no-eval-static"])
    assert result.exit_code == 0, result.output
    assert "SPAG-1: resumed after step 1" in result.output and "imitation data" not in result.output
    assert sorted((tiny_workspace / "playpen-records" / "spag+lora").rglob("interactions.json")) == rollouts
    assert not (run_dir / "checkpoint-3").exists()  # the stop inside SPAG-1 is behind its end
    epoch_1 = lora_b(run_dir / "checkpoint-4")
    assert any(not epoch_1[n].equal(w) for n, w in imitation.items()), "SPAG-1 changed nothing"
    steps = steps_of(run_dir)
    assert [(s["step"], s["spag/phase"]) for s in steps] == [(1, 0), (2, 0), (3, 1), (4, 1)]
    for key in ("train/loss", "train/kl", "memory/peak_rss_mb", "spag/clipped_fraction", "rollout/percent_played",
                "spag/samples", "reward/Attacker/mean", "train/grad_norm", "train/learning_rate"):
        assert key in steps[3], key
    assert all(s["spag/samples"] >= 1 for s in steps[2:])
    summary = json.loads((run_dir / "playpen-run.json").read_text())
    assert summary["eval"]["games"][0]["game"] == "adversarial_taboo"
    assert summary["checkpoint"].endswith("checkpoint-4") and summary["phases"]["SPAG-1"]["checkpoint"] == "checkpoint-4"

    # a second epoch: --resume starts at SPAG-2 from SPAG-1's adapter (no imitation again)
    result = CliRunner().invoke(cli, [*run, "--epochs", "2", "--resume", "--no-evaluate"])
    assert result.exit_code == 0, result.output
    assert "imitation data" not in result.output and "SPAG-2:" in result.output
    assert [s["step"] for s in steps_of(run_dir)] == [1, 2, 3, 4, 5, 6]
    assert all(lora_b(run_dir / "checkpoint-2")[n].equal(w) for n, w in imitation.items())  # kept as it was
    epoch_2 = lora_b(run_dir / "checkpoint-6")
    assert any(not epoch_2[n].equal(w) for n, w in epoch_1.items()), "SPAG-2 changed nothing"
    # one AdamW state through every phase and both resumes: 6 steps
    import torch
    state = torch.load(run_dir / "checkpoint-6" / "optimizer.pt")
    assert {int(v["step"]) for v in state["optimizer"]["state"].values()} == {6}


def test_spag_winning_demonstrations_are_the_winners_turns(tiny_workspace):
    from playpen.training.sft.demonstrations import play_demonstrations
    folder = play_demonstrations(["adversarial_taboo"], tiny_workspace / "demos", max_instances=2)
    records = spag.winning_records(folder, ["adversarial_taboo"])
    assert records
    for record in records:
        episode = next(p.parent for p in folder.rglob("interactions.json")
                       if json.loads(p.read_text())["meta"]["game_id"] == record["meta"]["game_id"]
                       and json.loads(p.read_text())["meta"]["experiment_name"] == record["meta"]["experiment"])
        interactions = json.loads((episode / "interactions.json").read_text())
        assert interactions[f"{record['meta']['game_role']} Win"] == 1


@pytest.mark.parametrize("args, expected", [
    (["--init-adapter", "foreign"], "was trained on base model 'SomeOrg/other-model-7b'"),
    (["--clip", "1.5"], "option --clip: 1.5 is not valid"),
    (["--spag-reference", "teacher"], "option --spag-reference: 'teacher' is not valid"),
    (["--win-reward", "-2"], "rewards must order lose < tie < win"),
    (["--epochs", "0"], "option --epochs: 0 is not valid"),
])
def test_spag_user_errors_one_line_nothing_written(foreign_adapter, tiny_workspace, monkeypatch, args, expected):
    foreign_adapter(tiny_workspace / "foreign")
    import playpen.models
    monkeypatch.setattr(playpen.models, "load_model_by_name",
                        lambda *a, **k: pytest.fail("a model was loaded before the options were checked"))
    result = CliRunner().invoke(cli, ["run", str(SPAG_TRAINER), "-l", "tiny-random", *args])
    assert result.exit_code == 2, result.output
    assert expected in result.output and result.output.count("\n") == 1, result.output
    assert not (tiny_workspace / "models").exists() and not (tiny_workspace / "playpen-records").exists()
