"""The lifecycle of a training run: the frame of every trainer's ``learn()``
(:class:`TrainingRun`: the run-folder lock, refusals, resume, training — a TRL trainer's or
a loop of the trainer's own — final evaluation, summary), Ctrl-C/SIGTERM safety, precision.
The bridge from TRL's logs to playpen's metrics is
:mod:`~playpen.training.common.trainer_callback`; checkpoints and their rotation
:mod:`~playpen.training.common.checkpoints`; an own loop's optimizer step
:mod:`~playpen.training.common.optimization`.

Kept free of any one algorithm: :mod:`playpen.training.sft` builds supervised datasets,
:mod:`playpen.training.grpo` bridges the rollout engine to TRL's ``rollout_func``.
"""
from __future__ import annotations

import re
import signal
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any, Callable, Optional

from playpen import distributed
from playpen.callbacks import JsonlLogCallback
from playpen.errors import Interrupted, PlaypenError, ResumeError, RunLockedError, TrainingSetupError
from playpen.files import FolderLock, write_json
from playpen.training.common.checkpoints import (checkpoint_step, checkpoints, latest_checkpoint,  # noqa: F401
                                                 read_state, remove_checkpoint, remove_partial, resume_checkpoint,
                                                 truncate_log)
from playpen.training.common.dev_stopping import DevStopping
from playpen.training.common.final_evaluation import FinalEvaluation
from playpen.training.common.finite import NonFiniteGuard
from playpen.training.common.memory import memory_metrics, prepare_for_training, release_memory, reset_peak, training_heap
from playpen.training.common.plotting import CURVE_FILE, LOG_FILE, plot_run
from playpen.training.common.trainer_callback import make_trainer_callback


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


def precision_kwargs(precision: str = "auto") -> dict:
    """The TrainingArguments of ``--precision`` (TRL's configs default to bf16 everywhere).
    ``auto``: fp32 on a CPU, bf16 where a GPU supports it, else fp16; ``fp32``; ``bf16``:
    autocast (on a CPU ``torch.autocast("cpu", bfloat16)``, accelerate's CPU mixed precision)."""
    import torch
    cuda = torch.cuda.is_available()
    device = {} if cuda else {"use_cpu": True}
    if precision == "fp32":
        return {"bf16": False, "fp16": False, **device}
    if precision == "bf16":
        if cuda and not torch.cuda.is_bf16_supported():
            raise TrainingSetupError("--precision bf16: this GPU does not support bf16; use auto (fp16) or fp32")
        return {"bf16": True, "fp16": False, **device}
    if cuda:
        bf16 = torch.cuda.is_bf16_supported()
        return {"bf16": bf16, "fp16": not bf16}
    return {"bf16": False, "fp16": False, **device}


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
    :func:`~playpen.training.common.trainer_callback.make_trainer_callback`, which turns the
    flag into ``should_save`` and ``should_training_stop`` (an own loop reads it through
    :meth:`TrainingRun.log_step`).
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


# ----------------------------------------------------------------------------- a trainer's run

