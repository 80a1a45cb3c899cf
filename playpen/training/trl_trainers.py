"""playpen's subclasses of TRL's trainers: the one module that touches TRL's private surface.

TRL is extended one way: a subclass per trainer, playpen's options as fields of a config
subclass (:class:`PlaypenGRPOConfig`, :class:`PlaypenDPOConfig`) or constructor arguments (the
advantages, the supervised anchor) — never methods patched on an instance or attributes set
after construction. What is private here, tested with trl 1.16 (the range pinned in
pyproject.toml; widen it when a newer TRL passes the tests):

- ``GRPOTrainer._generate_and_score_completions``, ``._get_per_token_logps_and_entropies``,
  ``._compute_loss``, and ``._prepare_inputs`` with the attributes its training branch keeps
  (``_step``, ``_buffered_inputs``; overridden to cut a step into micro-batches by prompt);
- ``DPOTrainer._prepare_dataset`` and ``._compute_loss``;
- the log-prob kernel's tile sizes, module constants TRL reads at call time
  (``trl.kernels.chunked_logprob.TOKEN_CHUNK_SIZE``,
  ``trl.trainer.utils._CHUNKED_LOGPROB_CHUNK_SIZE``: :func:`use_cpu_logprob_tiles`);
- the logger ``trl.trainer.grpo_trainer`` (one warning filtered).

``tests/test_library_surfaces.py`` checks each of these names, and the signatures playpen
calls, against the installed TRL.

Imports torch and TRL: import it where a trainer is built, never on ``playpen --help``'s path.
"""
from __future__ import annotations

import functools
import logging
import time
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import Any, Optional

import torch
import trl.kernels.chunked_logprob as trl_kernel
import trl.trainer.utils as trl_utils
from transformers import TrainerCallback
from trl import DPOConfig, DPOTrainer, GRPOConfig, GRPOTrainer
from trl.trainer.utils import split_pixel_values_by_grid, split_tensor_dict, unsplit_pixel_values_by_grid

from playpen.inference.transformers_compat import checkpointing_on
from playpen.training.common.memory import StepClock, release_memory
from playpen.training.grpo.advantages import BatchAdvantages
from playpen.training.grpo.steps import masked_reference, rows_by_prompt
from playpen.training.shared_prefix import share_prompt_passes, shared_prefix_logps

SHARE_PROMPTS_HELP = "rows sharing the beginning of their prompt run those tokens once (playpen.training.shared_prefix)"


@dataclass
class PlaypenGRPOConfig(GRPOConfig):
    """TRL's GRPOConfig and playpen's options of a GRPO step."""

    share_prompts: bool = field(default=True, metadata={"help": SHARE_PROMPTS_HELP})
    rollout_correction: bool = field(default=False, metadata={
        "help": "the rollouts came from vLLM: TRL's importance-sampling correction of its logprobs "
                "(playpen.training.grpo.steps.correction_args)"})


@dataclass
class PlaypenDPOConfig(DPOConfig):
    """TRL's DPOConfig and playpen's options of a DPO step."""

    share_prompts: bool = field(default=False, metadata={"help": SHARE_PROMPTS_HELP})


# ----------------------------------------------------------------------------- GRPO

LOGPROB_TILE_TOKENS = 512
LOGPROB_TILE_VOCAB = 8192


def use_cpu_logprob_tiles() -> bool:
    """On a CPU, TRL's per-token log-prob kernel in small tiles (False on a GPU: left as TRL
    has it). TRL's tiles of 4096 tokens x 32768 vocabulary entries are 512 MB in fp32 with
    temporaries a few times that: 1 GB more peak for a batch of 2 x 512 tokens on smol-135m
    (``benchmarks/memory.py``). TRL offers no option for them: they are module constants it
    reads at call time, so this sets them for the process."""
    if torch.cuda.is_available():
        return False
    trl_kernel.TOKEN_CHUNK_SIZE = min(trl_kernel.TOKEN_CHUNK_SIZE, LOGPROB_TILE_TOKENS)
    trl_utils._CHUNKED_LOGPROB_CHUNK_SIZE = min(trl_utils._CHUNKED_LOGPROB_CHUNK_SIZE, LOGPROB_TILE_VOCAB)
    return True


