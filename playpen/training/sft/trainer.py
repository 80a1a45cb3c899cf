"""The SFT trainers: LoRA adapters (:class:`SFTLoraTrainer`, ``playpen run sft``) or every
parameter (:class:`SFTSimpleTrainer`, ``playpen run sft-full``) on won episodes, the loss on
the assistant turns only. Each class's docstring is its documentation (``playpen run sft --help``).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from playpen.inference.transformers_compat import checkpointing_args
from playpen.models import load_init_adapter
from playpen.training.common import lifecycle
from playpen.training.common.base import BasePlayPen
from playpen.training.common.dev_stopping import dev_items
from playpen.training.common.config import (DemonstrationOptions, DevOptions, LoraOptions, PrecisionOptions, RunConfig,
                                            option, report_to)
from playpen.training.preference.rounds import check_init_adapter
from playpen.training.sft.demonstrations import supervised_dataset


@dataclass
class SFTLoraConfig(DevOptions, DemonstrationOptions, PrecisionOptions, LoraOptions, RunConfig):
    """The run (RunConfig), LoRA, the supervised data, early stopping on a dev split; an adapter
    to continue from."""

    init_adapter: str = option("", "continue training this adapter (same base model) instead of a fresh one")


@dataclass
class SFTSimpleConfig(DevOptions, DemonstrationOptions, PrecisionOptions, RunConfig):
    """The run (RunConfig), the supervised data, early stopping on a dev split; a full fine-tune
    wants a smaller step."""

    learning_rate: float = option(2e-5, "peak learning rate")


def sft_args(cfg, run_dir: Path, seed: int, **options) -> object:
    """TRL's SFTConfig of the SFT trainers and of expert iteration's rounds; ``options`` are
    SFTConfig fields a trainer sets otherwise (how activations are kept, its own step count)."""
    from trl import SFTConfig
    args = dict(
        output_dir=str(run_dir), max_steps=cfg.max_steps, per_device_train_batch_size=cfg.batch_size,
        gradient_accumulation_steps=cfg.gradient_accumulation_steps, learning_rate=cfg.learning_rate,
        lr_scheduler_type="constant_with_warmup", warmup_steps=0, max_length=cfg.max_length,
        logging_steps=1, save_strategy="steps", save_steps=cfg.save_steps,
        save_total_limit=cfg.save_total_limit, report_to=report_to(cfg.report_to), seed=seed,
        dataloader_num_workers=0, disable_tqdm=True, **lifecycle.precision_kwargs(cfg.precision))
    return SFTConfig(**{**args, **options})


def supervised_run(trainer: BasePlayPen):
    """(the run, the tokenizer, the dataset) of an SFT trainer: the run folder
    ``<models_dir>/<kind>/<learner>`` (refused now, not after training, if it holds another
    run's checkpoints or results) and the won episodes of the chosen roles, tokenised with
    assistant masks."""
    cfg, learner = trainer.config, trainer.learner
    run = lifecycle.TrainingRun(trainer, Path(cfg.models_dir) / trainer.kind / lifecycle.safe_name(learner.name),
                                cfg.game_list, eval_prefix=f"{learner.name}+{trainer.kind}-")
    tokenizer = lifecycle.tokenizer_of(learner)
    return run, tokenizer, supervised_dataset(cfg, trainer.output_dir, tokenizer, seed=trainer.seed)


class SFTLoraTrainer(BasePlayPen):
    """SFT with LoRA adapters on won episodes (assistant-only loss).

        playpen run sft -l smol-135m --games referencegame,wordle --max-steps 8
        playpen run sft -l smol-135m --dataset my_episodes.jsonl
        playpen run sft -l smol-135m --resume     # after Ctrl-C or a crash
        playpen run sft -l smol-135m --games taboo --dev-every 8 --dev-patience 2 --dev-splits splits.json

    Data (first that applies): ``--dataset FILE`` (JSON lines of {messages, meta}),
    ``--records DIR`` (any clemcore results or playpen records folder), else the games' training
    instances played by ``--demo-model`` (default: the games' programmatic players) into
    ``<output_dir>/demonstrations/``; ``--outcomes`` (default: success) and ``--roles`` (default:
    all) pick the episodes. The loss covers the assistant turns only: the masks come from the chat
    template's renders of the conversation's prefixes (any template whose prefixes render as
    prefixes, SmolLM2's included, which TRL's ``assistant_only_loss`` cannot patch) and reach
    SFTTrainer as ``assistant_masks``. With LoRA, activations are checkpointed.

    Outputs: ``models/sft+lora/<learner>/`` holds ``checkpoint-N`` (the adapter only),
    ``playpen-log.jsonl``, ``learning-curve.png`` and ``playpen-run.json``; the held-out
    evaluation goes to ``results/<learner>+sft+lora-checkpoint-N/``. Play the adapter later
    with ``playpen eval -m LEARNER --adapter models/sft+lora/<learner>/checkpoint-N`` or
    ``playpen register NAME models/sft+lora/<learner>``. With ``--dev-every N`` the dev items of
    ``--dev-splits`` are played every N steps (``"event": "dev"`` rows in the log) and the best
    chunk's checkpoint is the run's result (``best_checkpoint``; docs/trainers.md).
    """

    config_class = SFTLoraConfig
    kind = "sft+lora"

    @classmethod
    def check(cls, config, learner, teacher=None):
        # before any model loads: an adapter trained on another base model, a dev split that is not there
        check_init_adapter(config.init_adapter, learner)
        if config.dev_every:
            dev_items(config)

    def learn(self, game_registry) -> None:
        from trl import SFTTrainer

        cfg, learner = self.config, self.learner
        # 1. the run and the won episodes of the chosen roles, tokenised with assistant masks
        run, tokenizer, dataset = supervised_run(self)

        # 2. TRL: the assistant_masks column restricts the loss to assistant tokens;
        #    peft_config: only the LoRA adapters are trained
        args = sft_args(cfg, run.run_dir, self.seed, **checkpointing_args(True))
        model, peft_config = lifecycle.model_of(learner), cfg.lora_config()
        if cfg.init_adapter:  # continue that adapter (e.g. in a stage pipeline)
            model = load_init_adapter(model, cfg.init_adapter)
            peft_config = None
        trainer = SFTTrainer(model=model, args=args, train_dataset=dataset,
                             processing_class=tokenizer, peft_config=peft_config,
                             callbacks=[run.trainer_callback(dev_learner=learner)])

        # 3. train (Ctrl-C saves a checkpoint and stops); 4. evaluate the adapter (the learner
        #    carries it in memory) on the held-out instances, write the summary and the curve
        run.train(trainer)
        run.finish(saved="adapter", num_examples=len(dataset))


class SFTSimpleTrainer(BasePlayPen):
    """Full fine-tuning on won episodes (assistant-only loss).

        playpen run sft-full -l smol-135m --games referencegame,wordle --max-steps 8
        playpen run sft-full -l smol-135m --dataset my_episodes.jsonl
        playpen run sft-full -l smol-135m --resume     # after Ctrl-C or a crash

    Data and loss as for ``playpen run sft`` (its ``--help``).

    Outputs: ``models/sft/<learner>/`` holds ``checkpoint-N`` (the full model with its
    tokenizer: register it as a ``huggingface_id``), ``playpen-log.jsonl``,
    ``learning-curve.png`` and ``playpen-run.json``; the held-out evaluation goes to
    ``results/<learner>+sft-checkpoint-N/`` (its before side loads the base model again by
    name: a full fine-tune has no adapter to switch off).
    """

    config_class = SFTSimpleConfig
    kind = "sft"

    @classmethod
    def check(cls, config, learner, teacher=None):
        if config.dev_every:  # before any model loads: a dev split that is not there
            dev_items(config)

    def learn(self, game_registry) -> None:
        from trl import SFTTrainer

        cfg, learner = self.config, self.learner
        # 1. the run and the won episodes of the chosen roles, tokenised with assistant masks
        run, tokenizer, dataset = supervised_run(self)

        # 2. TRL: the assistant_masks column restricts the loss to assistant tokens; no
        #    peft_config: every parameter is trained
        args = sft_args(cfg, run.run_dir, self.seed, **checkpointing_args(False))
        trainer = SFTTrainer(model=lifecycle.model_of(learner), args=args, train_dataset=dataset,
                             processing_class=tokenizer, callbacks=[run.trainer_callback(dev_learner=learner)])

        # 3. train (Ctrl-C saves a checkpoint and stops); 4. evaluate the trained model on the
        #    held-out instances, write the summary and the curve
        run.train(trainer)
        run.finish(saved="checkpoint", num_examples=len(dataset))
