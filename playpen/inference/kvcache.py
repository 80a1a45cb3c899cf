"""Conversations' KV caches kept between turns, and the decode loop that uses them.

A multi-turn episode's learner prompt is its previous prompt, the tokens it generated and
the game's reply. :class:`KVCacheStore` keeps, per conversation, the keys and values the
model computed for the token ids it has seen; :func:`generate_cached` takes the longest
stored prefix of each new prompt (verified token by token, so a rewritten history or a
fork simply re-prefills what differs), prefills only the rest, and decodes with rows
leaving the batch as soon as they end. Tokens and logprobs are those of the plain path
(:func:`playpen.inference.engine.generate`) up to floating-point noise.

The keys and values of a prefix depend only on its ids, the weights and the adapter that
produced them: a store is valid while the weights do not change (one rollout call) and
its entries are keyed by adapter as well as by conversation.

Longer than 400 lines because the store, the prefill and the decode loop share one cache layout and are read together.
"""
from __future__ import annotations

from collections import OrderedDict
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any, Hashable, Optional, Sequence

from playpen.inference.mixed_lora import mixed_lora
from playpen.rollouts.types import SamplingConfig

# A stored prefix shorter than this is not worth its bookkeeping: the prompt is prefilled.
MIN_REUSED_TOKENS = 16
# Prefill cost of one more forward pass, in token positions, when rows are split into
# chunks of similar suffix length (a chunk computes rows x its longest suffix).
CHUNK_OVERHEAD_POSITIONS = 32


@dataclass
class PrefillCounts:
    """Prompt positions of :func:`generate` calls, added up across calls."""

    prefilled: int = 0
    """Prompt tokens run through the model (padding excluded)."""
    reused: int = 0
    """Prompt tokens whose keys and values came from a kept cache (or a shared prefix)."""
    computed: int = 0
    """Positions the prefill forward passes computed, padding included."""


@dataclass
class _Entry:
    ids: Any  # 1-D LongTensor on the CPU: the token ids the layers cover
    layers: list  # per layer (keys, values), each [heads, len(ids), head_dim]
    nbytes: int


class KVCacheStore:
    """Per-conversation KV caches, capped at ``max_bytes`` with least-recently-used eviction.

    Keys are ``(conversation, adapter)``: a conversation is any hashable the caller picks
    (the rollout loop uses one per episode and player), the adapter is the name of the
    LoRA adapter that produced the cache (None: the model as it is). An evicted or
    mismatching entry costs a re-prefill, never a wrong token.
    """

    def __init__(self, max_bytes: int):
        if max_bytes < 0:
            raise ValueError(f"max_bytes must be >= 0, got {max_bytes}")
        self.max_bytes = int(max_bytes)
        self._entries: OrderedDict[tuple, _Entry] = OrderedDict()
        self.num_bytes = 0
        self.peak_bytes = 0
        self.peak_entries = 0
        self.num_evictions = 0
        self.num_hits = 0
        self.num_misses = 0

    def __len__(self) -> int:
        return len(self._entries)

    def lookup(self, conversation: Hashable, adapter: Optional[str], prompt: Sequence[int]):
        """The longest stored prefix of ``prompt`` (at most ``len(prompt) - 1`` tokens, so one
        is left to feed): ``(length, layers)`` with the layers cut to that length, or
        ``(0, None)``. The conversation's own entry is tried first, then every entry of the
        same adapter (a forked episode continues its parent's cache)."""
        import torch
        prompt_t = torch.as_tensor(list(prompt), dtype=torch.long)
        limit = len(prompt) - 1
        best, best_key = 0, None
        own = (conversation, adapter)
        if own in self._entries:
            best, best_key = min(_common_prefix(self._entries[own].ids, prompt_t), limit), own
        if best < MIN_REUSED_TOKENS:
            for key, entry in self._entries.items():
                if key[1] == adapter and key != own:
                    length = min(_common_prefix(entry.ids, prompt_t), limit)
                    if length > best:
                        best, best_key = length, key
        if best < MIN_REUSED_TOKENS:
            self.num_misses += 1
            return 0, None
        self.num_hits += 1
        self._entries.move_to_end(best_key)
        layers = [(k[:, :best], v[:, :best]) for k, v in self._entries[best_key].layers]
        return best, layers

    def put(self, conversation: Hashable, adapter: Optional[str], ids: Sequence[int], layers: list) -> None:
        """Keep ``layers`` (per layer ``(keys, values)`` of shape [heads, len(ids), dim]) as the
        conversation's cache, replacing its previous one; evicts the least recently used
        entries beyond ``max_bytes`` (an entry larger than the cap is not kept)."""
        import torch
        key = (conversation, adapter)
        self._remove(key)
        nbytes = sum(k.numel() * k.element_size() + v.numel() * v.element_size() for k, v in layers)
        if nbytes > self.max_bytes or not ids:
            return
        while self._entries and self.num_bytes + nbytes > self.max_bytes:
            self._remove(next(iter(self._entries)))
            self.num_evictions += 1
        self._entries[key] = _Entry(torch.as_tensor(list(ids), dtype=torch.long), layers, nbytes)
        self.num_bytes += nbytes
        self.peak_bytes = max(self.peak_bytes, self.num_bytes)
        self.peak_entries = max(self.peak_entries, len(self._entries))

    def drop(self, conversation: Hashable) -> None:
        """Free every cache of ``conversation`` (all adapters): its episode has ended."""
        for key in [k for k in self._entries if k[0] == conversation]:
            self._remove(key)

    def clear(self) -> None:
        self._entries.clear()
        self.num_bytes = 0

    def _remove(self, key) -> None:
        entry = self._entries.pop(key, None)
        if entry is not None:
            self.num_bytes -= entry.nbytes


