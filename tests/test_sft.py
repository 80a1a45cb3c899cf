"""SFT data and trainers: assistant-only masks, records, the two example trainers
(in-process and through `playpen run`), resume, Ctrl-C, crash safety, user errors."""
import json
import os
import signal
from pathlib import Path

import pytest
from click.testing import CliRunner

from playpen import data
from playpen.cli import cli
from playpen.errors import DatasetError
from playpen.files import write_jsonl
from playpen.training.common import lifecycle as training
from playpen.training.sft import demonstrations as sft

LORA_TRAINER = "sft"
SIMPLE_TRAINER = "sft-full"
# small and fast: 2 steps of 2 conversations, 1 held-out instance per experiment, short replies
FAST = ["--max-steps", "2", "--batch-size", "2", "--max-length", "400", "--save-steps", "1",
        "--eval-max-instances", "1", "--eval-sets", "none", "--no-eval-static"]


@pytest.fixture(scope="session")
def tokenizer(smol_tokenizer_dir):
    from transformers import AutoTokenizer
    return AutoTokenizer.from_pretrained(smol_tokenizer_dir)


@pytest.fixture(scope="session")
def demonstrations(tmp_path_factory):
    """Programmatic referencegame episodes on the training instances (1 per experiment)."""
    from playpen.training.sft.demonstrations import play_demonstrations
    root = tmp_path_factory.mktemp("demos")
    cwd = os.getcwd()
    os.chdir(root)
    try:
        return play_demonstrations(["referencegame"], root / "demonstrations", max_instances=1)
    finally:
        os.chdir(cwd)


# ----------------------------------------------------------------------------- data

def test_assistant_mask_covers_exactly_the_assistant_turns(tokenizer):
    messages = [{"role": "user", "content": "Say A."}, {"role": "assistant", "content": "A"},
                {"role": "user", "content": "Now B."}, {"role": "user", "content": "Please."},
                {"role": "assistant", "content": "B b"}]
    row = sft.tokenize_conversation(tokenizer, messages)
    masked = [i for i, m in zip(row["input_ids"], row["assistant_masks"]) if m]
    assert tokenizer.decode(masked) == "A<|im_end|>\nB b<|im_end|>\n"
    # the trained tokens follow exactly the prompt the model sees at inference
    prompt = tokenizer.apply_chat_template(
        [messages[0]], add_generation_prompt=True, tokenize=False)
    first = row["assistant_masks"].index(1)
    assert tokenizer.decode(row["input_ids"][:first]) == prompt
    assert sft.tokenize_conversation(tokenizer, messages, max_length=5)["input_ids"] == row["input_ids"][:5]


def test_records_from_results(demonstrations):
    records = data.read_results(demonstrations)
    assert len(records) == 10  # 5 episodes x 2 players
    roles = {r["meta"]["game_role"] for r in records}
    assert roles == {"Instruction Giver", "Instruction Follower"}
    giver = next(r for r in records if r["meta"]["game_role"] == "Instruction Giver")
    assert [m["role"] for m in giver["messages"]] == ["user", "assistant"]
    assert giver["messages"][1]["content"].startswith("Expression:")
    followers = data.DatasetFilter(roles=("Instruction Follower",), outcomes=("success",))
    assert [r for r in records if followers.keeps(r["meta"])] == \
        [r for r in records if r["meta"]["game_role"] == "Instruction Follower"]
    # both spellings of a role (3.x records: InstructionFollower; 2.x: Instruction Follower)
    assert [r for r in records if data.DatasetFilter(roles=("InstructionFollower",)).keeps(r["meta"])] == \
        [r for r in records if r["meta"]["game_role"] == "Instruction Follower"]
    assert not [r for r in records if data.DatasetFilter(outcomes=("aborted",)).keeps(r["meta"])]
    with pytest.raises(DatasetError, match="unknown outcome 'won'"):
        data.DatasetFilter(outcomes=("won",))


