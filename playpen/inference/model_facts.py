"""What generating with a model needs to know about it: the ids that end a turn, the device
its inputs go to, how many tokens it attends over, whether the machine computes bf16
natively, and (:class:`ModelFacts`) all of these read once per call of the door."""
from __future__ import annotations

from functools import cached_property, lru_cache
from pathlib import Path
from typing import Any, Optional

from playpen.inference.transformers_compat import cache_kwarg, supports_kv_reuse


class ModelFacts:
    """What one call of :func:`playpen.inference.engine.generate` knows about its model, each
    fact read on first use and kept for the rest of the call: the door chooses the engine from
    them and hands them to it, so no layer below asks the model (or transformers) again.
    Per call, not per model: a caller may change the tokenizer's EOS or the generation config
    between calls."""

    def __init__(self, model: Any, tokenizer: Any = None):
        self.model, self.tokenizer = model, tokenizer

    @cached_property
    def kv_reuse(self) -> bool:
        """Its cache is plain per-layer keys and values (:func:`supports_kv_reuse`)."""
        return supports_kv_reuse(self.model)

    @cached_property
    def cache_key(self) -> str:
        """The keyword that hands its forward a KV cache (:func:`cache_kwarg`)."""
        return cache_kwarg(self.model)

    @cached_property
    def device(self):
        return device_of(self.model)

    @property
    def on_cuda(self) -> bool:
        return self.device.type == "cuda"

    @cached_property
    def eos(self) -> list[int]:
        return eos_token_ids(self.model, self.tokenizer)

    @cached_property
    def context(self) -> Optional[int]:
        return context_limit(self.model, self.tokenizer)

    @cached_property
    def attention(self) -> str:
        """Its attention implementation (``sdpa``, ``eager``, ...)."""
        return getattr(getattr(self.model, "config", None), "_attn_implementation", "eager")


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


def context_limit(model: Any, tokenizer: Any = None) -> int | None:
    """The most tokens (prompt + generated) the model attends over: the config's
    ``max_position_embeddings`` (or ``n_positions``), and the tokenizer's
    ``model_max_length`` when that is a real limit; None when neither says."""
    limits = []
    config = getattr(model, "config", None)
    for key in ("max_position_embeddings", "n_positions"):
        value = getattr(config, key, None)
        if isinstance(value, int) and value > 0:
            limits.append(value)
            break
    value = getattr(tokenizer, "model_max_length", None)
    if isinstance(value, int) and 0 < value < 10**7:  # HF's "no limit" is a huge sentinel
        limits.append(value)
    return min(limits) if limits else None


@lru_cache(maxsize=1)
def has_native_bf16() -> bool:
    """Whether this machine computes bfloat16 natively: a CUDA GPU that supports it, or a CPU
    with AVX512-BF16 or AMX-BF16 (read from /proc/cpuinfo once per process, not on every
    generate call; False where it cannot be read)."""
    import torch
    if torch.cuda.is_available():
        return bool(torch.cuda.is_bf16_supported())
    try:
        flags = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False
    return "avx512_bf16" in flags or "amx_bf16" in flags
