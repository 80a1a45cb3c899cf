"""Stage pipelines through `playpen run` on a tiny random model: two stages (SFT, then DPO from
SFT's adapter), a run cut short in stage 2 and resumed there (stage 1 not run again), and
bad input (unknown stage, unknown stage option, an adapter of another base model, a run
folder in use: one line, exit 2, nothing written or overwritten)."""
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from playpen.callbacks import BaseCallback
from playpen.cli import cli

REPO_ROOT = Path(__file__).resolve().parents[1]
PIPELINE = "pipeline"
RUNS = REPO_ROOT / "tests" / "fixtures" / "clembench-runs-v2.0"
OPTIONS = dict(games="wordle", stages="sft,dpo", stage_steps="2,1", learning_rate=1e-3, evaluate=False,
               stage_options=f"sft: --records {RUNS} --batch-size 2; dpo: --source records --records {RUNS}")


def lora_b(checkpoint: Path) -> dict:
    from safetensors.torch import load_file
    return {n: w for n, w in load_file(Path(checkpoint) / "adapter_model.safetensors").items() if "lora_B" in n}


class PowerCut(BaseCallback):
    """Fails at the first optimizer step of the second stage (a crash, a kill -9)."""

    def __init__(self):
        super().__init__()
        self.stages = 0

    def _on_learn_start(self, trainer_name, total_steps):
        self.stages += 1

    def _on_train_step(self, step, metrics):
        if self.stages == 2:
            raise RuntimeError("power cut")
        return True