class TrainingRun:
    """The frame of a trainer's ``learn()``: every trainer of the package runs in one.

    Created before anything is loaded or trained, it locks `run_dir` for this process
    (another run into it stops with one line naming the holder; :class:`~playpen.files.FolderLock`),
    removes what an interrupted save left there, and refuses to ``--resume`` without a
    complete checkpoint, to train into a folder that holds checkpoints without
    ``--resume`` or ``--overwrite``, and to let the final evaluation replace another
    run's results. Then either hand :meth:`trainer_callback` to a TRL trainer and
    :meth:`train` it, or run a loop of the trainer's own with :meth:`loop` (SPAG, the
    population trainers: :meth:`log_step` after each optimizer step, a ``checkpoint-N``
    folder per save); then :meth:`finish`: the end-of-run evaluation before -> after
    (:mod:`~playpen.training.common.final_evaluation`), ``playpen-run.json`` and the
    learning curve in `run_dir`; the lock is released then (or when training raises, or
    when the process ends).

    `trainer` is the trainer (a ``BasePlayPen``); its config has ``resume`` and
    ``overwrite`` (a RunConfig's fields; a config without ``evaluate`` has no final
    evaluation). Evaluation results go to ``<results_dir>/<eval_prefix>checkpoint-N/``, N
    the last step (`total_steps`, default ``--max-steps``).
    """

    def __init__(self, trainer: Any, run_dir: str | Path, games: list[str], eval_prefix: str = "",
                 total_steps: Optional[int] = None):
        cfg = trainer.config
        self.trainer, self.run_dir, self.games, self.eval_prefix = trainer, Path(run_dir), games, eval_prefix
        self.evaluate = bool(getattr(cfg, "evaluate", False))
        self.lock = self._lock()
        self.trained = False
        try:
            removed = remove_partial(self.run_dir) if distributed.is_main() else []
            if removed:
                print(f"[playpen] removed what an interrupted save left in {self.run_dir}: "
                      f"{', '.join(removed)}", flush=True)
            self.resume_from = resume_checkpoint(self.run_dir, cfg.resume)
            self._start_over = bool(cfg.overwrite) and not cfg.resume  # done as it first trains
            if not cfg.resume and not cfg.overwrite and latest_checkpoint(self.run_dir):
                raise ResumeError(f"{self.run_dir} already holds checkpoints: pass --resume to continue, "
                                  f"--overwrite to start over, or --models-dir DIR for a run of its own")
            # the final evaluation replaces results only of this run's own checkpoints (resumed or
            # restarted); refuse now, not after training, to replace another run's (or a bad set name)
            self.final = FinalEvaluation(cfg, games, f"{eval_prefix}checkpoint-{total_steps or cfg.max_steps}") \
                if self.evaluate else None
            if self.evaluate:
                self.final.check()
        except BaseException:
            self._unlock()
            raise
        if getattr(cfg, "split", ""):  # the run says what it trains on (playpen-run.json: its config)
            counts = ", ".join(f"{len(items)} of {game}" for game, items in cfg.train_items.items())
            print(f"[playpen] training on split '{cfg.split}' of {cfg.splits}: {counts} "
                  f"(in/{cfg.train_instances}.json)", flush=True)
        self.interrupt = GracefulInterrupt()
        self.guard = NonFiniteGuard()  # an own loop's steps: its Optimization drops non-finite ones
        self.checkpoint: Optional[Path] = None
        self.dev: Optional[DevStopping] = None
        self.started = time.time()
        if isinstance(getattr(trainer, "runs", None), list):
            trainer.runs.append(self)

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

    def trainer_callback(self, extra_metrics: Optional[callable] = None, stop_when: Optional[callable] = None,
                         dev_learner: Any = None):
        """The ``TrainerCallback`` for the TRL trainer (see :func:`make_trainer_callback`). With
        `dev_learner` (the learner, when the config's ``--dev-every`` is on) the run stops on its
        dev split (:class:`~playpen.training.common.dev_stopping.DevStopping`)."""
        if dev_learner is not None and getattr(self.trainer.config, "dev_every", 0):
            self.dev = DevStopping(self.trainer.config, dev_learner, self.run_dir, self.eval_prefix, self.resume_from)
        return make_trainer_callback(self.trainer.callbacks, self.run_dir, self.interrupt, extra_metrics, stop_when,
                                     self.dev)

    def train(self, trl_trainer) -> Optional[Path]:
        """``trl_trainer.train()``, from the checkpoint to resume from if any; the first Ctrl-C
        saves a checkpoint and stops. Returns the last complete checkpoint, or with a dev split
        the best one (its weights put back into the model)."""
        self.start_over()
        self._run(lambda: trl_trainer.train(resume_from_checkpoint=self.resume_from), self.trainer.config.max_steps)
        if self.dev is not None and not self.interrupt.requested:
            self.checkpoint = self.dev.restore(trl_trainer.model, self.checkpoint) or self.checkpoint
        return self.checkpoint

    def start_over(self) -> None:
        """``--overwrite`` (without ``--resume``), as the run first trains: the folder's earlier
        checkpoints and step log go, so that none is taken for this run's. A longer earlier
        run's ``checkpoint-N`` was once the "latest" after a shorter new run, and its log lines
        stayed in the new run's curve. Later rounds of the same run (expert iteration, DPO)
        keep what the first ones saved."""
        if not self._start_over:
            return
        self._start_over = False
        if distributed.is_main():
            for folder in checkpoints(self.run_dir):
                remove_checkpoint(folder)
            (self.run_dir / LOG_FILE).unlink(missing_ok=True)

    def _run(self, work: Callable[[], Any], total_steps: int) -> Optional[Path]:
        """`work()` inside the signal handler, between ``on_learn_start`` and ``on_learn_end``
        (the lock goes when it raises), the objects from before it frozen out of the garbage
        collector (:func:`~playpen.training.common.memory.training_heap`); the last complete
        checkpoint after it."""
        callbacks = self.trainer.callbacks
        callbacks.on_learn_start(self.trainer.name, total_steps)
        try:
            with self.interrupt, training_heap():
                work()
        except BaseException:
            self.lock.release()
            raise
        callbacks.on_learn_end()
        self.checkpoint = latest_checkpoint(self.run_dir)
        return self.checkpoint

    # ------------------------------------------------------------------ a loop of the trainer's own

    def loop(self, train: Callable[[Optional[Path]], Any], total_steps: int) -> Optional[Path]:
        """Run ``train(resume_from)`` — a trainer's own loop from the checkpoint to continue
        (None: from the start) — inside the Ctrl-C/SIGTERM handler, between the callbacks'
        ``on_learn_start`` and ``on_learn_end``. The loop calls :meth:`log_step` after each
        optimizer step, and when that says stop it saves a checkpoint (``checkpoint-N``,
        ``trainer_state.json`` written last: :func:`write_state`) and returns. On --resume the
        log lines after the checkpoint's step go (those steps run again); with --overwrite
        the earlier checkpoints and log go first. Returns the last complete checkpoint."""
        self.trained = True  # what it writes from here on is kept (see abandon)
        if distributed.world_size() > 1:
            raise TrainingSetupError(f"{self.trainer.name} runs on one process (its loop is its own, not "
                                     f"accelerate's): run it without --num-processes or accelerate launch")
        self.start_over()
        if self.resume_from is not None:
            truncate_log(self.run_dir / LOG_FILE, read_state(self.resume_from).get("global_step", 0))
        self._log = JsonlLogCallback(self.run_dir / LOG_FILE)
        prepare_for_training()  # allocator and log-prob tiles: benchmarks/memory.py
        return self._run(lambda: train(Path(self.resume_from) if self.resume_from else None), total_steps)

    @staticmethod
    def begin_step() -> None:
        """What a step frees goes back to the system; ``memory/peak_rss_mb`` is then the step's own."""
        release_memory()
        reset_peak()

    def log_step(self, step: int, metrics: dict) -> bool:
        """Log step `step` of an own loop (the callbacks, ``playpen-log.jsonl``, the step's
        memory and skipped steps); False when the loop must save and stop: a signal, a
        callback's stop, or the non-finite guard's."""
        metrics = {**metrics, **memory_metrics(), **self.guard.metrics()}
        keep_going = self.trainer.callbacks.on_train_step(step, metrics)
        self._log.on_train_step(step, metrics)
        return keep_going and not self.interrupt.requested and not self.guard.stop

    def finish(self, players: Optional[list] = None, *, partner: Optional[str] = None, saved: str = "adapter",
               evaluate: bool = True, **details) -> dict:
        """Evaluate the trained learner (in memory: it carries what was trained) with
        `players` (default: the learner alone) on the held-out instances unless the config
        says no or the run was interrupted, then write ``playpen-run.json`` (trainer,
        learner, `partner`, config, checkpoint, `details`, time, evaluation) and draw the
        learning curve. `saved` names what a checkpoint holds in the closing line. After a
        SIGINT/SIGTERM, ``playpen.interrupted_by`` is the signal (`playpen run` exits with
        128 + it). ``evaluate=False``: no final evaluation (an own loop stopped before its end).
        Releases the run folder's lock."""
        try:
            return self._finish(players, partner, saved, evaluate, details)
        finally:
            self.lock.release()

    def _finish(self, players, partner, saved, evaluate, details) -> dict:
        trainer, cfg = self.trainer, self.trainer.config
        if not distributed.is_main():  # rank 0 evaluates and writes the summary and the curve
            if self.interrupt.requested:
                trainer.interrupted_by = self.interrupt.signum
                distributed.barrier()  # an interrupted rank exits 130/143 only once rank 0 has written
            return {"trainer": trainer.name, "checkpoint": str(self.checkpoint), "rank": distributed.rank()}
        summary = {"trainer": trainer.name, "learner": trainer.learner.name}
        if partner is not None:
            summary["partner"] = partner
        summary.update(config=asdict(cfg), checkpoint=str(self.checkpoint), **details,
                       train_seconds=round(time.time() - self.started, 1), interrupted=self.interrupt.requested)
        if self.dev is not None:
            summary.update(self.dev.summary())
        if self.interrupt.requested:
            trainer.interrupted_by = self.interrupt.signum
            summary["signal"] = signal.Signals(self.interrupt.signum).name
        if self.evaluate and evaluate and not self.interrupt.requested and self.checkpoint is not None:
            self.final.after_name = f"{self.eval_prefix}{self.checkpoint.name}"
            summary.update(self.final.run(players or [trainer.learner], trainer.learner))
        write_json(self.run_dir / "playpen-run.json", summary, indent=1)
        if (self.run_dir / LOG_FILE).exists():
            plot_run(self.run_dir)
        print(f"[playpen] {saved}: {self.checkpoint}  curve: {self.run_dir / CURVE_FILE}", flush=True)
        if saved == "adapter" and self.checkpoint is not None:
            print(f"[playpen] play it by name: playpen register NAME {self.run_dir}", flush=True)
        if self.interrupt.requested:
            print(f"[playpen] stopped by {summary['signal']}: continue with --resume", flush=True)
            distributed.barrier()  # the other ranks wait for this summary before they exit (non-zero)
        return summary

