"""The named fallback: transformers' own ``model.generate`` over left-padded prompts, for
models whose cache the engine cannot keep (not plain per-layer keys and values) and for
calls without a :class:`~playpen.inference.kvcache.KVCacheStore`.

Each row stops at its first EOS; the returned ids are exactly the generated ones (up to and
including that EOS, no padding) and the text is the decode of exactly those ids minus the
EOS. Logprobs are ``log_softmax(logits / T)`` of the chosen token (T = temperature, 1.0 when
greedy) taken before top-p/top-k, recorded step by step so that memory stays at one
``batch x vocab`` slice whatever ``max_new_tokens`` is. Rows that start alike share one
prefill of their common prefix: the engine's prefix sharer
(:func:`playpen.inference.prefill.prefill_prefixes`) over groups planned by
:func:`playpen.inference.prefixes.plan_prefixes`. Which groups share differs from the
engine's rule: here every row is padded into one ``generate`` call, so a row alone in its
group shares too (all but its last token go to the prefix pass, keeping the padded rest
short), and sharing is all-or-nothing (:func:`_worth_sharing`). An engine behind the door
(:class:`playpen.inference.types.Engine`) that keeps no cache between calls and takes no
per-row budgets.
"""
from __future__ import annotations

from contextlib import nullcontext
from playpen.inference.kvcache import PrefillCounts
from playpen.inference.mixed_lora import mixed_lora
from playpen.inference.model_facts import ModelFacts
from playpen.inference.prefill import prefill_prefixes
from playpen.inference.prefixes import PrefixPlan, plan_prefixes
from playpen.inference.sampling import check_finite_scores
from playpen.inference.types import Generation, SamplingConfig

CHUNKED = True
PER_ROW_BUDGETS = False


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


# Sharing must save at least this many prefill positions to be worth its extra pass.
MIN_SAVED_POSITIONS = 16


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


def generate(model, tokenizer, prompts, sampling: SamplingConfig, facts: ModelFacts, *, adapter_names, budgets,
             counts: PrefillCounts, cache, conversations, share_prefix: bool) -> list[Generation]:
    """One continuation per prompt in ONE ``model.generate`` (see the module doc and
    :func:`playpen.inference.engine.generate`, which splits calls into chunks of
    ``max_batch_size`` rows; :class:`playpen.inference.types.Engine`: ``cache`` and
    ``conversations`` are not used)."""
    import torch
    from transformers import LogitsProcessorList

    if budgets is not None:
        raise ValueError("per-row budgets need the cached path (cache= and a model with a plain KV cache)")
    if not prompts:
        return []
    if any(len(p) == 0 for p in prompts):
        raise ValueError("cannot generate from an empty prompt")
    eos_ids = facts.eos
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else eos_ids[0]
    device = facts.device
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
    # a group's prefix is run once (counted by prefill_prefixes), then the rest of each row
    counts.computed += len(prompts) * tail
    counts.prefilled += sum(len(p) - (plan.prefix_of(i) if plan else 0) for i, p in enumerate(prompts))
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
                kwargs[facts.cache_key] = _prefix_cache(model, plan, prompts, adapter_names, counts, facts)
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


def _prefix_cache(model, plan: PrefixPlan, prompts, adapter_names, counts: PrefillCounts, facts: ModelFacts):
    """Every row's KV cache of its group's prefix, ``head`` positions wide (the longest
    prefix; padding to the left). Its own function: benchmarks/rollouts.py times it."""
    import torch
    cache, _ = prefill_prefixes(model, prompts, plan.groups, adapter_names or [None] * len(prompts), counts, facts)
    cache.batch_select_indices(torch.tensor([plan.group_of(r) for r in range(len(prompts))],
                                            device=facts.device))
    return cache
