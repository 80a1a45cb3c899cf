"""One pass over the prompt tokens that several rows of a training batch share.

The rows of a GRPO group are episodes of one instance, and the learner's prompts in them
share most of their tokens: a referencegame follower with the programmatic giver reads
one prompt of ~310 tokens and answers in ~5, eight times per group; in self-play the
followers' prompts differ only in the giver's expression at their end. A DPO pair's
chosen and rejected rows share their whole prompt. TRL's training forward runs every row
in full — the same prompt tokens several times, with the activations of each kept for the
backward pass.

One mechanism, for both: a row's prompt is its tokens before its first scored label. The
rows are grouped by the prompt prefix they share (:func:`playpen.inference.prefixes.plan_prefixes`,
the grouping the rollout engine prefills with: contiguous groups in sorted order that
minimise the tokens computed), each group's prefix runs once and gives a KV cache with
its autograd graph attached, the cache is indexed out to one entry per row
(``batch_select_indices``: differentiable, so the backward pass sums the rows' gradients
into the one prefix pass), and one call over each row's remaining tokens scores them. The
per-token outputs are put back in the rows' own layout, so the caller cannot tell.

Layout: prefix rows ``[padding][group prefix]``; rest rows ``[rest of the row][padding]``,
at positions that continue their prefix's, so the distances between a row's tokens are
those of TRL's pass (rotary embeddings see only distances). Rows must hold their real
tokens in one contiguous run: TRL's GRPO batch (left-padded prompts, right-padded
completions) and DPO batch (right-padded) do. The result is the same computation up to
floating-point summation order (tests: log-probs, entropies and LoRA gradients equal to
1e-5).

Used by :class:`playpen.training.trl_trainers.PlaypenGRPOTrainer`'s training forward and
reference pass (:func:`shared_prefix_logps`) and by :class:`~playpen.training.trl_trainers.TokenDPOTrainer`'s
passes (DPO, SPIN, self-rewarding: :class:`share_prompt_passes`);
single-process runs only (a data-parallel wrapper expects one forward per backward),
without activation checkpointing (which drops caches), for text-only models.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import torch

from playpen.inference.prefixes import plan_prefixes
from playpen.inference.transformers_compat import cache_kwarg

# sharing must save at least this share of the positions a plain pass computes
MIN_SAVED_SHARE = 0.2

# the per-token fields of TRL's fused-LM-head output
PER_TOKEN_FIELDS = ("log_probs", "entropy", "log_sum_sq_probs", "mean_logits", "is_top1")


@dataclass(frozen=True)
class TrainingPrefixPlan:
    """How a batch runs: ``groups[g] = (prefix_length, rows)``; ``spans[r] = (first real
    column, real tokens, first scored column)`` of row r; ``head``: the longest group prefix;
    ``tail``: the most real tokens a row has after its group's prefix."""

    groups: tuple
    spans: tuple
    head: int
    tail: int

    def prefixed(self) -> list[tuple]:
        """The groups with a prefix to run (a group of prefix 0 has none)."""
        return [(prefix, rows) for prefix, rows in self.groups if prefix > 0]

    def group_of(self) -> list[int]:
        """Each row's index into :meth:`prefixed` (rows without a prefix: 0, their prefix
        columns masked out)."""
        out = [0] * len(self.spans)
        for g, (_, rows) in enumerate(self.prefixed()):
            for r in rows:
                out[r] = g
        return out

    def prefix_of(self) -> list[int]:
        prefix = {r: p for p, rows in self.groups for r in rows}
        return [prefix[r] for r in range(len(self.spans))]

    @property
    def rest(self) -> int:
        """The longest remainder of a prompt after its group's prefix."""
        return max(scored - start - prefix
                   for (start, _, scored), prefix in zip(self.spans, self.prefix_of()))


def completion_labels(input_ids, attention_mask, logits_to_keep: int):
    """TRL's GRPO batch as labels: the last ``logits_to_keep`` columns (the completions,
    right-padded) are scored where attended, the prompts (left-padded) not."""
    labels = input_ids.masked_fill(attention_mask == 0, -100)
    labels[:, :-logits_to_keep] = -100
    return labels


