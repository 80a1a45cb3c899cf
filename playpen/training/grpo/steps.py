"""GRPO steps in flat memory and without waste: the TRL settings of a step (playpen's
``GRPOTrainer`` subclass that runs them and times each phase is
:class:`playpen.training.trl_trainers.PlaypenGRPOTrainer`).

Where the memory of a GRPO step goes (smol-135m, fp32, LoRA r16 on every linear layer,
16 trajectories of up to 512 tokens; ``benchmarks/memory.py`` measures it): the
activations kept for the backward pass, about 3.3 MB per token over the model's 30 layers
(+1.7 GB at the backward's peak per 512-token row: 27 GB for 16 such rows in one pass, as
TRL's defaults run them), and TRL's log-prob tiles (see :mod:`playpen.training.common.memory`).
A step therefore runs its rows in micro-batches (``--micro-batch-size`` rows per forward
and backward; gradients are accumulated, so the optimizer step and the advantages are
those of the whole step); ``--gradient-checkpointing`` keeps only each layer's input and
recomputes the rest during the backward pass (~0.4 GB per 512-token row, ~1.35x the
backward time) for longer trajectories.

No forward pass is wasted: the rows of a step are generated once and used once
(``num_iterations=1`` and ``steps_per_generation`` = the micro-batches of one step), so
TRL takes the old policy's log-probs from the training forward itself (the policy that
sampled is the policy being trained) instead of running a pass for them; the only
no-grad pass left is the reference pass of the KL term (``--beta`` > 0).

The trainer logs each step's time split
(``time/rollout_s``, ``time/logprob_s``: no-grad log-prob passes, ``time/forward_s``,
``time/backward_s``, ``time/optimizer_s``, ``time/other_s``: rewards, padding,
bookkeeping; ``time/step_s``) through a :class:`~playpen.training.common.memory.StepClock`.
"""
from __future__ import annotations

from dataclasses import dataclass

from playpen.distributed import world_size
from playpen.inference.transformers_compat import checkpointing_args
from playpen.training.common.config import PrecisionOptions, option


def micro_batch(rows: int, wanted: int) -> int:
    """The largest divisor of ``rows`` that is at most ``wanted`` (TRL splits a step's
    rows into equal micro-batches)."""
    wanted = max(1, min(wanted, rows))
    return next(m for m in range(wanted, 0, -1) if rows % m == 0)


# the reference log-prob put at masked completion positions: exp(ref - logp) is 0 there, not inf
MASKED_REFERENCE_LOGP = -1.0e4


def masked_reference(inputs: dict) -> dict:
    """``inputs`` with the reference log-probs at masked completion positions (padding, and
    the game master's and partners' tokens inside a multi-turn completion) set to
    :data:`MASKED_REFERENCE_LOGP`.

    TRL computes the KL term ``exp(ref - logp) - (ref - logp) - 1`` at every position and
    masks it afterwards. At a token the learner did not write, its log-prob can fall far
    below the reference's as the policy moves (-95 against -3 on a game master's word);
    ``exp`` then overflows to inf, and inf × 0 is NaN: in the loss, in every gradient and,
    after the optimizer step, in every weight. With the masked reference the term is
    finite there and still multiplied by 0; positions the loss counts are untouched."""
    ref = inputs.get("ref_per_token_logps")
    if ref is None:
        return inputs
    mask = inputs["completion_mask"]
    if "tool_mask" in inputs:
        mask = mask * inputs["tool_mask"]
    return {**inputs, "ref_per_token_logps": ref.masked_fill(mask == 0, MASKED_REFERENCE_LOGP)}


# --micro-batch-size 0 on a GPU: rows per forward/backward pass. benchmarks/scale.py (H200): 16 rows of
# ~440 tokens of the Qwen3-1.7B shape peak at 40 GB with LoRA, 64 at once did not fit in 140 GB.
GPU_MICRO_BATCH = 16


def automatic_micro_batch() -> int:
    """``--micro-batch-size 0``: up to :data:`GPU_MICRO_BATCH` rows per pass on a GPU (one pass
    per step at smol-135m's step sizes; a launch-bound GPU wants few, large passes), 1 on a
    CPU (memory-safe for long multi-turn rows, and on a CPU a larger pass is not faster)."""
    import torch
    return GPU_MICRO_BATCH if torch.cuda.is_available() else 1


