"""Choosing the next token from a step's logits: greedy, or sampled after temperature,
top-k and top-p; and the check that refuses logits a diverged model produced."""
from __future__ import annotations

from playpen.errors import DivergedModelError
from playpen.inference.types import SamplingConfig


def check_finite_scores(scores) -> None:
    """Refuse to sample from next-token scores that hold NaN (weights that diverged): one
    clear error instead of torch's sampling error on a CPU or a device-side assert, which
    ends the process, on a GPU."""
    import torch
    if bool(torch.isnan(scores).any()):
        raise DivergedModelError(
            "the model's next-token scores are NaN: its weights have diverged (a training step with non-finite "
            "gradients or too high a learning rate); resume from an earlier checkpoint or lower "
            "--learning-rate")


def choose_tokens(logits, sampling: SamplingConfig, check_finite: bool = True):
    """The next token of each row: greedy at temperature 0, else sampled after temperature,
    top-k, then top-p (the order of transformers' generate). Sampling draws
    ``argmax(p / E)`` with E ~ Exp(1) per token, which picks token i with probability p_i
    (the exponential race) in two vocabulary-wide passes, where ``torch.multinomial`` walks
    each row's cumulative sum (slow for 150k-token vocabularies on a GPU).
    ``check_finite`` False: the caller checks the logits for NaN itself (one host sync less)."""
    import torch
    if check_finite:
        check_finite_scores(logits)
    if not sampling.temperature or sampling.temperature <= 0:
        return torch.argmax(logits, dim=-1)
    scores = logits / sampling.temperature
    if sampling.top_k:
        k = min(int(sampling.top_k), scores.shape[-1])
        threshold = torch.topk(scores, k, dim=-1).values[..., -1:]
        scores = scores.masked_fill(scores < threshold, -float("inf"))
    if sampling.top_p is not None and sampling.top_p < 1.0:
        ascending, indices = torch.sort(scores, descending=False)
        cumulative = ascending.softmax(-1).cumsum(-1)
        drop = cumulative <= (1 - sampling.top_p)
        drop[..., -1:] = False  # always keep the most likely token
        scores = scores.masked_fill(drop.scatter(1, indices, drop), -float("inf"))
    probs = torch.softmax(scores, dim=-1)
    return torch.argmax(probs / torch.empty_like(probs).exponential_(), dim=-1)
