"""Online GRPO with LoRA in self-play: the learner plays every role of the games.

    playpen run examples/trl/grpo_trainer_lora_sp.py -l smol-135m -T 1.0 -L 40
    playpen run examples/trl/grpo_trainer_lora_sp.py -l smol-135m --init-adapter models/sft+lora/smol-135m/checkpoint-8
    playpen run examples/trl/grpo_trainer_lora_sp.py -l smol-135m --resume      # after Ctrl-C or a crash

Each optimizer step plays ``--groups-per-step`` groups. A group is one training instance
and one role, played ``--num-generations`` times; the role's turns in those episodes are
trained with that role's reward (default: outcome reward, aborted < lose < success, graded
by the game's Main Score), normalised within the group. Game-master and partner tokens
are masked out of the loss. In self-play the roles of an instance share its episodes.
``-T`` is the sampling temperature of the rollouts (0 is replaced by 1.0: greedy groups
carry no signal) and ``-L`` the tokens per turn.

Against collapse to a private protocol and forgetting of other games (docs/trainers.md):

    playpen run examples/trl/grpo_trainer_lora_sp.py -l smol-135m --init-adapter ADAPTER --baseline chance
    playpen run examples/trl/grpo_trainer_lora_sp.py -l smol-135m --partners programmatic:0.5,self:0.3,past:0.2
    playpen run examples/trl/grpo_trainer_lora_sp.py -l smol-135m --game-shares referencegame:0.7,taboo:0.3

Records of every episode go to ``<output_dir>/grpo+lora/<learner>/selfplay/`` (clemcore
layout: ``clem score``/``transcribe`` work on them), checkpoints (adapters) to
``models/grpo+lora/<learner>/selfplay/checkpoint-N``, metrics (loss, reward per role,
% played, KL, tokens/s) to ``playpen-log.jsonl`` and ``learning-curve.png`` there and to the
tracker of ``--report-to``. At the end the adapter is evaluated on the held-out instances.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from playpen.training import BasePlayPen, LoraOptions, RunConfig, report_to
from playpen.training import run as lifecycle
from playpen.training import anticollapse
from playpen.training.grpo import GRPOOptions, grpo_parts
from playpen.training.grpo_steps import GRPOStepOptions, grpo_trainer_class, step_args


@dataclass
class GRPOSelfPlayConfig(GRPOOptions, GRPOStepOptions, LoraOptions, RunConfig):
    """Every option is shared: the run (RunConfig), LoRA and GRPO over games."""


class GRPOSelfPlayTrainer(BasePlayPen):
    """GRPO with LoRA; the learner plays every role (self-play)."""

    config_class = GRPOSelfPlayConfig

    @classmethod
    def check(cls, config, learner, teacher=None):
        # before any model loads: an init adapter of another base model, unknown partners or games
        anticollapse.check(config, learner, teacher)

    def learn(self, game_registry) -> None:
        from trl import GRPOConfig

        cfg = self.config
        run_name = f"grpo+lora/{lifecycle.safe_name(self.learner.name)}/selfplay"
        # refuses now (not after training) to overwrite checkpoints or another run's results
        run = lifecycle.TrainingRun(self, Path(cfg.models_dir) / run_name, cfg.game_list,
                                    eval_prefix=f"{self.learner.name}+grpo+lora-selfplay-")
        # 1. the groups ((training instance, role) slots, an instance's roles side by side),
        #    one reward function per role, and the rollout function that plays the slots'
        #    episodes with the current policy (nobody else: the learner plays every role)
        parts = grpo_parts(self, run, teacher=None, records_dir=self.output_dir / run_name)

        # 2. TRL: adapters only; the reference policy of the KL term is the adapter-free base, or
        #    with --init-adapter a frozen copy of that adapter (a second LoRA adapter, no model copy)
        args = GRPOConfig(
            output_dir=str(run.run_dir), max_steps=cfg.max_steps, learning_rate=cfg.learning_rate, beta=cfg.beta,
            num_generations=cfg.num_generations, shuffle_dataset=False, temperature=parts.temperature,
            logging_steps=1, save_strategy="steps", save_steps=cfg.save_steps,
            save_total_limit=cfg.save_total_limit, report_to=report_to(cfg.report_to), seed=self.seed,
            disable_tqdm=True, log_completions=False,
            # micro-batches (and gradient checkpointing): flat memory; rows used once: no old-logprob pass
            **step_args(parts.batch_size, cfg.micro_batch_size, cfg.gradient_checkpointing),
            reward_weights=parts.reward_weights, dataloader_num_workers=0, **lifecycle.precision_kwargs())
        trainer = grpo_trainer_class()(  # TRL's GRPOTrainer logging each step's time split
            model=parts.model, reward_funcs=parts.reward_funcs, args=args, train_dataset=parts.dataset,
            processing_class=parts.tokenizer, peft_config=parts.peft_config, rollout_func=parts.rollout_func,
            callbacks=[run.trainer_callback(extra_metrics=parts.extra_metrics)])
        parts.attach(trainer)  # advantages against --baseline; equal-reward groups dropped

        # 3. train (Ctrl-C saves a checkpoint and stops); 4. evaluate the adapter (the learner
        #    carries it in memory) on the held-out instances, write the summary and the curve
        run.train(trainer)
        run.finish([self.learner], partner="selfplay", records=str(self.output_dir / run_name))
