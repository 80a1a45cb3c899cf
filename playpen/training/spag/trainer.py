"""SPAG with LoRA on adversarial_taboo (``playpen run spag``): imitation with a KL term, then
epochs of self-play and offline policy optimisation; the phase loop of the run
(:class:`~playpen.training.spag.phases.SpagRun` holds each phase's steps). Options and outputs:
``examples/trl/spag_trainer_lora.py``.
"""
from __future__ import annotations

from dataclasses import dataclass

from playpen.training.common.base import BasePlayPen
from playpen.training.common.config import DemonstrationOptions, LoraOptions, RunConfig, option
from playpen.training.grpo.parts import training_slots
from playpen.training.preference.rounds import check_init_adapter
from playpen.training.spag import objective
from playpen.training.spag.phases import IMITATION, SpagRun


@dataclass
class SPAGConfig(objective.SPAGOptions, DemonstrationOptions, LoraOptions, RunConfig):
    """Every option is shared: SPAG's phases, the demonstrations, LoRA and the run."""

    lora_dropout: float = option(0.0, "LoRA dropout (0: the trained policy is the one that played)")
    batch_size: int = option(4, "samples per optimizer step")


class SPAGTrainer(BasePlayPen):
    """SPAG with LoRA: imitation with KL, then self-play epochs of offline policy optimisation."""

    config_class = SPAGConfig

    @classmethod
    def check(cls, config, learner, teacher=None):
        # before any model loads: an adapter trained on another base model
        check_init_adapter(config.init_adapter, learner)

    def learn(self, game_registry) -> None:
        cfg = self.config
        # refuses now (not after playing) to overwrite phases or another run's results
        run = SpagRun(self)
        self.callbacks.on_learn_start(self.name, cfg.imitation_steps + cfg.epochs * cfg.max_steps)
        try:
            stopped = self._train(run)
        except BaseException:
            run.lock.release()
            raise
        self.callbacks.on_learn_end()
        # 3. evaluate the last adapter (in the learner's model) on the held-out instances
        run.finish(run.model, None if stopped or self.teacher is None else [self.learner, self.teacher])

    def _train(self, run) -> bool:
        """Every phase still to run; True when a signal or a callback stopped the run."""
        cfg = self.config
        with run.interrupt:
            model = run.model = run.policy()  # the last complete phase's adapter, --init-adapter or a fresh one
            todo = run.phases[len(run.done):]

            # 1. the demonstrations (imitation, and the --sft-coef mix-in)
            rows = []
            if (IMITATION in todo) or cfg.sft_coef:
                records = objective.imitation_records(cfg, self.output_dir)
                rows = objective.tokenized_turns(records, run.tokenizer, cfg.max_length, run.template_kwargs)
                print(f"[playpen] imitation data: {len(rows)} conversations", flush=True)
            if IMITATION in todo:
                if not run.imitate(model, rows, cfg.imitation_steps):
                    return True
                run.save(model, IMITATION, {"conversations": len(rows)})
                if run.stopped:  # asked during the phase's last step: saved, stop now
                    return True

            # 2. epochs: self-play with the current adapter, rewards, offline optimisation
            per_instance, _ = training_slots(cfg.game_list, instances=cfg.train_instances)
            instances = list(dict.fromkeys(slots[0].instance for slots in per_instance))
            for name in todo:
                if name == IMITATION:
                    continue
                epoch = int(name.split("-")[1])
                # a stopped epoch resumed: its samples as saved (no new self-play)
                samples, collected = run.partial_samples(name) or run.collect(model, epoch, instances)
                print(f"[playpen] {name}: {len(samples)} samples from {collected['rollout/episodes']} "
                      f"self-play episodes", flush=True)
                if samples and not run.optimise(model, epoch, samples, rows, collected):
                    return True
                if not samples:
                    print(f"[playpen] {name}: no sample to learn from (no winner, --winners-only); the adapter "
                          f"is kept as it was", flush=True)
                run.save(model, name, collected)
                if run.stopped:
                    return True
        return False
