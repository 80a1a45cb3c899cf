"""Online GRPO with LoRA against a frozen teacher: the learner plays one role, the teacher
all the others.

    playpen run examples/trl/grpo_trainer_lora_mp.py -l smol-135m -t programmatic -T 1.0 -L 40
    playpen run examples/trl/grpo_trainer_lora_mp.py -l smol-135m -t my-remote --roles "Instruction Giver"
    playpen run examples/trl/grpo_trainer_lora_mp.py -l smol-135m -t programmatic --resume

The teacher is any registered model: a local HF model (batched with the learner's turns),
``programmatic`` (the games' own competent players) or a remote OpenAI-compatible model
from key.json (called concurrently). It is never trained. Every other option, the group
construction, the masking (teacher and game-master tokens carry no loss) and the
outputs are those of grpo_trainer_lora_sp.py; here a group is one
training instance played ``--num-generations`` times with the learner in one role
(``--roles``, default: each role in turn, each with its own group), and checkpoints go to
``models/grpo+lora/<learner>/<teacher>``, records to
``<output_dir>/grpo+lora/<learner>/<teacher>/``.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from playpen.errors import PlaypenError
from playpen.training import BasePlayPen, LoraOptions, RunConfig, report_to
from playpen.training import run as lifecycle
from playpen.training import anticollapse
from playpen.training.grpo import GRPOOptions, grpo_parts
from playpen.training.grpo_steps import GRPOStepOptions, grpo_trainer_class, step_args


@dataclass
class GRPOTeacherConfig(GRPOOptions, GRPOStepOptions, LoraOptions, RunConfig):
    """The options of self-play; ``--roles`` picks the learner's roles."""


class GRPOTeacherTrainer(BasePlayPen):
    """GRPO with LoRA; the learner plays one role, a frozen teacher the others."""

    config_class = GRPOTeacherConfig

    @classmethod
    def check(cls, config, learner, teacher=None):
        # before any model loads: an init adapter of another base model, unknown partners or games
        anticollapse.check(config, learner, teacher)

    def learn(self, game_registry) -> None:
        from trl import GRPOConfig

        if self.teacher is None:
            raise PlaypenError("this trainer needs a teacher: pass -t/--teacher MODEL "
                               "(e.g. -t programmatic), or use grpo_trainer_lora_sp.py for self-play")
        cfg = self.config
        partner = lifecycle.safe_name(self.teacher.name)
        run_name = f"grpo+lora/{lifecycle.safe_name(self.learner.name)}/{partner}"
        # refuses now (not after training) to overwrite checkpoints or another run's results
        run = lifecycle.TrainingRun(self, Path(cfg.models_dir) / run_name, cfg.game_list,
                                    eval_prefix=f"{self.learner.name}+grpo+lora-{partner}-")
        # 1. the groups ((training instance, role) slots, an instance's roles side by side),
        #    one reward function per role, and the rollout function that plays the slots'
        #    episodes with the current policy, the teacher in every role the learner does not train
        parts = grpo_parts(self, run, teacher=self.teacher, records_dir=self.output_dir / run_name)

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
        run.finish([self.learner, self.teacher], partner=partner, records=str(self.output_dir / run_name))
