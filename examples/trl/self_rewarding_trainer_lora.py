"""Self-rewarding with LoRA: the learner's candidate turns, scored by a judge (the learner
itself or any registered model), best vs worst trained with DPO; rounds.

    playpen run examples/trl/self_rewarding_trainer_lora.py -l smol-135m -t programmatic -T 1.0 -L 40 \\
        --games referencegame --roles "Instruction Follower" --init-adapter models/sft+lora/smol-135m/checkpoint-8
    playpen run examples/trl/self_rewarding_trainer_lora.py -l smol-135m -t programmatic --judge gpt-4o-mini \\
        --judge-template game-aware
    playpen run examples/trl/self_rewarding_trainer_lora.py -l smol-135m -t programmatic --reward game
    playpen run examples/trl/self_rewarding_trainer_lora.py -l smol-135m -t programmatic --resume

Each of ``--rounds`` rounds plays ``--pair-instances`` training instances per role with
the policy the previous round ended with (the teacher ``-t`` in the other roles, or the
learner itself without one); the learner's turns ``--fork-turns`` (0 = the first move)
are branch points, each with ``--candidates`` sampled turns (``-T``; greedy means 1.0)
generated in the branch point's exact token context. They are ranked by

- ``--reward judge`` (default): the judge ``--judge`` (``learner``: the policy as the round
  starts — self-rewarding proper; or a registered model, local or a remote API model)
  answers the prompt ``--judge-template`` (``additive``: a 5-point checklist; ``game-aware``:
  the checklist with what winning means in each game; or a Jinja file of your own) and
  ``--score-regex`` (a file; default reads ``Score: N``) reads a score in
  ``[--score-min, --score-max]`` from the reply. Replies without a score are counted
  (``judge/unparsed``), written to ``playpen-log.jsonl`` (``judge_unparsed`` lines) and
  skipped; a round where no reply gives a score stops with one line, before training.
- ``--reward game``: the game's own outcome — each candidate's episode is finished with
  the partner and the forked player's reward ranks them.

Each branch point gives one pair, best chosen and worst rejected (ties: none), trained
with TRL's DPOTrainer and a LoRA adapter; the reference is the policy the round starts
from (the model with the adapter disabled, or a frozen copy of the adapter it starts
from: never a second copy of the model). Judge prompts and replies never become
training data. Adapters go to
``models/self-rewarding+lora/<learner>/<reward>-.../checkpoint-N`` with each round's pairs
(``pairs-round-R.jsonl``: the judge's scores in ``meta``), the log (``memory/peak_rss_mb``
included) and the curve; the run is then evaluated on the held-out instances.
"""
from __future__ import annotations

from dataclasses import dataclass

from playpen.training import BasePlayPen, LoraOptions, RunConfig, report_to
from playpen.training import judging, preference, self_rewarding
from playpen.training import run as lifecycle


@dataclass
class SelfRewardingConfig(self_rewarding.SelfRewardingOptions, judging.JudgeOptions, preference.PreferenceOptions,
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
        preference.check_init_adapter(config.init_adapter, learner)

    def learn(self, game_registry) -> None:

        cfg, learner = self.config, self.learner
        partner = lifecycle.safe_name(self.teacher.name) if self.teacher else "selfplay"
        tag = f"judge-{lifecycle.safe_name(cfg.judge)}-{partner}" if cfg.reward == "judge" else f"game-{partner}"
        # refuses now (not after collecting) to overwrite checkpoints or another run's results
        run = preference.PreferenceRun(self, self.kind, tag=tag)

        # 1. the pairs of a round: candidates at the branch points of the round's episodes,
        #    ranked by the judge (or by the game), best vs worst
        try:
            judge = judging.load_judge(cfg, learner) if cfg.reward == "judge" else None  # a remote one must answer
        except BaseException:
            run.run.lock.release()
            raise
        collector = self_rewarding.collector(self, self.output_dir / run.run_name, run.run_dir, judge=judge,
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
        try:
            run.train(collector, make_trainer, lambda: collector.last_metrics)
        except BaseException:
            run.run.lock.release()  # e.g. a judge without a single score: nothing was trained
            raise
        players = [learner, self.teacher] if self.teacher is not None else None
        run.finish(players, reward=cfg.reward, judge=judge.name if judge else None,
                   judge_unparsed=collector.totals["unparsed"] if judge else None)