def _common_prefix(a, b) -> int:
    n = min(len(a), len(b))
    if n == 0:
        return 0
    differ = (a[:n] != b[:n]).nonzero()
    return int(differ[0, 0]) if len(differ) else n




# ----------------------------------------------------------------------------- the decode loop

def generate_cached(model: Any, tokenizer: Any, prompts: Sequence[Sequence[int]], sampling: SamplingConfig,
                    store: KVCacheStore, conversations: Sequence[Hashable],
                    budgets: Optional[Sequence[int]] = None, adapter_names: Optional[Sequence[str]] = None,
                    counts: Optional[PrefillCounts] = None) -> list:
    """One continuation per prompt, reusing and updating ``store`` (see the module doc).

    ``conversations[i]`` names the conversation prompt i continues; ``budgets[i]`` is its
    most new tokens (default ``sampling.max_new_tokens``); ``adapter_names[i]`` the peft
    adapter of row i, passed to every forward pass (None: the model as it is).
    """
    import torch
    from playpen.inference.prefixes import plan_prefixes

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
    counts = counts if counts is not None else PrefillCounts()
    was_training = model.training
    model.eval()
    mixed = mixed_lora(model) if any(a is not None for a in adapters) else nullcontext()
    try:
        with torch.no_grad(), mixed:  # rows of several LoRA adapters: see playpen.inference.mixed_lora
            # 1. what each row already has: its conversation's cache, or another's prefix
            known = [store.lookup(conversations[r], owners[r], prompts[r]) for r in range(n)]
            # 2. rows without one: a prefix shared within the batch is prefilled once
            misses = [r for r in range(n) if known[r][0] == 0]
            if len(misses) > 1:
                plan = plan_prefixes([prompts[r] for r in misses], [str(adapters[r]) for r in misses])
                groups = [(prefix, [misses[i] for i in rows]) for prefix, rows in plan.groups
                          if len(rows) > 1 and prefix >= MIN_REUSED_TOKENS]
                if groups:
                    shared = _prefill(model, [[] for _ in groups], [prompts[rows[0]][:prefix] for prefix, rows in groups],
                                      [adapters[rows[0]] for _, rows in groups], counts, want_logits=False)[1]
                    for (prefix, rows), layers in zip(groups, shared):
                        for r in rows:
                            known[r] = (prefix, layers)
                        counts.reused -= prefix  # prefilled once, reused by the group's other rows
            counts.reused += sum(length for length, _ in known)
            # 3. the rest of every prompt, in chunks of similar length
            logits: list = [None] * n
            full: list = [None] * n
            for chunk in _chunks([len(prompts[r]) - known[r][0] for r in range(n)], sampling.max_batch_size):
                chunk_logits, chunk_layers = _prefill(
                    model, [known[r][1] or [] for r in chunk], [prompts[r][known[r][0]:] for r in chunk],
                    [adapters[r] for r in chunk], counts)
                for r, row_logits, layers in zip(chunk, chunk_logits, chunk_layers):
                    logits[r], full[r] = row_logits, layers
            del known
            # 4. decode, all rows together; a row leaves at its EOS or its budget
            decode = _decode
            if use_static_engine(model, sampling, adapters):
                from playpen.inference.static import static_decoder
                decode = static_decoder(model).decode
            return decode(model, tokenizer, prompts, torch.stack(logits), full, sampling, budgets, adapters,
                          store, conversations, owners)
    finally:
        if was_training:
            model.train()


ENGINES = ("auto", "static", "dynamic")


