"""Batched generation from token ids with per-token logprobs.

One call = one ``model.generate`` over left-padded prompts. Each row stops at its
first EOS; the returned ids are exactly the generated ones (up to and including that
EOS, no padding) and the text is the decode of exactly those ids minus the EOS.
Logprobs are ``log_softmax(logits / T)`` of the chosen token (T = temperature, 1.0
when greedy) taken before top-p/top-k, recorded step by step so that memory stays at
one ``batch x vocab`` slice whatever ``max_new_tokens`` is.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from playpen.rollout import SamplingConfig


@dataclass(frozen=True)
class Generation:
    """One generated turn."""

    token_ids: tuple[int, ...]
    logprobs: tuple[float, ...]
    text: str
    finished: bool  # ended with an EOS (False: cut at max_new_tokens)


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


def _device_of(model):
    return next(model.parameters()).device


# Below this many shared tokens a separate prefix pass is not worth it.
MIN_SHARED_PREFIX = 16


def generate(model: Any, tokenizer: Any, prompts: Sequence[Sequence[int]],
             sampling: SamplingConfig, share_prefix: bool = True) -> list[Generation]:
    """Generate one continuation per prompt (token ids), in chunks of ``max_batch_size``.

    With ``share_prefix`` the longest prefix common to all prompts of a chunk (a GRPO
    group's prompt, a game's instructions, the chat template's system prompt) is run
    through the model once and its KV cache shared by every row; the rest of each
    prompt follows it, padded in between. Prefill is what dominates on a CPU.
    """
    out: list[Generation] = []
    step = max(1, sampling.max_batch_size)
    for start in range(0, len(prompts), step):
        out.extend(_generate_chunk(model, tokenizer, prompts[start:start + step], sampling, share_prefix))
    return out


def common_prefix_length(prompts: Sequence[Sequence[int]]) -> int:
    """Length of the longest common prefix, leaving at least one token of every prompt."""
    shortest = min(len(p) for p in prompts)
    first = prompts[0]
    length = 0
    while length < shortest - 1 and all(p[length] == first[length] for p in prompts):
        length += 1
    return length


def _generate_chunk(model, tokenizer, prompts, sampling: SamplingConfig, share_prefix: bool) -> list[Generation]:
    import torch
    from transformers import LogitsProcessorList

    if not prompts:
        return []
    if any(len(p) == 0 for p in prompts):
        raise ValueError("cannot generate from an empty prompt")
    eos_ids = eos_token_ids(model, tokenizer)
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else eos_ids[0]
    device = _device_of(model)
    shared = common_prefix_length(prompts) if share_prefix and len(prompts) > 1 else 0
    if shared < MIN_SHARED_PREFIX:
        shared = 0
    # rows: [shared prefix][padding][rest of the prompt]; padding is masked out and
    # position ids follow the attention mask, so every row sees its own prompt
    tail = max(len(p) - shared for p in prompts)
    width = shared + tail
    input_ids = torch.full((len(prompts), width), pad_id, dtype=torch.long)
    attention = torch.zeros((len(prompts), width), dtype=torch.long)
    for row, ids in enumerate(prompts):
        ids = list(ids)
        input_ids[row, :shared] = torch.tensor(ids[:shared], dtype=torch.long)
        attention[row, :shared] = 1
        rest = ids[shared:]
        input_ids[row, width - len(rest):] = torch.tensor(rest, dtype=torch.long)
        attention[row, width - len(rest):] = 1
    recorder = _LogprobRecorder(sampling.temperature)
    do_sample = sampling.temperature > 0
    kwargs = dict(max_new_tokens=sampling.max_new_tokens, do_sample=do_sample,
                  eos_token_id=eos_ids, pad_token_id=pad_id,
                  logits_processor=LogitsProcessorList([recorder]),
                  return_dict_in_generate=True)
    if do_sample:
        kwargs.update(temperature=sampling.temperature, top_p=sampling.top_p or 1.0,
                      top_k=sampling.top_k or 0)
    else:
        kwargs.update(temperature=None, top_p=None, top_k=None)
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            if shared:
                kwargs["past_key_values"] = _prefix_cache(model, input_ids[:1, :shared].to(device), len(prompts))
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


def _prefix_cache(model, prefix_ids, batch_size: int):
    """The KV cache of ``prefix_ids`` (batch 1), repeated for ``batch_size`` rows."""
    from transformers import DynamicCache
    cache = DynamicCache(config=model.config)
    model(input_ids=prefix_ids, past_key_values=cache, use_cache=True)
    cache.batch_repeat_interleave(batch_size)
    return cache
