"""The lifecycle of a training run: the frame of a trainer's ``learn()``
(:class:`TrainingRun`: refusals, resume, training, final evaluation, summary),
checkpoints, Ctrl-C safety, the bridge from TRL's logs to playpen's metrics, precision.

Kept free of any one algorithm: :mod:`playpen.training.sft` builds supervised datasets,
:mod:`playpen.training.grpo` bridges the rollout engine to TRL's ``rollout_func``.
"""
from __future__ import annotations

import re
import signal
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any, Optional

from playpen.callbacks import BaseCallback, JsonlLogCallback
from playpen.errors import PlaypenError, ResumeError
from playpen.files import write_json
from playpen.training.plotting import CURVE_FILE, LOG_FILE, plot_run

_CHECKPOINT = re.compile(r"^checkpoint-(\d+)$")



# ----------------------------------------------------------------------------- checkpoints

def checkpoints(run_dir: str | Path) -> list[Path]:
    """Complete ``checkpoint-N`` folders, oldest first. A checkpoint is complete when its
    ``trainer_state.json`` exists: transformers writes that file last, so a folder left
    by a crash in the middle of saving is never picked."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        return []
    found = []
    for child in run_dir.iterdir():
        match = _CHECKPOINT.match(child.name)
        if match and (child / "trainer_state.json").exists():
            found.append((int(match.group(1)), child))
    return [path for _, path in sorted(found)]


def latest_checkpoint(run_dir: str | Path) -> Optional[Path]:
    found = checkpoints(run_dir)
    return found[-1] if found else None


def resume_checkpoint(run_dir: str | Path, resume: bool) -> Optional[str]:
    """The checkpoint to resume from (None for a fresh run); --resume without one is an error."""
    if not resume:
        return None
    last = latest_checkpoint(run_dir)
    if last is None:
        raise ResumeError(f"--resume: no complete checkpoint in {run_dir} (checkpoint-N with "
                          f"trainer_state.json); start without --resume")
    return str(last)


def checkpoint_step(path: str | Path) -> int:
    match = _CHECKPOINT.match(Path(path).name)
    return int(match.group(1)) if match else 0


# ----------------------------------------------------------------------------- precision, threads

def precision_kwargs() -> dict:
    """TRL configs default to bf16, which on CPU means slow autocast: fp32 on CPU, bf16
    where a GPU supports it."""
    import torch
    if torch.cuda.is_available():
        bf16 = torch.cuda.is_bf16_supported()
        return {"bf16": bf16, "fp16": not bf16}
    return {"bf16": False, "fp16": False, "use_cpu": True}


def model_of(learner: Any):
    """The torch module of a learner (a clemcore HuggingfaceLocalModel or a bare model)."""
    return getattr(learner, "model", learner)


def tokenizer_of(learner: Any):
    tokenizer = getattr(learner, "tokenizer", None)
    if tokenizer is None:
        raise PlaypenError(f"learner {learner!r} has no tokenizer: the learner must be a "
                           f"huggingface_local model")
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def safe_name(name: str) -> str:
    """A model name as one folder name (``org/model`` → ``org--model``)."""
    return re.sub(r"[^A-Za-z0-9+._-]", "-", name.replace("/", "--"))


# ----------------------------------------------------------------------------- options

def set_lora_dropout(model, p: float) -> int:
    """Give every LoRA layer of a peft ``model`` dropout ``p`` (0: none). Returns the
    number of layers changed. An adapter loaded from a checkpoint keeps the dropout it was
    trained with unless told otherwise; GRPO wants none (the trained policy must be the
    one that sampled, and on a CPU dropout nearly doubles the cost of a forward pass:
    benchmarks/lora_dropout.py)."""
    import torch
    if not 0.0 <= p < 1.0:
        raise ValueError(f"LoRA dropout must be in [0, 1), got {p}")
    changed = 0
    for module in model.modules():
        dropouts = getattr(module, "lora_dropout", None)
        if isinstance(dropouts, torch.nn.ModuleDict):
            for name in list(dropouts.keys()):
                dropouts[name] = torch.nn.Dropout(p) if p > 0 else torch.nn.Identity()
                changed += 1
    return changed


# ----------------------------------------------------------------------------- Ctrl-C

class GracefulInterrupt:
    """First Ctrl-C: finish the current optimizer step, save a checkpoint, stop cleanly.
    A second Ctrl-C interrupts at once (the last saved checkpoint stays valid).

    Use as a context manager around ``trainer.train()`` together with
    :class:`PlaypenTrainerCallback`, which turns the flag into ``should_save`` and
    ``should_training_stop``.
    """

    def __init__(self):
        self.requested = False
        self._previous = None

    def _handle(self, signum, frame):
        if self.requested:
            raise KeyboardInterrupt
        self.requested = True
        print("\n[playpen] Ctrl-C: saving a checkpoint after this step and stopping "
              "(press Ctrl-C again to stop at once)", flush=True)

    def __enter__(self):
        try:
            self._previous = signal.signal(signal.SIGINT, self._handle)
        except ValueError:  # not the main thread: no handler, Ctrl-C raises as usual
            self._previous = None
        return self

    def __exit__(self, *exc):
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)
        return False


# ----------------------------------------------------------------------------- metrics bridge

# TRL log keys -> playpen's namespaced metric keys
_RENAMES = {
    "loss": "train/loss",
    "learning_rate": "train/learning_rate",
    "grad_norm": "train/grad_norm",
    "kl": "train/kl",
    "entropy": "train/entropy",
    "mean_token_accuracy": "train/mean_token_accuracy",
    "reward": "rollout/reward_mean",
    "reward_std": "rollout/reward_std",
    "epoch": "train/epoch",
    "num_tokens": "train/num_tokens",
}


def rename_metrics(logs: dict) -> dict:
    """TRL's log dict → playpen keys. Per-role rewards arrive as ``rewards/role:<R>/mean``
    (one reward function per role) and become ``reward/<R>/mean``; ``rewards/played/mean``
    becomes ``rollout/percent_played`` (×100)."""
    out = {}
    for key, value in logs.items():
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            continue
        if key.startswith("rewards/role:"):
            role_and_stat = key[len("rewards/role:"):]
            role, _, stat = role_and_stat.rpartition("/")
            out[f"reward/{role}/{stat}"] = value
        elif key == "rewards/played/mean":
            out["rollout/percent_played"] = 100.0 * value
        elif key in _RENAMES:
            out[_RENAMES[key]] = value
        elif "/" in key:
            out[key] = value
        else:
            out[f"train/{key}"] = value
    return out


def make_trainer_callback(callbacks: BaseCallback, run_dir: str | Path,
                          interrupt: Optional[GracefulInterrupt] = None,
                          extra_metrics: Optional[callable] = None):
    """A transformers ``TrainerCallback`` that forwards every logged step to playpen's
    callbacks and to ``<run_dir>/playpen-log.jsonl``, adds ``train/tokens_per_s``, stops
    when a callback returns False, and saves + stops after a Ctrl-C."""
    from transformers import TrainerCallback

    log = JsonlLogCallback(Path(run_dir) / LOG_FILE)

    class PlaypenTrainerCallback(TrainerCallback):
        def __init__(self):
            self._last_time = None
            self._last_tokens = None
            self._stop = False

        def on_train_begin(self, args, state, control, **kwargs):
            self._last_time = time.time()
            self._last_tokens = getattr(state, "num_input_tokens_seen", 0) or 0

        def on_log(self, args, state, control, logs=None, **kwargs):
            if not logs or "train_runtime" in logs:  # the end-of-training summary is no step
                return
            metrics = rename_metrics(logs)
            now = time.time()
            tokens = metrics.get("train/num_tokens", getattr(state, "num_input_tokens_seen", 0)) or 0
            if self._last_time is not None and tokens and now > self._last_time:
                metrics["train/tokens_per_s"] = (tokens - (self._last_tokens or 0)) / (now - self._last_time)
            self._last_time, self._last_tokens = now, tokens
            if extra_metrics is not None:
                metrics.update(extra_metrics())
            step = int(state.global_step)
            keep_going = callbacks.on_train_step(step, metrics)
            log.on_train_step(step, metrics)
            if not keep_going:
                self._stop = True
            # on_log runs before the step's save decision: act on a stop request right away
            self.on_step_end(args, state, control)

        def on_step_end(self, args, state, control, **kwargs):
            if (interrupt is not None and interrupt.requested) or self._stop:
                control.should_save = True
                control.should_training_stop = True

    return PlaypenTrainerCallback()


# ----------------------------------------------------------------------------- a trainer's run

class TrainingRun:
    """The frame of an example trainer's ``learn()`` around its TRL trainer.

    Created before anything is loaded or trained, it refuses to ``--resume`` without a
    complete checkpoint, to train into a folder that holds checkpoints without
    ``--resume`` or ``--overwrite``, and to let the final evaluation replace another
    run's results. Then hand :meth:`trainer_callback` to the TRL trainer, :meth:`train`
    it and :meth:`finish`: evaluation of the last checkpoint on the held-out instances,
    ``playpen-run.json`` and the learning curve in `run_dir`.

    `playpen` is the trainer (a ``BasePlayPen``); its config has the fields ``max_steps``,
    ``resume``, ``overwrite``, ``evaluate``, ``results_dir``, ``eval_max_instances`` and
    ``eval_batch_size``. Evaluation results go to
    ``<results_dir>/<eval_prefix>checkpoint-N/``.
    """

    def __init__(self, playpen: Any, run_dir: str | Path, games: list[str], eval_prefix: str):
        cfg = playpen.config
        self.playpen, self.run_dir, self.games, self.eval_prefix = playpen, Path(run_dir), games, eval_prefix
        self.resume_from = resume_checkpoint(self.run_dir, cfg.resume)
        if not cfg.resume and not cfg.overwrite and latest_checkpoint(self.run_dir):
            raise ResumeError(f"{self.run_dir} already holds checkpoints: pass --resume to continue "
                              f"or --overwrite to start over")
        # the final evaluation replaces results only of this run's own checkpoints (resumed or
        # restarted); refuse now, not after training, to replace another run's
        if cfg.evaluate and not (cfg.resume or cfg.overwrite):
            from playpen.evaluation import check_no_earlier_results
            check_no_earlier_results(cfg.results_dir, f"{eval_prefix}checkpoint-{cfg.max_steps}", games,
                                     hint="pass --overwrite to replace them or --results-dir DIR to keep them")
        self.interrupt = GracefulInterrupt()
        self.checkpoint: Optional[Path] = None
        self.started = time.time()

    def trainer_callback(self, extra_metrics: Optional[callable] = None):
        """The ``TrainerCallback`` for the TRL trainer (see :func:`make_trainer_callback`)."""
        return make_trainer_callback(self.playpen.callbacks, self.run_dir, self.interrupt, extra_metrics)

    def train(self, trainer) -> Optional[Path]:
        """``trainer.train()``, from the checkpoint to resume from if any; the first Ctrl-C
        saves a checkpoint and stops. Returns the last complete checkpoint."""
        callbacks = self.playpen.callbacks
        callbacks.on_learn_start(self.playpen.name, self.playpen.config.max_steps)
        with self.interrupt:
            trainer.train(resume_from_checkpoint=self.resume_from)
        callbacks.on_learn_end()
        self.checkpoint = latest_checkpoint(self.run_dir)
        return self.checkpoint

    def finish(self, players: Optional[list] = None, *, partner: Optional[str] = None, saved: str = "adapter",
               **details) -> dict:
        """Evaluate the trained learner (in memory: it carries what was trained) with
        `players` (default: the learner alone) on the held-out instances unless the config
        says no or the run was interrupted, then write ``playpen-run.json`` (trainer,
        learner, `partner`, config, checkpoint, `details`, time, evaluation) and draw the
        learning curve. `saved` names what a checkpoint holds in the closing line."""
        playpen, cfg = self.playpen, self.playpen.config
        summary = {"trainer": playpen.name, "learner": playpen.learner.name}
        if partner is not None:
            summary["partner"] = partner
        summary.update(config=asdict(cfg), checkpoint=str(self.checkpoint), **details,
                       train_seconds=round(time.time() - self.started, 1), interrupted=self.interrupt.requested)
        if cfg.evaluate and not self.interrupt.requested and self.checkpoint is not None:
            from playpen.evaluation import evaluate
            model_of(playpen.learner).eval()
            table = evaluate(players or [playpen.learner], self.games, results_dir=cfg.results_dir,
                             max_instances=cfg.eval_max_instances or None, batch_size=cfg.eval_batch_size,
                             run_name=f"{self.eval_prefix}{self.checkpoint.name}",
                             overwrite=cfg.resume or cfg.overwrite)
            print(table.to_text(), flush=True)
            summary["eval"] = table.to_dict()
        write_json(self.run_dir / "playpen-run.json", summary, indent=1)
        plot_run(self.run_dir)
        print(f"[playpen] {saved}: {self.checkpoint}  curve: {self.run_dir / CURVE_FILE}", flush=True)
        return summary
