"""SFT that stops on a dev split (--dev-every, --dev-patience, --dev-splits): the stopping rule,
dev rows in the log, the stop after patience, the best checkpoint spared by rotation and put
back into the model, and the options' one-line errors."""
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from playpen.cli import cli
from playpen.errors import PlaypenError, TrainingSetupError
from playpen.training.common import lifecycle as training
from playpen.training.common.dev_stopping import BestSoFar
from playpen.training.sft.trainer import SFTLoraConfig

DEV = ["words/0", "words/1"]
# sayword's demonstrations (its programmatic player wins every training instance), short runs
QUICK = dict(games="sayword", batch_size=2, max_length=400, lora_r=4, eval_max_instances=1, eval_sets="none",
             eval_static=False, eval_before=False)


@pytest.fixture
def splits_file(toy_workspace):
    path = toy_workspace / "splits.json"
    path.write_text(json.dumps({"games": {"sayword": {"dev": DEV, "test": ["words/2", "words/3"]}}}))
    return path


def load_trainer(**config):
    from playpen.models import load_model_by_name
    from playpen.training.sft.trainer import SFTLoraTrainer
    learner = load_model_by_name("tiny-random", gen_args=dict(temperature=0.0, max_tokens=6), role="learner")
    return SFTLoraTrainer(learner, config=SFTLoraConfig(**config), progress=False), learner


def log_rows(run_dir, event):
    rows = [json.loads(line) for line in (run_dir / "playpen-log.jsonl").read_text().splitlines()]
    return [r for r in rows if r.get("event") == event]


def test_best_so_far_keeps_the_first_best_and_stops_after_patience():
    rule = BestSoFar(patience=2)
    assert [rule.add(step, score) for step, score in [(10, 5.0), (20, 7.0), (30, 7.0), (40, 6.0)]] == \
        [False, False, False, True]
    assert rule.best_step == 20 and rule.best_score == 7.0  # a tie does not replace the earlier chunk
    never = BestSoFar(patience=0)
    assert not any(never.add(step, 0.0) for step in range(1, 10)) and never.best_step == 1


def test_constant_dev_stops_after_one_plus_patience_chunks(toy_workspace, splits_file):
    # learning rate 0: the weights (and so the dev scores) never change
    trainer, _ = load_trainer(**QUICK, learning_rate=0.0, max_steps=20, save_steps=100, save_total_limit=1,
                              dev_every=2, dev_patience=2, dev_splits=str(splits_file))
    trainer.learn(None)
    run_dir = toy_workspace / "models" / "sft+lora" / "tiny-random"
    dev = log_rows(run_dir, "dev")
    assert [r["step"] for r in dev] == [2, 4, 6]  # 1 + patience chunks
    assert all(set(r["dev/sayword/items"]) == set(DEV) and r["dev/sayword/score"] == r["dev/score"] for r in dev)
    assert max(r["step"] for r in log_rows(run_dir, "train_step")) == 6
    assert (toy_workspace / "results" / "tiny-random+sft+lora-dev-checkpoint-4" / "sayword").is_dir()
    # the best (first) chunk survives rotation beside the last one; it is the run's result
    assert [p.name for p in training.checkpoints(run_dir)] == ["checkpoint-2", "checkpoint-6"]
    summary = json.loads((run_dir / "playpen-run.json").read_text())
    assert summary["best_checkpoint"] == summary["checkpoint"]
    assert Path(summary["best_checkpoint"]).resolve() == run_dir / "checkpoint-2"
    assert [c["step"] for c in summary["dev_curve"]] == [2, 4, 6]
    assert summary["eval"]["run_name"] == "tiny-random+sft+lora-checkpoint-2"


