"""The shared policy-gradient pieces (playpen/training/common/losses.py, playpen/inference/logprobs.py)
against TRL's code and a token-by-token loop, and the optimizer step of the own-loop trainers
(optimization.py)."""
import math

import pytest
import torch

from playpen.inference import logprobs
from playpen.training.common import losses
from playpen.training.common.optimization import Optimization, OptimizerOptions


def test_token_logprobs_are_trls_selective_log_softmax_and_the_definition():
    from trl.trainer.utils import selective_log_softmax
    torch.manual_seed(0)
    logits, tokens = torch.randn(3, 5, 11) * 4, torch.randint(0, 11, (3, 5))
    ours = logprobs.token_logprobs(logits, tokens)
    assert torch.allclose(ours, selective_log_softmax(logits, tokens), atol=1e-6)
    for b in range(3):
        for t in range(5):
            row = logits[b, t].tolist()
            by_hand = row[tokens[b, t]] - math.log(sum(math.exp(x) for x in row))
            assert ours[b, t].item() == pytest.approx(by_hand, abs=1e-5)
    # the sampling temperature divides the logits, as the rollout's samplers do
    assert torch.allclose(logprobs.token_logprobs(logits, tokens, 0.7), selective_log_softmax(logits / 0.7, tokens),
                          atol=1e-6)


def test_sequence_logprobs_are_the_full_forward_pass_at_the_masked_tokens(tiny_pair):
    model, _ = tiny_pair
    ids, mask = [5, 17, 29, 3, 8, 41, 2], [0, 0, 0, 1, 1, 0, 1]
    ours = logprobs.sequence_logprobs(model, ids, mask, temperature=0.5)
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([ids])).logits[0]
    expected = [torch.log_softmax(logits[t - 1] / 0.5, -1)[ids[t]].item() for t in range(1, len(ids)) if mask[t]]
    assert ours.tolist() == pytest.approx(expected, abs=1e-5)


def brute_force_loss(logps, old, advantages, clip, mask):
    """GRPO's loss (TRL, loss_type="grpo", beta=0), one token at a time."""
    per_sequence = []
    for b in range(len(logps)):
        terms = []
        for t in range(len(logps[b])):
            if not mask[b][t]:
                continue
            ratio = math.exp(logps[b][t] - old[b][t])
            clipped = min(max(ratio, 1 - clip), 1 + clip)
            terms.append(-min(ratio * advantages[b], clipped * advantages[b]))
        per_sequence.append(sum(terms) / max(1, len(terms)))
    return sum(per_sequence) / len(per_sequence)


def test_the_clipped_policy_loss_is_grpos_token_by_token():
    torch.manual_seed(1)
    old = torch.randn(4, 6) - 2
    logps = (old + torch.randn(4, 6) * 0.5).requires_grad_()
    advantages = torch.tensor([1.5, -0.7, 0.0, 2.0])
    mask = torch.tensor([[1, 1, 1, 0, 0, 0], [1, 1, 1, 1, 1, 1], [0, 1, 1, 0, 0, 0], [1, 0, 0, 0, 0, 0]])
    loss = losses.clipped_policy_loss(logps, old, advantages, 0.2, mask)
    expected = brute_force_loss(logps.tolist(), old.tolist(), advantages.tolist(), 0.2, mask.tolist())
    assert loss.item() == pytest.approx(expected, rel=1e-5)
    # one sequence and a number as the advantage: the same as a batch of one
    one = losses.clipped_policy_loss(logps[1], old[1], -0.7, 0.2)
    assert one.item() == pytest.approx(brute_force_loss([logps[1].tolist()], [old[1].tolist()], [-0.7], 0.2,
                                                        [[1] * 6]), rel=1e-5)
    # a clipped token in the advantage's direction takes no gradient, an unclipped one does
    loss.backward()
    ratio = (logps - old).exp().detach()
    for b, t in ((b, t) for b in range(4) for t in range(6) if mask[b, t] and advantages[b] != 0):
        outside = ratio[b, t] > 1.2 if advantages[b] > 0 else ratio[b, t] < 0.8
        assert (logps.grad[b, t] == 0) == bool(outside), (b, t)


def test_an_optimization_step_clips_schedules_and_keeps_its_state(tmp_path):
    torch.manual_seed(2)
    model = torch.nn.Linear(4, 1)
    options = OptimizerOptions(lr_scheduler_type="linear", warmup_ratio=0.0, max_grad_norm=0.5)
    run = Optimization(list(model.parameters()), 0.1, total_steps=4, options=options)
    (model(torch.randn(8, 4)).sum() * 100).backward()
    norm = float(torch.nn.utils.get_total_norm([p.grad for p in model.parameters()]))
    metrics = run.step(model, 1)
    assert metrics["train/grad_norm"] == pytest.approx(norm) and norm > 0.5
    assert metrics["train/learning_rate"] == pytest.approx(0.1) and run.learning_rate == pytest.approx(0.075)
    run.save(tmp_path)
    again = Optimization(list(model.parameters()), 0.1, total_steps=4, options=options)
    again.load(tmp_path)
    assert again.learning_rate == pytest.approx(0.075)
    assert int(again.optimizer.state_dict()["state"][0]["step"]) == 1
    # a step with a NaN gradient is dropped: the weights stay
    before = [p.detach().clone() for p in model.parameters()]
    (model(torch.randn(2, 4)).sum() * float("nan")).backward()
    again.step(model, 2)
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters()))
    assert again.guard.skipped == 1
