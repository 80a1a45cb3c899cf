"""The policy-gradient pieces of the trainers that run their own loop (SPAG, populations):
a sequence's token log-probabilities and the clipped surrogate loss.

They are written once here because each trainer had its own copy, and copies drift (one
divided the logits by the sampling temperature, one did not). The formulas are TRL's:
:func:`token_logprobs` is what ``trl.trainer.utils.selective_log_softmax`` returns, and
:func:`clipped_policy_loss` is ``GRPOTrainer``'s loss with ``loss_type="grpo"`` and
``beta=0`` — per sequence the mean over its tokens of ``-min(ρA, clip(ρ, 1-ε, 1+ε)A)``,
``ρ = exp(logp - logp_old)``, then the mean over sequences. tests/test_losses.py holds
both to TRL's code and to a token-by-token loop. The GRPO trainers use TRL's own loss.
"""
from __future__ import annotations

from typing import Any, Sequence

from playpen.inference.model_facts import device_of


def token_logprobs(logits, tokens, temperature: float = 1.0):
    """``log_softmax(logits / T)`` at each of ``tokens``: ``logits`` (..., V), ``tokens`` (...).
    ``T`` is the sampling temperature, so that the ratio to the sampler's log-probabilities
    is 1 for the policy that sampled."""
    import torch
    rows = torch.log_softmax(logits.float() / temperature, dim=-1)
    return rows.gather(-1, tokens.unsqueeze(-1)).squeeze(-1)


def sequence_logprobs(model, ids: Sequence[int], mask: Sequence[int], temperature: float = 1.0,
                      full: bool = False):
    """The log-probabilities of the tokens of `ids` where `mask` is 1 (the first token
    never counts: nothing predicts it), one forward pass of `model`; with ``full`` also the
    log-softmax rows at those positions (a KL over the vocabulary)."""
    import torch
    device = device_of(model)
    input_ids = torch.tensor([list(ids)], device=device)
    where = torch.tensor(list(mask)[1:], dtype=torch.bool, device=device)
    positions = torch.nonzero(where).squeeze(1)  # position t predicts token t + 1
    try:  # the vocabulary projection only where it counts (most of a game's tokens are prompt)
        logits = model(input_ids=input_ids, logits_to_keep=positions).logits[0]
    except TypeError:  # a model without logits_to_keep
        logits = model(input_ids=input_ids).logits[0, :-1][where]
    chosen = token_logprobs(logits, input_ids[0, 1:][where], temperature)
    if not full:
        return chosen
    return chosen, torch.log_softmax(logits.float() / temperature, dim=-1)


def clipped_policy_loss(logps, old_logps, advantages: Any, clip: float, mask=None):
    """``-min(ρA, clip(ρ, 1-clip, 1+clip)A)`` averaged over each sequence's tokens (where
    `mask` is 1), then over sequences. ``logps`` (gradients flow through it) and
    ``old_logps``: (T,) for one sequence or (B, T); ``advantages``: a number, or one per
    sequence."""
    import torch
    old_logps = old_logps.to(logps.device)
    ratio = torch.exp(logps - old_logps)
    advantage = torch.as_tensor(advantages, dtype=ratio.dtype, device=ratio.device)
    if ratio.dim() == 2 and advantage.dim() == 1:
        advantage = advantage[:, None]
    per_token = -torch.minimum(ratio * advantage, torch.clamp(ratio, 1.0 - clip, 1.0 + clip) * advantage)
    if mask is None:
        mask = torch.ones_like(per_token)
    mask = mask.to(per_token.dtype)
    return ((per_token * mask).sum(-1) / mask.sum(-1).clamp(min=1.0)).mean()


def clipped_fraction(logps, old_logps, clip: float) -> float:
    """The share of tokens whose ratio lies outside ``[1 - clip, 1 + clip]`` (a number to log)."""
    ratio = (logps.detach() - old_logps.to(logps.device)).exp()
    return float(((ratio < 1 - clip) | (ratio > 1 + clip)).float().mean())