def test_the_best_chunks_weights_go_back_into_the_model(toy_workspace, splits_file):
    from safetensors.torch import load_file
    trainer, learner = load_trainer(**QUICK, learning_rate=5e-3, max_steps=3, save_steps=100, dev_every=1,
                                    evaluate=False, dev_splits=str(splits_file))
    trainer.learn(None)
    run_dir = toy_workspace / "models" / "sft+lora" / "tiny-random"
    summary = json.loads((run_dir / "playpen-run.json").read_text())
    assert [r["step"] for r in log_rows(run_dir, "dev")] == [1, 2, 3]  # patience 0: never stops early
    best = Path(summary["best_checkpoint"]).resolve()
    assert Path(summary["checkpoint"]).resolve() == best and best in training.checkpoints(run_dir)

    def lora(weights):  # saved names -> the learner's (peft adds the adapter's name in memory)
        return {k.removeprefix("base_model.model.").replace(".weight", ".default.weight"): v
                for k, v in weights.items()}
    in_model = {n: p.detach() for n, p in learner.model.named_parameters() if "lora_" in n}
    saved = lora(load_file(f"{best}/adapter_model.safetensors"))
    assert set(saved) == set(in_model) and all((in_model[n] == saved[n]).all() for n in saved)
    if best != run_dir / "checkpoint-3":  # trained on after the best chunk: those weights are gone
        last = lora(load_file(run_dir / "checkpoint-3" / "adapter_model.safetensors"))
        assert any(not (in_model[n] == last[n]).all() for n in last)


def test_a_full_fine_tune_gets_its_best_chunk_back_too(toy_workspace, splits_file):
    from safetensors.torch import load_file
    from playpen.models import load_model_by_name
    from playpen.training.sft.trainer import SFTSimpleConfig, SFTSimpleTrainer
    learner = load_model_by_name("tiny-random", gen_args=dict(temperature=0.0, max_tokens=6), role="learner")
    options = {k: v for k, v in QUICK.items() if k != "lora_r"}
    trainer = SFTSimpleTrainer(learner, config=SFTSimpleConfig(**options, learning_rate=1e-3, max_steps=2,
                                                               dev_every=1, evaluate=False,
                                                               dev_splits=str(splits_file)), progress=False)
    trainer.learn(None)
    run_dir = toy_workspace / "models" / "sft" / "tiny-random"
    best = Path(json.loads((run_dir / "playpen-run.json").read_text())["best_checkpoint"]).resolve()
    in_model = dict(learner.model.named_parameters())
    for name, saved in load_file(best / "model.safetensors").items():
        assert (in_model[name].detach() == saved).all(), name
    if best.name == "checkpoint-1":
        last = load_file(run_dir / "checkpoint-2" / "model.safetensors")
        assert any(not (in_model[n].detach() == w).all() for n, w in last.items())


@pytest.mark.parametrize("options, error, expected", [
    (dict(dev_every=-1), PlaypenError, "option --dev-every: -1 is not valid"),
    (dict(dev_every=2, dev_patience=-1, dev_splits="s.json"), PlaypenError, "option --dev-patience: -1"),
    (dict(dev_patience=2), TrainingSetupError, "need --dev-every N"),
    (dict(dev_splits="s.json"), TrainingSetupError, "need --dev-every N"),
    (dict(dev_every=2), TrainingSetupError, "--dev-every needs --dev-splits FILE"),
])
def test_bad_dev_options_are_one_line(options, error, expected):
    with pytest.raises(error, match=expected):
        SFTLoraConfig(**options)


@pytest.mark.parametrize("games, expected", [
    ("sayword", "missing.json: no such file"),
    ("relay", "no split for relay"),
])
def test_a_dev_split_that_is_not_there_stops_before_training(toy_workspace, splits_file, games, expected):
    name = "missing.json" if "missing" in expected else str(splits_file)
    result = CliRunner().invoke(cli, ["run", "sft", "-l", "tiny-random", "--games", games,
                                      "--dev-every", "2", "--dev-splits", name])
    assert result.exit_code == 2, result.output
    assert expected in result.output and "Traceback" not in result.output
    assert not (toy_workspace / "models").exists()
