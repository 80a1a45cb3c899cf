"""Rows of a GRPO micro-batch or of DPO pairs that share their prompt run it once
(playpen/training/shared_prefix.py): the same log-probs, entropies and LoRA gradients as
TRL's one-pass forward, on a real (tiny, random) Llama with LoRA and TRL's fused LM head."""
import pytest
import torch

from playpen.training.shared_prefix import completion_labels, plan, shared_prefix_logps
from test_grpo import toy_workspace  # noqa: F401  (the fixture: the toy games with tiny-yesno)


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


def _ragged_batch(keep=6, vocab=500):
    """5 rows whose prompts share their first 30 tokens and end differently (3 to 12 more
    tokens, so different left padding), like self-play followers' prompts that differ in the
    giver's expression; row 4 shares nothing."""
    g = torch.Generator().manual_seed(1)
    common = torch.randint(5, vocab, (30,), generator=g)
    prompts = [torch.cat([common, torch.randint(5, vocab, (n,), generator=g)]) for n in (3, 12, 7, 7)]
    prompts.append(torch.randint(5, vocab, (25,), generator=g))
    width = max(len(p) for p in prompts)
    ids = torch.zeros((5, width + keep), dtype=torch.long)
    mask = torch.zeros_like(ids)
    for r, p in enumerate(prompts):
        ids[r, width - len(p):width] = p
        mask[r, width - len(p):width] = 1
    ids[:, width:] = torch.randint(5, vocab, (5, keep), generator=g)
    mask[:, width:] = 1
    mask[1, width + 3:] = 0
    ids[1, width + 3:] = 0
    return ids, mask, keep


def _batch_with_placeholders(keep=6):
    """Rows 0-3 share prompt A; rows 4 and 5 are the 1-token rows a role gets when it never
    had a turn (prompt and completion of one token)."""
    ids, mask, keep = _batch(completion_len=keep)
    ids, mask = ids[[0, 2, 3, 0, 1, 4]].clone(), mask[[0, 2, 3, 0, 1, 4]].clone()
    width = ids.size(1) - keep
    for r in (4, 5):
        ids[r, :width - 1], mask[r, :width - 1] = 0, 0
        ids[r, width + 1:], mask[r, width + 1:] = 0, 0
    return ids, mask, keep


def _plan(ids, mask, keep):
    return plan(ids, mask, completion_labels(ids, mask, keep))


def test_plan_groups_the_rows_by_shared_prompt_prefix():
    ids, mask, keep = _batch()
    found = _plan(ids, mask, keep)
    groups = {rows: prefix for prefix, rows in found.groups}
    assert groups == {(0, 2, 3): 39, (1, 5): 36, (4,): 39}  # every row keeps its prompt's last token
    assert found.head == 39 and found.rest == 1
    ragged, ragged_mask, keep = _ragged_batch()
    found = _plan(ragged, ragged_mask, keep)
    groups = {rows: prefix for prefix, rows in found.groups}
    assert groups[(0, 1, 2, 3)] == 30 and groups[(4,)] == 24
    assert found.rest == 12  # the longest ending after the shared 30 tokens
    placeholders, placeholder_mask, keep = _batch_with_placeholders()
    found = _plan(placeholders, placeholder_mask, keep)
    assert {rows: prefix for prefix, rows in found.groups} == {(0, 1, 2, 3): 39, (4,): 0, (5,): 0}
    assert found.group_of() == [0, 0, 0, 0, 0, 0] and found.prefixed() == [(39, (0, 1, 2, 3))]


def test_no_sharing_means_none():
    ids, mask, keep = _batch()
    assert _plan(ids[[0, 1, 4]], mask[[0, 1, 4]], keep) is None  # three different prompts: nothing to save
    assert _plan(ids[:1], mask[:1], keep) is None
    right_padded = mask.clone()
    right_padded[0, :3], right_padded[0, ids.size(1) - keep - 3:ids.size(1) - keep] = 1, 0
    assert _plan(ids, right_padded, keep) is None  # real tokens must be contiguous (TRL's layout)


@pytest.mark.parametrize("make", [_batch, _ragged_batch, _batch_with_placeholders],
                         ids=["same-prompts", "shared-beginnings", "placeholder-rows"])
def test_shared_prefix_gives_trls_logprobs_entropies_and_gradients(tiny_model_dir, make):
    model = _model(tiny_model_dir)
    ids, mask, keep = make()
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


@pytest.mark.parametrize("make", [_batch, _ragged_batch], ids=["same-prompts", "shared-beginnings"])
def test_shared_prefix_under_no_grad_matches_too(tiny_model_dir, make):
    """The reference pass (no gradients) goes the same way."""
    model = _model(tiny_model_dir)
    ids, mask, keep = make()
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


def test_rows_by_prompt_puts_rows_of_alike_prompts_together():
    from playpen.training.grpo.steps import rows_by_prompt
    prompts = torch.tensor([[1, 2], [3, 4], [1, 2], [5, 6], [3, 4], [1, 2]])
    mask = torch.ones_like(prompts)
    mask[3, 0] = 0  # same tokens, other padding: another prompt
    prompts[3] = torch.tensor([1, 2])
    batch = {"prompt_ids": prompts, "prompt_mask": mask, "advantages": torch.arange(6.0),
             "names": list("abcdef"), "num_items_in_batch": torch.tensor(9), "pixel_values": None}
    out = rows_by_prompt(batch)
    # sorted by the prompt without its padding ([1, 2] < [2] < [3, 4]), rows in order within a prompt
    assert out["names"] == list("acfdbe")
    assert out["advantages"].tolist() == [0.0, 2.0, 5.0, 3.0, 1.0, 4.0]
    assert out["prompt_ids"].tolist() == [[1, 2], [1, 2], [1, 2], [1, 2], [3, 4], [3, 4]]
    assert out["prompt_mask"][3].tolist() == [0, 1]
    assert int(out["num_items_in_batch"]) == 9 and out["pixel_values"] is None


