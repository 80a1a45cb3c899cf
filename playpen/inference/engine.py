"""Batched generation from token ids with per-token logprobs.

One call = one ``model.generate`` over left-padded prompts (with a
:class:`~playpen.inference.kvcache.KVCacheStore`: playpen's own decode loop over the
conversations' kept KV caches, see :mod:`playpen.inference.kvcache`). Each row stops at its
first EOS; the returned ids are exactly the generated ones (up to and including that
EOS, no padding) and the text is the decode of exactly those ids minus the EOS.
Logprobs are ``log_softmax(logits / T)`` of the chosen token (T = temperature, 1.0
when greedy) taken before top-p/top-k, recorded step by step so that memory stays at
one ``batch x vocab`` slice whatever ``max_new_tokens`` is.
"""
from __future__ import annotations

from contextlib import nullcontext
from dataclasses import replace
from typing import Any, Optional, Sequence

from playpen.inference.prefixes import (Generation, PrefixPlan, cache_kwarg, device_of as _device_of,  # noqa: F401
                                       check_finite_scores, eos_token_ids, plan_prefixes)
from playpen.inference.mixed_lora import mixed_lora
from playpen.rollouts.types import SamplingConfig


class _LogprobRecorder:
    """A logits processor that records the logprob of each sampled token.

    Custom processors run before HF's temperature/top-k/top-p warpers, so ``scores``
    here are the model's logits. The token sampled from step s appears as the last
    input id at step s + 1; the last one is read from the final sequences.
    """

    def __init__(self, temperature: float):
        self.temperature = temperature if temperature and temperature > 0 else 1.0
        self.previous = None
        self.steps = []

    def __call__(self, input_ids, scores):
        import torch
        check_finite_scores(scores)
        if self.previous is not None:
            self.steps.append(self.previous.gather(1, input_ids[:, -1:]).squeeze(1))
        self.previous = torch.log_softmax(scores.float() / self.temperature, dim=-1)
        return scores

    def finish(self, sequences):
        import torch
        if self.previous is not None:
            self.steps.append(self.previous.gather(1, sequences[:, -1:]).squeeze(1))
        self.previous = None
        if not self.steps:
            return torch.zeros((sequences.shape[0], 0))
        return torch.stack(self.steps, dim=1).cpu()


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


# Sharing must save at least this many prefill positions to be worth its extra pass.
MIN_SAVED_POSITIONS = 16


def generate(model: Any, tokenizer: Any, prompts: Sequence[Sequence[int]],
             sampling: SamplingConfig, share_prefix: bool = True,
             adapter_names: Optional[Sequence[str]] = None, *, cache: Any = None,
             conversations: Optional[Sequence[Any]] = None, budgets: Optional[Sequence[int]] = None,
             counts: Any = None) -> list[Generation]:
    """Generate one continuation per prompt (token ids), in chunks of ``max_batch_size``.

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
    decode batch as they end (:func:`playpen.inference.kvcache.generate_cached`; a model
    whose cache is not plain per-layer keys and values takes the path above). ``budgets``
    (cached path only) gives each row its own ``max_new_tokens``; ``counts`` (a
    :class:`playpen.inference.kvcache.PrefillCounts`) adds up the prompt positions prefilled.
    """
    out: list[Generation] = []
    step = max(1, sampling.max_batch_size)
    cached = cache is not None and _kv_reuse(model)
    if budgets is not None and not cached:
        raise ValueError("per-row budgets need the cached path (cache= and a model with a plain KV cache)")
    for start in range(0, len(prompts), step):
        rows = slice(start, start + step)
        names = None if adapter_names is None else list(adapter_names[rows])
        if cached:
            from playpen.inference.kvcache import generate_cached
            out.extend(generate_cached(model, tokenizer, prompts[rows], sampling, cache, conversations[rows],
                                       None if budgets is None else budgets[rows], names, counts))
        else:
            out.extend(_generate_chunk(model, tokenizer, prompts[rows], sampling, share_prefix, names, counts))
    return out


def _kv_reuse(model) -> bool:
    from playpen.inference.prefixes import supports_kv_reuse
    return supports_kv_reuse(model)


def generate_within(model: Any, tokenizer: Any, prompts: Sequence[Sequence[int]],
                    sampling: SamplingConfig,
                    adapter_names: Optional[Sequence[str]] = None, *, cache: Any = None,
                    conversations: Optional[Sequence[Any]] = None,
                    counts: Any = None) -> tuple[list[Optional[Generation]], int]:
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
    if cache is not None and _kv_reuse(model):
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


def _worth_sharing(plan: PrefixPlan, prompts) -> bool:
    """Positions computed with sharing (group prefixes padded to the longest, suffixes
    padded to the longest) against plain left padding."""
    if any(prefix < 1 for prefix, _ in plan.groups):
        return False
    longest_prefix = max(prefix for prefix, _ in plan.groups)
    longest_rest = max(len(p) - plan.prefix_of(i) for i, p in enumerate(prompts))
    shared = len(plan.groups) * longest_prefix + len(prompts) * longest_rest
    plain = len(prompts) * max(len(p) for p in prompts)
    return plain - shared >= MIN_SAVED_POSITIONS


