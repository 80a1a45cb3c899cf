"""The preference trainers, rounds of DPO with LoRA on pairs: :class:`DPOGamesTrainer`
(``playpen run dpo``: pairs from branched episodes or recorded play), :class:`SPINTrainer`
(``playpen run spin``: demonstrations chosen, the learner's own answers rejected) and
:class:`SelfRewardingTrainer` (``playpen run self-rewarding``: judged candidates, best vs
worst). Their options and outputs: ``examples/trl/dpo_trainer_lora.py``,
``spin_trainer_lora.py`` and ``self_rewarding_trainer_lora.py``.
"""
from __future__ import annotations

from dataclasses import dataclass

from playpen.training.common import lifecycle
from playpen.training.common.base import BasePlayPen
from playpen.training.common.config import DemonstrationOptions, LoraOptions, RunConfig, report_to
from playpen.training.preference import pair_sources
from playpen.training.preference import self_rewarding
from playpen.training.preference import spin
from playpen.training.preference.rounds import PreferenceOptions, PreferenceRun, check_init_adapter, dpo_args
from playpen.training.rubrics import judging


def dpo_trainer_factory(trainer, run: PreferenceRun):
    """``make_trainer(policy, dataset, plan)`` for :meth:`PreferenceRun.train`: TRL's DPOTrainer of
    a round. The pairs arrive as token ids; with a PEFT model and ref_model=None the reference is
    the policy the round starts from (its adapter disabled, or a frozen copy of it)."""
    cfg = trainer.config

    def make_trainer(policy, dataset, plan):
        from playpen.training.trl_trainers import TokenDPOTrainer
        args = dpo_args(cfg, run.run_dir, plan, trainer.seed, report_to(cfg.report_to))  # --share-prompts in it
        return TokenDPOTrainer(
            model=policy, ref_model=None, args=args, train_dataset=dataset, processing_class=run.tokenizer,
            peft_config=plan.peft_config, callbacks=plan.callbacks)
    return make_trainer


@dataclass
class DPOGamesConfig(pair_sources.PairSourceOptions, PreferenceOptions, LoraOptions, RunConfig):
    """Every option is shared: pair sources, DPO rounds, LoRA and the run."""


class DPOGamesTrainer(BasePlayPen):
    """DPO with LoRA on pairs from branched episodes or recorded play."""

    config_class = DPOGamesConfig
    kind = "dpo+lora"

    @classmethod
    def check(cls, config, learner, teacher=None):
        # before any model loads: a pairs file with no pairs, an adapter of another base model
        pair_sources.check_pairs_file(config)
        check_init_adapter(config.init_adapter, learner)

    def learn(self, game_registry) -> None:
        cfg, learner = self.config, self.learner
        source = cfg.source
        if source == "branching":
            source += "-" + (lifecycle.safe_name(self.teacher.name) if self.teacher else "selfplay")
        # refuses now (not after collecting) to overwrite checkpoints or another run's results
        run = PreferenceRun(self, self.kind, tag=source)

        # 1. the pairs of a round: branches played with the round's policy, or recorded play
        make_pairs, collection_metrics = pair_sources.pair_source(self, self.output_dir / run.run_name, run.run_dir,
                                                         teacher=self.teacher)
        # 2. TRL's DPOTrainer per round; 3. rounds of collecting and training (Ctrl-C saves a
        #    checkpoint and stops); 4. evaluate the adapter on the held-out instances
        run.train(make_pairs, dpo_trainer_factory(self, run), collection_metrics)
        players = [learner, self.teacher] if self.teacher is not None and cfg.source == "branching" else None
        run.finish(players, source=cfg.source)


@dataclass
class SPINConfig(spin.SPINOptions, PreferenceOptions, DemonstrationOptions, LoraOptions, RunConfig):
    """Every option is shared: SPIN's rounds, DPO, the demonstrations, LoRA and the run."""


class SPINTrainer(BasePlayPen):
    """SPIN with LoRA: demonstrations chosen, the learner's own answers rejected."""

    config_class = SPINConfig
    kind = "spin+lora"

    @classmethod
    def check(cls, config, learner, teacher=None):
        # before any model loads: an adapter trained on another base model
        check_init_adapter(config.init_adapter, learner)

    def learn(self, game_registry) -> None:
        # refuses now (not after generating) to overwrite checkpoints or another run's results
        run = PreferenceRun(self, self.kind)
        # 1. the demonstrations, read or played once; each round answers a sample of their turns
        collector = spin.SpinCollector(self)
        # 2. TRL's DPOTrainer per round; 3. rounds (Ctrl-C saves a checkpoint and stops; --resume
        #    continues inside a round); 4. evaluate the adapter on the held-out instances
        run.train(collector, dpo_trainer_factory(self, run), lambda: collector.last_metrics)
        run.finish(demonstrations=len(collector.contexts))


@dataclass
class SelfRewardingConfig(self_rewarding.SelfRewardingOptions, judging.JudgeOptions, PreferenceOptions,
                          LoraOptions, RunConfig):
    """Every option is shared: candidates and rounds, the judge, DPO, LoRA and the run."""


class SelfRewardingTrainer(BasePlayPen):
    """Self-rewarding with LoRA: judged candidates, best vs worst, DPO, rounds."""

    config_class = SelfRewardingConfig
    kind = "self-rewarding+lora"

    @classmethod
    def check(cls, config, learner, teacher=None):
        # before any model loads: an unknown judge name, an adapter of another base model
        if config.reward == "judge":
            judging.check_judge(config)
        check_init_adapter(config.init_adapter, learner)

    def learn(self, game_registry) -> None:
        cfg, learner = self.config, self.learner
        partner = lifecycle.safe_name(self.teacher.name) if self.teacher else "selfplay"
        tag = f"judge-{lifecycle.safe_name(cfg.judge)}-{partner}" if cfg.reward == "judge" else f"game-{partner}"
        # refuses now (not after collecting) to overwrite checkpoints or another run's results
        run = PreferenceRun(self, self.kind, tag=tag)
        # a judge that cannot answer, or one without a single score, stops the run before it trains
        with run.released_on_error():
            # 1. the pairs of a round: candidates at the branch points of the round's episodes,
            #    ranked by the judge (or by the game), best vs worst
            judge = judging.load_judge(cfg, learner) if cfg.reward == "judge" else None  # a remote one must answer
            collector = self_rewarding.collector(self, self.output_dir / run.run_name, run.run_dir, judge=judge,
                                                 teacher=self.teacher)
            # 2. TRL's DPOTrainer per round; 3. rounds of collecting and training (Ctrl-C saves a
            #    checkpoint and stops)
            run.train(collector, dpo_trainer_factory(self, run), lambda: collector.last_metrics)
        # 4. evaluate the adapter on the held-out instances, write the summary and the curve
        players = [learner, self.teacher] if self.teacher is not None else None
        run.finish(players, reward=cfg.reward, judge=judge.name if judge else None,
                   judge_unparsed=collector.totals["unparsed"] if judge else None)
