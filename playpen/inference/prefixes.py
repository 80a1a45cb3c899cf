"""Decoding primitives shared by :mod:`playpen.inference.engine` (batched ``generate``)
and :mod:`playpen.inference.kvcache` (the decode loop over kept KV caches): a generated turn,
the ids that end one, the model's device, and grouping prompts by shared prefix."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Optional, Sequence

if TYPE_CHECKING:
    from playpen.rollouts.types import SamplingConfig


@dataclass(frozen=True)
class Generation:
    """One generated turn."""

    token_ids: tuple[int, ...]
    logprobs: tuple[float, ...]
    text: str
    finished: bool  # ended with an EOS (False: cut at max_new_tokens)


def eos_token_ids(model: Any, tokenizer: Any) -> list[int]:
    """Every id that ends a turn: the generation config's EOS ids and the tokenizer's."""
    ids: list[int] = []
    configured = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
    if isinstance(configured, int):
        ids.append(configured)
    elif configured:
        ids.extend(int(i) for i in configured)
    if tokenizer.eos_token_id is not None and tokenizer.eos_token_id not in ids:
        ids.append(tokenizer.eos_token_id)
    if not ids:
        raise ValueError("neither the model's generation_config nor the tokenizer defines an EOS token")
    return ids


def device_of(model):
    """The device of the model's (first) parameters: where its inputs go."""
    return next(model.parameters()).device


def cache_kwarg(model) -> str:
    """The keyword that hands a KV cache to the model's forward and generate: ``cache`` in
    transformers releases that renamed it (``past_key_values`` is deprecated there and warns
    on every call), ``past_key_values`` before. Read from the forward of the model under any
    peft wrapper, whose own forward takes ``**kwargs``."""
    import inspect
    unwrap = getattr(model, "get_base_model", None)  # a peft model
    base = unwrap() if callable(unwrap) else model
    name = _CACHE_KWARG.get(type(base))
    if name is None:
        try:
            name = "cache" if "cache" in inspect.signature(type(base).forward).parameters else "past_key_values"
        except (TypeError, ValueError):
            name = "past_key_values"
        _CACHE_KWARG[type(base)] = name
    return name


_CACHE_KWARG: dict = {}


def _common(a: Sequence[int], b: Sequence[int]) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


@dataclass(frozen=True)
class PrefixPlan:
    """Rows grouped by shared prefix: ``groups[g] = (prefix_length, row indices)``."""

    groups: tuple[tuple[int, tuple[int, ...]], ...]

    def group_of(self, row: int) -> int:
        return next(g for g, (_, rows) in enumerate(self.groups) if row in rows)

    def prefix_of(self, row: int) -> int:
        return self.groups[self.group_of(row)][0]


def plan_prefixes(prompts: Sequence[Sequence[int]], keys: Optional[Sequence[str]] = None) -> PrefixPlan:
    """Contiguous groups (in sorted order) minimising prefilled tokens: a group's prefix
    is prefilled once, the rest of each of its prompts once per row. Every row keeps at
    least its last token for the generate call. Rows with different ``keys`` (their
    adapters: a KV cache belongs to one adapter) share no prefix."""
    keys = list(keys) if keys is not None else [""] * len(prompts)
    order = sorted(range(len(prompts)), key=lambda i: (keys[i], list(prompts[i])))
    lengths = [len(prompts[i]) for i in order]
    adjacent = [_common(prompts[a], prompts[b]) if keys[a] == keys[b] else 0 for a, b in zip(order, order[1:])]
    best = [0.0] + [math.inf] * len(order)
    choice = [(0, 0)] * (len(order) + 1)
    for j in range(1, len(order) + 1):
        prefix, total = lengths[j - 1] - 1, 0
        for i in range(j, 0, -1):  # the group order[i-1 .. j-1]
            if i < j:
                prefix = min(prefix, adjacent[i - 1], lengths[i - 1] - 1)
            total += lengths[i - 1]
            cost = best[i - 1] + prefix + total - (j - i + 1) * prefix
            if cost < best[j]:
                best[j], choice[j] = cost, (i, prefix)
    groups, j = [], len(order)
    while j > 0:
        i, prefix = choice[j]
        groups.append((prefix, tuple(sorted(order[i - 1:j]))))
        j = i - 1
    return PrefixPlan(tuple(sorted(groups, key=lambda g: g[1][0])))


def check_finite_scores(scores) -> None:
    """Refuse to sample from next-token scores that hold NaN (weights that diverged): one
    clear error instead of torch's sampling error on a CPU or a device-side assert, which
    ends the process, on a GPU."""
    import torch
    if bool(torch.isnan(scores).any()):
        from playpen.errors import DivergedModelError
        raise DivergedModelError(
            "the model's next-token scores are NaN: its weights have diverged (a training step with non-finite "
            "gradients or too high a learning rate); resume from an earlier checkpoint or lower "
            "--learning-rate")

def supports_kv_reuse(model: Any) -> bool:
    """Whether the model's cache is plain per-layer keys and values (no sliding window,
    no static or quantized layers), which :func:`generate_cached` can cut and stack."""
    from transformers import DynamicCache
    from transformers.cache_utils import DynamicLayer
    try:
        cache = DynamicCache(config=model.config)
    except Exception:  # noqa: BLE001 - a config transformers cannot map to cache layers
        return False
    return bool(cache.layers) and all(type(layer) is DynamicLayer for layer in cache.layers)


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
