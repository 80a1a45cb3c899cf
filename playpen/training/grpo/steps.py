"""GRPO steps in flat memory and without waste: the TRL settings of a step and playpen's
``GRPOTrainer`` subclass that times each phase of it.

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

:func:`grpo_trainer_class` is TRL's ``GRPOTrainer`` that logs each step's time split
(``time/rollout_s``, ``time/logprob_s``: no-grad log-prob passes, ``time/forward_s``,
``time/backward_s``, ``time/optimizer_s``, ``time/other_s``: rewards, padding,
bookkeeping; ``time/step_s``) through a :class:`~playpen.training.common.memory.StepClock`.
"""
from __future__ import annotations

import functools
import time
from dataclasses import dataclass
from typing import Optional

from playpen.training.common.config import option
from playpen.training.common.memory import StepClock, release_memory


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


def step_args(rows: int, micro_batch_size: int, gradient_checkpointing: bool) -> dict:
    """``GRPOConfig`` keywords for steps of ``rows`` trajectories generated once, used once,
    trained in micro-batches of at most ``micro_batch_size`` rows. In a data-parallel run of
    N processes each plays and trains ``rows / N`` of them (whole groups: the step's
    groups must be a multiple of N), so a step is the same global batch on any N."""
    from playpen.distributed import world_size
    if rows % world_size():  # grpo_parts refuses such a --groups-per-step first, in one line
        raise ValueError(f"{rows} trajectories per step cannot be shared by {world_size()} processes")
    rows //= world_size()
    micro = micro_batch(rows, micro_batch_size)
    return dict(per_device_train_batch_size=micro, gradient_accumulation_steps=rows // micro,
                steps_per_generation=rows // micro, num_iterations=1,
                activation_checkpointing=gradient_checkpointing)  # transformers 5's name of gradient checkpointing


class _NoTurnRows:
    """A filter for TRL's GRPO logger: playpen gives a row no reward (NaN from every reward
    function) on purpose when its role never got a turn (the episode ended or failed before
    it), so that the row stays out of its group's baseline; TRL warns about each such step
    with a dump of the row, which reads like an error. Other warnings pass."""

    def filter(self, record) -> bool:
        return "All reward functions returned None" not in record.getMessage()


@functools.lru_cache(maxsize=1)
def _quiet_trl_about_no_turn_rows() -> None:
    import logging
    logging.getLogger("trl.trainer.grpo_trainer").addFilter(_NoTurnRows())


