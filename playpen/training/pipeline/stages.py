"""Stage pipelines: packaged trainers run one after another (``--stages sft,spin,dpo,grpo``, any
order), each starting from the adapter the previous stage ended with, each writing its own
checkpoints; ``--resume`` continues at the stage where the run stopped.

The run folder ``<models_dir>/pipeline/<learner>/<stage>-<stage>-...`` holds one folder per
stage (``1-sft/``, ``2-dpo/``, …: the stage trainer's ``--models-dir``, so its checkpoints,
log and curve are where that trainer puts them) and ``pipeline-state.json`` (written
atomically after every stage: the stages, each finished stage's adapter). A stage is run
in this process by the stage's own trainer class (:mod:`playpen.training.catalog`, as
``playpen run NAME`` finds it) with a freshly loaded learner, except the first stage run, which uses the one
``playpen run`` loaded. Resuming: finished stages are skipped; the stage that stopped is
resumed from its last complete checkpoint (``--resume`` of that trainer) or, when it
saved none, started over in its own folder.
"""
from __future__ import annotations

import json
import shlex
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable, Optional

from playpen.errors import ResumeError, TrainingSetupError
from playpen.files import write_json
from playpen.models import load_init_adapter
from playpen.registry import close_matches
from playpen.training import catalog
from playpen.training.common.base import parse_config
from playpen.training.common.checkpoints import STATE_FILE as TRAINER_STATE, is_complete
from playpen.training.common.config import option, split_list
from playpen.training.common.final_evaluation import FinalEvaluation
from playpen.training.common.lifecycle import lock_run_folder

STATE_FILE = "pipeline-state.json"
# stage name -> the packaged trainer that runs it (GRPO: with the teacher -t when there is one)
STAGES = {"sft": "sft", "spin": "spin", "dpo": "dpo", "self-rewarding": "self-rewarding", "grpo": "grpo",
          "spag": "spag"}
WITH_TEACHER = {"grpo": "grpo-teacher"}
# options of the pipeline handed to every stage that has them (None: the stage's own default)
SHARED = ("games", "train_instances", "split", "splits", "max_steps", "learning_rate", "save_steps",
          "save_total_limit", "report_to", "results_dir")


@dataclass
class PipelineOptions:
    """The stages and what they share (extends RunConfig: --games, --resume, --overwrite, ...)."""

    stages: str = option("sft,dpo", "stages in order, comma-separated (e.g. sft,spin,dpo,grpo); each starts "
                                    "from the previous stage's adapter")
    stage_steps: str = option("", "optimizer steps per stage, comma-separated in stage order (empty: --max-steps, "
                                  "else each stage's own default)")
    stage_options: str = option("", "options of single stages, e.g. 'dpo: --beta 0.2 --source records --records "
                                    "runs; grpo: --num-generations 4' (see playpen run STAGE --help)")
    init_adapter: str = option("", "the first stage starts from this adapter (same base model as the learner)")
    max_steps: Optional[int] = option(None, "optimizer steps of every stage (default: each stage's own)")
    learning_rate: Optional[float] = option(None, "learning rate of every stage (default: each stage's own)")
    save_steps: Optional[int] = option(None, "save a checkpoint every N steps in every stage (default: each "
                                             "stage's own)")
    save_total_limit: Optional[int] = option(None, "checkpoints kept per stage (default: each stage's own)")

    def validate(self) -> None:
        super().validate()
        names = split_list(self.stages)
        if not names:
            raise TrainingSetupError("option --stages: no stage given; expected stage names, comma-separated")
        known = list(STAGES)
        for name in names:
            if name not in known:
                raise TrainingSetupError(f"unknown stage '{name}'.{close_matches(name, known)} Stages: "
                                         f"{', '.join(known)}")
        steps = split_list(self.stage_steps)
        if steps and (len(steps) != len(names) or not all(s.isdigit() and int(s) >= 1 for s in steps)):
            raise TrainingSetupError(f"option --stage-steps: {self.stage_steps!r} is not valid; expected "
                                     f"{len(names)} integers >= 1, one per stage")
        own = self.options_by_stage()
        stray = [name for name in own if name not in names]
        if stray:
            raise TrainingSetupError(f"option --stage-options: '{stray[0]}' is not one of the stages "
                                     f"({', '.join(names)})")

    @property
    def stage_list(self) -> list[str]:
        return split_list(self.stages)

    def options_by_stage(self) -> dict[str, list[str]]:
        """``--stage-options`` as stage -> its option tokens."""
        out: dict[str, list[str]] = {}
        for part in self.stage_options.split(";"):
            if not part.strip():
                continue
            name, colon, rest = part.partition(":")
            if not colon:
                raise TrainingSetupError(f"option --stage-options: {part.strip()!r} is not valid; expected "
                                         f"'STAGE: --option value ...' parts separated by ';'")
            try:
                out.setdefault(name.strip(), []).extend(shlex.split(rest))
            except ValueError as e:
                raise TrainingSetupError(f"option --stage-options: {part.strip()!r}: {e}") from e
        return out


