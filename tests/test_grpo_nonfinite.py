"""Training steps that must not poison the weights: GRPO's KL term at masked completion
positions (the game master's tokens inside a multi-turn completion) stays finite however far
the policy moves, a step with non-finite gradients leaves the weights as they were (every
trainer: playpen's trainer callback; SPAG's loop), and sampling from weights that diverged
is one clear error, not a device-side assert."""
import json

import pytest

from playpen.training.common.finite import NonFiniteGuard
from playpen.training.grpo.steps import MASKED_REFERENCE_LOGP, masked_reference


def test_masked_reference_changes_only_masked_positions():
    import torch
    ref = torch.tensor([[-1.0, -2.0, -3.0, -4.0], [-5.0, -6.0, -7.0, -8.0]])
    inputs = {"ref_per_token_logps": ref, "completion_mask": torch.tensor([[1, 1, 1, 0], [1, 1, 1, 1]]),
              "tool_mask": torch.tensor([[1, 0, 1, 1], [1, 1, 0, 1]])}
    out = masked_reference(inputs)
    m = MASKED_REFERENCE_LOGP
    assert out["ref_per_token_logps"].tolist() == [[-1.0, m, -3.0, m], [-5.0, -6.0, m, -8.0]]
    assert inputs["ref_per_token_logps"] is ref and ref[0, 1] == -2.0  # the caller's tensors are untouched
    # without a tool mask: the completion mask alone; without a KL term: nothing to do
    only = masked_reference({"ref_per_token_logps": ref, "completion_mask": torch.tensor([[1, 1, 0, 0]] * 2)})
    assert only["ref_per_token_logps"][:, 2:].eq(m).all() and only["ref_per_token_logps"][:, :2].eq(ref[:, :2]).all()
    plain = {"completion_mask": torch.ones(1, 2)}
    assert masked_reference(plain) is plain


@pytest.fixture
def grpo_trainer(tiny_pair, tmp_path):
    """A real PlaypenGRPOTrainer (TRL's GRPOTrainer) with a KL term on the tiny random model."""
    from datasets import Dataset
    from peft import LoraConfig, get_peft_model
    from playpen.training.trl_trainers import PlaypenGRPOConfig, PlaypenGRPOTrainer
    model, tokenizer = tiny_pair
    model = get_peft_model(model, LoraConfig(r=4, lora_alpha=8, target_modules="all-linear",
                                             init_lora_weights=False))
    args = PlaypenGRPOConfig(output_dir=str(tmp_path / "out"), beta=0.1, num_generations=2, max_steps=1,
                      per_device_train_batch_size=2, report_to=[], use_cpu=True, logging_steps=1,
                      disable_tqdm=True, max_completion_length=4, learning_rate=1e-2)

    def by_position(completions, **kwargs):  # a group's two rows differ: advantages are not 0
        return [float(i) for i in range(len(completions))]
    trainer = PlaypenGRPOTrainer(model=model, reward_funcs=[by_position],
                                 args=args, train_dataset=Dataset.from_dict({"prompt": ["a", "b"]}),
                                 processing_class=tokenizer)
    yield trainer
    model.unload()


def kl_inputs(ref_at_masked: float):
    """One multi-turn completion: the learner's tokens, then the game master's (tool mask 0),
    then the learner's again; the reference log-prob of the masked tokens as given."""
    import torch
    tool_mask = torch.tensor([[1, 1, 0, 0, 0, 1]])
    ref = torch.full((1, 6), -2.0).masked_fill(tool_mask == 0, ref_at_masked)
    return {"prompt_ids": torch.tensor([[5, 6, 7]]), "prompt_mask": torch.ones(1, 3, dtype=torch.long),
            "completion_ids": torch.tensor([[8, 9, 10, 11, 12, 13]]),
            "completion_mask": torch.ones(1, 6, dtype=torch.long), "tool_mask": tool_mask,
            "advantages": torch.tensor([1.0]), "ref_per_token_logps": ref,
            "num_items_in_batch": torch.tensor(3.0)}  # TRL's default loss (dapo) divides by the counted tokens


def test_the_kl_term_stays_finite_where_the_policy_fell_far_below_the_reference(grpo_trainer):
    """ref - logp > 88 at a game master's token: exp overflows; TRL's own loss is NaN there,
    playpen's is the loss of the counted positions alone, with finite gradients."""
    import torch
    from trl import GRPOTrainer
    trainer = grpo_trainer
    trainer.current_gradient_accumulation_steps = 1  # what the training loop sets before a step
    model = trainer.model
    model.train()
    far = kl_inputs(200.0)  # as if the policy's log-prob of those tokens were 200 below the reference's
    assert torch.isnan(GRPOTrainer._compute_loss(trainer, model, far))  # the failure this guards against
    loss = trainer._compute_loss(model, far)
    assert torch.isfinite(loss)
    loss.backward()
    grads = [p.grad for p in model.parameters() if p.requires_grad]
    assert all(g is not None and torch.isfinite(g).all() for g in grads)
    assert any(g.abs().sum() > 0 for g in grads)
    # the positions the loss counts decide it: a normal reference at the masked tokens gives the same loss
    near = GRPOTrainer._compute_loss(trainer, model, kl_inputs(-2.0))
    assert float(loss) == pytest.approx(float(near), rel=1e-5, abs=1e-7)


