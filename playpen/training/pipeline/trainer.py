"""The stage pipeline trainer (``playpen run pipeline --stages sft,dpo``): packaged trainers one
after another, each from the adapter the previous stage ended with. :class:`PipelineTrainer`'s
docstring is its documentation (``playpen run pipeline --help``); the stages' bookkeeping:
:mod:`playpen.training.pipeline`.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from playpen.models import load_model_by_name
from playpen.training.common import lifecycle
from playpen.training.common.base import BasePlayPen
from playpen.training.common.config import RunConfig
from playpen.training.pipeline import stages
from playpen.training.preference.rounds import check_init_adapter


@dataclass
class PipelineConfig(stages.PipelineOptions, RunConfig):
    """The stages and what they share, and the run (RunConfig)."""


class PipelineTrainer(BasePlayPen):
    """Stages of packaged trainers, each from the previous stage's adapter.

        playpen run pipeline -l smol-135m -L 40 --stages sft,spin,dpo,grpo --stage-steps 8,4,4,2 --games referencegame
        playpen run pipeline -l smol-135m -t programmatic --stages sft,dpo --stage-steps 8,4 \\
            --stage-options 'dpo: --beta 0.2 --roles "Instruction Follower"'
        playpen run pipeline -l smol-135m -L 40 --stages sft,spin,dpo,grpo --stage-steps 8,4,4,2 --resume

    ``--stages`` names the trainers in the order to run them, any order and any number (a
    name may repeat): ``sft``, ``spin``, ``dpo``, ``self-rewarding``, ``grpo`` (``grpo-teacher``
    with ``-t``, self-play without), ``spag``. The first starts from ``--init-adapter`` or a
    fresh adapter, every later one from the adapter the previous stage ended with. Shared
    options go to every stage that has them (``--games``, ``--train-instances``, ``--split``,
    ``--splits``, ``--max-steps`` or ``--stage-steps`` (one per stage), ``--learning-rate``,
    ``--save-steps``, ``--save-total-limit``, ``--report-to``; unset: each stage's own
    default); ``--stage-options 'dpo: ...; grpo: ...'`` sets options of single stages. Each
    stage runs its own trainer in this process (a fresh copy of the learner after the first)
    without its own evaluation. ``--resume`` skips the finished stages and continues the one
    that stopped (a Ctrl-C, a crash, a round without pairs) from its last complete checkpoint,
    or its start; ``--stage-options`` may change between the runs, ``--stages`` may not;
    ``--overwrite`` starts over. Checked before any model loads, one line each: an unknown
    stage, a stage option its trainer does not know, ``--stage-options`` for a stage not in
    ``--stages``, ``--stage-steps`` of the wrong length, an adapter of another base model, a
    stage without ``--init-adapter`` after another, ``--resume`` without a pipeline state.

    Outputs: ``models/pipeline/<learner>/<stage>-<stage>-.../`` holds each stage's own models
    folder (``1-sft/sft+lora/<learner>/checkpoint-N``, ``2-dpo/...``: its log, curve and
    ``playpen-run.json`` where that trainer puts them) and ``pipeline-state.json`` (the
    finished stages and their adapters, written atomically before and after every stage);
    the last adapter's held-out evaluation goes to ``results/<learner>+pipeline-<stages>/``.
    """

    config_class = PipelineConfig

    @staticmethod
    def run_dir(config, learner: str) -> Path:
        return Path(config.models_dir) / "pipeline" / lifecycle.safe_name(learner) / "-".join(config.stage_list)

    @classmethod
    def check(cls, config, learner, teacher=None):
        # before any model loads: every stage's options and checks, the starting adapter
        check_init_adapter(config.init_adapter, learner)
        stages.starting_state(cls.run_dir(config, learner), config)  # --resume without a run, a run without it
        planned = stages.plan_stages(config, teacher)
        stages.check_stages(planned, cls.run_dir(config, learner), config, learner, teacher)

    def learn(self, game_registry) -> None:

        cfg, learner = self.config, self.learner
        planned = stages.plan_stages(cfg, self.teacher and self.teacher.name)

        # a fresh copy of the learner for every stage after the first (same name, same -T/-L)
        def load_learner():
            return load_model_by_name(learner.name, gen_args=dict(getattr(learner, "gen_args", {}) or {}),
                                      role="learner")

        # refuses now (before any stage) to start over a run or to replace another run's results
        run = stages.PipelineRun(self, planned, self.run_dir(cfg, learner.name), load_learner)
        run.run()