def test_pipeline_resumes_at_the_stage_where_it_stopped(tiny_workspace):
    from playpen.cli.run import trainer_class
    from playpen.models import load_model_by_name
    cls = trainer_class(PIPELINE)
    learner = load_model_by_name("tiny-random", gen_args=dict(temperature=0.0, max_tokens=6), role="learner")
    with pytest.raises(RuntimeError, match="power cut"):
        cls(learner, config=cls.config_class(**OPTIONS), callbacks=[PowerCut()], progress=False).learn(None)
    run_dir = tiny_workspace / "models" / "pipeline" / "tiny-random" / "sft-dpo"
    state = json.loads((run_dir / "pipeline-state.json").read_text())
    assert [d["stage"] for d in state["done"]] == ["sft"] and state["current"] == "dpo"
    sft_adapter = Path(state["done"][0]["adapter"])
    assert sft_adapter.name == "checkpoint-2" and sft_adapter.parent.parent.parent.name == "1-sft"
    sft_weights = lora_b(sft_adapter)
    assert any(w.abs().sum() > 0 for w in sft_weights.values())
    sft_log = (sft_adapter.parent / "playpen-log.jsonl").read_text()

    args = ["run", str(PIPELINE), "-l", "tiny-random", "--resume"]
    for key, value in OPTIONS.items():
        args += [f"--{key.replace('_', '-')}", str(value)] if key != "evaluate" else ["--no-evaluate"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    assert "sft done; resuming at dpo" in result.output
    assert "stage 1/2" not in result.output and "stage 2/2: dpo from " in result.output
    # stage 1 was not run again: its adapter and log are as they were
    assert (sft_adapter.parent / "playpen-log.jsonl").read_text() == sft_log
    assert all(lora_b(sft_adapter)[n].equal(w) for n, w in sft_weights.items())
    state = json.loads((run_dir / "pipeline-state.json").read_text())
    assert [d["stage"] for d in state["done"]] == ["sft", "dpo"] and state["current"] is None
    dpo_adapter = Path(state["done"][1]["adapter"])
    assert "2-dpo" in dpo_adapter.parts and dpo_adapter.name == "checkpoint-1"
    dpo_run = json.loads((dpo_adapter.parent / "playpen-run.json").read_text())
    assert dpo_run["config"]["init_adapter"] == str(sft_adapter)  # DPO started from SFT's adapter
    dpo_weights = lora_b(dpo_adapter)
    assert set(dpo_weights) == set(sft_weights)
    assert any(not dpo_weights[n].equal(w) for n, w in sft_weights.items()), "DPO changed nothing"
    assert json.loads((run_dir / "playpen-run.json").read_text())["checkpoint"] == str(dpo_adapter)


@pytest.mark.parametrize("args, expected", [
    (["--stages", "sft,dpoo"], "unknown stage 'dpoo'. Did you mean: dpo"),
    (["--stages", "sft,dpo", "--stage-options", "dpo: --bta 0.2"], "unknown option '--bta' for this trainer"),
    (["--stages", "sft,dpo", "--stage-options", "grpo: --beta 0.2"], "'grpo' is not one of the stages"),
    (["--stages", "sft,dpo", "--stage-steps", "2"], "option --stage-steps: '2' is not valid"),
    (["--stages", "dpo", "--init-adapter", "foreign"], "was trained on base model 'SomeOrg/other-model-7b'"),
    (["--stages", "sft", "--resume"], "no pipeline state"),
])
def test_pipeline_user_errors_one_line_nothing_written(foreign_adapter, tiny_workspace, monkeypatch, args, expected):
    foreign_adapter(tiny_workspace / "foreign")
    import playpen.models
    monkeypatch.setattr(playpen.models, "load_model_by_name",
                        lambda *a, **k: pytest.fail("a model was loaded before the options were checked"))
    result = CliRunner().invoke(cli, ["run", str(PIPELINE), "-l", "tiny-random", "--games", "wordle", *args])
    assert result.exit_code == 2, result.output
    assert expected in result.output and result.output.count("\n") == 1, result.output
    assert not (tiny_workspace / "playpen-records").exists()
    assert not list((tiny_workspace / "models").rglob("*.json")) if (tiny_workspace / "models").exists() else True


def test_a_finished_pipeline_is_never_overwritten(tiny_workspace):
    run_dir = tiny_workspace / "models" / "pipeline" / "tiny-random" / "sft"
    run_dir.mkdir(parents=True)
    state = {"stages": ["sft"], "done": [{"stage": "sft", "adapter": "x"}], "current": None}
    (run_dir / "pipeline-state.json").write_text(json.dumps(state))
    result = CliRunner().invoke(cli, ["run", str(PIPELINE), "-l", "tiny-random", "--games", "wordle",
                                      "--stages", "sft", "--no-evaluate"])
    assert result.exit_code == 2 and "already holds a pipeline run" in result.output, result.output
    assert result.output.count("\n") == 1
    assert json.loads((run_dir / "pipeline-state.json").read_text()) == state
    assert sorted(p.name for p in run_dir.iterdir()) == ["pipeline-state.json"]


def test_sft_lora_continues_an_adapter(tiny_workspace, tiny_model_dir):
    """What lets SFT be a later stage: --init-adapter trains that adapter on."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM
    model = get_peft_model(AutoModelForCausalLM.from_pretrained(tiny_model_dir),
                           LoraConfig(r=4, lora_alpha=8, target_modules="all-linear", task_type="CAUSAL_LM"))
    torch.manual_seed(1)
    for name, p in model.named_parameters():
        if "lora_B" in name:
            torch.nn.init.normal_(p, std=0.02)
    model.save_pretrained(tiny_workspace / "start")
    start = lora_b(tiny_workspace / "start")
    result = CliRunner().invoke(cli, ["run", str("sft"),
                                      "-l", "tiny-random", "--games", "wordle", "--records", str(RUNS),
                                      "--init-adapter", "start", "--max-steps", "1", "--batch-size", "2",
                                      "--learning-rate", "1e-2", "--no-evaluate"])
    assert result.exit_code == 0, result.output
    trained = lora_b(tiny_workspace / "models" / "sft+lora" / "tiny-random" / "checkpoint-1")
    assert set(trained) == set(start) and all(w.shape[1] == 4 for w in trained.values())  # the same adapter (r=4)
    assert any(not trained[n].equal(w) for n, w in start.items())