def test_a_step_with_nonfinite_gradients_leaves_the_weights_and_stops_after_three(tiny_pair, capsys):
    import torch
    model, _ = tiny_pair
    weight = next(model.parameters())
    guard = NonFiniteGuard(limit=3)
    assert guard.check(model, 0) is False and guard.metrics() == {}  # no gradients yet: nothing to check
    weight.grad = torch.ones_like(weight)
    assert guard.check(model, 1) is False
    assert weight.grad is not None and guard.skipped == 0 and guard.metrics() == {}
    for step in (2, 3):
        weight.grad = torch.ones_like(weight)
        weight.grad[0, 0] = float("nan")  # one NaN anywhere is enough
        assert guard.check(model, step) is True
        assert all(p.grad is None for p in model.parameters())
        assert not guard.stop
    # a finite step in between resets the count of steps in a row, not the total
    weight.grad = torch.ones_like(weight)
    assert guard.check(model, 4) is False and guard.in_a_row == 0 and guard.skipped == 2
    optimizer = torch.optim.AdamW([weight], lr=0.1)
    optimizer.zero_grad()
    before = weight.detach().clone()
    for step in (5, 6, 7):
        weight.grad = torch.full_like(weight, float("inf"))
        guard.check(model, step)
        optimizer.step()  # what the trainer does next: nothing for parameters without a gradient
    assert torch.equal(weight.detach(), before)
    assert guard.stop and guard.skipped == 5 and guard.metrics() == {"train/skipped_steps": 5}
    out = capsys.readouterr().out
    assert "step 2: the gradient norm is nan" in out and "3 steps in a row" in out


def test_sampling_from_diverged_weights_is_one_clear_error(tiny_pair):
    """NaN weights: both decoding paths (the KV-cache engine and HF generate) raise
    DivergedModelError before sampling."""
    import torch

    from playpen.errors import DivergedModelError
    from playpen.inference.engine import generate
    from playpen.inference.kvcache import KVCacheStore
    from playpen.rollouts.types import SamplingConfig
    model, tokenizer = tiny_pair
    head = model.get_output_embeddings().weight
    saved = head.detach().clone()
    try:
        with torch.no_grad():
            head[0, 0] = float("nan")
        sampling = SamplingConfig(temperature=1.0, max_new_tokens=3)
        with pytest.raises(DivergedModelError, match="NaN"):
            generate(model, tokenizer, [[5, 6, 7]], sampling)
        with pytest.raises(DivergedModelError, match="diverged"):
            generate(model, tokenizer, [[5, 6, 7]], sampling, cache=KVCacheStore(max_bytes=10**8), conversations=["c"])
    finally:
        with torch.no_grad():
            head.copy_(saved)
    assert len(generate(model, tokenizer, [[5, 6, 7]], SamplingConfig(temperature=1.0, max_new_tokens=3))) == 1


def test_a_real_grpo_run_drops_a_nan_step_and_keeps_training(grpo_trainer, tmp_path):
    """TRL's own training loop with playpen's trainer callback: step 1's gradients are made
    NaN (a hook on one LoRA weight); the weights stay finite, the run's log counts the
    skipped step, step 2 trains."""
    import torch

    from playpen.callbacks import CallbackList
    from playpen.training.common.lifecycle import make_trainer_callback
    trainer = grpo_trainer
    trainer.add_callback(make_trainer_callback(CallbackList(), tmp_path / "run"))
    trainer.args.max_steps = 2
    model = trainer.model
    lora = [p for n, p in model.named_parameters() if p.requires_grad and "lora_B" in n]
    calls = []

    def poison(grad):
        calls.append(int(trainer.state.global_step))
        return grad * float("nan") if trainer.state.global_step == 0 else grad
    handle = lora[0].register_hook(poison)
    before = [p.detach().clone() for p in lora]
    try:
        trainer.train()
    finally:
        handle.remove()
    assert calls and 0 in calls and 1 in calls  # both steps ran their backward
    assert all(torch.isfinite(p).all() for p in model.parameters())
    log = [json.loads(line) for line in (tmp_path / "run" / "playpen-log.jsonl").read_text().splitlines()]
    steps = [row for row in log if row.get("event") == "train_step"]
    assert [row["step"] for row in steps] == [1, 2]
    assert [row["train/skipped_steps"] for row in steps] == [1, 1]
    assert steps[1]["train/grad_norm"] > 0
    assert any(not torch.equal(b, p.detach()) for b, p in zip(before, lora))  # step 2 changed the adapter
