"""A sequence's token log-probabilities under a model, in one forward pass: what the trainers
that run their own loop (SPAG, populations, the SFT anchor) train on and what
:mod:`playpen.evaluation.retention` measures drift with; and, per decoding step, what playpen's
decode loops (:mod:`~playpen.inference.dynamic`, :mod:`~playpen.inference.static`) record of the
tokens they sample.

Written once because each trainer had its own copy, and copies drift (one divided the logits
by the sampling temperature, one did not). :func:`token_logprobs` is what
``trl.trainer.utils.selective_log_softmax`` returns (tests/test_losses.py holds it to TRL's
code and to a token-by-token loop).
"""
from __future__ import annotations

from typing import Sequence

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
