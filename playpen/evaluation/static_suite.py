"""The static suite: lm-evaluation-harness tasks on the evaluated model, and its statscore.

Game play says nothing about what training cost elsewhere; LM Playschool therefore reports
a statscore beside the clemscores: the mean of the primary metrics of static benchmarks.
The benchmarks are run by lm-evaluation-harness (``lm_eval``, the optional ``static``
extra), never by a harness of playpen's own, on the model object already loaded (adapter
included), so a trainer can score the model it holds without saving and reloading it.

Tasks are lm-eval task names (hub datasets, downloaded by lm-eval where a user has network
access), task YAML files, or tasks in folders passed as ``include_paths``; playpen's own
offline task ``playpen_word_clues`` (``tasks/``, see :mod:`playpen.evaluation.word_clues`)
is always found, so the suite runs on a machine without network. A task's primary metric
is the first of its ``metric_list`` (for a group, of its ``aggregate_metric_list``).
"""
from __future__ import annotations

import contextlib
import json
import logging
import math
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Sequence

from playpen.errors import EvaluationError
from playpen.evaluation import _quiet_stdout
from playpen.files import write_json

TASKS_DIR = Path(__file__).resolve().parent / "tasks"
STATIC_FILE = "playpen-static.json"
INSTALL_HINT = "pip install 'playpen[static]'"


@dataclass(frozen=True)
class TaskScore:
    """One task's primary metric as lm-eval reports it (`stderr` NaN where it gives none)."""

    task: str
    metric: str
    value: float
    stderr: float = math.nan
    num_samples: Optional[int] = None


@dataclass(frozen=True)
class StaticTable:
    """The statscore of one model: the unweighted mean of its tasks' primary metrics."""

    run_name: str
    tasks: tuple[TaskScore, ...]

    @property
    def statscore(self) -> float:
        return round(sum(t.value for t in self.tasks) / len(self.tasks), 4)

    def to_dict(self) -> dict:
        return {"run_name": self.run_name, "statscore": self.statscore,
                "tasks": [{"task": t.task, "metric": t.metric, "value": t.value,
                           "stderr": None if math.isnan(t.stderr) else t.stderr,
                           "num_samples": t.num_samples} for t in self.tasks]}

    def to_text(self) -> str:
        lines = [f"static suite (lm-evaluation-harness) for {self.run_name}",
                 f"{'task':<32} {'metric':<12} {'value':>8} {'stderr':>8} {'samples':>8}"]
        for t in self.tasks:
            stderr = "n/a" if math.isnan(t.stderr) else f"{t.stderr:.4f}"
            lines.append(f"{t.task:<32} {t.metric:<12} {t.value:>8.4f} {stderr:>8} {t.num_samples or '':>8}")
        lines.append(f"{'statscore (mean of the tasks)':<45} {self.statscore:>9.4f}")
        return "\n".join(lines)


def import_lm_eval():
    """The lm_eval module; one line saying how to install it when it is missing."""
    try:
        import lm_eval
        import lm_eval.tasks  # noqa: F401  (the task manager; fails early when lm_eval is broken)
    except ImportError as e:
        raise EvaluationError(f"the static suite needs lm-evaluation-harness, which is not installed "
                              f"({e.name or e}): {INSTALL_HINT}") from e
    return lm_eval


@contextlib.contextmanager
def _quiet_lm_eval():
    """lm-eval logs every request batch at INFO and warns about a pre-loaded model, and the hub
    client logs each retry of a download that cannot succeed offline: keep their errors (a
    task that cannot load is then said in one line) and playpen's stdout for the table."""
    loggers = [logging.getLogger(name) for name in ("lm_eval", "huggingface_hub", "datasets")]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.ERROR)
    try:
        with _quiet_stdout():
            yield
    finally:
        for logger, level in zip(loggers, levels):
            logger.setLevel(level)


def task_manager(names: Sequence[str], include_paths: Sequence[str | Path] = ()):
    """lm-eval's TaskManager over playpen's tasks and `include_paths`; lm-eval's own task
    index (seconds to build) only when a name is not found there."""
    import_lm_eval()
    from lm_eval.tasks import TaskManager
    for path in include_paths:
        if not Path(path).is_dir():
            raise EvaluationError(f"--include-path '{path}' is not a folder of lm-eval task YAML files")
    paths = [str(TASKS_DIR), *map(str, include_paths)]
    with _quiet_lm_eval():
        local = TaskManager(include_path=paths, include_defaults=False)
        known = set(local.all_tasks) | set(local.all_groups) | set(local.all_tags)
        if all(name in known or name.endswith((".yaml", ".yml")) for name in names):
            return local
        return TaskManager(include_path=paths)


