"""The inference engine: one call answers a batch of prompts (token ids) with one
:class:`~playpen.inference.types.Generation` each, with per-token logprobs.

:func:`generate` is the door. Given a :class:`~playpen.inference.kvcache.KVCacheStore` and
a conversation per row, it is one engine over kept KV caches (:func:`generate_cached`):

1. each row takes the longest kept prefix of its prompt (its own conversation's cache, or
   another's: a forked episode continues its parent's);
2. rows without one share the prefill of a prefix they have in common
   (:func:`playpen.inference.prefixes.plan_prefixes`, the planner training uses too);
3. the rest of every prompt is prefilled in chunks of similar length
   (:mod:`playpen.inference.prefill`);
4. the rows decode together, each leaving at its EOS or budget, its cache put back:
   ``SamplingConfig.engine`` picks the static loop (pre-allocated buffers, captured CUDA
   graphs: :mod:`playpen.inference.static`; ``auto`` on CUDA) or the dynamic one
   (:mod:`playpen.inference.dynamic`; ``auto`` elsewhere). Both sample with
   :func:`playpen.inference.sampling.choose_tokens` and give the same tokens.

Without a store, or for a model whose cache is not plain per-layer keys and values, the
named fallback answers: transformers' ``model.generate`` (:mod:`playpen.inference.hf_generate`).
``SamplingConfig.engine == "vllm"`` hands every call to vLLM instead
(:mod:`playpen.inference.vllm_engine`: per-row budgets and adapters, its own prefix cache,
whose hits ``counts`` adds up as reused; ``cache`` and ``conversations`` are playpen's
engine's and are not used).
Tokens and logprobs are the same on every path up to floating-point noise
(tests/test_kvcache.py, tests/test_static_decoding.py). Rows of several LoRA adapters of one
peft model are answered in one call on every path (:mod:`playpen.inference.mixed_lora`).
"""
from __future__ import annotations

from contextlib import nullcontext
from dataclasses import replace
from typing import Any, Hashable, Optional, Sequence

from playpen.inference import dynamic, hf_generate, vllm_engine
from playpen.inference.kvcache import MIN_REUSED_TOKENS, KVCacheStore, PrefillCounts
from playpen.inference.mixed_lora import mixed_lora
from playpen.inference.model_facts import context_limit, device_of
from playpen.inference.prefill import chunks, prefill, prefill_prefixes, prefix_layers
from playpen.inference.prefixes import plan_prefixes
from playpen.inference.static import static_decoder, supports_static_decoding
from playpen.inference.transformers_compat import supports_kv_reuse
from playpen.inference.types import Generation, SamplingConfig

ENGINES = ("auto", "static", "dynamic", "vllm")
ENGINE_DTYPES = ("auto", "float32", "bfloat16")


def generate(model: Any, tokenizer: Any, prompts: Sequence[Sequence[int]],
             sampling: SamplingConfig, share_prefix: bool = True,
             adapter_names: Optional[Sequence[str]] = None, *, cache: Optional[KVCacheStore] = None,
             conversations: Optional[Sequence[Any]] = None, budgets: Optional[Sequence[int]] = None,
             counts: Optional[PrefillCounts] = None) -> list[Generation]:
    """Generate one continuation per prompt (token ids), in chunks of ``max_batch_size``.

    Without ``cache``: transformers' ``model.generate`` (:mod:`playpen.inference.hf_generate`).
    With ``share_prefix``, rows that start alike (a GRPO group's identical prompts, a
    game's instructions, the chat template's system prompt) are grouped; each group's
    common prefix is run through the model once and its KV cache shared by the group's
    rows, which then prefill only the rest of their prompt. Prefill is what dominates on
    a CPU; the tokens and logprobs are those of the unshared computation.

    ``adapter_names`` (one per prompt) answers each row with its own LoRA adapter of a
    peft model (``"__base__"``: the adapter-free base), all in one ``generate`` (peft's
    mixed-batch inference); a shared prefix is only shared by rows of one adapter.

    With ``cache`` (a :class:`playpen.inference.kvcache.KVCacheStore`) and
    ``conversations`` (one key per prompt), each row continues its conversation's kept KV
    cache (kept per adapter) and leaves its cache there for the next turn; rows leave the
    decode batch as they end (:func:`generate_cached`; a model whose cache is not plain
    per-layer keys and values takes the fallback). ``budgets``
    (cached path only) gives each row its own ``max_new_tokens``; ``counts`` (a
    :class:`playpen.inference.kvcache.PrefillCounts`) adds up the prompt positions prefilled.
    """
    check_engine(sampling)
    if sampling.engine == "vllm":
        return vllm_engine.generate(model, tokenizer, prompts, sampling, adapter_names, budgets, counts)
    out: list[Generation] = []
    step = max(1, sampling.max_batch_size)
    cached = cache is not None and supports_kv_reuse(model)
    if budgets is not None and not cached:
        raise ValueError("per-row budgets need the cached path (cache= and a model with a plain KV cache)")
    for start in range(0, len(prompts), step):
        rows = slice(start, start + step)
        names = None if adapter_names is None else list(adapter_names[rows])
        if cached:
            out.extend(generate_cached(model, tokenizer, prompts[rows], sampling, cache, conversations[rows],
                                       None if budgets is None else budgets[rows], names, counts))
        else:
            out.extend(hf_generate.generate(model, tokenizer, prompts[rows], sampling, share_prefix, names, counts))
    return out


