"""Conversations' KV caches kept between turns, and the batched cache their rows are stacked into.

A multi-turn episode's learner prompt is its previous prompt, the tokens it generated and
the game's reply. :class:`KVCacheStore` keeps, per conversation, the keys and values the
model computed for the token ids it has seen; the engine
(:func:`playpen.inference.prefill.prefill_then_decode`) takes the longest stored prefix of each new
prompt (verified token by token, so a rewritten history or a fork simply re-prefills what
differs), prefills only the rest and decodes, then puts each row's cache back.
:func:`stacked_cache` lays kept rows side by side in one transformers cache for a batched
forward (the prefill's, or the dynamic decode loop's, which appends in place).

The keys and values of a prefix depend only on its ids, the weights and the adapter that
produced them: a store is valid while the weights do not change (one rollout call) and
its entries are keyed by adapter as well as by conversation.
"""
from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Hashable, Optional, Sequence

# A stored prefix shorter than this is not worth its bookkeeping: the prompt is prefilled.
MIN_REUSED_TOKENS = 16


@dataclass
class PrefillCounts:
    """Prompt positions of :func:`playpen.inference.engine.generate` calls, added up across calls."""

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


# ----------------------------------------------------------------------------- stacked rows

def stacked_cache(model, rows: list[list], width: int, spare: int = 0):
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
