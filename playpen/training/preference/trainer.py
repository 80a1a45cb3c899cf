"""The preference trainers, rounds of DPO with LoRA on pairs: :class:`DPOGamesTrainer`
(``playpen run dpo``: pairs from branched episodes or recorded play), :class:`SPINTrainer`
(``playpen run spin``: demonstrations chosen, the learner's own answers rejected) and
:class:`SelfRewardingTrainer` (``playpen run self-rewarding``: judged candidates, best vs
worst). Each class's docstring is its documentation (``playpen run dpo --help``).
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
    """DPO with LoRA on pairs from branched episodes or recorded play.

        playpen run dpo -l smol-135m -t programmatic -T 1.0 -L 40 --games referencegame \\
            --roles "Instruction Follower" --init-adapter models/sft+lora/smol-135m/checkpoint-8
        playpen run dpo -l smol-135m --source records --records clembench-runs/v2.0
        playpen run dpo -l smol-135m --source pairs --pairs-file pairs.jsonl --games wordle
        playpen run dpo -l smol-135m -t programmatic --resume

    Pairs (``--source``):

    - ``branching`` (default): ``--pair-instances`` training instances per role are played
      with the current policy (``-T 0`` means 1.0); every episode forks at the learner's turn
      ``--fork-turns`` (0 = the first move; ``0,1`` = first and second, in separate episodes)
      into ``--branches`` continuations that the partner finishes — the teacher ``-t`` (a
      model or ``programmatic``) in the other roles, the learner itself without one. Branches
      are ranked by the forked player's reward (aborted < lost < won, graded by Main Score);
      every two with different rewards give a pair whose prompt is the fork's token sequence.
      Ties, failed branches and branches with the same turn give none; a round without a pair
      stops with one line.
    - ``records``: ``--records DIR`` (clem run output, clembench-runs 2.x, playpen records): a
      won and a lost or aborted episode of the same instance and role give a pair at the first
      turn of that role where they part (parting at a game's or partner's message: none).
    - ``pairs``: ``--pairs-file FILE``, e.g. ``playpen dataset RESULTS --pairs -o FILE`` (TRL's
      conversational preference format with a ``meta`` field).

    Checked before any model loads, one line each: an unknown ``--source``, a pairs file that
    is missing, malformed or holds no pair, ``--source records`` without a folder, an
    ``--init-adapter`` of another base model.

    Rounds (``spin`` and ``self-rewarding`` alike): ``--rounds R`` splits ``--max-steps`` into
    R rounds, each collecting its pairs with the policy the previous round ended with. The
    reference of the DPO loss is never a second copy of the model: with a fresh adapter it is
    the model with the adapter disabled (``ref_model=None``); when a round starts from an
    adapter (``--init-adapter``, or the previous round's) TRL keeps a frozen copy of it beside
    the trained one. Checkpoints count the steps of the whole run, so ``--resume`` continues
    inside the round where the run stopped (its pairs read back, its reference kept as
    ``reference-round-R/``). Pairs reach TRL as token ids: pairs of messages rendered with the
    learner's chat template as the rollout engine renders a prompt; branched and SPIN pairs
    keep the ids the model saw and generated. ``--share-prompts``: docs/trainers.md.

    Outputs: ``models/dpo+lora/<learner>/<source>/`` (``branching-<partner>``, ``records``,
    ``pairs``) holds ``checkpoint-N``, each round's ``pairs-round-R.jsonl``,
    ``playpen-log.jsonl`` (TRL's ``rewards/margins|accuracies`` and ``logps/*``,
    ``pairs/round``, ``pairs/num``, ``memory/peak_rss_mb``), ``learning-curve.png`` and
    ``playpen-run.json``; branched episodes are recorded under
    ``<output_dir>/dpo+lora/<learner>/branching-<partner>/``; the held-out evaluation (with
    the teacher as partner when there is one) goes to
    ``results/<learner>+dpo+lora-<source>-checkpoint-N/``.
    """

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
    """SPIN with LoRA: demonstrations chosen, the learner's own answers rejected.

        playpen run spin -l smol-135m -L 40 --games referencegame --rounds 3 --max-steps 30
        playpen run spin -l smol-135m --init-adapter models/sft+lora/smol-135m/checkpoint-8
        playpen run spin -l smol-135m --records results/programmatic --roles Guesser
        playpen run spin -l smol-135m --resume     # after Ctrl-C or a crash

    Demonstrations as for ``playpen run sft`` (``--dataset``, ``--records``, else the
    training instances played by ``--demo-model``; ``--outcomes``, ``--roles``). Each of
    ``--rounds`` rounds samples ``--pairs-per-round`` of their assistant turns, lets the
    learner as the previous round left it answer in the same context (``-T``/``-L``, greedy by
    default) and trains ``--max-steps/--rounds`` DPO steps: the demonstration chosen, the
    learner's answer rejected (an answer equal to it gives no pair), the round's starting
    policy as the reference — SPIN's opponent.

    Rounds, reference, resume and what a run folder holds: as ``playpen run dpo`` (its ``--help``).

    Outputs: ``models/spin+lora/<learner>/`` (``checkpoint-N``, ``pairs-round-R.jsonl``,
    ``playpen-log.jsonl``, ``learning-curve.png``, ``playpen-run.json``); played
    demonstrations in ``<output_dir>/demonstrations/``; the held-out evaluation in
    ``results/<learner>+spin+lora-checkpoint-N/``.
    """

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
    """Self-rewarding with LoRA: judged candidates, best vs worst, DPO, rounds.

        playpen run self-rewarding -l smol-135m -t programmatic -T 1.0 -L 40 --games referencegame \\
            --roles "Instruction Follower" --init-adapter models/sft+lora/smol-135m/checkpoint-8
        playpen run self-rewarding -l smol-135m -t programmatic --judge my-api-model --judge-template game-aware
        playpen run self-rewarding -l smol-135m -t programmatic --judge-template my_judge.jinja \\
            --score-regex my_score.regex --score-max 10
        playpen run self-rewarding -l smol-135m -t programmatic --reward game

    After Yuan et al. 2024. Each of ``--rounds`` rounds plays ``--pair-instances`` training
    instances per role with the policy the previous round ended with (the teacher ``-t`` in
    the other roles, or the learner itself); the learner's turns ``--fork-turns`` are branch
    points, each with ``--candidates`` turns sampled in its exact token context (``-T``, 0
    means 1.0). They are ranked by ``--reward``:

    - ``judge`` (default): ``--judge learner`` is the policy as the round starts
      (self-rewarding proper; ``--no-judge-adapter``: its adapter disabled), any other name a
      registered model, local (batches of ``--judge-batch-size``) or remote (that many calls
      at a time under playpen's timeouts and retries). The judge answers greedily one user
      message, the Jinja template ``--judge-template`` (``additive``: a 5-point checklist;
      ``game-aware``: with what winning means in each game; or a file) rendered with
      ``game``, ``role``, ``turn``, ``conversation``, ``candidate``, ``score_min``,
      ``score_max``; ``--score-regex`` (default reads ``Score: N``, ``score = N``, ``a total of
      N points``; its last match, group ``score``, else group 1) reads a score in
      [``--score-min``, ``--score-max``]. Replies without one are counted
      (``judge/unparsed``), logged as ``judge_unparsed`` lines and skipped; a round where no
      reply gives a score stops with one line, before anything is trained.
    - ``game``: each candidate's episode is finished by the partner and the forked player's
      reward ranks them, as DPO's branching source.

    A branch point gives one pair, best chosen and worst rejected (ties: none); judge prompts
    and replies never become training data or records. Rounds, reference and resume: as
    ``playpen run dpo`` (its ``--help``). Measured on a 2-core CPU: smol-135m as its own judge
    (4 branch points x 4 candidates, ``-L 40``, ``--judge-max-tokens 64``, 2 DPO steps) took
    3.5 minutes, 67 s judging, and gave a score in 8 of 16 replies; after 6 SFT-LoRA steps on
    referencegame, 2 of 12 with its adapter, 5 of 12 with ``--no-judge-adapter``. At that size
    the judge is the weak part: judge with a larger or remote model, or ``--reward game``.
    Checked before any model loads, one line each: an unknown or programmatic ``--judge``, a
    template that is missing, malformed, never shows ``{{ candidate }}`` or uses an unknown
    variable (templates render sandboxed), a score regex that does not compile,
    ``--score-min`` not below ``--score-max``, ``--candidates`` < 2.

    Outputs: ``models/self-rewarding+lora/<learner>/<judge-NAME-partner | game-partner>/`` holds
    ``checkpoint-N``, ``pairs-round-R.jsonl`` (the judge's scores in ``meta``),
    ``playpen-log.jsonl`` (adds ``judge/replies|unparsed|score_mean|seconds``,
    ``pairs/branch_points``, ``pairs/no_pair``, ``rollout/percent_played``),
    ``learning-curve.png`` and ``playpen-run.json``; the held-out evaluation goes to
    ``results/<learner>+self-rewarding+lora-<tag>-checkpoint-N/``.
    """

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
