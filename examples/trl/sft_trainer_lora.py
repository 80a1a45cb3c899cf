"""Supervised fine-tuning with LoRA on won episodes; loss on the assistant turns only.

    playpen run examples/trl/sft_trainer_lora.py -l smol-135m
    playpen run examples/trl/sft_trainer_lora.py -l smol-135m --games referencegame,wordle --max-steps 8
    playpen run examples/trl/sft_trainer_lora.py -l smol-135m --dataset my_episodes.jsonl
    playpen run examples/trl/sft_trainer_lora.py -l smol-135m --resume     # after Ctrl-C or a crash

Data (first that applies): ``--dataset FILE`` (JSON lines of {messages, meta}), ``--records
DIR`` (clemcore results / playpen records), else the games' training instances played
by ``--demo-model`` (default: the games' programmatic players) into
``<output_dir>/demonstrations/``. Only the episodes whose outcome is in ``--outcomes``
(default: success) and whose role is in ``--roles`` (default: all roles) are kept.

Adapters (only) go to ``models/sft+lora/<learner>/checkpoint-N``; the run is then
evaluated on the held-out instances (``results/<learner>+sft+lora-checkpoint-N/``), the
metrics are in ``playpen-log.jsonl`` and the curve in ``learning-curve.png`` beside the
checkpoints. Evaluate an adapter later with
``playpen eval -m LEARNER --adapter models/sft+lora/<learner>/checkpoint-N``.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from playpen.training import BasePlayPen, DemonstrationOptions, LoraOptions, RunConfig, option, report_to
from playpen.training import run as lifecycle
from playpen.training.sft import supervised_dataset


@dataclass
class SFTLoraConfig(DemonstrationOptions, LoraOptions, RunConfig):
    """The run (RunConfig), LoRA and the supervised data; an adapter to continue from."""

    init_adapter: str = option("", "continue training this adapter (same base model) instead of a fresh one")


class SFTLoraTrainer(BasePlayPen):
    """SFT with LoRA adapters on won episodes (assistant-only loss)."""

    config_class = SFTLoraConfig
    kind = "sft+lora"

    @classmethod
    def check(cls, config, learner, teacher=None):
        # before any model loads: an adapter trained on another base model
        from playpen.training.preference import check_init_adapter
        check_init_adapter(config.init_adapter, learner)

    def learn(self, game_registry) -> None:
        from trl import SFTConfig, SFTTrainer

        cfg, learner = self.config, self.learner
        # refuses now (not after training) to overwrite checkpoints or another run's results
        run = lifecycle.TrainingRun(self, Path(cfg.models_dir) / self.kind / lifecycle.safe_name(learner.name),
                                    cfg.game_list, eval_prefix=f"{learner.name}+{self.kind}-")
        # 1. won episodes of the chosen roles, tokenised with assistant masks
        tokenizer = lifecycle.tokenizer_of(learner)
        dataset = supervised_dataset(cfg, self.output_dir, tokenizer, seed=self.seed)

        # 2. TRL: the assistant_masks column restricts the loss to assistant tokens;
        #    peft_config: only the LoRA adapters are trained
        args = SFTConfig(
            output_dir=str(run.run_dir), max_steps=cfg.max_steps, per_device_train_batch_size=cfg.batch_size,
            gradient_accumulation_steps=cfg.gradient_accumulation_steps, learning_rate=cfg.learning_rate,
            lr_scheduler_type="constant_with_warmup", warmup_steps=0, max_length=cfg.max_length,
            logging_steps=1, save_strategy="steps", save_steps=cfg.save_steps,
            save_total_limit=cfg.save_total_limit, report_to=report_to(cfg.report_to), seed=self.seed,
            activation_checkpointing=True, dataloader_num_workers=0, disable_tqdm=True,
            **lifecycle.precision_kwargs())
        model, peft_config = lifecycle.model_of(learner), cfg.lora_config()
        if cfg.init_adapter:  # continue that adapter (e.g. in a stage pipeline)
            from peft import PeftModel
            from playpen.models import check_adapter
            model = PeftModel.from_pretrained(model, str(check_adapter(cfg.init_adapter)), is_trainable=True)
            peft_config = None
        trainer = SFTTrainer(model=model, args=args, train_dataset=dataset,
                             processing_class=tokenizer, peft_config=peft_config,
                             callbacks=[run.trainer_callback()])

        # 3. train (Ctrl-C saves a checkpoint and stops); 4. evaluate the adapter (the learner
        #    carries it in memory) on the held-out instances, write the summary and the curve
        run.train(trainer)
        run.finish(saved="adapter", num_examples=len(dataset))