def generate_within(model: Any, tokenizer: Any, prompts: Sequence[Sequence[int]],
                    sampling: SamplingConfig,
                    adapter_names: Optional[Sequence[str]] = None, *, cache: Optional[KVCacheStore] = None,
                    conversations: Optional[Sequence[Any]] = None,
                    counts: Optional[PrefillCounts] = None) -> tuple[list[Optional[Generation]], int]:
    """:func:`generate` within the context window: a prompt leaving less room than
    ``max_new_tokens`` is generated with the room left (cut, as at ``max_new_tokens``); one
    that fills the window gets None. Returns the generations and the number of calls.
    ``adapter_names``: one peft adapter per prompt (see :func:`generate`). With ``cache``
    (see :func:`generate`): one call, each row with its own room."""
    limit = context_limit(model, tokenizer)
    wanted = sampling.max_new_tokens
    budgets: dict[int, list[int]] = {}
    for i, prompt in enumerate(prompts):
        room = wanted if limit is None else min(wanted, limit - len(prompt))
        if room >= 1:
            budgets.setdefault(room, []).append(i)
    out: list[Optional[Generation]] = [None] * len(prompts)
    if sampling.engine == "vllm" or (cache is not None and supports_kv_reuse(model)):
        rows = sorted(i for group in budgets.values() for i in group)
        room_of = {i: room for room, group in budgets.items() for i in group}
        pick = lambda values: None if values is None else [values[i] for i in rows]  # noqa: E731
        for i, gen in zip(rows, generate(model, tokenizer, [prompts[i] for i in rows], sampling,
                                         adapter_names=pick(adapter_names), cache=cache,
                                         conversations=pick(conversations), budgets=[room_of[i] for i in rows],
                                         counts=counts)):
            out[i] = gen
        return out, int(bool(rows))
    for room, rows in sorted(budgets.items(), reverse=True):
        cut = sampling if room == wanted else replace(sampling, max_new_tokens=room)
        names = None if adapter_names is None else [adapter_names[i] for i in rows]
        for i, gen in zip(rows, generate(model, tokenizer, [prompts[i] for i in rows], cut, adapter_names=names,
                                         counts=counts)):
            out[i] = gen
    return out, len(budgets)


def generate_cached(model: Any, tokenizer: Any, prompts: Sequence[Sequence[int]], sampling: SamplingConfig,
                    store: KVCacheStore, conversations: Sequence[Hashable],
                    budgets: Optional[Sequence[int]] = None, adapter_names: Optional[Sequence[str]] = None,
                    counts: Optional[PrefillCounts] = None) -> list[Generation]:
    """One continuation per prompt, reusing and updating ``store`` (see the module doc).

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
    counts = counts if counts is not None else PrefillCounts()
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
                    shared, width = prefill_prefixes(model, prompts, groups, adapters, counts)
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
                    [adapters[r] for r in chunk], counts)
                for r, row_logits, layers in zip(chunk, chunk_logits, chunk_layers):
                    logits[r], full[r] = row_logits, layers
            del known
            # 4. decode, all rows together; a row leaves at its EOS or its budget
            decode = static_decoder(model).decode if use_static_engine(model, sampling, adapters) else dynamic.decode
            return decode(model, tokenizer, prompts, torch.stack(logits), full, sampling, budgets, adapters,
                          store, conversations, owners)
    finally:
        if was_training:
            model.train()


def use_static_engine(model: Any, sampling: SamplingConfig, adapters: list) -> bool:
    """Whether ``sampling.engine`` picks :mod:`playpen.inference.static` for these rows."""
    engine = check_engine(sampling)
    if engine == "dynamic":
        return False
    if engine == "auto" and device_of(model).type != "cuda":
        return False
    return supports_static_decoding(model, adapters)


def check_engine(sampling: SamplingConfig) -> str:
    """``sampling.engine``, one of :data:`ENGINES`."""
    engine = getattr(sampling, "engine", "auto")
    if engine not in ENGINES:
        raise ValueError(f"unknown engine {engine!r}; valid: {', '.join(ENGINES)}")
    return engine
