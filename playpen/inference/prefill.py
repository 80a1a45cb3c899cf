"""Prefill over kept KV caches: each row's prompt after the part its cache already covers,
in chunks of rows of similar length. Both decode loops start from what this returns (the
rows' last logits and their per-layer keys and values over the whole prompt), through
:func:`prefill_then_decode`, the part of playpen's engine the static and dynamic loops share:

1. each row takes the longest kept prefix of its prompt (its own conversation's cache, or
   another's: a forked episode continues its parent's);
2. rows without one share the prefill of a prefix they have in common
   (:func:`playpen.inference.prefixes.plan_prefixes`, the planner training uses too);
3. the rest of every prompt is prefilled in chunks of similar length;
4. the rows decode together (the loop's ``decode``), each leaving at its EOS or budget, its
   cache put back.
"""
from __future__ import annotations

import math
from contextlib import nullcontext
from typing import Any, Callable, Hashable, Optional, Sequence

from playpen.inference.kvcache import MIN_REUSED_TOKENS, KVCacheStore, PrefillCounts, stacked_cache
from playpen.inference.mixed_lora import mixed_lora
from playpen.inference.model_facts import ModelFacts
from playpen.inference.prefixes import plan_prefixes
from playpen.inference.types import Generation, SamplingConfig

# Prefill cost of one more forward pass, in token positions, when rows are split into
# chunks of similar suffix length (a chunk computes rows x its longest suffix).
CHUNK_OVERHEAD_POSITIONS = 32


def chunks(lengths: list[int], max_rows: int) -> list[list[int]]:
    """Rows split into chunks (sorted by suffix length) minimising computed positions:
    each chunk costs rows x its longest suffix plus one pass's overhead."""
    order = sorted(range(len(lengths)), key=lambda r: lengths[r])
    best = [0.0] + [math.inf] * len(order)
    start = [0] * (len(order) + 1)
    for j in range(1, len(order) + 1):
        for i in range(max(0, j - max(1, max_rows)), j):  # the chunk order[i:j]
            cost = best[i] + (j - i) * lengths[order[j - 1]] + CHUNK_OVERHEAD_POSITIONS
            if cost < best[j]:
                best[j], start[j] = cost, i
    out, j = [], len(order)
    while j > 0:
        out.append(order[start[j]:j])
        j = start[j]
    return out[::-1]


def forward_kwargs(adapters: list) -> dict:
    """The keyword that gives every row its peft adapter (none when no row names one)."""
    return {"adapter_names": list(adapters)} if any(a is not None for a in adapters) else {}


def prefill_then_decode(decode: Callable, model: Any, tokenizer: Any, prompts: Sequence[Sequence[int]],
                        sampling: SamplingConfig, facts: ModelFacts, adapter_names: Optional[Sequence[Optional[str]]],
                        budgets: Optional[Sequence[int]], counts: PrefillCounts, store: KVCacheStore,
                        conversations: Sequence[Hashable]) -> list[Generation]:
    """One continuation per prompt, reusing and updating ``store`` (see the module doc), decoded
    by ``decode`` (:func:`playpen.inference.dynamic.decode`'s contract).

    ``conversations[i]`` names the conversation prompt i continues; ``budgets[i]`` is its
    most new tokens (default ``sampling.max_new_tokens``); ``adapter_names[i]`` the peft
    adapter of row i, passed to every forward pass (None: the model as it is).
    """
    import torch

    n = len(prompts)
    if n == 0:
        return []
    if any(len(p) == 0 for p in prompts):
        raise ValueError("cannot generate from an empty prompt")
    prompts = [list(p) for p in prompts]
    budgets = list(budgets) if budgets is not None else [sampling.max_new_tokens] * n
    adapters = list(adapter_names) if adapter_names is not None else [None] * n
    # a cache belongs to the model object and the adapter that computed it
    owners = [(id(model), adapter) for adapter in adapters]
    was_training = model.training
    model.eval()
    mixed = mixed_lora(model) if any(a is not None for a in adapters) else nullcontext()
    try:
        with torch.no_grad(), mixed:  # rows of several LoRA adapters: see playpen.inference.mixed_lora
            # 1. what each row already has: its conversation's cache, or another's prefix
            known = [store.lookup(conversations[r], owners[r], prompts[r]) for r in range(n)]
            # 2. rows without one: a prefix shared within the batch is prefilled once
            counts.reused += sum(length for length, _ in known)
            misses = [r for r in range(n) if known[r][0] == 0]
            if len(misses) > 1:
                plan = plan_prefixes([prompts[r] for r in misses], [str(adapters[r]) for r in misses])
                groups = [(prefix, [misses[i] for i in rows]) for prefix, rows in plan.groups
                          if len(rows) > 1 and prefix >= MIN_REUSED_TOKENS]
                if groups:
                    shared, width = prefill_prefixes(model, prompts, groups, adapters, counts, facts)
                    for (prefix, rows), layers in zip(groups, prefix_layers(shared, width, groups)):
                        for r in rows:
                            known[r] = (prefix, layers)
                    del shared
            # 3. the rest of every prompt, in chunks of similar length
            logits: list = [None] * n
            full: list = [None] * n
            for chunk in chunks([len(prompts[r]) - known[r][0] for r in range(n)], sampling.max_batch_size):
                chunk_logits, chunk_layers = prefill(
                    model, [known[r][1] or [] for r in chunk], [prompts[r][known[r][0]:] for r in chunk],
                    [adapters[r] for r in chunk], counts, facts=facts)
                for r, row_logits, layers in zip(chunk, chunk_logits, chunk_layers):
                    logits[r], full[r] = row_logits, layers
            del known
            # 4. decode, all rows together; a row leaves at its EOS or its budget
            return decode(model, tokenizer, prompts, torch.stack(logits), full, sampling, budgets, adapters,
                          store, conversations, owners, facts=facts)
    finally:
        if was_training:
            model.train()