def load_tasks(names: Sequence[str], include_paths: Sequence[str | Path] = ()) -> tuple[object, list]:
    """(task manager, one loaded Task or Group per name); a name that is no task, a file that
    is no task file or a dataset that cannot be read: one EvaluationError naming the task."""
    names = list(dict.fromkeys(names))
    if not names:
        raise EvaluationError("no static tasks given (pass --task NAME)")
    manager = task_manager(names, include_paths)
    loaded = []
    for name in names:
        if name.endswith((".yaml", ".yml")) and not Path(name).is_file():
            raise EvaluationError(f"static task file '{name}' does not exist")
        try:
            with _quiet_lm_eval():
                found = manager.load([name])
        except Exception as e:  # lm-eval raises KeyError, ValueError, dataset and network errors alike
            detail = " ".join(str(e).split())[:300] or type(e).__name__
            hint = " (see `lm_eval ls tasks`; a hub task needs network access once)" * isinstance(e, KeyError)
            raise EvaluationError(f"static task '{name}' cannot be loaded: {detail}{hint}") from e
        loaded.append(_top_level(name, found))
    try:  # what simple_evaluate does first: a task in two of the requested groups is refused there
        manager.load([obj for item in loaded for obj in (item if isinstance(item, list) else [item])])
    except ValueError as e:
        raise EvaluationError(f"static tasks {', '.join(names)}: {' '.join(str(e).split())}") from e
    return manager, loaded


def _top_level(name: str, found: dict):
    """The object lm-eval should report for a requested name: its group, its task, or (a tag,
    a task file) each task it stands for."""
    if name in found["groups"]:
        return found["groups"][name]
    if name in found["tasks"]:
        return found["tasks"][name]
    children = {child for names in found["group_map"].values() for child in names}
    return ([g for g in found["groups"].values() if g.name not in children]
            + [t for n, t in found["tasks"].items() if n not in children])


def _reported_names(loaded: list) -> list[str]:
    names = []
    for item in loaded:
        for obj in item if isinstance(item, list) else [item]:
            names.append(getattr(obj, "task_name", None) or obj.name)
    return names


@contextlib.contextmanager
def _kept_random_state(model):
    """lm-eval seeds python, numpy and torch and puts the model in eval mode: a trainer
    scoring its model mid-run gets both back as they were."""
    import numpy as np
    import torch
    states = random.getstate(), np.random.get_state(), torch.get_rng_state()
    training = getattr(model, "training", False)
    try:
        yield
    finally:
        random.setstate(states[0])
        np.random.set_state(states[1])
        torch.set_rng_state(states[2])
        if training:
            model.train()


@contextlib.contextmanager
def _no_machine_survey():
    """simple_evaluate ends by surveying the machine for its results (torch's collect_env runs
    pip, the compilers and nvidia-smi: about a second a call here); playpen keeps no field of it,
    so the survey is skipped for the call."""
    import lm_eval.evaluator as evaluator
    survey = evaluator.add_env_info
    evaluator.add_env_info = lambda results: None
    try:
        yield
    finally:
        evaluator.add_env_info = survey


def run_static(model, tokenizer, tasks: Sequence[str], *, run_name: str, include_paths: Sequence[str | Path] = (),
               batch_size: int = 8, limit: Optional[int] = None, out_dir: str | Path | None = None) -> StaticTable:
    """Score a loaded HF causal LM (a PeftModel counts) on lm-eval `tasks`; returns the table
    and, with `out_dir`, writes it with lm-eval's per-task results to ``out_dir/playpen-static.json``.
    `limit`: at most that many questions per task (lm-eval's ``limit``)."""
    manager, loaded = load_tasks(tasks, include_paths)
    from lm_eval import simple_evaluate
    from lm_eval.models.huggingface import HFLM
    with _kept_random_state(model), _quiet_lm_eval(), _no_machine_survey():
        lm = HFLM(pretrained=model, tokenizer=tokenizer, batch_size=batch_size)
        results = simple_evaluate(model=lm, tasks=loaded, task_manager=manager, limit=limit,
                                  log_samples=False, bootstrap_iters=1000)
    table = StaticTable(run_name, tuple(_primary(name, results) for name in _reported_names(loaded)))
    if out_dir is not None:
        payload = {**table.to_dict(), "tasks_requested": list(tasks), "limit": limit,
                   "lm_eval": {key: results.get(key) for key in ("results", "groups", "versions", "n-samples",
                                                                  "higher_is_better")}}
        write_json(Path(out_dir) / STATIC_FILE, json.loads(json.dumps(payload, default=str)), indent=1)
    return table


def _primary(name: str, results: dict) -> TaskScore:
    """The first higher-is-better metric lm-eval reports for `name` (its metric_list order)."""
    entry = results["results"].get(name, {})
    better = results.get("higher_is_better", {}).get(name, {})
    samples = (results.get("n-samples", {}).get(name) or {}).get("effective")
    for metric, higher in better.items():
        key = next((k for k in entry if k.split(",")[0] == metric), None)
        if key is None or not isinstance(entry[key], (int, float)):
            continue
        if not higher:
            raise EvaluationError(f"static task '{name}': its primary metric '{metric}' is better when lower; "
                                  f"the statscore averages scores that are better when higher")
        stderr_key = key.replace(",", "_stderr,", 1)
        stderr = entry.get(stderr_key)
        return TaskScore(name, metric, round(float(entry[key]), 4),
                         float(stderr) if isinstance(stderr, (int, float)) else math.nan, samples)
    raise EvaluationError(f"static task '{name}' reported no metric (a group without aggregate_metric_list? "
                          f"pass its tasks one by one)")
