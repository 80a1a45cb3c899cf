"""Stage pipelines: example trainers one after another, each starting from the adapter the
previous one ended with.

    playpen run examples/trl/pipeline_trainer_lora.py -l smol-135m -L 40 --stages sft,spin,dpo,grpo
    playpen run examples/trl/pipeline_trainer_lora.py -l smol-135m -t programmatic --stages sft,dpo \\
        --stage-steps 8,4 --stage-options 'dpo: --beta 0.2 --roles "Instruction Follower"'
    playpen run examples/trl/pipeline_trainer_lora.py -l smol-135m --stages sft,spin --resume

Stages (any order, any number; a name may repeat): ``sft`` (sft_trainer_lora.py), ``spin``,
``dpo``, ``self-rewarding``, ``grpo`` (grpo_trainer_lora_mp.py with the teacher ``-t`` in the
other roles, grpo_trainer_lora_sp.py without one), ``spag``. Every stage runs with its own
trainer's options: ``--games``, ``--train-instances``, ``--max-steps`` (or ``--stage-steps``,
one number per stage), ``--learning-rate``, ``--save-steps``, ``--save-total-limit`` and
``--report-to`` go to every stage that has them (unset: each stage's own default);
``--stage-options 'dpo: --beta 0.2; grpo: --num-generations 4'`` to single stages. The
first stage starts from ``--init-adapter`` (or a fresh adapter), every later one from the
previous stage's last adapter.

The run folder ``models/pipeline/<learner>/<stages>/`` holds each stage's own models folder
(``1-sft/sft+lora/<learner>/checkpoint-N``, ``2-dpo/...``) and ``pipeline-state.json`` (the
finished stages and their adapters, written atomically after every stage). ``--resume``
skips the finished stages and continues the one that stopped (from its last checkpoint);
``--overwrite`` starts over. The last adapter is evaluated on the held-out instances
(``results/<learner>+pipeline-<stages>/``). An unknown stage, a stage option its trainer
does not know, an adapter of another base model: one line, exit code 2, before any model
loads.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from playpen.cli.run import load_trainer_class, parse_config
from playpen.training import BasePlayPen, RunConfig
from playpen.training import pipeline
from playpen.training import run as lifecycle

HERE = Path(__file__).resolve().parent
STAGE_FILES = {
    "sft": HERE / "sft_trainer_lora.py",
    "spin": HERE / "spin_trainer_lora.py",
    "dpo": HERE / "dpo_trainer_lora.py",
    "self-rewarding": HERE / "self_rewarding_trainer_lora.py",
    "grpo": HERE / "grpo_trainer_lora_sp.py",
    "spag": HERE / "spag_trainer_lora.py",
}


@dataclass
class PipelineConfig(pipeline.PipelineOptions, RunConfig):
    """The stages and what they share, and the run (RunConfig)."""

    @classmethod
    def stage_files(cls) -> dict[str, Path]:
        return {name: path for name, path in STAGE_FILES.items() if path.exists()}


def stage_file(name: str, teacher) -> Path:
    """A stage's trainer file; GRPO plays with the teacher when there is one."""
    if name == "grpo" and teacher:
        return HERE / "grpo_trainer_lora_mp.py"
    return STAGE_FILES[name]


class PipelineTrainer(BasePlayPen):
    """Stages of example trainers, each from the previous stage's adapter."""

    config_class = PipelineConfig

    @staticmethod
    def run_dir(config, learner: str) -> Path:
        return Path(config.models_dir) / "pipeline" / lifecycle.safe_name(learner) / "-".join(config.stage_list)

    @classmethod
    def check(cls, config, learner, teacher=None):
        # before any model loads: every stage's options and checks, the starting adapter
        from playpen.training.preference import check_init_adapter
        check_init_adapter(config.init_adapter, learner)
        pipeline.starting_state(cls.run_dir(config, learner), config)  # --resume without a run, a run without it
        stages = pipeline.plan_stages(config, lambda name: stage_file(name, teacher), load_trainer_class, parse_config)
        pipeline.check_stages(stages, cls.run_dir(config, learner), config, learner, teacher)

    def learn(self, game_registry) -> None:
        from playpen.models import load_model_by_name

        cfg, learner = self.config, self.learner
        stages = pipeline.plan_stages(cfg, lambda name: stage_file(name, self.teacher and self.teacher.name),
                                      load_trainer_class, parse_config)

        # a fresh copy of the learner for every stage after the first (same name, same -T/-L)
        def load_learner():
            return load_model_by_name(learner.name, gen_args=dict(getattr(learner, "gen_args", {}) or {}),
                                      role="learner")

        # refuses now (before any stage) to start over a run or to replace another run's results
        run = pipeline.PipelineRun(self, stages, self.run_dir(cfg, learner.name), load_learner)
        run.run()
