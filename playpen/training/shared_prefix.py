"""One pass over a prompt that several rows of a GRPO micro-batch share.

The rows of a GRPO group are episodes of one instance, and the learner's first turn is
often the same in all of them up to its reply: a referencegame follower reads one prompt
of ~310 tokens and answers in ~5, eight times per group. TRL's training forward runs
every row in full, so eight times the same prompt — with the activations of each kept
for the backward pass. Here the rows of a micro-batch whose prompt columns agree token
for token (and padding for padding) run that prompt once: the prompt's forward pass
gives a KV cache with the autograd graph attached, the cache is indexed out to one entry
per row (``index_select``, differentiable: the backward pass sums the rows' gradients
into the one prompt pass), and one call over the rows' remaining tokens scores the
completions against it.

The result is the same computation: attention is causal, so the prompt's keys and values
do not depend on what follows; position ids continue from the cache (TRL's forward gives
every column its index, padding included, and so does this split); the completion
log-probs are those of TRL's fused LM head, called with the same labels. What differs is
floating-point summation order (tests: log-probs and LoRA gradients equal to 1e-5).

Used by :class:`~playpen.training.grpo_steps` for the training forward and the reference
pass, single-process runs only (a data-parallel wrapper expects one forward per backward),
without activation checkpointing (which drops caches), for text-only models.
"""
from __future__ import annotations

from typing import Optional

# fewer shared prompt columns than this: the second call's overhead is not worth it
MIN_SHARED_COLUMNS = 16


def prefix_groups(input_ids, attention_mask, logits_to_keep: int):
    """``(k, first, inverse)`` when rows of the batch agree on their first ``k`` columns
    (tokens and attention mask), ``k`` = every prompt column but the last (the last one's
    output scores the first completion token, so it runs with the completions); ``first``
    indexes one row per distinct prefix and ``inverse`` maps every row to its prefix.
    None when no two rows share one (or the prompt is shorter than MIN_SHARED_COLUMNS)."""
    import torch
    k = input_ids.size(1) - logits_to_keep - 1
    if k < MIN_SHARED_COLUMNS or input_ids.size(0) < 2:
        return None
    key = torch.cat([input_ids[:, :k], attention_mask[:, :k].to(input_ids.dtype)], dim=1)
    distinct, inverse = torch.unique(key, dim=0, return_inverse=True)
    if distinct.size(0) == key.size(0):
        return None
    rows = torch.arange(key.size(0), device=key.device)
    # the first row of each distinct prefix (scatter_reduce "amin" over the rows mapped to it)
    first = torch.full((distinct.size(0),), key.size(0), dtype=rows.dtype, device=key.device)
    first = first.scatter_reduce(0, inverse, rows, reduce="amin")
    return k, first, inverse


def _cache_of(outputs):
    cache = getattr(outputs, "cache", None)  # transformers >= 5.24
    return cache if cache is not None else getattr(outputs, "past_key_values", None)


def _cache_kwarg(model) -> str:
    import inspect
    base = model
    for attr in ("get_base_model",):  # a PEFT model: the wrapped transformers model's signature
        if hasattr(base, attr):
            base = getattr(base, attr)()
    try:
        params = inspect.signature(type(base).forward).parameters
    except (TypeError, ValueError):
        return "past_key_values"
    return "cache" if "cache" in params else "past_key_values"


def shared_prefix_logps(model, input_ids, attention_mask, logits_to_keep: int,
                        compute_entropy: bool = False) -> Optional[tuple]:
    """``(log_probs, entropies)`` of the last ``logits_to_keep`` tokens of every row, as
    TRL's fused-LM-head forward gives them (``model`` patched by TRL's
    ``add_fused_lm_head``), with every distinct prompt prefix run once; None when no two
    rows share one (the caller runs its usual forward)."""
    groups = prefix_groups(input_ids, attention_mask, logits_to_keep)
    if groups is None:
        return None
    k, first, inverse = groups
    # the distinct prefixes, once; only the last position's logits are computed (not used)
    prefix = model(input_ids=input_ids[first, :k], attention_mask=attention_mask[first, :k], use_cache=True,
                   logits_to_keep=1)
    cache = _cache_of(prefix)
    if cache is None or not hasattr(cache, "reorder_cache"):
        return None
    cache.reorder_cache(inverse)  # one cache entry per row: index_select, gradients flow back
    labels = input_ids.masked_fill(attention_mask == 0, -100)
    labels[:, :-logits_to_keep] = -100
    outputs = model(input_ids=input_ids[:, k:], attention_mask=attention_mask, labels=labels[:, k:],
                    fused_lm_head=True, **{_cache_kwarg(model): cache})
    logps = outputs.log_probs[:, -logits_to_keep:]
    entropies = outputs.entropy[:, -logits_to_keep:] if compute_entropy else None
    return logps, entropies
