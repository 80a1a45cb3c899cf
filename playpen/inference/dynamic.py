"""The dynamic decode loop: every row decodes over its kept KV cache, stacked into one
growing cache (:func:`playpen.inference.kvcache.stacked_cache`, appended in place), and
leaves the batch as soon as it ends (its EOS or its token budget), its cache put back in the
store. Columns no remaining row attends to are cut off as rows leave.

This is the loop on a CPU and for rows of several LoRA adapters; on CUDA the static loop
(:mod:`playpen.inference.static`) decodes the same rows to the same tokens with captured
CUDA graphs. As an engine behind the door (:class:`playpen.inference.types.Engine`) it
prefills with :func:`playpen.inference.prefill.prefill_then_decode`, as the static loop does.
"""
from __future__ import annotations

from typing import Optional

from playpen.inference.kvcache import KVCacheStore, stacked_cache
from playpen.inference.logprobs import token_logprobs
from playpen.inference.model_facts import ModelFacts
from playpen.inference.prefill import forward_kwargs, prefill_then_decode
from playpen.inference.sampling import choose_tokens
from playpen.inference.types import Generation, SamplingConfig

CHUNKED = True
PER_ROW_BUDGETS = True


def generate(model, tokenizer, prompts, sampling: SamplingConfig, facts: ModelFacts, *, adapter_names, budgets,
             counts, cache, conversations, share_prefix) -> list[Generation]:
    """The rows continue their conversations' kept caches in ``cache`` and decode in this loop
    (:class:`playpen.inference.types.Engine`; ``share_prefix``: rows without a kept prefix
    always share theirs)."""
    return prefill_then_decode(decode, model, tokenizer, prompts, sampling, facts, adapter_names, budgets, counts,
                               cache, conversations)


def decode(model, tokenizer, prompts, logits, full: list, sampling: SamplingConfig, budgets: list,
           adapters: list, store: KVCacheStore, conversations, owners: list,
           facts: Optional[ModelFacts] = None) -> list:
    """One Generation per prompt. ``logits`` are the prompts' last logits, ``full[r]`` row
    r's per-layer (keys, values) over its whole prompt (:func:`playpen.inference.prefill.prefill`);
    ``budgets[r]`` its most new tokens; ``adapters[r]`` its peft adapter (None: the model as
    it is); finished rows' caches go to ``store`` under ``(conversations[r], owners[r])``;
    ``facts``: the call's :class:`~playpen.inference.model_facts.ModelFacts` (None: read here)."""
    import torch
    facts = facts if facts is not None else ModelFacts(model, tokenizer)
    device = facts.device
    eos = set(facts.eos)
    temperature = sampling.temperature if sampling.temperature and sampling.temperature > 0 else 1.0
    n = len(prompts)
    width = max(map(len, prompts))
    cache = stacked_cache(model, full, width, spare=max(budgets))
    cache_key = facts.cache_key
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
        logprobs = token_logprobs(logits, chosen, temperature)
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
                       cache_key: cache, "use_cache": True}, **forward_kwargs([adapters[r] for r in active]))
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