# ----------------------------------------------------------------------------- stages

@dataclass(frozen=True)
class Stage:
    index: int  # 1-based
    name: str
    trainer: type  # the stage's BasePlayPen subclass
    args: tuple[str, ...]  # its options, as on the command line

    @property
    def folder(self) -> str:
        return f"{self.index}-{self.name}"


def stage_trainer(name: str, teacher: Optional[str]) -> type:
    """A stage's trainer class; GRPO plays with the teacher when there is one."""
    return catalog.trainer_class(WITH_TEACHER.get(name, STAGES[name]) if teacher else STAGES[name])


def plan_stages(cfg, teacher: Optional[str]) -> list[Stage]:
    """The stages with their trainer classes and options (`teacher`: the -t model's name or None)."""
    steps = split_list(cfg.stage_steps)
    own = cfg.options_by_stage()
    stages = []
    for i, name in enumerate(cfg.stage_list):
        cls = stage_trainer(name, teacher)
        fields = {f for f in getattr(cls.config_class, "__dataclass_fields__", {})}
        args = []
        for key in SHARED:
            value = getattr(cfg, key)
            if key == "max_steps" and steps:
                value = int(steps[i])
            if value not in (None, "") and key in fields:
                args += [f"--{key.replace('_', '-')}", str(value)]
        if "init_adapter" not in fields and (i > 0 or cfg.init_adapter):
            raise TrainingSetupError(f"stage '{name}' cannot start from an adapter (its trainer has no "
                                     f"--init-adapter): put it first")
        stages.append(Stage(i + 1, name, cls, tuple(args + own.get(name, []))))
    return stages


def stage_config(stage: Stage, run_dir: Path, init_adapter: str, *, resume: bool, overwrite: bool):
    """The stage trainer's config: its options, its own models folder in the run folder, no
    evaluation (the pipeline evaluates its last adapter), the adapter to start from."""
    args = list(stage.args) + ["--models-dir", str(run_dir / stage.folder), "--no-evaluate"]
    if init_adapter:
        args += ["--init-adapter", init_adapter]
    if resume:
        args.append("--resume")
    elif overwrite:
        args.append("--overwrite")
    return parse_config(stage.trainer.config_class, args)


def check_stages(stages: list[Stage], run_dir: Path, cfg, learner: str, teacher: Optional[str]) -> None:
    """Each stage's options and its trainer's own checks, before any model loads."""
    for stage in stages:
        config = stage_config(stage, run_dir, cfg.init_adapter if stage.index == 1 else "", resume=False,
                              overwrite=False)
        stage.trainer.check(config, learner, teacher)


# ----------------------------------------------------------------------------- the state