def step_args(rows: int, micro_batch_size: int, gradient_checkpointing: bool) -> dict:
    """``GRPOConfig`` keywords for steps of ``rows`` trajectories generated once, used once,
    trained in micro-batches of at most ``micro_batch_size`` rows. In a data-parallel run of
    N processes each plays and trains ``rows / N`` of them (whole groups: the step's
    groups must be a multiple of N), so a step is the same global batch on any N."""
    if rows % world_size():  # grpo_parts refuses such a --groups-per-step first, in one line
        raise ValueError(f"{rows} trajectories per step cannot be shared by {world_size()} processes")
    rows //= world_size()
    micro = micro_batch(rows, micro_batch_size or automatic_micro_batch())
    return dict(per_device_train_batch_size=micro, gradient_accumulation_steps=rows // micro,
                steps_per_generation=rows // micro, num_iterations=1, **checkpointing_args(gradient_checkpointing))


def rows_by_prompt(batch: dict) -> dict:
    """``batch`` (TRL's dict of per-row sequences) with its rows sorted by their prompt
    (``prompt_ids`` without the padding of ``prompt_mask``; ties keep their order): rows of
    one prompt, and prompts that begin alike, end up next to each other, so that the
    micro-batches cut from the step share as much prompt as possible (``--share-prompts``)."""
    import torch
    ids, mask = batch.get("prompt_ids"), batch.get("prompt_mask")
    if not isinstance(ids, torch.Tensor) or ids.ndim != 2:
        return batch
    rows = ids.tolist()
    if isinstance(mask, torch.Tensor) and mask.shape == ids.shape:
        rows = [[t for t, m in zip(row, keep) if m] for row, keep in zip(rows, mask.tolist())]
    order = sorted(range(len(rows)), key=lambda i: (rows[i], i))

    def permute(value):
        if value is None or (isinstance(value, torch.Tensor) and value.ndim == 0):
            return value
        if isinstance(value, torch.Tensor):
            return value[torch.tensor(order, device=value.device)]
        return [value[i] for i in order]

    return {key: permute(value) for key, value in batch.items()}


def correction_args(cfg, engine: str) -> dict:
    """``GRPOConfig`` keywords of the rollout correction: with ``--engine vllm`` the trainer
    recomputes the rollouts' logprobs and weights each token's loss by TRL's truncated
    importance ratio ``min(exp(logp_train - logp_vllm), cap)`` (``token_truncate``), logging
    the mismatch per step (``sampling/sampling_logp_difference/*``,
    ``sampling/importance_sampling_ratio/*``); :class:`playpen.training.trl_trainers.PlaypenGRPOTrainer`
    turns TRL's correction on."""
    if engine != "vllm" or not cfg.rollout_correction:
        return {}
    return dict(rollout_correction=True, vllm_importance_sampling_correction=True,
                vllm_importance_sampling_mode="token_truncate",
                vllm_importance_sampling_clip_max=cfg.rollout_correction_cap)


@dataclass
class GRPOStepOptions(PrecisionOptions):
    """How a GRPO step runs its trajectories (memory against time; the step's result is the same)
    and in which precision."""

    micro_batch_size: int = option(0, "trajectories per forward and backward pass (gradients are accumulated over "
                                      "the step's micro-batches; more = more memory; on a CPU faster only with --share-prompts, "
                                      "when its rows share their prompt); 0 = automatic: up to 16 on a GPU, 1 on a CPU")
    share_prompts: bool = option(True, "rows of a micro-batch whose prompts begin alike (a group's episodes up to "
                                       "the learner's first reply) run the shared tokens once, in the training and "
                                       "the reference pass: same gradients, less time and memory; needs "
                                       "--micro-batch-size > 1 (e.g. the group size); off with "
                                       "--gradient-checkpointing")
    rollout_correction: bool = option(True, "with --engine vllm: recompute the rollouts' logprobs in the trainer "
                                            "and weight each token by the truncated importance ratio of the "
                                            "two (TRL's token_truncate); the mismatch is logged per step")
    rollout_correction_cap: float = option(3.0, "the largest importance ratio of --rollout-correction (TRL's default)")
    gradient_checkpointing: bool = option(False, "keep only each layer's input for the backward pass and recompute "
                                                 "the rest: less memory for longer trajectories (~0.4 instead of "
                                                 "~1.7 GB per 512-token row on smol-135m), ~1.35x the backward time")
