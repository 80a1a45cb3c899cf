"""Rows of a GRPO micro-batch that share their prompt run it once
(playpen/training/shared_prefix.py): the same log-probs, entropies and LoRA gradients as
TRL's one-pass forward, on a real (tiny, random) Llama with LoRA and TRL's fused LM head."""
import pytest
import torch

from playpen.training.shared_prefix import MIN_SHARED_COLUMNS, prefix_groups, shared_prefix_logps
from test_grpo import yesno_model_dir  # noqa: F401  (a fixture: the tiny model that says yes or no)


def _model(tiny_model_dir):
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM
    from trl.trainer.utils import add_fused_lm_head
    torch.manual_seed(1)
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32)
    add_fused_lm_head(model, temperature=0.7, outputs=("log_probs", "entropy"))
    model = get_peft_model(model, LoraConfig(r=4, lora_alpha=8, target_modules="all-linear", lora_dropout=0.0,
                                             init_lora_weights=False))  # non-zero B: LoRA changes the outputs
    model.train()
    return model


def _batch(prompt_len=40, completion_len=6, vocab=500):
    """6 rows: rows 0, 2, 3 share prompt A; rows 1 and 5 share prompt B (left-padded by 3);
    row 4 has a prompt of its own. Completions differ, with right padding."""
    g = torch.Generator().manual_seed(0)
    a = torch.randint(5, vocab, (prompt_len,), generator=g)
    b = torch.randint(5, vocab, (prompt_len,), generator=g)
    b[:3] = 0
    c = torch.randint(5, vocab, (prompt_len,), generator=g)
    prompts = torch.stack([a, b, a, a, c, b])
    prompt_mask = torch.ones_like(prompts)
    prompt_mask[[1, 5], :3] = 0
    completions = torch.randint(5, vocab, (6, completion_len), generator=g)
    completion_mask = torch.ones_like(completions)
    completion_mask[2, 4:] = 0
    completion_mask[5, 2:] = 0
    ids = torch.cat([prompts, completions.masked_fill(completion_mask == 0, 0)], dim=1)
    return ids, torch.cat([prompt_mask, completion_mask], dim=1), completion_len


def _full_pass(model, ids, mask, keep):
    """What TRL's GRPOTrainer computes for a micro-batch (one forward over every row)."""
    labels = ids.masked_fill(mask == 0, -100)
    labels[:, :-keep] = -100
    out = model(input_ids=ids, attention_mask=mask, labels=labels, fused_lm_head=True)
    return out.log_probs[:, -keep:], out.entropy[:, -keep:]


def _lora_grads(model):
    return {n: p.grad.detach().clone() for n, p in model.named_parameters() if p.requires_grad}


def test_prefix_groups_finds_the_rows_that_share_a_prompt():
    ids, mask, keep = _batch()
    k, first, inverse = prefix_groups(ids, mask, keep)
    assert k == ids.size(1) - keep - 1
    assert len(first) == 3  # A, B, C
    # rows mapped to the same prefix are exactly those with the same prompt
    assert inverse[0] == inverse[2] == inverse[3] and inverse[1] == inverse[5]
    assert len({int(inverse[0]), int(inverse[1]), int(inverse[4])}) == 3
    for row, group in enumerate(inverse.tolist()):
        assert torch.equal(ids[first[group], :k], ids[row, :k])
    assert sorted(first.tolist()) == [0, 1, 4]  # the first row of each prompt


def test_no_sharing_means_none():
    ids, mask, keep = _batch()
    distinct = ids[[0, 1, 4]]
    assert prefix_groups(distinct, mask[[0, 1, 4]], keep) is None
    short = ids[:, -(MIN_SHARED_COLUMNS + keep):]  # a prompt too short to be worth a second call
    assert prefix_groups(short, torch.ones_like(short), keep) is None
    # the prompt's last column runs with the completions (its output scores the first completion
    # token): rows that differ there still share the rest; rows that differ before it do not
    twin = ids[[0, 0]].clone()
    twin[1, ids.size(1) - keep - 1] += 1
    assert prefix_groups(twin, torch.ones_like(twin), keep)[1].tolist() == [0]
    twin[1, ids.size(1) - keep - 2] += 1
    assert prefix_groups(twin, torch.ones_like(twin), keep) is None


def test_shared_prefix_gives_trls_logprobs_entropies_and_gradients(tiny_model_dir):
    model = _model(tiny_model_dir)
    ids, mask, keep = _batch()
    weights = torch.linspace(0.5, 2.0, ids.size(0)).unsqueeze(1)  # rows weighted differently, like advantages
    completion_mask = mask[:, -keep:].float()

    full_logps, full_entropy = _full_pass(model, ids, mask, keep)
    ((full_logps * weights * completion_mask).sum()).backward()
    full_grads = _lora_grads(model)
    model.zero_grad()

    shared_logps, shared_entropy = shared_prefix_logps(model, ids, mask, keep, compute_entropy=True)
    ((shared_logps * weights * completion_mask).sum()).backward()
    shared_grads = _lora_grads(model)

    assert shared_logps.shape == full_logps.shape
    real = completion_mask.bool()
    assert torch.allclose(shared_logps[real], full_logps[real], atol=1e-5)
    assert torch.allclose(shared_entropy[real], full_entropy[real], atol=1e-5)
    assert full_grads.keys() == shared_grads.keys() and len(full_grads) > 0
    moved = 0
    for name, grad in full_grads.items():
        assert torch.allclose(shared_grads[name], grad, atol=1e-5, rtol=1e-4), name
        moved += int(grad.abs().sum() > 0)
    assert moved == len(full_grads)  # every LoRA matrix got a gradient: the prompt pass is in the graph