def use_static_engine(model: Any, sampling: SamplingConfig, adapters: list) -> bool:
    """Whether ``sampling.engine`` picks :mod:`playpen.inference.static` for these rows."""
    from playpen.inference.static import supports_static_decoding
    engine = getattr(sampling, "engine", "auto")
    if engine not in ENGINES:
        raise ValueError(f"unknown decoding engine {engine!r}; valid: {', '.join(ENGINES)}")
    if engine == "dynamic":
        return False
    if engine == "auto":
        from playpen.inference.prefixes import device_of
        if device_of(model).type != "cuda":
            return False
    return supports_static_decoding(model, adapters)


def _chunks(lengths: list[int], max_rows: int) -> list[list[int]]:
    """Rows split into chunks (sorted by suffix length) minimising computed positions:
    each chunk costs rows x its longest suffix plus one pass's overhead."""
    import math
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


def _forward_kwargs(adapters: list) -> dict:
    return {"adapter_names": list(adapters)} if any(a is not None for a in adapters) else {}


def _stacked_cache(model, rows: list[list], width: int, spare: int = 0):
    """A DynamicCache holding each row's layers right-aligned in ``width`` positions,
    zeros to the left (masked out by the caller). ``spare`` > 0: room for that many more
    positions per layer, written in place by :class:`_SlabLayer` as decoding goes (a plain
    layer would copy the whole cache to append each token)."""
    from transformers import DynamicCache
    cache = DynamicCache(config=model.config)
    if width == 0:
        return cache
    reference = next(layers for layers in rows if layers)
    for index, (key_ref, value_ref) in enumerate(reference):
        heads, _, dim = key_ref.shape
        keys = key_ref.new_zeros((len(rows), heads, width + spare, dim))
        values = value_ref.new_zeros((len(rows), heads, width + spare, value_ref.shape[-1]))
        for row, layers in enumerate(rows):
            if layers:
                k, v = layers[index]
                keys[row, :, width - k.shape[1]:width] = k
                values[row, :, width - v.shape[1]:width] = v
        if spare:
            cache.layers[index] = _SlabLayer(keys, values, width)
        else:
            cache.update(keys, values, index)
    return cache