def prefill(model, cached: list[list], suffixes: list[list[int]], adapters: list, counts: PrefillCounts,
            want_logits: bool = True, facts: Optional[ModelFacts] = None):
    """Run ``suffixes`` after their rows' cached layers: [cached][padding][suffix] per row,
    padding masked, positions from the mask. Returns each row's last logits (or Nones) and
    its layers over cached + suffix (real positions only). ``facts``: the door's
    :class:`~playpen.inference.model_facts.ModelFacts` of this call (None: read here)."""
    facts = facts if facts is not None else ModelFacts(model)
    logits, cache, width = _forward(model, cached, suffixes, adapters, counts, want_logits, facts)
    return logits, [_row_layers(cache, row, layers, len(suffix), width)
                    for row, (layers, suffix) in enumerate(zip(cached, suffixes))]


def prefill_prefixes(model, prompts: list[list[int]], groups, adapters: list, counts: PrefillCounts,
                     facts: ModelFacts):
    """The one prefix sharer: each group's common prefix (``groups``: ``(length, rows)``, as
    :func:`playpen.inference.prefixes.plan_prefixes` plans them, the caller keeping the groups
    worth it) run through the model once, in one batched forward, each with its first row's
    adapter; the group's other rows reuse it (counted in ``counts.reused``). Returns the
    forward's transformers cache, row g holding group g's prefix right-aligned in ``width``
    positions (padding to the left, to be masked), and ``width``. The engine cuts its rows out
    (:func:`prefix_layers`); the fallback hands the cache to ``model.generate`` as it is,
    whatever kind of cache the model keeps."""
    firsts = [rows[0] for _, rows in groups]
    _, cache, width = _forward(model, [[] for _ in groups], [list(prompts[r][:length]) for r, (length, _) in
                                                               zip(firsts, groups)],
                               [adapters[r] for r in firsts], counts, False, facts)
    counts.reused += sum(length * (len(rows) - 1) for length, rows in groups)
    return cache, width


def prefix_layers(cache, width: int, groups) -> list[list]:
    """Per group of :func:`prefill_prefixes`, its prefix's layers (real positions only)."""
    return [_row_layers(cache, g, [], length, width) for g, (length, _) in enumerate(groups)]


def _forward(model, cached: list[list], suffixes: list[list[int]], adapters: list, counts: PrefillCounts,
             want_logits: bool, facts: ModelFacts):
    """The one padded prefill forward: the rows' last logits (or Nones), the cache over
    [cached][padding][suffix] and its width."""
    import torch
    device = facts.device
    lengths = [layers[0][0].shape[1] if layers else 0 for layers in cached]
    head, tail = max(lengths), max(map(len, suffixes))
    rows = len(suffixes)
    ids = torch.zeros((rows, tail), dtype=torch.long)
    mask = torch.zeros((rows, head + tail), dtype=torch.long)
    for row, (length, suffix) in enumerate(zip(lengths, suffixes)):
        mask[row, head - length:head] = 1
        ids[row, tail - len(suffix):] = torch.tensor(suffix, dtype=torch.long)
        mask[row, head + tail - len(suffix):] = 1
    positions = (mask.cumsum(-1) - 1).clamp(min=0)[:, head:]
    cache = stacked_cache(model, cached, head)
    inputs = {"input_ids": ids.to(device), "attention_mask": mask.to(device), "position_ids": positions.to(device),
              facts.cache_key: cache, "use_cache": True, **forward_kwargs(adapters)}
    try:  # the last position's logits only, not the vocabulary for every prompt position
        out = model(**inputs, logits_to_keep=1)
    except TypeError:  # a model without logits_to_keep
        cache = stacked_cache(model, cached, head)
        out = model(**dict(inputs, **{facts.cache_key: cache}))
    counts.prefilled += sum(map(len, suffixes))
    counts.computed += rows * tail
    logits = out.logits[:, -1].float() if want_logits else [None] * rows
    return logits, cache, head + tail


def _row_layers(cache, row: int, layers: list, new: int, width: int) -> list:
    """Row ``row``'s layers: its kept ``layers`` followed by the ``new`` positions the forward
    added (the last ones of ``width``)."""
    import torch
    out = []
    for index, layer in enumerate(cache.layers):
        k, v = layer.keys[row, :, width - new:], layer.values[row, :, width - new:]
        if layers:
            k, v = torch.cat([layers[index][0], k], dim=1), torch.cat([layers[index][1], v], dim=1)
        else:
            k, v = k.clone(), v.clone()
        out.append((k, v))
    return out
