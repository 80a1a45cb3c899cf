"""DPO with LoRA on preference pairs from games: branched episodes or recorded play.

    playpen run examples/trl/dpo_trainer_lora.py -l smol-135m -t programmatic -T 1.0 -L 40 \\
        --init-adapter models/sft+lora/smol-135m/checkpoint-8
    playpen run examples/trl/dpo_trainer_lora.py -l smol-135m --source records --records clembench-runs/v2.0
    playpen run examples/trl/dpo_trainer_lora.py -l smol-135m --source pairs --pairs-file pairs.jsonl
    playpen run examples/trl/dpo_trainer_lora.py -l smol-135m -t programmatic --resume

Pairs (``--source``):

- ``branching`` (default): ``--pair-instances`` training instances per role are played
  with the current policy; every episode forks at the learner's turn ``--fork-turns``
  (0 = the first move; ``0,1`` = the first and the second, in separate episodes) into
  ``--branches`` continuations, which the partner finishes — the teacher ``-t`` (a
  registered model or ``programmatic``) in the other roles, or the learner itself
  without one. The branches are ranked by the forked player's reward (aborted < lost <
  won, graded by the game's Main Score); every two with different rewards give a pair
  whose prompt is the fork's token sequence, exactly as the model saw it. Episodes are
  recorded under ``<output_dir>/dpo+lora/<learner>/branching-<partner>/``.
- ``records``: ``--records DIR``, any results folder (clem run output, clembench-runs,
  playpen records): a won and a lost or aborted episode of the same instance and role
  give a pair at the first turn of that role where they part.
- ``pairs``: ``--pairs-file FILE`` (``playpen dataset RESULTS --pairs -o FILE``).

Training: TRL's DPOTrainer with a LoRA adapter; the reference of the DPO loss is the
same model with the adapter disabled (``ref_model=None``), or a frozen copy of the
starting adapter when the run starts from one (``--init-adapter``), never a second
copy of the model. ``--rounds R`` splits ``--max-steps`` into R rounds, each collecting
new pairs with the policy the previous round ended with (iterative DPO).

Adapters go to ``models/dpo+lora/<learner>/<source>/checkpoint-N`` with each round's
pairs (``pairs-round-R.jsonl``), the log (``playpen-log.jsonl``: loss, reward margins,
pair counts, ``memory/peak_rss_mb``) and the curve; the run is then evaluated on the
held-out instances (with the teacher as partner when there is one).
"""
from __future__ import annotations

from dataclasses import dataclass

from playpen.training import BasePlayPen, LoraOptions, RunConfig, report_to
from playpen.training import dpo, preference
from playpen.training import run as lifecycle


@dataclass
class DPOGamesConfig(dpo.PairSourceOptions, preference.PreferenceOptions, LoraOptions, RunConfig):
    """Every option is shared: pair sources, DPO rounds, LoRA and the run."""


class DPOGamesTrainer(BasePlayPen):
    """DPO with LoRA on pairs from branched episodes or recorded play."""

    config_class = DPOGamesConfig
    kind = "dpo+lora"

    @classmethod
    def check(cls, config, learner, teacher=None):
        # before any model loads: a pairs file with no pairs, an adapter of another base model
        dpo.check_pairs_file(config)
        preference.check_init_adapter(config.init_adapter, learner)

    def learn(self, game_registry) -> None:

        cfg, learner = self.config, self.learner
        source = cfg.source
        if source == "branching":
            source += "-" + (lifecycle.safe_name(self.teacher.name) if self.teacher else "selfplay")
        # refuses now (not after collecting) to overwrite checkpoints or another run's results
        run = preference.PreferenceRun(self, self.kind, tag=source)

        # 1. the pairs of a round: branches played with the round's policy, or recorded play
        make_pairs, collection_metrics = dpo.pair_source(self, self.output_dir / run.run_name, run.run_dir,
                                                         teacher=self.teacher)

        # 2. TRL: the pairs arrive as token ids; with a PEFT model and ref_model=None the
        #    reference is the policy with its adapter disabled (or a frozen copy of it)
        def make_trainer(policy, dataset, plan):
            args = preference.dpo_args(cfg, run.run_dir, plan, self.seed, report_to(cfg.report_to))
            trainer = preference.dpo_trainer_class()(
                model=policy, ref_model=None, args=args, train_dataset=dataset, processing_class=run.tokenizer,
                peft_config=plan.peft_config, callbacks=plan.callbacks)
            trainer.share_prompts = cfg.share_prompts  # a pair's prompt runs once
            return trainer

        # 3. rounds of collecting and training (Ctrl-C saves a checkpoint and stops);
        # 4. evaluate the adapter on the held-out instances, write the summary and the curve
        run.train(make_pairs, make_trainer, collection_metrics)
        players = [learner, self.teacher] if self.teacher is not None and cfg.source == "branching" else None
        run.finish(players, source=cfg.source)