def _slab_layer_class():
    from transformers.cache_utils import DynamicLayer

    class SlabLayer(DynamicLayer):
        """A cache layer over preallocated buffers: ``keys``/``values`` are views of the
        filled columns ``[start, end)``; an update writes the new positions in place (the
        buffers grow by half when full), dropping leading columns only moves ``start``."""

        def __init__(self, keys, values, end: int):
            super().__init__()
            self.device = keys.device
            self.is_initialized = True
            self._keys, self._values, self.start, self.end = keys, values, 0, end
            self._view()

        def _view(self):
            self.keys = self._keys[:, :, self.start:self.end]
            self.values = self._values[:, :, self.start:self.end]

        def update(self, key_states, value_states, *args, **kwargs):
            n = key_states.shape[-2]
            if self.end + n > self._keys.shape[-2]:
                spare = max(n, (self.end - self.start) // 2, 16)
                live = self.end - self.start
                for name in ("_keys", "_values"):
                    old = getattr(self, name)
                    grown = old.new_zeros(old.shape[:2] + (live + spare,) + old.shape[3:])
                    grown[:, :, :live] = old[:, :, self.start:self.end]
                    setattr(self, name, grown)
                self.start, self.end = 0, live
            self._keys[:, :, self.end:self.end + n] = key_states
            self._values[:, :, self.end:self.end + n] = value_states
            self.end += n
            self._view()
            return self.keys, self.values

        def drop_leading(self, count: int) -> None:
            self.start += count
            self._view()

        def batch_select_indices(self, indices) -> None:
            self._keys, self._values = self._keys[indices], self._values[indices]
            self._view()

        def crop(self, tokens_to_remove: int) -> None:
            if tokens_to_remove > 0:
                raise ValueError("crop takes a negative number of tokens to remove")
            self.end = max(self.start, self.end + tokens_to_remove)
            self._view()

    return SlabLayer


def _SlabLayer(keys, values, end):  # noqa: N802 - a class built once, transformers imported lazily
    global _SLAB
    if _SLAB is None:
        _SLAB = _slab_layer_class()
    return _SLAB(keys, values, end)


_SLAB = None


def _prefill(model, cached: list[list], suffixes: list[list[int]], adapters: list, counts: PrefillCounts,
             want_logits: bool = True):
    """Run ``suffixes`` after their rows' cached layers: [cached][padding][suffix] per row,
    padding masked, positions from the mask. Returns each row's last logits (or Nones) and
    its layers over cached + suffix (real positions only)."""
    import torch
    from playpen.inference.prefixes import cache_kwarg, device_of as _device_of
    device = _device_of(model)
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
    cache = _stacked_cache(model, cached, head)
    inputs = {"input_ids": ids.to(device), "attention_mask": mask.to(device), "position_ids": positions.to(device),
              cache_kwarg(model): cache, "use_cache": True, **_forward_kwargs(adapters)}
    try:  # the last position's logits only, not the vocabulary for every prompt position
        out = model(**inputs, logits_to_keep=1)
    except TypeError:  # a model without logits_to_keep
        cache = _stacked_cache(model, cached, head)
        out = model(**dict(inputs, **{cache_kwarg(model): cache}))
    counts.prefilled += sum(map(len, suffixes))
    counts.computed += rows * tail
    logits = out.logits[:, -1].float() if want_logits else [None] * rows
    layers_out = []
    for row, (layers, suffix) in enumerate(zip(cached, suffixes)):
        s = len(suffix)
        row_layers = []
        for index, layer in enumerate(cache.layers):
            k, v = layer.keys[row, :, head + tail - s:], layer.values[row, :, head + tail - s:]
            if layers:
                k, v = torch.cat([layers[index][0], k], dim=1), torch.cat([layers[index][1], v], dim=1)
            else:
                k, v = k.clone(), v.clone()
            row_layers.append((k, v))
        layers_out.append(row_layers)
    return logits, layers_out




def _decode(model, tokenizer, prompts, logits, full: list, sampling: SamplingConfig, budgets: list,
            adapters: list, store: KVCacheStore, conversations, owners: list) -> list:
    import torch
    from playpen.inference.prefixes import Generation, cache_kwarg, choose_tokens, device_of as _device_of, eos_token_ids
    device = _device_of(model)
    eos = set(eos_token_ids(model, tokenizer))
    temperature = sampling.temperature if sampling.temperature and sampling.temperature > 0 else 1.0
    n = len(prompts)
    width = max(map(len, prompts))
    cache = _stacked_cache(model, full, width, spare=max(budgets))
    cache_key = cache_kwarg(model)
    del full
    mask = torch.zeros((n, width), dtype=torch.long, device=device)
    for row, prompt in enumerate(prompts):
        mask[row, width - len(prompt):] = 1
    positions = torch.tensor([len(p) for p in prompts], dtype=torch.long, device=device)
    active = list(range(n))
    tokens_of: list[list[int]] = [[] for _ in range(n)]
    logprobs_of: list[list[float]] = [[] for _ in range(n)]
    while True:
        chosen = choose_tokens(logits, sampling)
        logprobs = torch.log_softmax(logits / temperature, dim=-1).gather(1, chosen[:, None]).squeeze(1)
        keep = []
        for j, (r, token, logprob) in enumerate(zip(active, chosen.tolist(), logprobs.tolist())):
            tokens_of[r].append(token)
            logprobs_of[r].append(logprob)
            if token in eos or len(tokens_of[r]) >= budgets[r]:
                covered = len(prompts[r]) + len(tokens_of[r]) - 1  # the last token was never fed
                store.put(conversations[r], owners[r], prompts[r] + tokens_of[r][:-1],
                          [(layer.keys[j, :, -covered:].clone(), layer.values[j, :, -covered:].clone())
                           for layer in cache.layers])
            else:
                keep.append(j)
        if not keep:
            break
        if len(keep) < len(active):
            index = torch.tensor(keep, dtype=torch.long, device=device)
            cache.batch_select_indices(index)
            mask, positions, chosen = mask[index], positions[index], chosen[index]
            active = [active[j] for j in keep]
            # columns no remaining row attends to: cut them off the cache
            first = int(mask.any(0).nonzero()[0, 0])
            if first > 0:
                for layer in cache.layers:
                    layer.drop_leading(first)
                mask = mask[:, first:]
        mask = torch.cat([mask, mask.new_ones((len(active), 1))], dim=1)
        out = model(**{"input_ids": chosen[:, None], "attention_mask": mask, "position_ids": positions[:, None],
                       cache_key: cache, "use_cache": True}, **_forward_kwargs([adapters[r] for r in active]))
        logits = out.logits[:, -1].float()
        positions = positions + 1
    generations = []
    for r in range(n):
        ids = tokens_of[r]
        finished = ids[-1] in eos
        generations.append(Generation(token_ids=tuple(ids), logprobs=tuple(logprobs_of[r]),
                                      text=tokenizer.decode(ids[:-1] if finished else ids, skip_special_tokens=False),
                                      finished=finished))
    return generations
