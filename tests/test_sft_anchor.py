"""GRPO's supervised anchor (--sft-coef): the gradient it adds, once per optimizer step,
and a real GRPO run on a toy game whose demonstrations say the rewarded word."""
import json
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest
from click.testing import CliRunner

from playpen.cli import cli
from playpen.training.sft.anchor import SFTAnchor

REPO_ROOT = Path(__file__).resolve().parents[1]
SP_TRAINER = "grpo"
TOYGAMES = REPO_ROOT / "tests" / "toygames"


def lora_model(tiny_pair):
    from peft import LoraConfig, get_peft_model
    model, _ = tiny_pair
    return get_peft_model(model, LoraConfig(r=4, lora_alpha=8, target_modules="all-linear", init_lora_weights=False))


def fake_trainer(step=0):
    from playpen.training.common.memory import StepClock
    return SimpleNamespace(state=SimpleNamespace(global_step=step), clock=StepClock(),
                           accelerator=SimpleNamespace(backward=lambda loss: loss.backward()))


def test_the_anchor_adds_coef_times_the_assistant_loss_once_per_step(tiny_pair):
    import torch
    model = lora_model(tiny_pair)
    rows = [{"input_ids": [5, 6, 7, 8, 9, 10], "assistant_masks": [0, 0, 0, 1, 1, 1]},
            {"input_ids": [11, 12, 13, 14], "assistant_masks": [0, 0, 1, 1]}]
    trainable = [p for p in model.parameters() if p.requires_grad]

    def gradients(coef, batch):
        model.zero_grad()
        anchor = SFTAnchor(rows, coef, batch)
        trainer = fake_trainer(step=3)
        assert anchor.apply(trainer, model) is True
        assert anchor.apply(trainer, model) is False  # the step's other micro-batches: done already
        assert trainer.clock.seconds["sft"] > 0  # timed into the step's split
        return anchor, [p.grad.clone() for p in trainable]

    anchor, one = gradients(1.0, 2)
    _, half = gradients(0.5, 2)
    assert any(g.abs().sum() > 0 for g in one)
    assert all(torch.allclose(h, o / 2, atol=1e-6) for h, o in zip(half, one))
    # its loss: the mean over the rows of the loss on their assistant tokens only
    expected = []
    for row in rows:
        ids = torch.tensor([row["input_ids"]])
        labels = ids.masked_fill(torch.tensor([row["assistant_masks"]]) == 0, -100)
        expected.append(float(model(input_ids=ids, labels=labels).loss.detach()))
    assert anchor.metrics["train/sft_loss"] == pytest.approx(sum(expected) / 2, rel=1e-5)
    assert anchor.cursor == 2  # the next step goes on with the next rows
    model.zero_grad()
    assert anchor.apply(fake_trainer(step=4), model) is True and anchor.cursor == 4


def test_an_empty_demonstration_set_is_refused():
    with pytest.raises(ValueError, match="at least one"):
        SFTAnchor([], 1.0, 2)


@pytest.fixture
def sayword_workspace(tiny_workspace):
    games = tiny_workspace / "toygames"
    shutil.copytree(TOYGAMES / "sayword", games / "sayword")
    (games / "sayword" / "in" / "instances.json").write_text(json.dumps({"experiments": [
        {"name": "words", "game_instances": [{"game_id": i, "word": "yes"} for i in range(4)]}]}))
    (tiny_workspace / "game_registry.json").write_text(json.dumps([{"benchmark_path": str(games)}]))
    return tiny_workspace


def test_grpo_with_sft_coef_learns_the_demonstrations_and_logs_it(sayword_workspace):
    result = CliRunner().invoke(cli, ["run", str(SP_TRAINER), "-l", "tiny-random", "-T", "1.0", "-L", "3",
                                      "--games", "sayword", "--train-instances", "instances", "--max-steps", "2",
                                      "--num-generations", "2", "--groups-per-step", "1", "--sft-coef", "1.0",
                                      "--sft-batch", "3", "--learning-rate", "1e-2", "--no-evaluate"])
    assert result.exit_code == 0, result.output
    assert "--sft-coef: 4 demonstration conversations" in result.output
    run_dir = sayword_workspace / "models" / "grpo+lora" / "tiny-random" / "selfplay"
    steps = [json.loads(line) for line in (run_dir / "playpen-log.jsonl").read_text().splitlines()]
    steps = [s for s in steps if s.get("event") == "train_step"]
    assert [s["step"] for s in steps] == [1, 2]
    assert all(s["train/sft_loss"] > 0 and s["time/sft_s"] > 0 for s in steps)
    # the programmatic WordSayer's won episodes say "yes": learning them lowers their loss
    assert steps[1]["train/sft_loss"] < steps[0]["train/sft_loss"]
    demos = sayword_workspace / "playpen-records" / "grpo+lora" / "tiny-random" / "selfplay" / "demonstrations"
    assert len(list(demos.rglob("interactions.json"))) == 4


def test_bad_sft_options_are_one_line_before_any_model_loads(sayword_workspace):
    for args, message in ((["--sft-coef", "-1"], "option --sft-coef: -1.0 is not valid; expected a number >= 0"),
                          (["--sft-coef", "1", "--sft-batch", "0"],
                           "option --sft-batch: 0 is not valid; expected an integer >= 1")):
        result = CliRunner().invoke(cli, ["run", str(SP_TRAINER), "-l", "tiny-random", "--games", "sayword",
                                          "--train-instances", "instances", *args])
        assert result.exit_code == 2, result.output
        assert message in result.output
        assert not (sayword_workspace / "models").exists()