@functools.lru_cache(maxsize=1)
def grpo_trainer_class():
    """TRL's ``GRPOTrainer`` that logs a per-step time split (``time/*_s``, kept in
    ``self.clock``, a :class:`~playpen.training.common.memory.StepClock`) and hands the memory of
    each step's rollout back to the system before the backward passes."""
    import torch
    from transformers import TrainerCallback
    from trl import GRPOTrainer
    _quiet_trl_about_no_turn_rows()

    class _ClockCallback(TrainerCallback):
        def __init__(self, trainer):
            self.trainer = trainer

        def on_step_begin(self, args, state, control, **kwargs):
            self.trainer.clock.start()

        def on_optimizer_step(self, args, state, control, **kwargs):
            # gradient clipping, the optimizer and zeroing the gradients
            ended = self.trainer._backward_ended
            if ended is not None:
                self.trainer.clock.add("optimizer", time.perf_counter() - ended)

    class PlaypenGRPOTrainer(GRPOTrainer):
        """GRPOTrainer timing the phases of every step into ``self.clock``."""

        def __init__(self, *args, clock: Optional[StepClock] = None, **kwargs):
            super().__init__(*args, **kwargs)
            self.clock = clock or StepClock()
            self._backward_ended: Optional[float] = None
            self._inside = 0.0
            self.share_prompts = True  # GRPOParts.attach sets --share-prompts
            self.shared_prompt_rows = 0  # rows of the step whose prompt ran shared in the training forward
            self.add_callback(_ClockCallback(self))
            if self.rollout_func is not None:
                rollout_func = self.rollout_func

                def timed_rollout(prompts, trainer):
                    with self.clock.phase("rollout"):
                        return rollout_func(prompts, trainer)
                self.rollout_func = timed_rollout

        def log(self, logs, *args, **kwargs):
            if self.model.training and "loss" in logs:  # a training step's line, not the summary
                logs = {**logs, **self.clock.metrics(), "train/shared_prompt_rows": self.shared_prompt_rows}
                self.shared_prompt_rows = 0
            return super().log(logs, *args, **kwargs)

        def _generate_and_score_completions(self, inputs):
            out = super()._generate_and_score_completions(inputs)
            # the rollout's generation caches and the game threads' buffers are garbage now
            release_memory()
            return out

        def _get_per_token_logps_and_entropies(self, *args, **kwargs):
            if torch.is_grad_enabled():  # the training forward: timed by compute_loss
                return self._logps_sharing_prompts(*args, **kwargs)
            with self.clock.phase("logprob"):
                return self._logps_sharing_prompts(*args, **kwargs)

        def _logps_sharing_prompts(self, model, input_ids, attention_mask, logits_to_keep, batch_size=None,
                                   compute_entropy=False, compute_aux_loss=False, **extra):
            """TRL's per-token log-probs, with the prompt tokens that rows of a chunk share run
            once (:mod:`playpen.training.shared_prefix`; ``--share-prompts``)."""
            plain = functools.partial(super()._get_per_token_logps_and_entropies, model,
                                      compute_entropy=compute_entropy, compute_aux_loss=compute_aux_loss, **extra)
            if not self.share_prompts or compute_aux_loss or any(v is not None for v in extra.values()) \
                    or self.args.activation_checkpointing or self.accelerator.num_processes > 1:
                return plain(input_ids, attention_mask, logits_to_keep, batch_size)
            from playpen.training.shared_prefix import shared_prefix_logps
            batch_size = batch_size or input_ids.size(0)
            logps, entropies = [], []
            for start in range(0, input_ids.size(0), batch_size):
                ids, mask = input_ids[start:start + batch_size], attention_mask[start:start + batch_size]
                with self.accelerator.autocast():
                    out = shared_prefix_logps(model, ids, mask, logits_to_keep, compute_entropy)
                if out is None:  # sharing would save little in this chunk
                    out = plain(ids, mask, logits_to_keep)[:2]
                elif torch.is_grad_enabled():  # counted in the training forward (not the reference pass)
                    self.shared_prompt_rows += ids.size(0)
                logps.append(out[0])
                entropies.append(out[1])
            return torch.cat(logps), (torch.cat(entropies) if compute_entropy else None), None

        def _prepare_inputs(self, generation_batch):
            began = time.perf_counter()
            try:
                if not self.share_prompts:
                    return super()._prepare_inputs(generation_batch)
                # TRL shuffles a step's rows before cutting them into micro-batches; rows are used
                # once and their gradients summed over the step, so the order changes nothing but
                # which rows meet in a micro-batch: keep rows of one prompt together instead
                import trl.trainer.grpo_trainer as trl_grpo
                shuffle = trl_grpo.shuffle_sequence_dict
                trl_grpo.shuffle_sequence_dict = rows_by_prompt
                try:
                    return super()._prepare_inputs(generation_batch)
                finally:
                    trl_grpo.shuffle_sequence_dict = shuffle
            finally:
                self._inside += time.perf_counter() - began

        def _compute_loss(self, model, inputs):
            # the KL term is computed at every completion position, then masked: keep it finite
            # at the game master's and partners' tokens (see masked_reference)
            return super()._compute_loss(model, masked_reference(inputs))

        def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
            began = time.perf_counter()
            try:
                return super().compute_loss(model, inputs, return_outputs, num_items_in_batch)
            finally:
                elapsed = time.perf_counter() - began
                self.clock.add("forward", elapsed)
                self._inside += elapsed

        def training_step(self, model, inputs, num_items_in_batch=None):
            began, self._inside = time.perf_counter(), 0.0
            out = super().training_step(model, inputs, num_items_in_batch)
            self._backward_ended = time.perf_counter()
            # what the step spent outside input preparation and the loss forward: the backward pass
            self.clock.add("backward", max(0.0, self._backward_ended - began - self._inside))
            anchor = getattr(self, "sft_anchor", None)
            if anchor is not None and anchor.apply(self, model):  # --sft-coef: once per optimizer step
                self._backward_ended = time.perf_counter()
            return out

    return PlaypenGRPOTrainer


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


@dataclass
class GRPOStepOptions:
    """How a GRPO step runs its trajectories (memory against time; the step's result is the same)."""

    micro_batch_size: int = option(1, "trajectories per forward and backward pass (gradients are accumulated over "
                                      "the step's micro-batches; more = more memory; on a CPU faster only with --share-prompts, "
                                      "when its rows share their prompt)")
    share_prompts: bool = option(True, "rows of a micro-batch whose prompts begin alike (a group's episodes up to "
                                       "the learner's first reply) run the shared tokens once, in the training and "
                                       "the reference pass: same gradients, less time and memory; needs "
                                       "--micro-batch-size > 1 (e.g. the group size); off with "
                                       "--gradient-checkpointing")
    gradient_checkpointing: bool = option(False, "keep only each layer's input for the backward pass and recompute "
                                                 "the rest: less memory for longer trajectories (~0.4 instead of "
                                                 "~1.7 GB per 512-token row on smol-135m), ~1.35x the backward time")