def test_dataset_file_round_trip(tmp_path, demonstrations, tokenizer):
    records = data.read_results(demonstrations)
    path = write_jsonl(records, tmp_path / "d.jsonl")
    assert data.read_dataset_file(path) == records
    dataset = sft.tokenized_dataset(records, tokenizer, max_length=600)
    assert set(dataset.column_names) == {"input_ids", "assistant_masks"} and len(dataset) == 10
    (tmp_path / "bad.jsonl").write_text('{"messages": []}\n{oops\n')
    with pytest.raises(DatasetError, match="bad.jsonl:2"):
        data.read_dataset_file(tmp_path / "bad.jsonl")
    with pytest.raises(DatasetError, match="no trainable examples"):
        sft.tokenized_dataset(records, tokenizer, max_length=8)


# ----------------------------------------------------------------------------- trainers

def load_trainer(path, learner_name="tiny-random", **config):
    from playpen.cli.run import trainer_class
    from playpen.models import load_model_by_name
    cls = trainer_class(path)
    learner = load_model_by_name(learner_name, gen_args=dict(temperature=0.0, max_tokens=6), role="learner")
    return cls(learner, config=cls.config_class(**config), progress=False), learner


def lora_state(model):
    return {n: p.detach().clone() for n, p in model.named_parameters() if "lora_" in n}


def test_sft_lora_in_process_trains_saves_evaluates(tiny_workspace, demonstrations):
    trainer, learner = load_trainer(LORA_TRAINER, records=str(demonstrations), max_steps=2, batch_size=2,
                                    max_length=400, save_steps=1, eval_max_instances=1, lora_r=4,
                                    eval_sets="none", eval_static=False)
    trainer.learn(None)
    run_dir = tiny_workspace / "models" / "sft+lora" / "tiny-random"
    assert [p.name for p in training.checkpoints(run_dir)] == ["checkpoint-1", "checkpoint-2"]
    ckpt = run_dir / "checkpoint-2"
    assert (ckpt / "adapter_model.safetensors").exists() and not (ckpt / "model.safetensors").exists()
    from safetensors.torch import load_file
    weights = load_file(ckpt / "adapter_model.safetensors")
    # LoRA B starts at zero: non-zero B means the adapter was trained
    assert any(w.abs().sum() > 0 for n, w in weights.items() if "lora_B" in n)
    steps = [json.loads(l) for l in (run_dir / "playpen-log.jsonl").read_text().splitlines()]
    assert [s["step"] for s in steps] == [1, 2] and all("train/loss" in s for s in steps)
    assert (run_dir / "learning-curve.png").stat().st_size > 1000
    summary = json.loads((run_dir / "playpen-run.json").read_text())
    assert summary["eval"]["run_name"] == "tiny-random+sft+lora-checkpoint-2"
    assert (tiny_workspace / "results" / "tiny-random+sft+lora-checkpoint-2" / "playpen-eval.json").exists()

    # --resume continues from checkpoint-2 up to the new max_steps
    trainer, _ = load_trainer(LORA_TRAINER, records=str(demonstrations), max_steps=3, batch_size=2,
                              max_length=400, save_steps=1, lora_r=4, resume=True, evaluate=False)
    trainer.learn(None)
    state = json.loads((run_dir / "checkpoint-3" / "trainer_state.json").read_text())
    assert state["global_step"] == 3
    steps = [json.loads(l)["step"] for l in (run_dir / "playpen-log.jsonl").read_text().splitlines()]
    assert steps == [1, 2, 3]


