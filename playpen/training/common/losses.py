"""The policy-gradient pieces of the trainers that run their own loop (SPAG, populations):
the clipped surrogate loss (a sequence's token log-probabilities:
:mod:`playpen.inference.logprobs`).

They are written once here because each trainer had its own copy, and copies drift (one
divided the logits by the sampling temperature, one did not). The formulas are TRL's:
:func:`clipped_policy_loss` is ``GRPOTrainer``'s loss with ``loss_type="grpo"`` and
``beta=0`` — per sequence the mean over its tokens of ``-min(ρA, clip(ρ, 1-ε, 1+ε)A)``,
``ρ = exp(logp - logp_old)``, then the mean over sequences. tests/test_losses.py holds
both to TRL's code and to a token-by-token loop. The GRPO trainers use TRL's own loss.
"""
from __future__ import annotations

from typing import Any



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