class _NoTurnRows:
    """A filter for TRL's GRPO logger: playpen gives a row no reward (NaN from every reward
    function) on purpose when its role never got a turn (the episode ended or failed before
    it), so that the row stays out of its group's baseline; TRL warns about each such step
    with a dump of the row, which reads like an error. Other warnings pass."""

    def filter(self, record) -> bool:
        return "All reward functions returned None" not in record.getMessage()


logging.getLogger("trl.trainer.grpo_trainer").addFilter(_NoTurnRows())


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

class _SyncedByEngine:
    """TRL's weight-sync hook when playpen's vLLM engine generates: it serves each step's
    adapter under a new id, or takes a full learner's changed base weights, on its next call
    (playpen.inference.vllm_engine)."""

    def sync_weights(self):
        pass


class PlaypenGRPOTrainer(GRPOTrainer):
    """TRL's GRPOTrainer with playpen's step: the advantages of ``--baseline``/``--credit``
    (`advantages`, a :class:`~playpen.training.grpo.advantages.BatchAdvantages`; None: TRL's
    group advantages), the supervised anchor of ``--sft-coef`` (`sft_anchor`, a
    :class:`~playpen.training.sft.anchor.SFTAnchor`), prompts shared within a micro-batch
    (``args.share_prompts``), the memory of each rollout handed back before the backward
    passes, and the phases of every step timed into ``self.clock`` (a
    :class:`~playpen.training.common.memory.StepClock`: ``time/*_s``)."""

    def __init__(self, *args, advantages: Optional[BatchAdvantages] = None, sft_anchor: Any = None,
                 clock: Optional[StepClock] = None, **kwargs):
        use_cpu_logprob_tiles()
        super().__init__(*args, **kwargs)
        if not isinstance(self.args, PlaypenGRPOConfig):
            raise TypeError(f"{type(self).__name__} needs args=PlaypenGRPOConfig(...) (playpen's options on TRL's "
                            f"GRPOConfig), got {type(self.args).__name__}")
        self.advantages = advantages
        self.sft_anchor = sft_anchor
        self.clock = clock or StepClock()
        self._backward_ended: Optional[float] = None
        self._inside = 0.0
        self.shared_prompt_rows = 0  # rows of the step whose prompt ran shared in the training forward
        self.no_signal_rows = 0  # rows of the step whose micro-batch carried no signal (no forward, no backward)
        self.add_callback(_ClockCallback(self))
        if self.args.rollout_correction:
            # TRL applies its correction (the trainer's logprobs recomputed, the truncated
            # ratio, its metrics) to rollouts "from vLLM": ours came from playpen's vLLM engine,
            # which takes each step's weights by itself, so TRL's weight sync has nothing to do
            self.use_vllm = True
            self.vllm_generation, self._last_loaded_step = _SyncedByEngine(), -1
        if self.rollout_func is not None:
            rollout_func = self.rollout_func

            def timed_rollout(prompts, trainer):
                with self.clock.phase("rollout"):
                    return rollout_func(prompts, trainer)
            self.rollout_func = timed_rollout

    def log(self, logs, *args, **kwargs):
        if self.model.training and "loss" in logs:  # a training step's line, not the summary
            logs = {**logs, **self.clock.metrics(), "train/shared_prompt_rows": self.shared_prompt_rows,
                    "train/no_signal_rows": self.no_signal_rows}
            self.shared_prompt_rows = self.no_signal_rows = 0
        return super().log(logs, *args, **kwargs)

    def _generate_and_score_completions(self, inputs):
        out = super()._generate_and_score_completions(inputs)
        # the rollout's generation caches and the game threads' buffers are garbage now
        release_memory()
        if self.advantages is not None:
            out = self.advantages.apply(out, int(self.state.global_step or 0))
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
        if not self.args.share_prompts or compute_aux_loss or any(v is not None for v in extra.values()) \
                or checkpointing_on(self.args) or self.accelerator.num_processes > 1:
            return plain(input_ids, attention_mask, logits_to_keep, batch_size)
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
        """TRL's, except that with ``--share-prompts`` a generated step is cut into
        micro-batches with the rows of one prompt together (:func:`rows_by_prompt`) where TRL
        shuffles them: rows are used once and their gradients summed over the step, so the
        order changes nothing but which rows meet in a micro-batch. The rest is TRL 1.16's
        training branch: generate every ``steps_per_generation x num_iterations`` calls (or
        when nothing is buffered, as after a resume), then hand out one buffered micro-batch
        per call."""
        began = time.perf_counter()
        try:
            if not (self.args.share_prompts and self.model.training):
                return super()._prepare_inputs(generation_batch)
            steps = self.args.steps_per_generation
            if self._step % (steps * self.num_iterations) == 0 or self._buffered_inputs is None:
                step = split_pixel_values_by_grid(self._generate_and_score_completions(generation_batch))
                self._buffered_inputs = [unsplit_pixel_values_by_grid(batch)
                                         for batch in split_tensor_dict(rows_by_prompt(step), steps)]
            return self._buffered_inputs[self._step % steps]
        finally:
            self._inside += time.perf_counter() - began

    def _compute_loss(self, model, inputs):
        # the KL term is computed at every completion position, then masked: keep it finite
        # at the game master's and partners' tokens (see masked_reference)
        return super()._compute_loss(model, masked_reference(inputs))

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        began = time.perf_counter()
        try:
            advantages = inputs.get("advantages")
            if self.beta == 0.0 and not return_outputs and isinstance(advantages, torch.Tensor) \
                    and not bool(advantages.any()):
                # advantage 0 at every row and no KL term: the loss and every gradient are exactly 0
                # (a group whose episodes all scored alike). The same zero gradients, without the
                # forward and backward passes over the rows (on a CPU most of such a step's time)
                self.no_signal_rows += int(advantages.size(0))
                return sum(p.sum() for p in model.parameters() if p.requires_grad) * 0.0
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
        if self.sft_anchor is not None and self.sft_anchor.apply(self, model):  # --sft-coef: once per optimizer step
            self._backward_ended = time.perf_counter()
        return out


