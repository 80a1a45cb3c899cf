"""The door: one call answers a batch of prompts (token ids) with one
:class:`~playpen.inference.types.Generation` each, with per-token logprobs, whichever engine
computes it.

Every engine is one module with the same :class:`~playpen.inference.types.Engine` function
(token ids, per-row budgets and adapters in; token ids, logprobs and finish reason out):

- :mod:`~playpen.inference.dynamic` and :mod:`~playpen.inference.static`, playpen's engine:
  each row continues its conversation's kept KV cache (:class:`~playpen.inference.kvcache.KVCacheStore`),
  rows without one share a common prefix's prefill, the rest is prefilled in chunks
  (:func:`playpen.inference.prefill.prefill_then_decode`), then the rows decode together in
  a growing cache or in pre-allocated buffers with captured CUDA graphs; both sample with
  :func:`playpen.inference.sampling.choose_tokens` and give the same tokens;
- :mod:`~playpen.inference.hf_generate`, the named fallback: transformers' ``model.generate``,
  for a call without a store or a model whose cache is not plain per-layer keys and values;
- :mod:`~playpen.inference.vllm_engine`: vLLM, in this process or a server, with its own
  prefix cache.

:func:`generate` reads the model's facts once (:class:`~playpen.inference.model_facts.ModelFacts`),
chooses from :data:`CHOICES` (:func:`choose_engine`) and hands the engine those facts.
Tokens and logprobs are the same on every path up to floating-point noise
(tests/test_kvcache.py, tests/test_static_decoding.py). Rows of several LoRA adapters of one
peft model are answered in one call on every path (:mod:`playpen.inference.mixed_lora`).
"""
from __future__ import annotations

from dataclasses import replace
from typing import Any, Callable, Optional, Sequence, Union

from playpen.inference import dynamic, hf_generate, static, vllm_engine
from playpen.inference.kvcache import KVCacheStore, PrefillCounts
from playpen.inference.model_facts import ModelFacts
from playpen.inference.types import Engine, Generation, SamplingConfig

ENGINES = ("auto", "static", "dynamic", "vllm")
ENGINE_DTYPES = ("auto", "float32", "bfloat16")

# Who answers: the first row that matches (None matches anything). Columns: SamplingConfig.engine;
# the rows continue kept caches (a store was given and the model's cache is plain keys and values);
# the model is on CUDA; the static loop can decode the rows (static.supports_static_decoding).
CHOICES: tuple[tuple[Optional[str], Optional[bool], Optional[bool], Optional[bool], Engine], ...] = (
    ("vllm", None, None, None, vllm_engine),
    (None, False, None, None, hf_generate),
    ("static", True, None, True, static),
    ("auto", True, True, True, static),  # on a CPU the launches the static loop saves cost nothing
    (None, True, None, None, dynamic),
)

Fact = Union[bool, Callable[[], bool]]


def choose_engine(option: str, kept_caches: Fact, on_cuda: Fact, static_fits: Fact) -> Engine:
    """The engine :data:`CHOICES` names for these facts of a call. A fact may be a function
    that reads it: it is called only when a row asks, so a call that needs no cache facts (vLLM,
    ``dynamic``) reads none."""
    facts = (option, kept_caches, on_cuda, static_fits)
    return next(engine for *wanted, engine in CHOICES
                if all(want is None or want == (fact() if callable(fact) else fact)
                       for want, fact in zip(wanted, facts)))


