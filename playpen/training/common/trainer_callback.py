"""The bridge from a TRL trainer to playpen's run: a transformers ``TrainerCallback`` that
turns TRL's logs into playpen's metrics (:func:`rename_metrics`), rotates checkpoints
safely, applies the non-finite guard and turns a Ctrl-C/SIGTERM into a save and a stop
(:func:`make_trainer_callback`; :class:`~playpen.training.common.lifecycle.TrainingRun`
hands it to the trainer).
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Optional

from playpen import distributed
from playpen.callbacks import BaseCallback, JsonlLogCallback
from playpen.training.common.checkpoints import rotate_checkpoints
from playpen.training.common.finite import NonFiniteGuard
from playpen.training.common.memory import memory_metrics, prepare_for_training, release_memory, reset_peak
from playpen.training.common.plotting import LOG_FILE


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
                          interrupt: Optional[Any] = None,
                          extra_metrics: Optional[callable] = None, stop_when: Optional[callable] = None,
                          dev: Optional[Any] = None):
    """A transformers ``TrainerCallback`` that forwards every logged step to playpen's
    callbacks and to ``<run_dir>/playpen-log.jsonl``, adds ``train/tokens_per_s``, the CPU
    seconds since the previous step (``time/cpu_s``) and the
    step's memory (``memory/peak_rss_mb``: the highest resident memory since the step
    began; :func:`playpen.training.common.memory.memory_metrics`), stops when a callback returns
    False, and saves + stops after a Ctrl-C. Each step begins with the memory the previous
    one freed handed back to the system (:func:`~playpen.training.common.memory.release_memory`).
    A step whose gradients are not finite is dropped before the optimizer step
    (:class:`~playpen.training.common.finite.NonFiniteGuard`: ``train/skipped_steps``; 3 in a row
    save and stop). ``stop_when()``, asked after every logged step, returns why the run cannot
    learn (one line, printed; the run saves and stops) or None. With `dev` (a
    :class:`~playpen.training.common.dev_stopping.DevStopping`) each chunk's end is saved, its
    dev items played after the save, the run stopped when its patience runs out, and the best
    checkpoint spared by the rotation."""
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
            if self._dev_due(state) and dev.measure(int(state.global_step)):
                control.should_training_stop = True
            if distributed.is_main():  # the rank that saved (transformers saves from rank 0)
                rotate_checkpoints(args.output_dir, self._keep, dev.best_checkpoint if dev is not None else None)

        def _dev_due(self, state) -> bool:
            interrupted = interrupt is not None and interrupt.requested
            return dev is not None and not interrupted and dev.due(int(state.global_step), state.max_steps)

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
            why = stop_when() if stop_when is not None else None
            if why:
                print(f"[playpen] stopping at step {step}: {why}", flush=True)
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
            elif self._dev_due(state):  # a chunk's end: saved, then its dev items played (on_save)
                control.should_save = True

    return PlaypenTrainerCallback()