def _row_spans(attention_mask, labels):
    """Per row: (first real column, real tokens, first scored column), or None when a row's
    real tokens are not one contiguous run or its first real token is scored."""
    spans = []
    for mask_row, label_row in zip(attention_mask.tolist(), labels.tolist()):
        real = [c for c, m in enumerate(mask_row) if m]
        if not real or real[-1] - real[0] + 1 != len(real):
            return None
        scored = next((c for c in real if label_row[c] != -100), real[-1] + 1)
        if scored <= real[0]:
            return None
        spans.append((real[0], len(real), scored))
    return spans


def plan(input_ids, attention_mask, labels) -> Optional[TrainingPrefixPlan]:
    """The grouping of a batch's rows by shared prompt prefix, or None where it saves less
    than MIN_SAVED_SHARE of the positions (or a row's real tokens are not contiguous)."""
    if input_ids.size(0) < 2:
        return None
    spans = _row_spans(attention_mask, labels)
    if spans is None:
        return None
    prompts = [input_ids[r, start:scored].tolist() for r, (start, _, scored) in enumerate(spans)]
    found = plan_prefixes(prompts)  # a row of one token (a role that never got a turn) shares nothing
    shared = [prefix for prefix, _ in found.groups if prefix > 0]
    if not shared:
        return None
    prefix_of = {r: p for p, rows in found.groups for r in rows}
    head = max(shared)
    tail = max(n - prefix_of[r] for r, (_, n, _) in enumerate(spans))
    rows, width = input_ids.shape
    if len(shared) * head + rows * tail > (1 - MIN_SAVED_SHARE) * rows * width:
        return None
    return TrainingPrefixPlan(found.groups, tuple(spans), head, tail)


def _cache_of(outputs):
    cache = getattr(outputs, "cache", None)  # transformers >= 5.24
    return cache if cache is not None else getattr(outputs, "past_key_values", None)


def shared_forward(model, input_ids, attention_mask, labels, forward=None):
    """TRL's fused-LM-head output (``model`` patched by TRL's ``add_fused_lm_head``, or a PEFT
    model around one) with every shared prompt prefix run once: the per-token fields in the
    rows' own layout (column j scores token j + 1, as TRL's). None where sharing does not
    pay (the caller runs its usual forward). ``forward`` runs the model: ``model`` itself
    unless given (:class:`share_prompt_passes` passes the forward it stands in for)."""
    found = plan(input_ids, attention_mask, labels)
    if found is None:
        return None
    forward = forward or model
    rows, width = input_ids.shape
    device = input_ids.device
    groups, group_of, prefix_of = found.prefixed(), found.group_of(), found.prefix_of()
    head, tail = found.head, found.tail
    # the prefixes, one row per group that has one: [padding][prefix]
    head_ids = torch.zeros((len(groups), head), dtype=input_ids.dtype, device=device)
    head_mask = torch.zeros((len(groups), head), dtype=attention_mask.dtype, device=device)
    for g, (prefix, members) in enumerate(groups):
        start = found.spans[members[0]][0]
        head_ids[g, head - prefix:] = input_ids[members[0], start:start + prefix]
        head_mask[g, head - prefix:] = 1
    # every row: [the rest of its tokens][padding], its labels alike
    tail_ids = torch.zeros((rows, tail), dtype=input_ids.dtype, device=device)
    tail_mask = torch.zeros((rows, tail), dtype=attention_mask.dtype, device=device)
    tail_labels = torch.full((rows, tail), -100, dtype=labels.dtype, device=device)
    for r, (start, n, _) in enumerate(found.spans):
        begin, count = start + prefix_of[r], n - prefix_of[r]
        tail_ids[r, :count] = input_ids[r, begin:start + n]
        tail_mask[r, :count] = 1
        tail_labels[r, :count] = labels[r, begin:start + n]
    positions = (head_mask.long().cumsum(-1) - 1).clamp(min=0)
    out = forward(input_ids=head_ids, attention_mask=head_mask, position_ids=positions, use_cache=True,
                  logits_to_keep=1)  # only the cache is wanted
    cache = _cache_of(out)
    if cache is None or not hasattr(cache, "batch_select_indices"):
        return None
    cache.batch_select_indices(torch.tensor(group_of, device=device))  # one entry per row; gradients flow back
    has_prefix = torch.tensor([p > 0 for p in prefix_of], dtype=head_mask.dtype, device=device)
    full_mask = torch.cat([head_mask[group_of] * has_prefix.unsqueeze(1), tail_mask], dim=1)  # no prefix: none seen
    tail_positions = torch.tensor(prefix_of, device=device).unsqueeze(1) + torch.arange(tail, device=device)
    shared = forward(input_ids=tail_ids, attention_mask=full_mask, position_ids=tail_positions,
                     labels=tail_labels, fused_lm_head=True, **{cache_kwarg(model): cache})
    # back to the rows' layout: the shared output's column j scores the row's token at
    # start + prefix + j + 1, i.e. column start + prefix + j of the usual (shifted) output
    fields = {}
    for name in PER_TOKEN_FIELDS:
        value = getattr(shared, name, None)
        if value is None:
            fields[name] = None
            continue
        placed = value.new_zeros((rows, width - 1))
        for r, (start, n, _) in enumerate(found.spans):
            offset = start + prefix_of[r]
            count = min(tail - 1, width - 1 - offset)
            placed[r, offset:offset + count] = value[r, :count]
        fields[name] = placed
    label_mask = labels[:, 1:] != -100
    loss = -fields["log_probs"].sum() / label_mask.sum().clamp(min=1)
    return type(shared)(loss=loss, label_mask=label_mask, aux_loss=None, **fields)