def _generate_chunk(model, tokenizer, prompts, sampling: SamplingConfig, share_prefix: bool,
                    adapter_names: Optional[list[str]] = None, counts: Any = None) -> list[Generation]:
    import torch
    from transformers import LogitsProcessorList

    if not prompts:
        return []
    if any(len(p) == 0 for p in prompts):
        raise ValueError("cannot generate from an empty prompt")
    eos_ids = eos_token_ids(model, tokenizer)
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else eos_ids[0]
    device = _device_of(model)
    plan = plan_prefixes(prompts, adapter_names) if share_prefix and len(prompts) > 1 else None
    if plan is not None and not _worth_sharing(plan, prompts):
        plan = None
    # rows: [group prefix, left-padded][padding][rest of the prompt]; padding is masked
    # out and position ids follow the attention mask, so every row sees its own prompt
    head = max(prefix for prefix, _ in plan.groups) if plan else 0
    tail = max(len(p) - (plan.prefix_of(i) if plan else 0) for i, p in enumerate(prompts))
    width = head + tail
    input_ids = torch.full((len(prompts), width), pad_id, dtype=torch.long)
    attention = torch.zeros((len(prompts), width), dtype=torch.long)
    for row, ids in enumerate(prompts):
        ids = list(ids)
        shared = plan.prefix_of(row) if plan else 0
        if shared:
            input_ids[row, head - shared:head] = torch.tensor(ids[:shared], dtype=torch.long)
            attention[row, head - shared:head] = 1
        rest = ids[shared:]
        input_ids[row, width - len(rest):] = torch.tensor(rest, dtype=torch.long)
        attention[row, width - len(rest):] = 1
    if counts is not None:  # a group's prefix is run once, then the rest of each row
        counts.computed += len(prompts) * tail + (len(plan.groups) * head if plan else 0)
        shared = sum(prefix for prefix, _ in plan.groups) if plan else 0
        reused = sum(plan.prefix_of(r) for r in range(len(prompts))) - shared if plan else 0
        counts.reused += reused
        counts.prefilled += sum(map(len, prompts)) - reused
    recorder = _LogprobRecorder(sampling.temperature)
    do_sample = sampling.temperature > 0
    kwargs = dict(max_new_tokens=sampling.max_new_tokens, do_sample=do_sample,
                  eos_token_id=eos_ids, pad_token_id=pad_id,
                  logits_processor=LogitsProcessorList([recorder]),
                  return_dict_in_generate=True)
    if adapter_names is not None:
        kwargs["adapter_names"] = list(adapter_names)
    if do_sample:
        kwargs.update(temperature=sampling.temperature, top_p=sampling.top_p or 1.0,
                      top_k=sampling.top_k or 0)
    else:
        kwargs.update(temperature=None, top_p=None, top_k=None)
    was_training = model.training
    model.eval()
    try:
        # rows of several LoRA adapters: one stacked LoRA matmul per layer (playpen.inference.mixed_lora)
        with torch.no_grad(), (mixed_lora(model) if adapter_names is not None else nullcontext()):
            if plan is not None:
                kwargs[cache_kwarg(model)] = _prefix_cache(model, plan, input_ids[:, :head].to(device),
                                                          attention[:, :head].to(device), adapter_names)
            result = model.generate(input_ids=input_ids.to(device), attention_mask=attention.to(device),
                                    **kwargs)
    finally:
        if was_training:
            model.train()
    sequences = result.sequences
    logprobs = recorder.finish(sequences)
    new_tokens = sequences[:, width:].cpu()
    eos_set = set(eos_ids)
    generations = []
    for row in range(len(prompts)):
        ids = new_tokens[row].tolist()
        end = next((i for i, t in enumerate(ids) if t in eos_set), None)
        finished = end is not None
        ids = ids[:end + 1] if finished else ids
        text_ids = ids[:-1] if finished else ids
        generations.append(Generation(
            token_ids=tuple(ids),
            logprobs=tuple(float(x) for x in logprobs[row, :len(ids)].tolist()),
            text=tokenizer.decode(text_ids, skip_special_tokens=False),
            finished=finished))
    return generations


def _prefix_cache(model, plan: PrefixPlan, head_ids, head_mask, adapter_names=None):
    """Prefill each group's prefix once (one batched forward; each group with its rows'
    adapter) and give every row the KV cache of its group."""
    import torch
    from transformers import DynamicCache
    firsts = [rows[0] for _, rows in plan.groups]
    mask = head_mask[firsts]
    positions = (mask.long().cumsum(-1) - 1).clamp(min=0)
    cache = DynamicCache(config=model.config)
    inputs = {"input_ids": head_ids[firsts], "attention_mask": mask, "position_ids": positions,
              cache_kwarg(model): cache, "use_cache": True}
    if adapter_names is not None:
        inputs["adapter_names"] = [adapter_names[i] for i in firsts]
    try:  # only the cache is wanted, not vocabulary-wide logits for every prefix position
        model(**inputs, logits_to_keep=1)
    except TypeError:  # a model without logits_to_keep
        cache = DynamicCache(config=model.config)
        model(**dict(inputs, **{cache_kwarg(model): cache}))
    rows = torch.tensor([plan.group_of(r) for r in range(head_ids.shape[0])], device=head_ids.device)
    cache.batch_select_indices(rows)
    return cache
