"""SPIN with LoRA: rounds of DPO between demonstration turns (chosen) and the learner's
own answers in the same contexts (rejected).

    playpen run examples/trl/spin_trainer_lora.py -l smol-135m -L 40 --games referencegame --rounds 3
    playpen run examples/trl/spin_trainer_lora.py -l smol-135m --init-adapter models/sft+lora/smol-135m/checkpoint-8
    playpen run examples/trl/spin_trainer_lora.py -l smol-135m --records results/programmatic --roles Guesser
    playpen run examples/trl/spin_trainer_lora.py -l smol-135m --resume     # after Ctrl-C or a crash

Demonstrations (first that applies, as for SFT): ``--dataset FILE`` (JSON lines of
{messages, meta}), ``--records DIR`` (clemcore results / playpen records, programmatic
players included), else the games' training instances played by ``--demo-model``
(default: the games' programmatic players; any registered model, a teacher too) into
``<output_dir>/demonstrations/``; kept by ``--outcomes`` (default: success) and ``--roles``.

Each of ``--rounds`` rounds samples ``--pairs-per-round`` demonstration turns, lets the
learner — as the previous round left it — answer each in the same context (``-T``/``-L``:
greedy by default), and trains ``--max-steps/--rounds`` DPO steps with TRL's DPOTrainer:
the demonstration chosen, the learner's answer rejected, the round's starting policy as
the reference (round 1: the model with the adapter disabled; later rounds: a frozen copy
of the adapter the previous round ended with — never a second copy of the model).

Adapters go to ``models/spin+lora/<learner>/checkpoint-N`` (N counts the steps of all
rounds) with each round's pairs (``pairs-round-R.jsonl``), the log (``playpen-log.jsonl``,
``memory/peak_rss_mb`` included) and the curve; the run is then evaluated on the held-out
instances (``results/<learner>+spin+lora-checkpoint-N/``).
"""
from __future__ import annotations

from dataclasses import dataclass

from playpen.training import BasePlayPen, DemonstrationOptions, LoraOptions, RunConfig, report_to
from playpen.training import preference, spin


@dataclass
class SPINConfig(spin.SPINOptions, preference.PreferenceOptions, DemonstrationOptions, LoraOptions, RunConfig):
    """Every option is shared: SPIN's rounds, DPO, the demonstrations, LoRA and the run."""


class SPINTrainer(BasePlayPen):
    """SPIN with LoRA: demonstrations chosen, the learner's own answers rejected."""

    config_class = SPINConfig
    kind = "spin+lora"

    @classmethod
    def check(cls, config, learner, teacher=None):
        # before any model loads: an adapter trained on another base model
        preference.check_init_adapter(config.init_adapter, learner)

    def learn(self, game_registry) -> None:

        cfg = self.config
        # refuses now (not after generating) to overwrite checkpoints or another run's results
        run = preference.PreferenceRun(self, self.kind)

        # 1. the demonstrations, read or played once; each round answers a sample of their turns
        collector = spin.SpinCollector(self)

        # 2. TRL: pairs as token ids; with a PEFT model and ref_model=None the reference is
        #    the policy the round starts from (adapter disabled, or a frozen copy of it)
        def make_trainer(policy, dataset, plan):
            args = preference.dpo_args(cfg, run.run_dir, plan, self.seed, report_to(cfg.report_to))
            trainer = preference.dpo_trainer_class()(
                model=policy, ref_model=None, args=args, train_dataset=dataset, processing_class=run.tokenizer,
                peft_config=plan.peft_config, callbacks=plan.callbacks)
            trainer.share_prompts = cfg.share_prompts  # a pair's prompt runs once
            return trainer

        # 3. rounds (Ctrl-C saves a checkpoint and stops; --resume continues inside a round);
        # 4. evaluate the adapter on the held-out instances, write the summary and the curve
        run.train(collector, make_trainer, lambda: collector.last_metrics)
        run.finish(demonstrations=len(collector.contexts))