def generate(model: Any, tokenizer: Any, prompts: Sequence[Sequence[int]],
             sampling: SamplingConfig, share_prefix: bool = True,
             adapter_names: Optional[Sequence[str]] = None, *, cache: Optional[KVCacheStore] = None,
             conversations: Optional[Sequence[Any]] = None, budgets: Optional[Sequence[int]] = None,
             counts: Optional[PrefillCounts] = None, facts: Optional[ModelFacts] = None) -> list[Generation]:
    """Generate one continuation per prompt (token ids), in chunks of ``max_batch_size`` rows
    (vLLM: all at once), each chunk by the engine :func:`choose_engine` picks.

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
    decode batch as they end (a model whose cache is not plain per-layer keys and values
    takes the fallback). ``budgets`` (not the fallback) gives each row its own
    ``max_new_tokens``; ``counts`` (a :class:`playpen.inference.kvcache.PrefillCounts`) adds
    up the prompt positions prefilled. ``facts``: the model's facts when the caller read
    them for this call already (:func:`generate_within`).
    """
    option = check_engine(sampling)
    facts = facts if facts is not None else ModelFacts(model, tokenizer)
    counts = counts if counts is not None else PrefillCounts()
    kept = lambda: cache is not None and facts.kv_reuse  # noqa: E731 - read only when the table asks
    step = max(1, sampling.max_batch_size)
    out: list[Generation] = []
    start = 0
    while start < len(prompts):
        rows = slice(start, start + step)
        adapters = list(adapter_names[rows]) if adapter_names is not None else [None] * len(prompts[rows])
        engine = choose_engine(option, kept, lambda: facts.on_cuda,
                               lambda: static.supports_static_decoding(model, adapters, facts))
        if not engine.CHUNKED:
            rows = slice(start, len(prompts))
        pick = lambda values: None if values is None else list(values[rows])  # noqa: E731
        out.extend(engine.generate(model, tokenizer, prompts[rows], sampling, facts, adapter_names=pick(adapter_names),
                                   budgets=pick(budgets), counts=counts, cache=cache,
                                   conversations=pick(conversations), share_prefix=share_prefix))
        start = rows.stop
    return out


def generate_within(model: Any, tokenizer: Any, prompts: Sequence[Sequence[int]],
                    sampling: SamplingConfig,
                    adapter_names: Optional[Sequence[str]] = None, *, cache: Optional[KVCacheStore] = None,
                    conversations: Optional[Sequence[Any]] = None,
                    counts: Optional[PrefillCounts] = None) -> tuple[list[Optional[Generation]], int]:
    """:func:`generate` within the context window: a prompt leaving less room than
    ``max_new_tokens`` is generated with the room left (cut, as at ``max_new_tokens``); one
    that fills the window gets None. Returns the generations and the number of calls.
    ``adapter_names``: one peft adapter per prompt (see :func:`generate`). An engine that
    takes per-row budgets answers in one call, each row with its own room; the fallback in one
    call per room."""
    facts = ModelFacts(model, tokenizer)
    limit = facts.context
    wanted = sampling.max_new_tokens
    budgets: dict[int, list[int]] = {}
    for i, prompt in enumerate(prompts):
        room = wanted if limit is None else min(wanted, limit - len(prompt))
        if room >= 1:
            budgets.setdefault(room, []).append(i)
    out: list[Optional[Generation]] = [None] * len(prompts)
    # whether the rows take the fallback depends on neither the device nor the static loop
    engine = choose_engine(check_engine(sampling), lambda: cache is not None and facts.kv_reuse, False, False)
    if engine.PER_ROW_BUDGETS:
        rows = sorted(i for group in budgets.values() for i in group)
        room_of = {i: room for room, group in budgets.items() for i in group}
        pick = lambda values: None if values is None else [values[i] for i in rows]  # noqa: E731
        for i, gen in zip(rows, generate(model, tokenizer, [prompts[i] for i in rows], sampling,
                                         adapter_names=pick(adapter_names), cache=cache,
                                         conversations=pick(conversations), budgets=[room_of[i] for i in rows],
                                         counts=counts, facts=facts)):
            out[i] = gen
        return out, int(bool(rows))
    for room, rows in sorted(budgets.items(), reverse=True):
        cut = sampling if room == wanted else replace(sampling, max_new_tokens=room)
        names = None if adapter_names is None else [adapter_names[i] for i in rows]
        for i, gen in zip(rows, generate(model, tokenizer, [prompts[i] for i in rows], cut, adapter_names=names,
                                         counts=counts, facts=facts)):
            out[i] = gen
    return out, len(budgets)


def use_static_engine(model: Any, sampling: SamplingConfig, adapters: list) -> bool:
    """Whether :data:`CHOICES` gives rows of kept caches with these ``adapters`` to
    :mod:`playpen.inference.static`."""
    facts = ModelFacts(model)
    return choose_engine(check_engine(sampling), True, lambda: facts.on_cuda,
                         lambda: static.supports_static_decoding(model, adapters, facts)) is static


def check_engine(sampling: SamplingConfig) -> str:
    """``sampling.engine``, one of :data:`ENGINES`."""
    engine = getattr(sampling, "engine", "auto")
    if engine not in ENGINES:
        raise ValueError(f"unknown engine {engine!r}; valid: {', '.join(ENGINES)}")
    return engine