# ----------------------------------------------------------------------------- DPO

class TokenDPOTrainer(DPOTrainer):
    """DPOTrainer on ``prompt_ids``/``chosen_ids``/``rejected_ids`` rows (TRL would render and
    re-tokenise ``prompt``/``chosen``/``rejected`` text instead), a pair's prompt run once when
    ``args.share_prompts``."""

    def _prepare_dataset(self, dataset, processing_class, args, dataset_name):
        missing = {"prompt_ids", "chosen_ids", "rejected_ids"} - set(dataset.column_names)
        if missing:
            return super()._prepare_dataset(dataset, processing_class, args, dataset_name)
        return dataset

    shared_prompt_rows = 0  # rows of the step's training passes whose prompt ran shared

    def _sharing(self):
        if not self.args.share_prompts or checkpointing_on(self.args) or self.accelerator.num_processes > 1:
            return nullcontext()
        return share_prompt_passes(self.accelerator.unwrap_model(self.model))

    def _compute_loss(self, model, inputs, return_outputs):
        with self._sharing() as sharing:
            out = super()._compute_loss(model, inputs, return_outputs)
        if sharing is not None:  # (the context counts only passes with gradients)
            self.shared_prompt_rows += sharing.training_rows
        return out

    def compute_ref_log_probs(self, model, inputs):
        with self._sharing():
            return super().compute_ref_log_probs(model, inputs)

    def log(self, logs, *args, **kwargs):
        if self.model.training and "loss" in logs:  # a training step's line
            logs = {**logs, "shared_prompt_rows": self.shared_prompt_rows}
            self.shared_prompt_rows = 0
        return super().log(logs, *args, **kwargs)
