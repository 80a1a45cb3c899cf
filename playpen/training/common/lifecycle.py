"""The lifecycle of a training run: the frame of a trainer's ``learn()``
(:class:`TrainingRun`: the run-folder lock, refusals, resume, training, final evaluation,
summary), Ctrl-C/SIGTERM safety, the bridge from TRL's logs to playpen's metrics and
checkpoint rotation (:mod:`playpen.training.common.checkpoints`), precision.

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

from playpen import distributed
from playpen.callbacks import BaseCallback, JsonlLogCallback
from playpen.errors import Interrupted, PlaypenError, ResumeError, RunLockedError
from playpen.files import FolderLock, write_json
from playpen.training.common.checkpoints import (checkpoint_step, checkpoints, latest_checkpoint,  # noqa: F401
                                                 remove_partial, resume_checkpoint, rotate_checkpoints)
from playpen.training.common.final_evaluation import FinalEvaluation
from playpen.training.common.finite import NonFiniteGuard
from playpen.training.common.memory import memory_metrics, prepare_for_training, release_memory, reset_peak
from playpen.training.common.plotting import CURVE_FILE, LOG_FILE, plot_run


# ----------------------------------------------------------------------------- precision, threads

def lock_run_folder(run_dir: Path) -> FolderLock:
    """The run folder's lock, or RunLockedError naming the run that holds it (take over:
    this process's earlier run that raised). In a data-parallel run rank 0 holds it for all
    ranks: the others get a lock object that holds nothing (its ``release`` does nothing)."""
    lock = FolderLock(run_dir)
    if not distributed.is_main():
        return lock
    if not lock.acquire(take_over=True):
        holder = lock.holder()
        raise RunLockedError(
            f"{run_dir} is in use by another run (PID {holder.get('pid', '?')}: "
            f"{holder.get('command', '?')}, since {holder.get('started', '?')}): wait for it to end, stop "
            f"it (kill {holder.get('pid', 'PID')}: it saves a checkpoint first), or pass --models-dir DIR")
    return lock


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


# ----------------------------------------------------------------------------- Ctrl-C, SIGTERM

class GracefulInterrupt:
    """First Ctrl-C (SIGINT) or SIGTERM (a timeout, a cluster scheduler, ``docker stop``):
    finish the current optimizer step, save a checkpoint, stop cleanly; ``signum`` says
    which signal. A second signal stops at once (:class:`~playpen.errors.Interrupted`; the
    last saved checkpoint stays valid).

    Use as a context manager around ``trainer.train()`` together with
    :class:`PlaypenTrainerCallback`, which turns the flag into ``should_save`` and
    ``should_training_stop``.
    """

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self):
        self.requested = False
        self.signum: Optional[int] = None
        self._previous: dict = {}

    def _handle(self, signum, frame):
        if self.requested:
            raise Interrupted(signum, "stopped at once; the last saved checkpoint is intact")
        self.requested, self.signum = True, signum
        print(f"\n[playpen] {signal.Signals(signum).name}: saving a checkpoint after this step and "
              f"stopping (a second signal stops at once)", flush=True)

    def __enter__(self):
        for signum in self.SIGNALS:
            try:
                self._previous[signum] = signal.signal(signum, self._handle)
            except ValueError:  # not the main thread: no handler, signals act as usual
                break
        return self

    def __exit__(self, *exc):
        for signum, previous in self._previous.items():
            signal.signal(signum, previous)
        self._previous = {}
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
    callbacks and to ``<run_dir>/playpen-log.jsonl``, adds ``train/tokens_per_s``, the CPU
    seconds since the previous step (``time/cpu_s``) and the
    step's memory (``memory/peak_rss_mb``: the highest resident memory since the step
    began; :func:`playpen.training.common.memory.memory_metrics`), stops when a callback returns
    False, and saves + stops after a Ctrl-C. Each step begins with the memory the previous
    one freed handed back to the system (:func:`~playpen.training.common.memory.release_memory`).
    A step whose gradients are not finite is dropped before the optimizer step
    (:class:`~playpen.training.common.finite.NonFiniteGuard`: ``train/skipped_steps``; 3 in a row
    save and stop)."""
    from transformers import TrainerCallback

    log = JsonlLogCallback(Path(run_dir) / LOG_FILE)

    class PlaypenTrainerCallback(TrainerCallback):
        def __init__(self):
            self._last_time = None
            self._last_tokens = None
            self._last_cpu = None
            self._stop = False
            self._keep = None
            self.guard = NonFiniteGuard()  # steps with NaN/inf gradients never reach the weights

        def on_train_begin(self, args, state, control, **kwargs):
            prepare_for_training()  # the allocator: benchmarks/memory.py
            self._last_time, self._last_cpu = time.time(), time.process_time()
            self._last_tokens = getattr(state, "num_input_tokens_seen", 0) or 0
            # playpen rotates (on_save, safely); transformers' rotation is turned off
            if args.save_total_limit is not None:
                self._keep, args.save_total_limit = args.save_total_limit, None
            # a resumed state keeps the checkpoint's save interval: apply the one asked for now
            if state.global_step and args.save_steps and state.save_steps != args.save_steps:
                print(f"[playpen] --resume: saving every {args.save_steps:g} steps as asked "
                      f"(the checkpoint saved every {state.save_steps:g})", flush=True)
                state.save_steps = args.save_steps

        def on_step_begin(self, args, state, control, **kwargs):
            release_memory()
            reset_peak()

        def on_pre_optimizer_step(self, args, state, control, model=None, **kwargs):
            # after clipping, before the optimizer: the gradients are the whole step's (all ranks')
            if model is not None and self.guard.check(model, int(state.global_step) + 1) and self.guard.stop:
                self._stop = True  # saved and stopped at the step's end, the weights as they were

        def on_save(self, args, state, control, **kwargs):
            if distributed.is_main():  # the rank that saved (transformers saves from rank 0)
                rotate_checkpoints(args.output_dir, self._keep)

        def on_log(self, args, state, control, logs=None, **kwargs):
            if not logs or "train_runtime" in logs:  # the end-of-training summary is no step
                return
            if not distributed.is_main():  # rank 0 logs the step (TRL's metrics are gathered over ranks)
                self.on_step_end(args, state, control)
                return
            metrics = rename_metrics(logs)
            now = time.time()
            tokens = metrics.get("train/num_tokens", getattr(state, "num_input_tokens_seen", 0)) or 0
            if self._last_time is not None and tokens and now > self._last_time:
                metrics["train/tokens_per_s"] = (tokens - (self._last_tokens or 0)) / (now - self._last_time)
            # CPU seconds of the whole process (every thread) since the last step: unlike the
            # wall clock, it does not grow when other jobs share the machine
            cpu = time.process_time()
            if self._last_cpu is not None:
                metrics["time/cpu_s"] = round(cpu - self._last_cpu, 3)
            self._last_time, self._last_tokens, self._last_cpu = now, tokens, cpu
            if extra_metrics is not None:
                metrics.update(extra_metrics())
            metrics.update(memory_metrics())
            metrics.update(self.guard.metrics())
            step = int(state.global_step)
            keep_going = callbacks.on_train_step(step, metrics)
            log.on_train_step(step, metrics)
            if not keep_going:
                self._stop = True
            # on_log runs before the step's save decision: act on a stop request right away
            self.on_step_end(args, state, control)

        def on_step_end(self, args, state, control, **kwargs):
            # every rank saves and stops at the same step, whichever rank got the signal or the
            # callback's stop (a rank that went on alone would wait for the others forever)
            signum = distributed.max_over_ranks(interrupt.signum or 0 if interrupt is not None else 0)
            if signum and not interrupt.requested:  # another rank got it: stop as it does
                interrupt.requested, interrupt.signum = True, signum
            if distributed.any_rank(self._stop) or signum:
                control.should_save = True
                control.should_training_stop = True

    return PlaypenTrainerCallback()


