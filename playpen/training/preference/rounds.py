"""Preference optimisation over games: the part DPO and SPIN share.

- :class:`PreferenceOptions`: rounds, β, loss, the starting adapter, batch and length.
- Token ids of a pair (:func:`pair_row`): branch and SPIN pairs bring the ids the model
  saw and generated; pairs of messages (recorded play, demonstrations) are rendered with
  the learner's chat template — the prompt exactly as the rollout engine renders a first
  prompt (:func:`playpen.rollouts.chat.prompt_ids`), the turn as the tokens between the
  prompt's render and the render with the turn (up to its end-of-turn token).
- TRL's ``DPOTrainer`` re-tokenises every dataset from text;
  :class:`~playpen.training.trl_trainers.TokenDPOTrainer` is the same trainer taking the ids as they are (``prompt_ids``/``chosen_ids``/
  ``rejected_ids`` columns), so that a branch pair's prompt is the fork's prompt token
  for token.
- :class:`PreferenceRun`: rounds of DPO on one :class:`~playpen.training.common.lifecycle.TrainingRun`.
  Round r trains optimizer steps ``(b[r-1], b[r]]`` of ``--max-steps`` split evenly over
  ``--rounds``, on pairs collected with the policy it starts from; checkpoints number the
  steps of the whole run (``checkpoint-N``), so ``--resume`` finds the round to continue.
  The reference of the DPO loss is the policy a round starts from, never a second copy
  of the model: with a fresh LoRA adapter it is the base model with the adapter
  disabled; when a round starts from an adapter (``--init-adapter``, or the previous
  round's), TRL keeps a frozen copy of that adapter (``ref``) beside the trained one.

Each logged step carries the step's peak and the current resident memory
(``memory/peak_rss_mb``, ``memory/rss_mb``: :mod:`playpen.training.common.memory`) and the round's
pair counts.
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

from playpen import distributed
from playpen.errors import DatasetError, TrainingSetupError
from playpen.inference.transformers_compat import checkpointing_args
from playpen.models import check_adapter, check_model_name, load_init_adapter
from playpen.pairs import PreferencePair, read_pairs, write_pairs
from playpen.rollouts.chat import normalize_messages, prompt_ids, template_kwargs_of
from playpen.training.common import lifecycle
from playpen.training.common.config import PrecisionOptions, option


@dataclass
class PreferenceOptions(PrecisionOptions):
    """DPO over pairs from games (also sets DPO's own defaults of the run options)."""

    rounds: int = option(1, "rounds: each collects its pairs with the policy it starts from (the previous "
                            "round's) and trains --max-steps/--rounds steps from it")
    beta: float = option(0.1, "DPO beta: how far the policy may move from the reference")
    loss_type: str = option("sigmoid", "TRL DPO loss (sigmoid = DPO, ipo, hinge, robust, ...)")
    init_adapter: str = option("", "start from this adapter (e.g. an SFT checkpoint of the same base model)")
    batch_size: int = option(4, "pairs per optimizer step (per device)")
    gradient_accumulation_steps: int = option(1, "micro-batches per step")
    max_length: int = option(1024, "tokens per prompt + turn (longer: the turn is cut; a prompt this long: "
                                   "the pair is dropped)")
    max_steps: int = option(20, "optimizer steps (all rounds together)")
    learning_rate: float = option(5e-5, "learning rate")
    share_prompts: bool = option(True, "a pair's chosen and rejected rows run their shared prompt once (one pair "
                                       "per forward and backward pass, --batch-size pairs accumulated, without "
                                       "activation checkpointing: about half the positions; false: --batch-size "
                                       "pairs in one pass with checkpointing)")

    def validate(self) -> None:
        super().validate()
        if self.max_steps < self.rounds:
            raise TrainingSetupError(f"--max-steps {self.max_steps} is fewer than --rounds {self.rounds}: "
                                     f"every round needs at least one step")
        if self.beta <= 0:
            raise TrainingSetupError(f"option --beta: {self.beta} is not valid; expected a number > 0")


def check_init_adapter(adapter: str, learner: str) -> None:
    """``--init-adapter`` is a PEFT adapter trained on the learner's own base model (checked
    from the registry entry and adapter_config.json; no model is loaded)."""
    if not adapter:
        return
    entry = check_model_name(learner, "learner")
    check_adapter(adapter, base_model=entry.spec.get("huggingface_id"))


def round_bounds(max_steps: int, rounds: int) -> list[int]:
    """The last global step of each round (index 0: 0)."""
    return [round(r * max_steps / rounds) for r in range(rounds + 1)]




# ----------------------------------------------------------------------------- token ids

def turn_ids(tokenizer, prompt: Sequence[dict], content: str, template_kwargs: Optional[dict] = None) -> list[int]:
    """The ids of an assistant turn `content` after `prompt`, as the chat template renders
    it, up to and including the end-of-turn (EOS) token."""
    messages = normalize_messages(prompt)
    kwargs = dict(tokenize=False, **(template_kwargs or {}))
    before = tokenizer.apply_chat_template(messages, add_generation_prompt=True, **kwargs)
    whole = tokenizer.apply_chat_template(messages + [{"role": "assistant", "content": content}], **kwargs)
    if not whole.startswith(before):
        raise DatasetError("the chat template does not render a prompt with its generation prompt as a "
                           "prefix of the prompt with the answer; pairs of messages cannot be tokenised")
    ids = list(tokenizer(whole[len(before):], add_special_tokens=False)["input_ids"])
    eos = tokenizer.eos_token_id
    return ids[:ids.index(eos) + 1] if eos in ids else ids


def pair_row(tokenizer, pair: PreferencePair, template_kwargs: Optional[dict] = None) -> dict:
    """``{prompt_ids, chosen_ids, rejected_ids}`` of a pair: its own ids when it has them."""
    if pair.has_ids:
        return {"prompt_ids": list(pair.prompt_ids), "chosen_ids": list(pair.chosen_ids),
                "rejected_ids": list(pair.rejected_ids)}
    return {"prompt_ids": prompt_ids(tokenizer, pair.prompt, template_kwargs),
            "chosen_ids": turn_ids(tokenizer, pair.prompt, pair.chosen, template_kwargs),
            "rejected_ids": turn_ids(tokenizer, pair.prompt, pair.rejected, template_kwargs)}


def pair_dataset(pairs: Sequence[PreferencePair], tokenizer, *, max_length: int,
                 template_kwargs: Optional[dict] = None, seed: int = 42):
    """A shuffled ``datasets.Dataset`` of token-id pairs; pairs whose prompt alone fills
    `max_length` are dropped (TRL would cut every turn token). DatasetError when none is left."""
    import random

    from datasets import Dataset
    rows = [pair_row(tokenizer, p, template_kwargs) for p in pairs]
    rows = [r for r in rows if len(r["prompt_ids"]) < max_length and r["chosen_ids"] != r["rejected_ids"]]
    if not rows:
        raise DatasetError(f"no preference pairs to train on ({len(pairs)} pairs; none with a prompt under "
                           f"--max-length {max_length} tokens and two different turns)")
    random.Random(seed).shuffle(rows)
    return Dataset.from_list(rows)


def dpo_args(cfg, run_dir, plan, seed: int, report_to: Any) -> Any:
    """playpen's ``DPOConfig`` of a round of a DPO-family trainer (DPO, SPIN, self-rewarding).
    With ``--share-prompts`` each forward and backward pass holds one pair, whose two rows
    run their shared prompt once, and a step accumulates ``--batch-size`` pairs (the same
    step: DPO's loss is a mean over pairs); activation checkpointing, which cannot keep the
    prompt's cache, is off: a pass keeps one prompt's activations instead of several rows'."""
    from playpen.training.trl_trainers import PlaypenDPOConfig
    if cfg.share_prompts:
        batch = dict(per_device_train_batch_size=1,
                     gradient_accumulation_steps=cfg.batch_size * cfg.gradient_accumulation_steps,
                     **checkpointing_args(False))
    else:
        batch = dict(per_device_train_batch_size=cfg.batch_size,
                     gradient_accumulation_steps=cfg.gradient_accumulation_steps, **checkpointing_args(True))
    return PlaypenDPOConfig(
        output_dir=str(run_dir), max_steps=plan.max_steps, learning_rate=cfg.learning_rate, beta=cfg.beta,
        loss_type=[cfg.loss_type], max_length=cfg.max_length, lr_scheduler_type="constant", logging_steps=1,
        save_strategy="steps", save_steps=cfg.save_steps, save_total_limit=cfg.save_total_limit,
        report_to=report_to, seed=seed, dataloader_num_workers=0, disable_tqdm=True,
        ignore_data_skip=plan.ignore_data_skip, share_prompts=cfg.share_prompts, **batch,
        **lifecycle.precision_kwargs(cfg.precision))


# ----------------------------------------------------------------------------- rounds

PairsFn = Callable[[int, Any], list]
"""``(round, policy) -> pairs``: the pairs of a round, collected with `policy` (the
learner's model as the round starts: a PeftModel from round 2 or with --init-adapter)."""


@dataclass(frozen=True)
class RoundPlan:
    """What the DPO trainer of a round needs from the run: its last global step (the
    ``max_steps`` of its TRL config: a round resumes from the checkpoint the previous one
    ended with), whether to replay the data from its start (``ignore_data_skip``: new
    pairs; False when resuming inside the round), the LoRA config of a fresh adapter
    (None when the policy already is a PeftModel) and the callbacks (log, Ctrl-C)."""

    round: int
    max_steps: int
    ignore_data_skip: bool
    peft_config: Any
    callbacks: list


class PreferenceRun:
    """Rounds of DPO with LoRA for ``trainer`` (a BasePlayPen whose config has
    :class:`PreferenceOptions`, LoRA options and RunConfig) into
    ``<models_dir>/<kind>/<learner>[/<tag>]`` (checkpoints, ``pairs-round-R.jsonl``, the
    log); the final evaluation goes to ``<results_dir>/<learner>+<kind>-[<tag>-]checkpoint-N``.

    Created before anything is collected or trained: it refuses what
    :class:`~playpen.training.common.lifecycle.TrainingRun` refuses (``--resume`` without a checkpoint,
    checkpoints without ``--resume``/``--overwrite``, another run's evaluation results).
    """

    def __init__(self, trainer, kind: str, tag: str = ""):
        cfg = trainer.config
        self.trainer, self.cfg, self.kind = trainer, cfg, kind
        self.run_name = f"{kind}/{lifecycle.safe_name(trainer.learner.name)}" + (f"/{tag}" if tag else "")
        self.run = lifecycle.TrainingRun(trainer, Path(cfg.models_dir) / self.run_name, cfg.game_list,
                                         eval_prefix=f"{trainer.learner.name}+{kind}-" + (f"{tag}-" if tag else ""))
        self.run_dir = self.run.run_dir
        self.bounds = round_bounds(cfg.max_steps, cfg.rounds)
        self.tokenizer = lifecycle.tokenizer_of(trainer.learner)
        self.template_kwargs = template_kwargs_of(trainer.learner)
        self.base = lifecycle.model_of(trainer.learner)
        self.round_metrics: dict[str, float] = {}
        self.num_pairs: list[int] = []

    def _policy(self, round_: int, start: int):
        """The model a (resumed) round starts from: round 1 from the base model (a fresh
        adapter) or --init-adapter; round r > 1 from the adapter round r-1 ended with."""
        if round_ == 1:
            if not self.cfg.init_adapter:
                return self.base
            source = Path(self.cfg.init_adapter)
        elif start == self.bounds[round_ - 1]:
            source = self.run_dir / f"checkpoint-{start}"
        else:
            source = self.run_dir / f"reference-round-{round_}"
        if not (source / "adapter_config.json").exists():
            raise TrainingSetupError(f"cannot resume round {round_}: its starting adapter {source} is missing; "
                                     f"start over with --overwrite")
        return load_init_adapter(self.base, source)

    def _metrics(self) -> dict[str, float]:
        return dict(self.round_metrics)  # the step's memory: run.make_trainer_callback

    def train(self, make_pairs: PairsFn, make_trainer: Callable[[Any, Any, "RoundPlan"], Any],
              collection_metrics: Optional[Callable[[], dict]] = None) -> Optional[Path]:
        """Every round still to train: collect (or, resuming inside a round, re-read) its
        pairs, then ``make_trainer(policy, dataset, plan)`` — the TRL DPO trainer of the
        round (see :class:`RoundPlan`) — and train it. Stops after a Ctrl-C or a callback's
        stop. `collection_metrics` (e.g. the rollouts' % played) joins every step's log line.
        Returns the last complete checkpoint."""
        start = lifecycle.checkpoint_step(self.run.resume_from) if self.run.resume_from else 0
        if start >= self.bounds[-1]:  # a finished run resumed: nothing to train, its adapter is evaluated
            load_init_adapter(self.base, self.run.resume_from, trainable=False)
            self.run.checkpoint = Path(self.run.resume_from)
            return self.run.checkpoint
        policy = None
        for round_ in range(1, self.cfg.rounds + 1):
            first, last = self.bounds[round_ - 1], self.bounds[round_]
            if start >= last:
                continue
            if policy is None:
                policy = self._policy(round_, start)
            inside = start > first
            pairs_file = self.run_dir / f"pairs-round-{round_}.jsonl"
            collected = {}
            if inside and pairs_file.exists():
                pairs = read_pairs(pairs_file)
            else:
                # a data-parallel run trains rank 0's pairs on every rank (branching gathers every
                # rank's share of the pairs first, so they are the same list everywhere)
                pairs = distributed.from_main(make_pairs(round_, policy))
                if distributed.is_main():
                    write_pairs(pairs, pairs_file)
                collected = dict(collection_metrics() if collection_metrics else {})
            self.num_pairs.append(len(pairs))
            if distributed.is_main():
                print(f"[playpen] round {round_}/{self.cfg.rounds}: {len(pairs)} preference pairs ({pairs_file})",
                      flush=True)
            dataset = pair_dataset(pairs, self.tokenizer, max_length=self.cfg.max_length,
                                   template_kwargs=self.template_kwargs, seed=self.trainer.seed + round_)
            self.round_metrics = {**collected, "pairs/round": round_, "pairs/num": len(dataset)}
            fresh_adapter = policy is self.base
            if not fresh_adapter and not inside and round_ > 1 and distributed.is_main():
                # the reference of this round, for a --resume inside it
                policy.save_pretrained(str(self.run_dir / f"reference-round-{round_}"),
                                       selected_adapters=["default"])
            plan = RoundPlan(round_, last, ignore_data_skip=not inside,
                             peft_config=self.cfg.lora_config() if fresh_adapter else None,
                             callbacks=[self.run.trainer_callback(extra_metrics=self._metrics)])
            round_trainer = make_trainer(policy, dataset, plan)
            self.run.resume_from = str(self.run_dir / f"checkpoint-{start}") if start else None
            self.run.train(round_trainer)
            policy = round_trainer.model
            if "ref" in getattr(policy, "peft_config", {}):
                policy.delete_adapter("ref")  # the next round copies its own reference
            start = int(round_trainer.state.global_step)
            if self.run.interrupt.requested or start < last:
                break
        return self.run.checkpoint

    @contextlib.contextmanager
    def released_on_error(self):
        """Release the run folder's lock when the block raises (e.g. a judge that never gives a
        score: nothing was trained, the next run must not find the folder locked)."""
        try:
            yield
        except BaseException:
            self.run.lock.release()
            raise

    def finish(self, players: Optional[list] = None, **details) -> dict:
        """The final evaluation, ``playpen-run.json`` and the learning curve (TrainingRun.finish)."""
        return self.run.finish(players, rounds=self.cfg.rounds, pairs_per_round=self.num_pairs, **details)

