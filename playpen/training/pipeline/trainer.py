"""The stage pipeline trainer (``playpen run pipeline --stages sft,dpo``): packaged trainers one
after another, each from the adapter the previous stage ended with. Options and outputs:
``examples/trl/pipeline_trainer_lora.py``; the stages' bookkeeping: :mod:`playpen.training.pipeline`.
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
    """Stages of packaged trainers, each from the previous stage's adapter."""

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