def test_precision_bf16_trains_under_cpu_autocast_and_the_default_does_not(tiny_workspace, demonstrations):
    """--precision bf16: the forward's matrix products run in bf16 (accelerate's CPU autocast)
    while the weights and the saved adapter stay fp32; auto keeps a CPU run in fp32. The two
    first-step losses (same weights, same rows) differ by bf16's rounding only."""
    import torch
    from safetensors.torch import load_file
    run_dir = tiny_workspace / "models" / "sft+lora" / "tiny-random"
    seen, losses = {}, {}

    def record(module, args, output):
        if isinstance(module, torch.nn.Linear) and torch.is_grad_enabled():
            seen[precision].add((torch.is_autocast_enabled("cpu"), output.dtype))
    for precision in ("auto", "bf16"):
        seen[precision] = set()
        trainer, _ = load_trainer(LORA_TRAINER, records=str(demonstrations), max_steps=1, batch_size=2,
                                  max_length=400, lora_r=4, evaluate=False, overwrite=True, precision=precision)
        handle = torch.nn.modules.module.register_module_forward_hook(record)
        try:
            trainer.learn(None)
        finally:
            handle.remove()
        losses[precision] = json.loads((run_dir / "playpen-log.jsonl").read_text().splitlines()[-1])["train/loss"]
        weights = load_file(run_dir / "checkpoint-1" / "adapter_model.safetensors")
        assert {w.dtype for w in weights.values()} == {torch.float32}
    assert seen["auto"] == {(False, torch.float32)}
    assert seen["bf16"] == {(True, torch.bfloat16)}
    assert losses["bf16"] == pytest.approx(losses["auto"], rel=0.02) and losses["bf16"] != losses["auto"]


def test_ctrl_c_saves_a_checkpoint_and_stops(tiny_workspace, demonstrations):
    from playpen.callbacks import BaseCallback

    class CtrlCAtStep1(BaseCallback):
        def _on_train_step(self, step, metrics):
            if step == 1:
                os.kill(os.getpid(), signal.SIGINT)

    trainer, _ = load_trainer(LORA_TRAINER, records=str(demonstrations), max_steps=50, batch_size=2,
                              max_length=400, save_steps=100, lora_r=4)
    trainer.add_callback(CtrlCAtStep1())
    trainer.learn(None)
    run_dir = tiny_workspace / "models" / "sft+lora" / "tiny-random"
    assert [p.name for p in training.checkpoints(run_dir)] == ["checkpoint-1"]
    summary = json.loads((run_dir / "playpen-run.json").read_text())
    assert summary["interrupted"] is True and "eval" not in summary


def test_crash_keeps_last_checkpoint_and_resume_finishes(tiny_workspace, demonstrations):
    from playpen.callbacks import BaseCallback

    class CrashAtStep3(BaseCallback):
        def _on_train_step(self, step, metrics):
            if step == 3:
                raise RuntimeError("simulated crash")

    trainer, _ = load_trainer(LORA_TRAINER, records=str(demonstrations), max_steps=4, batch_size=2,
                              max_length=400, save_steps=2, lora_r=4, evaluate=False)
    trainer.add_callback(CrashAtStep3())
    with pytest.raises(RuntimeError, match="simulated crash"):
        trainer.learn(None)
    run_dir = tiny_workspace / "models" / "sft+lora" / "tiny-random"
    # a half-written checkpoint (no trainer_state.json) is never picked
    (run_dir / "checkpoint-9").mkdir()
    assert training.latest_checkpoint(run_dir).name == "checkpoint-2"
    trainer, _ = load_trainer(LORA_TRAINER, records=str(demonstrations), max_steps=4, batch_size=2,
                              max_length=400, save_steps=2, lora_r=4, evaluate=False, resume=True)
    trainer.learn(None)
    assert training.latest_checkpoint(run_dir).name == "checkpoint-4"


def test_sft_simple_via_playpen_run(tiny_workspace, demonstrations, tiny_model_dir):
    """Full fine-tuning through the CLI, in this process (`python -m playpen run` as a process of
    its own: tests/test_interruptions.py)."""
    done = CliRunner().invoke(cli, ["run", str(SIMPLE_TRAINER), "-l", "tiny-random", "-L", "6",
                                    "--records", str(demonstrations), *FAST])
    assert done.exit_code == 0, done.output[-3000:]
    ckpt = tiny_workspace / "models" / "sft" / "tiny-random" / "checkpoint-2"
    assert (ckpt / "model.safetensors").exists() and (ckpt / "tokenizer.json").exists()
    from safetensors.torch import load_file
    before = load_file(Path(tiny_model_dir) / "model.safetensors")
    after = load_file(ckpt / "model.safetensors")
    changed = [n for n in before if not (before[n] == after[n]).all()]
    assert len(changed) == len(before), "every parameter should change in full fine-tuning"
    assert "clemscore table for tiny-random+sft-checkpoint-2" in done.output