def test_shared_prefix_under_no_grad_matches_too(tiny_model_dir):
    """The reference pass (no gradients) goes the same way."""
    model = _model(tiny_model_dir)
    ids, mask, keep = _batch()
    with torch.no_grad():
        full, _ = _full_pass(model, ids, mask, keep)
        shared, entropy = shared_prefix_logps(model, ids, mask, keep)
    real = mask[:, -keep:].bool()
    assert entropy is None
    assert torch.allclose(shared[real], full[real], atol=1e-5)


@pytest.mark.parametrize("rows", [[0, 2, 3], [1, 5]])
def test_rows_with_one_prompt_only(tiny_model_dir, rows):
    model = _model(tiny_model_dir)
    ids, mask, keep = _batch()
    ids, mask = ids[rows], mask[rows]
    with torch.no_grad():
        full, _ = _full_pass(model, ids, mask, keep)
        shared, _ = shared_prefix_logps(model, ids, mask, keep)
    real = mask[:, -keep:].bool()
    assert torch.allclose(shared[real], full[real], atol=1e-5)


def test_rows_by_prompt_puts_each_prompts_rows_together():
    from playpen.training.grpo_steps import rows_by_prompt
    prompts = torch.tensor([[1, 2], [3, 4], [1, 2], [5, 6], [3, 4], [1, 2]])
    mask = torch.ones_like(prompts)
    mask[3, 0] = 0  # same tokens, other padding: another prompt
    prompts[3] = torch.tensor([1, 2])
    batch = {"prompt_ids": prompts, "prompt_mask": mask, "advantages": torch.arange(6.0),
             "names": list("abcdef"), "num_items_in_batch": torch.tensor(9), "pixel_values": None}
    out = rows_by_prompt(batch)
    assert out["names"] == list("acfbed")  # prompts in order of first appearance, rows in order within
    assert out["advantages"].tolist() == [0.0, 2.0, 5.0, 1.0, 4.0, 3.0]
    assert out["prompt_ids"].tolist() == [[1, 2], [1, 2], [1, 2], [3, 4], [3, 4], [1, 2]]
    assert out["prompt_mask"][5].tolist() == [0, 1]
    assert int(out["num_items_in_batch"]) == 9 and out["pixel_values"] is None


# ----------------------------------------------------------------------------- in a GRPO run

def test_a_grpo_run_with_shared_prompts_trains_the_same_adapter(tmp_path, monkeypatch, tiny_workspace,
                                                                 yesno_model_dir):
    """The same seeded GRPO run twice, --share-prompts on and off (micro-batches of a group,
    with the KL term's reference pass): the rows of a group shared their prompt, step 1's loss
    and gradient norm are equal, and the adapters after it agree."""
    import json
    import shutil
    from pathlib import Path

    from click.testing import CliRunner
    from safetensors.torch import load_file

    from playpen.cli import cli
    toygames = Path(__file__).parent / "toygames"
    games = tiny_workspace / "toygames"
    shutil.copytree(toygames / "sayword", games / "sayword")
    (games / "sayword" / "in" / "instances.json").write_text(json.dumps({"experiments": [
        {"name": "words", "game_instances": [{"game_id": i, "word": "yes"} for i in range(4)]}]}))
    entries = json.loads((tiny_workspace / "model_registry.json").read_text())
    entries.append({**entries[0], "model_name": "tiny-yesno", "huggingface_id": str(yesno_model_dir)})
    (tiny_workspace / "model_registry.json").write_text(json.dumps(entries))
    (tiny_workspace / "game_registry.json").write_text(json.dumps([{"benchmark_path": str(games)}]))
    trainer = Path(__file__).resolve().parents[1] / "examples" / "trl" / "grpo_trainer_lora_sp.py"
    adapters, logs = {}, {}
    for share in ("true", "false"):
        models = tmp_path / f"models-{share}"
        result = CliRunner().invoke(cli, [
            "run", str(trainer), "-l", "tiny-yesno", "-T", "1.0", "-L", "3", "--games", "sayword",
            "--train-instances", "instances", "--max-steps", "2", "--save-steps", "1", "--num-generations", "8",
            "--groups-per-step", "1", "--micro-batch-size", "8", "--beta", "0.05", "--learning-rate", "3e-3",
            "--reward", "binary", "--share-prompts", share, "--no-evaluate", "--models-dir", str(models),
            "-o", str(tmp_path / f"records-{share}")])
        assert result.exit_code == 0, result.output
        run_dir = models / "grpo+lora" / "tiny-yesno" / "selfplay"
        adapters[share] = load_file(run_dir / "checkpoint-1" / "adapter_model.safetensors")
        logs[share] = [json.loads(line) for line in (run_dir / "playpen-log.jsonl").read_text().splitlines()
                       if '"train_step"' in line]
    assert [s["train/shared_prompt_rows"] for s in logs["true"]] == [8, 8]  # every row ran shared
    assert [s["train/shared_prompt_rows"] for s in logs["false"]] == [0, 0]
    assert logs["true"][0]["train/loss"] == pytest.approx(logs["false"][0]["train/loss"], abs=1e-5)
    assert logs["true"][0]["train/grad_norm"] == pytest.approx(logs["false"][0]["train/grad_norm"], rel=1e-4)
    assert adapters["true"].keys() == adapters["false"].keys()
    # Adam's first step moves every weight by ~lr x sign(gradient): where a gradient is ~0, float
    # noise can flip its sign, so a few entries may differ by up to 2 lr; all others agree
    differing = total = changed = 0
    for name, weight in adapters["false"].items():
        differing += int(((adapters["true"][name] - weight).abs() > 1e-5).sum())
        total += weight.numel()
        changed += int("lora_B" in name and weight.abs().sum() > 0)
    assert changed > 0  # the adapter trained
    assert differing / total < 0.01, (differing, total)