# ----------------------------------------------------------------------------- GRPO

def shared_prefix_logps(model, input_ids, attention_mask, logits_to_keep: int,
                        compute_entropy: bool = False) -> Optional[tuple]:
    """``(log_probs, entropies)`` of the last ``logits_to_keep`` tokens of every row of TRL's
    GRPO batch (left-padded prompts, right-padded completions), as TRL's fused-LM-head
    forward gives them, with every shared prompt prefix run once; None where sharing does
    not pay (the caller runs its usual forward)."""
    out = shared_forward(model, input_ids, attention_mask,
                         completion_labels(input_ids, attention_mask, logits_to_keep))
    if out is None:
        return None
    entropies = out.entropy[:, -logits_to_keep:] if compute_entropy else None
    return out.log_probs[:, -logits_to_keep:], entropies


# ----------------------------------------------------------------------------- DPO, SPIN, self-rewarding

class share_prompt_passes:
    """While active, ``model``'s fused-LM-head calls (TRL's DPO passes, the policy's and the
    reference's) run the prompt tokens that their rows share once (:func:`shared_forward`);
    other calls pass through. ``model``: a PEFT model or a model patched by TRL's
    ``add_fused_lm_head``."""

    def __init__(self, model):
        base = model.get_base_model() if hasattr(model, "get_base_model") else model
        self.base = base
        self.original = base.__dict__.get("forward")  # TRL's patched forward (an instance attribute)
        self.training_rows = 0  # rows that ran shared with gradients (the training pass, not the reference's)

    def __enter__(self):
        original = self.original
        if original is None:
            return self

        def forward(*args, fused_lm_head=False, labels=None, **kwargs):
            if fused_lm_head and labels is not None and not args:
                ids, mask = kwargs.pop("input_ids", None), kwargs.pop("attention_mask", None)
                kwargs.pop("use_cache", None)
                # PEFT adds inputs_embeds=None and the like; any other input: the usual pass
                if ids is not None and mask is not None and all(v is None for v in kwargs.values()):
                    out = shared_forward(self.base, ids, mask, labels, forward=original)
                    if out is not None:
                        if torch.is_grad_enabled():
                            self.training_rows += ids.size(0)
                        return out
                kwargs.update(input_ids=ids, attention_mask=mask)
            return original(*args, fused_lm_head=fused_lm_head, labels=labels, **kwargs)

        self.base.forward = forward
        return self

    def __exit__(self, *exc):
        if self.original is not None:
            self.base.forward = self.original
        return False