# ----------------------------------------------------------------------------- a trainer's run

class TrainingRun:
    """The frame of an example trainer's ``learn()`` around its TRL trainer.

    Created before anything is loaded or trained, it locks `run_dir` for this process
    (another run into it stops with one line naming the holder; :class:`~playpen.files.FolderLock`),
    removes what an interrupted save left there, and refuses to ``--resume`` without a
    complete checkpoint, to train into a folder that holds checkpoints without
    ``--resume`` or ``--overwrite``, and to let the final evaluation replace another
    run's results. Then hand :meth:`trainer_callback` to the TRL trainer, :meth:`train`
    it and :meth:`finish`: the end-of-run evaluation before -> after
    (:mod:`~playpen.training.common.final_evaluation`), ``playpen-run.json`` and the
    learning curve in `run_dir`; the lock is released then (or when training raises, or
    when the process ends).

    `playpen` is the trainer (a ``BasePlayPen``); its config is a RunConfig. Evaluation
    results go to ``<results_dir>/<eval_prefix>checkpoint-N/``.
    """

    def __init__(self, playpen: Any, run_dir: str | Path, games: list[str], eval_prefix: str):
        cfg = playpen.config
        self.playpen, self.run_dir, self.games, self.eval_prefix = playpen, Path(run_dir), games, eval_prefix
        self.lock = self._lock()
        self.trained = False
        try:
            removed = remove_partial(self.run_dir) if distributed.is_main() else []
            if removed:
                print(f"[playpen] removed what an interrupted save left in {self.run_dir}: "
                      f"{', '.join(removed)}", flush=True)
            self.resume_from = resume_checkpoint(self.run_dir, cfg.resume)
            if not cfg.resume and not cfg.overwrite and latest_checkpoint(self.run_dir):
                raise ResumeError(f"{self.run_dir} already holds checkpoints: pass --resume to continue, "
                                  f"--overwrite to start over, or --models-dir DIR for a run of its own")
            # the final evaluation replaces results only of this run's own checkpoints (resumed or
            # restarted); refuse now, not after training, to replace another run's (or a bad set name)
            self.final = FinalEvaluation(cfg, games, f"{eval_prefix}checkpoint-{cfg.max_steps}")
            if cfg.evaluate:
                self.final.check()
        except BaseException:
            self._unlock()
            raise
        self.interrupt = GracefulInterrupt()
        self.checkpoint: Optional[Path] = None
        self.started = time.time()
        if isinstance(getattr(playpen, "runs", None), list):
            playpen.runs.append(self)

    def abandon(self) -> None:
        """The trainer stopped at a user mistake before this run trained (data that is not
        there, a game it cannot play): release the lock and remove the folders the run
        created if nothing else was written into them. A run that trained keeps everything."""
        if not self.trained:
            self._unlock()

    def _lock(self) -> FolderLock:
        missing = [d for d in (self.run_dir, *self.run_dir.parents) if not d.exists()]
        # removed again when the run refuses (by rank 0, which created them)
        self._created = missing[-1] if missing and distributed.is_main() else None
        lock = lock_run_folder(self.run_dir)
        distributed.record_run_dir(self.run_dir)
        return lock

    def _unlock(self) -> None:
        """Release the lock; folders this run created and left empty go too."""
        self.lock.release()
        if self._created is None:
            return
        for folder in (self.run_dir, *self.run_dir.parents):
            try:
                folder.rmdir()
            except OSError:
                break
            if folder == self._created:
                break
        self._created = None

    def trainer_callback(self, extra_metrics: Optional[callable] = None):
        """The ``TrainerCallback`` for the TRL trainer (see :func:`make_trainer_callback`)."""
        return make_trainer_callback(self.playpen.callbacks, self.run_dir, self.interrupt, extra_metrics)

    def train(self, trainer) -> Optional[Path]:
        """``trainer.train()``, from the checkpoint to resume from if any; the first Ctrl-C
        saves a checkpoint and stops. Returns the last complete checkpoint."""
        callbacks = self.playpen.callbacks
        self.trained = True
        callbacks.on_learn_start(self.playpen.name, self.playpen.config.max_steps)
        try:
            with self.interrupt:
                trainer.train(resume_from_checkpoint=self.resume_from)
        except BaseException:
            self.lock.release()
            raise
        callbacks.on_learn_end()
        self.checkpoint = latest_checkpoint(self.run_dir)
        return self.checkpoint

    def finish(self, players: Optional[list] = None, *, partner: Optional[str] = None, saved: str = "adapter",
               **details) -> dict:
        """Evaluate the trained learner (in memory: it carries what was trained) with
        `players` (default: the learner alone) on the held-out instances unless the config
        says no or the run was interrupted, then write ``playpen-run.json`` (trainer,
        learner, `partner`, config, checkpoint, `details`, time, evaluation) and draw the
        learning curve. `saved` names what a checkpoint holds in the closing line. After a
        SIGINT/SIGTERM, ``playpen.interrupted_by`` is the signal (`playpen run` exits with
        128 + it). Releases the run folder's lock."""
        try:
            return self._finish(players, partner, saved, details)
        finally:
            self.lock.release()

    def _finish(self, players, partner, saved, details) -> dict:
        playpen, cfg = self.playpen, self.playpen.config
        if not distributed.is_main():  # rank 0 evaluates and writes the summary and the curve
            if self.interrupt.requested:
                playpen.interrupted_by = self.interrupt.signum
                distributed.barrier()  # an interrupted rank exits 130/143 only once rank 0 has written
            return {"trainer": playpen.name, "checkpoint": str(self.checkpoint), "rank": distributed.rank()}
        summary = {"trainer": playpen.name, "learner": playpen.learner.name}
        if partner is not None:
            summary["partner"] = partner
        summary.update(config=asdict(cfg), checkpoint=str(self.checkpoint), **details,
                       train_seconds=round(time.time() - self.started, 1), interrupted=self.interrupt.requested)
        if self.interrupt.requested:
            playpen.interrupted_by = self.interrupt.signum
            summary["signal"] = signal.Signals(self.interrupt.signum).name
        if cfg.evaluate and not self.interrupt.requested and self.checkpoint is not None:
            self.final.after_name = f"{self.eval_prefix}{self.checkpoint.name}"
            summary.update(self.final.run(players or [playpen.learner], playpen.learner))
        write_json(self.run_dir / "playpen-run.json", summary, indent=1)
        plot_run(self.run_dir)
        print(f"[playpen] {saved}: {self.checkpoint}  curve: {self.run_dir / CURVE_FILE}", flush=True)
        if saved == "adapter" and self.checkpoint is not None:
            print(f"[playpen] play it by name: playpen register NAME {self.run_dir}", flush=True)
        if self.interrupt.requested:
            print(f"[playpen] stopped by {summary['signal']}: continue with --resume", flush=True)
            distributed.barrier()  # the other ranks wait for this summary before they exit (non-zero)
        return summary
