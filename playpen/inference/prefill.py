"""Prefill over kept KV caches: each row's prompt after the part its cache already covers,
in chunks of rows of similar length. Both decode loops start from what this returns (the
rows' last logits and their per-layer keys and values over the whole prompt)."""
from __future__ import annotations

import math

from playpen.inference.kvcache import PrefillCounts, stacked_cache
from playpen.inference.model_facts import device_of
from playpen.inference.transformers_compat import cache_kwarg

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


def prefill(model, cached: list[list], suffixes: list[list[int]], adapters: list, counts: PrefillCounts,
            want_logits: bool = True):
    """Run ``suffixes`` after their rows' cached layers: [cached][padding][suffix] per row,
    padding masked, positions from the mask. Returns each row's last logits (or Nones) and
    its layers over cached + suffix (real positions only)."""
    logits, cache, width = _forward(model, cached, suffixes, adapters, counts, want_logits)
    return logits, [_row_layers(cache, row, layers, len(suffix), width)
                    for row, (layers, suffix) in enumerate(zip(cached, suffixes))]


def prefill_prefixes(model, prompts: list[list[int]], groups, adapters: list, counts: PrefillCounts):
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
                               [adapters[r] for r in firsts], counts, want_logits=False)
    counts.reused += sum(length * (len(rows) - 1) for length, rows in groups)
    return cache, width


def prefix_layers(cache, width: int, groups) -> list[list]:
    """Per group of :func:`prefill_prefixes`, its prefix's layers (real positions only)."""
    return [_row_layers(cache, g, [], length, width) for g, (length, _) in enumerate(groups)]


def _forward(model, cached: list[list], suffixes: list[list[int]], adapters: list, counts: PrefillCounts,
             want_logits: bool):
    """The one padded prefill forward: the rows' last logits (or Nones), the cache over
    [cached][padding][suffix] and its width."""
    import torch
    device = device_of(model)
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
              cache_kwarg(model): cache, "use_cache": True, **forward_kwargs(adapters)}
    try:  # the last position's logits only, not the vocabulary for every prompt position
        out = model(**inputs, logits_to_keep=1)
    except TypeError:  # a model without logits_to_keep
        cache = stacked_cache(model, cached, head)
        out = model(**dict(inputs, **{cache_kwarg(model): cache}))
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
