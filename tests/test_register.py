"""`playpen register NAME TRAINED`: a trained adapter becomes a model by name — an entry of
the workspace's model_registry.json (the learner's, with the adapter as peft_model) that
`playpen eval -m NAME` plays, loaded through clemcore's backend as `clem run -m NAME` loads
it (issue 40)."""
import json

import pytest
from click.testing import CliRunner

from playpen.cli import cli


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


@pytest.fixture
def trained_run(toy_workspace, tiny_model_dir):
    """A LoRA run folder as `playpen run sft` leaves it: checkpoint-2 (an adapter whose B is
    not zero, so that it changes the model) and playpen-run.json naming learner and checkpoint."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM
    run_dir = toy_workspace / "models" / "sft+lora" / "tiny-random"
    torch.manual_seed(0)
    get_peft_model(AutoModelForCausalLM.from_pretrained(tiny_model_dir),
                   LoraConfig(r=4, target_modules="all-linear", task_type="CAUSAL_LM",
                              init_lora_weights=False)).save_pretrained(run_dir / "checkpoint-2")
    (run_dir / "playpen-run.json").write_text(json.dumps({"trainer": "SFTLoraTrainer", "learner": "tiny-random",
                                                          "checkpoint": "models/sft+lora/tiny-random/checkpoint-2"}))
    return run_dir


def test_a_registered_adapter_is_a_model_by_name(trained_run, toy_workspace, tiny_model_dir):
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    from playpen.models import load_model_by_name
    result = invoke("register", "tiny-sft", "models/sft+lora/tiny-random")
    assert result.exit_code == 0, result.output
    entries = {e["model_name"]: e for e in json.loads((toy_workspace / "model_registry.json").read_text())}
    adapter = (trained_run / "checkpoint-2").resolve()
    assert entries["tiny-sft"]["model_config"]["peft_model"] == str(adapter)
    assert entries["tiny-sft"]["huggingface_id"] == entries["tiny-random"]["huggingface_id"]
    # loaded by name through clemcore's huggingface_local backend: the learner with the adapter on top
    model = load_model_by_name("tiny-sft")
    ids = torch.tensor([[1, 2, 3, 4, 5]])
    with torch.no_grad():
        expected = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(tiny_model_dir),
                                             str(adapter))(input_ids=ids).logits
        base = AutoModelForCausalLM.from_pretrained(tiny_model_dir)(input_ids=ids).logits
        logits = model.model(input_ids=ids).logits
    assert torch.allclose(logits, expected, atol=1e-5) and not torch.allclose(logits, base, atol=1e-3)
    # played by name
    result = invoke("eval", "-m", "tiny-sft", "-g", "sayword", "-n", "1", "-L", "3", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["run_name"] == "tiny-sft"


def test_register_refuses_in_one_line_and_writes_nothing(trained_run, toy_workspace, foreign_adapter):
    registry = toy_workspace / "model_registry.json"
    before = registry.read_text()
    for args, expected in (
            (["tiny-random", trained_run], "model 'tiny-random' is already in"),
            (["smol-135m", trained_run], "model 'smol-135m' is already registered"),
            (["x", foreign_adapter(toy_workspace / "foreign"), "-l", "tiny-random"], "was trained on base model"),
            (["x", trained_run / "checkpoint-2" / "nothing"], "is not a folder"),
            (["x", toy_workspace / "models"], "no playpen-run.json names the learner: pass -l/--learner"),
            (["x", trained_run, "-l", "no-such-model"], "unknown model 'no-such-model'")):
        result = invoke("register", *args)
        assert result.exit_code == 2, result.output
        assert result.output.startswith("playpen: error: ") and expected in result.output, result.output
        assert registry.read_text() == before
    assert invoke("register", "tiny-sft", trained_run / "checkpoint-2").exit_code == 0
    assert invoke("register", "tiny-sft", trained_run).exit_code == 2
    assert invoke("register", "tiny-sft", trained_run, "--overwrite").exit_code == 0
    names = [e["model_name"] for e in json.loads(registry.read_text())]
    assert names.count("tiny-sft") == 1