def read_state(run_dir: Path) -> Optional[dict]:
    try:
        state = json.loads((run_dir / STATE_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return state if isinstance(state, dict) and isinstance(state.get("done"), list) else None


def write_state(run_dir: Path, stages: list[str], done: list[dict], current: Optional[str]) -> None:
    write_json(run_dir / STATE_FILE, {"stages": stages, "done": done, "current": current}, indent=1)


def starting_state(run_dir: Path, cfg) -> list[dict]:
    """The finished stages to skip (``--resume``) or none; refuses to start over a run
    without ``--overwrite`` and to resume a run of other stages."""
    state = read_state(run_dir)
    if cfg.resume:
        if state is None:
            raise ResumeError(f"--resume: no pipeline state in {run_dir} ({STATE_FILE}); start without --resume")
        if state.get("stages") != cfg.stage_list:
            raise ResumeError(f"--resume: {run_dir} holds a run of stages {','.join(state.get('stages') or [])}, "
                              f"not {cfg.stages}")
        return list(state["done"])
    if state is not None and not cfg.overwrite:
        raise ResumeError(f"{run_dir} already holds a pipeline run: pass --resume to continue it or "
                          f"--overwrite to start over")
    return []


def stage_adapter(stage_dir: Path) -> Optional[str]:
    """The adapter a finished stage ended with: its ``playpen-run.json``'s checkpoint."""
    for path in sorted(stage_dir.rglob("playpen-run.json")):
        summary = json.loads(path.read_text(encoding="utf-8"))
        checkpoint = summary.get("checkpoint")
        finished = not summary.get("interrupted") and not summary.get("stopped")
        if finished and checkpoint and checkpoint != "None" and (Path(checkpoint) / "adapter_config.json").exists():
            return checkpoint
    return None


def has_checkpoint(stage_dir: Path) -> bool:
    """The stage saved a complete checkpoint (``checkpoint-N``)."""
    return any(is_complete(p.parent) for p in stage_dir.rglob(TRAINER_STATE))


# ----------------------------------------------------------------------------- the run

class PipelineRun:
    """Runs the stages of ``trainer`` (a BasePlayPen whose config has PipelineOptions and
    RunConfig) into ``run_dir``; `load_learner` loads a fresh learner for a stage."""

    def __init__(self, trainer, stages: list[Stage], run_dir: Path, load_learner: Callable[[], Any]):
        self.trainer, self.cfg, self.stages, self.run_dir = trainer, trainer.config, stages, Path(run_dir)
        self.load_learner = load_learner
        self.eval_name = f"{trainer.learner.name}+pipeline-{'-'.join(self.cfg.stage_list)}"
        self.lock = lock_run_folder(self.run_dir)
        try:
            self.done = starting_state(self.run_dir, self.cfg)
            self.final = FinalEvaluation(self.cfg, self.cfg.game_list, self.eval_name)
            if self.cfg.evaluate:  # refused now, not after the stages: another run's results, a bad set name
                self.final.check()
        except BaseException:
            self.lock.release()
            raise

    def run(self) -> dict:
        """Every stage not done yet, then the evaluation of the last adapter; releases the lock."""
        try:
            return self._run()
        finally:
            self.lock.release()

    def _run(self) -> dict:
        import gc
        cfg, trainer = self.cfg, self.trainer
        names = cfg.stage_list
        started = time.time()
        learner = None
        self._loaded_used = False
        if self.done:
            print(f"[playpen] pipeline: {', '.join(d['stage'] for d in self.done)} done; resuming at "
                  f"{names[len(self.done)] if len(self.done) < len(names) else 'the evaluation'}", flush=True)
        for stage in self.stages[len(self.done):]:
            adapter = self.done[-1]["adapter"] if self.done else cfg.init_adapter
            stage_dir = self.run_dir / stage.folder
            resume = cfg.resume and has_checkpoint(stage_dir)
            write_state(self.run_dir, names, self.done, stage.name)
            config = stage_config(stage, self.run_dir, adapter, resume=resume, overwrite=not resume)
            # the first stage run here trains the learner `playpen run` loaded; later ones a fresh copy
            learner = stage_trainer = None  # the previous stage's model goes before the next one loads
            gc.collect()
            learner = trainer.learner if not self._loaded_used else self.load_learner()
            self._loaded_used = True
            print(f"[playpen] pipeline stage {stage.index}/{len(self.stages)}: {stage.name}"
                  f"{f' from {adapter}' if adapter else ''}{' (resumed)' if resume else ''}", flush=True)
            stage_trainer = stage.trainer(learner, trainer.teacher, config=config, output_dir=trainer.output_dir,
                                    seed=trainer.seed + stage.index - 1,
                                    callbacks=list(trainer.callbacks.callbacks), progress=False)
            stage_trainer.learn(None)
            if stage_trainer.interrupted_by is not None:
                trainer.interrupted_by = stage_trainer.interrupted_by
                print(f"[playpen] pipeline stopped in stage {stage.name}: continue with --resume", flush=True)
                return {"stopped_in": stage.name}
            finished = stage_adapter(stage_dir)
            if finished is None:
                print(f"[playpen] pipeline stopped in stage {stage.name} (it saved no adapter): continue with "
                      f"--resume", flush=True)
                return {"stopped_in": stage.name}
            self.done.append({"stage": stage.name, "adapter": finished})
            write_state(self.run_dir, names, self.done, None)
        return self.finish(learner, started)

    def finish(self, learner, started: float) -> dict:
        cfg, trainer = self.cfg, self.trainer
        summary = {"trainer": trainer.name, "learner": trainer.learner.name, "config": asdict(cfg),
                   "stages": self.done, "checkpoint": self.done[-1]["adapter"],
                   "train_seconds": round(time.time() - started, 1)}
        if cfg.evaluate:
            if learner is None:  # every stage was done before: the last adapter onto the learner
                learner = trainer.learner
                load_init_adapter(learner.model, self.done[-1]["adapter"], trainable=False)
            learner.model.eval()
            players = [learner, trainer.teacher] if trainer.teacher is not None else [learner]
            summary.update(self.final.run(players, learner))
        write_json(self.run_dir / "playpen-run.json", summary, indent=1)
        print(f"[playpen] pipeline done: {summary['checkpoint']}", flush=True)
        return summary