# ----------------------------------------------------------------------------- in a GRPO run

def test_a_grpo_run_with_shared_prompts_trains_the_same_adapter(tmp_path, toy_workspace):
    """The same seeded GRPO run twice, --share-prompts on and off (micro-batches of a group,
    with the KL term's reference pass): the rows of a group shared their prompt, step 1's loss
    and gradient norm are equal, and the adapters after it agree."""
    import json
    from pathlib import Path

    from click.testing import CliRunner
    from safetensors.torch import load_file

    from playpen.cli import cli
    trainer = "grpo"
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


# ----------------------------------------------------------------------------- DPO pairs

def _pair_batch(vocab=500):
    """TRL's DPO layout: [chosen rows; rejected rows], each prompt + completion, right-padded;
    labels are the completion tokens. Pair 0's prompt has 30 tokens, pair 1's 22."""
    g = torch.Generator().manual_seed(2)
    rows, labels_of = [], []
    prompts = [torch.randint(5, vocab, (n,), generator=g) for n in (30, 22)]
    completions = [torch.randint(5, vocab, (n,), generator=g) for n in (4, 7, 5, 2)]  # chosen 0, 1; rejected 0, 1
    for i, completion in enumerate(completions):
        prompt = prompts[i % 2]
        rows.append(torch.cat([prompt, completion]))
        labels_of.append(len(prompt))
    width = max(len(r) for r in rows)
    ids = torch.zeros((4, width), dtype=torch.long)
    mask = torch.zeros_like(ids)
    labels = torch.full_like(ids, -100)
    for r, row in enumerate(rows):
        ids[r, :len(row)], mask[r, :len(row)] = row, 1
        labels[r, labels_of[r]:len(row)] = row[labels_of[r]:]
    return ids, mask, labels


def test_dpo_pairs_share_their_prompt_with_trls_outputs_and_gradients(tiny_model_dir):
    from playpen.training.shared_prefix import share_prompt_passes
    model = _model(tiny_model_dir)
    ids, mask, labels = _pair_batch()
    outputs, grads = {}, {}
    for shared in (False, True):
        model.zero_grad()
        context = share_prompt_passes(model) if shared else __import__("contextlib").nullcontext()
        with context as sharing:
            out = model(input_ids=ids, attention_mask=mask, labels=labels, fused_lm_head=True, use_cache=False)
            (out.log_probs.sum(dim=1) * torch.tensor([1.0, 2.0, -1.0, -0.5])).sum().backward()
        outputs[shared], grads[shared] = out, _lora_grads(model)
        if shared:
            assert sharing.training_rows == 4  # all four rows went through the shared path
    plain, shared = outputs[False], outputs[True]
    assert shared.log_probs.shape == plain.log_probs.shape == (4, ids.size(1) - 1)
    assert torch.allclose(shared.log_probs, plain.log_probs, atol=1e-5)  # zero outside the completions in both
    assert torch.allclose(shared.entropy, plain.entropy, atol=1e-5)
    assert torch.equal(shared.label_mask, plain.label_mask)
    assert torch.allclose(shared.loss, plain.loss, atol=1e-6)
    for name, grad in grads[False].items():
        assert torch.allclose(grads[True][name], grad, atol=1e-5, rtol=1e-4), name
    # outside the context the model's forward is TRL's again
    assert "forward" in model.get_base_model().__dict__
    again = model(input_ids=ids, attention_mask=mask, labels=labels, fused_lm_head=True, use_cache=False)
    assert torch.allclose(again.log_probs, plain.log_probs, atol=1e-6)


def test_a_dpo_run_with_shared_prompts_logs_the_same_step(tiny_workspace, tmp_path):
    import json
    from pathlib import Path

    from click.testing import CliRunner

    from playpen.cli import cli
    trainer = "dpo"
    records = Path(__file__).parent / "fixtures" / "clembench-runs-v2.0"
    steps = {}
    for share in ("true", "false"):
        models = tmp_path / f"models-{share}"
        result = CliRunner().invoke(cli, [
            "run", str(trainer), "-l", "tiny-random", "--source", "records", "--records", str(records),
            "--games", "wordle", "--max-steps", "1", "--learning-rate", "1e-3", "--no-evaluate",
            "--share-prompts", share, "--models-dir", str(models)])
        assert result.exit_code == 0, result.output
        log = (models / "dpo+lora" / "tiny-random" / "records" / "playpen-log.jsonl").read_text().splitlines()
        steps[share] = [json.loads(line) for line in log if '"train_step"' in line][0]
    assert steps["true"]["train/shared_prompt_rows"] == 2  # the pair's chosen and rejected rows
    assert steps["false"]["train/shared_prompt_rows"] == 0
    for key in ("train/loss", "train/grad_norm", "rewards/margins", "logps/chosen", "logits/rejected",
                "train/entropy"):
        assert steps["true"][key] == pytest.approx(steps["false"][key], rel=1e-4, abs=1e-6), key