def test_trainer_help_lists_config():
    result = CliRunner().invoke(cli, ["run", str(LORA_TRAINER), "--help"])
    assert result.exit_code == 0
    for option in ("--lora-r", "--max-steps", "--learning-rate", "--dataset", "--resume", "--report-to"):
        assert option in result.output


@pytest.mark.parametrize("args, expected", [
    (["--resume"], "--resume: no complete checkpoint"),
    (["--dataset", "missing.jsonl"], "dataset file 'missing.jsonl' does not exist"),
    (["--records", "nowhere"], "records folder 'nowhere' does not exist"),
    (["--outcomes", "won"], "unknown outcome 'won'"),
    (["--precision", "fp16"], "auto, fp32 or bf16"),
])
def test_sft_user_errors(tiny_workspace, demonstrations, args, expected):
    extra = [] if "--records" in args or "--dataset" in args else ["--records", str(demonstrations)]
    result = CliRunner().invoke(cli, ["run", str(LORA_TRAINER), "-l", "tiny-random", *extra, *args])
    assert result.exit_code == 2, result.output
    assert expected in result.output


def test_existing_checkpoints_need_resume_or_overwrite(tiny_workspace, demonstrations):
    ckpt = tiny_workspace / "models" / "sft+lora" / "tiny-random" / "checkpoint-1"
    ckpt.mkdir(parents=True)
    (ckpt / "trainer_state.json").write_text("{}")
    result = CliRunner().invoke(cli, ["run", str(LORA_TRAINER), "-l", "tiny-random",
                                      "--records", str(demonstrations)])
    assert result.exit_code == 2 and "pass --resume to continue, --overwrite to start over, or --models-dir" in result.output


def test_overwrite_starts_over_without_the_earlier_runs_checkpoints_or_log(tiny_workspace, demonstrations):
    """--overwrite once kept a longer earlier run's checkpoints and log lines: its checkpoint-3
    was the "latest" after the new one-step run, and the curve drew both runs."""
    run_dir = tiny_workspace / "models" / "sft+lora" / "tiny-random"
    options = dict(records=str(demonstrations), batch_size=2, max_length=400, lora_r=4, evaluate=False,
                   save_steps=1, save_total_limit=5)
    load_trainer(LORA_TRAINER, max_steps=3, **options)[0].learn(None)
    assert [p.name for p in training.checkpoints(run_dir)] == ["checkpoint-1", "checkpoint-2", "checkpoint-3"]
    trainer, _ = load_trainer(LORA_TRAINER, max_steps=1, overwrite=True, **options)
    trainer.learn(None)
    assert [p.name for p in training.checkpoints(run_dir)] == ["checkpoint-1"]
    assert training.latest_checkpoint(run_dir).name == "checkpoint-1"
    steps = [json.loads(line)["step"] for line in (run_dir / "playpen-log.jsonl").read_text().splitlines()]
    assert steps == [1]


def test_final_evaluation_never_replaces_another_runs_results(tiny_workspace, demonstrations):
    earlier = tiny_workspace / "results" / "tiny-random+sft+lora-checkpoint-2" / "referencegame" / "scores.json"
    earlier.parent.mkdir(parents=True)
    earlier.write_text("{}")
    result = CliRunner().invoke(cli, ["run", str(LORA_TRAINER), "-l", "tiny-random",
                                      "--records", str(demonstrations), *FAST])
    assert result.exit_code == 2, result.output
    assert "tiny-random+sft+lora-checkpoint-2/referencegame already holds episodes" in result.output
    assert "--overwrite" in result.output
    # refused before training: no checkpoint, the earlier results untouched
    assert not (tiny_workspace / "models" / "sft+lora").exists() and earlier.read_text() == "{}"
