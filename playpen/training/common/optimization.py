"""The optimizer step of a trainer that runs its own loop (SPAG, populations): what
transformers' ``Trainer`` does around ``optimizer.step()`` for the TRL trainers, here for
the others, with the same options and defaults (TRL's config names):

- AdamW without weight decay;
- gradient clipping to ``--max-grad-norm`` (1.0; 0 = none), the norm before clipping logged
  as ``train/grad_norm``;
- the non-finite guard (:class:`~playpen.training.common.finite.NonFiniteGuard`): a step whose
  gradients hold NaN or inf never reaches the weights;
- the learning-rate schedule of ``--lr-scheduler-type`` with ``--warmup-ratio``
  (transformers' ``get_scheduler``), logged as ``train/learning_rate``.

Its state (AdamW's moments and step, the schedule's position) goes into a checkpoint
(:meth:`Optimization.save`) and comes back on ``--resume`` (:meth:`Optimization.load`), so a
resumed run continues as if it had not stopped.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from playpen.errors import PlaypenError
from playpen.training.common.config import option
from playpen.training.common.finite import NonFiniteGuard

SCHEDULES = ("linear", "cosine", "constant", "constant_with_warmup")
OPTIMIZER_FILE = "optimizer.pt"


@dataclass
class OptimizerOptions:
    """The optimizer step of a trainer with its own loop (TRL's names and defaults)."""

    lr_scheduler_type: str = option("linear", "learning-rate schedule: " + ", ".join(SCHEDULES))
    warmup_ratio: float = option(0.0, "share of the steps that warm the learning rate up from 0")
    max_grad_norm: float = option(1.0, "gradients clipped to this 2-norm (0 = no clipping)")

    def check_optimizer_options(self) -> None:
        """PlaypenError (one line) for a value out of range."""
        if self.lr_scheduler_type not in SCHEDULES:
            raise PlaypenError(f"option --lr-scheduler-type: {self.lr_scheduler_type!r} is not valid; expected "
                               f"one of {', '.join(SCHEDULES)}")
        if not 0.0 <= self.warmup_ratio < 1.0:
            raise PlaypenError(f"option --warmup-ratio: {self.warmup_ratio!r} is not valid; expected a number in "
                               f"[0, 1)")
        if not self.max_grad_norm >= 0:
            raise PlaypenError(f"option --max-grad-norm: {self.max_grad_norm!r} is not valid; expected a number "
                               f">= 0 (0 = no clipping)")


class Optimization:
    """AdamW over `params`, clipping, the guard and a schedule over `total_steps` steps of
    the schedule (see the module). ``step()`` is one optimizer step."""

    def __init__(self, params: list, learning_rate: float, total_steps: int, options: OptimizerOptions,
                 guard: Optional[NonFiniteGuard] = None):
        import torch
        from transformers import get_scheduler
        self.params = [p for p in params if p.requires_grad]
        self.max_grad_norm = options.max_grad_norm
        self.optimizer = torch.optim.AdamW(self.params, lr=learning_rate, weight_decay=0.0)
        self.scheduler = get_scheduler(options.lr_scheduler_type, self.optimizer,
                                       num_warmup_steps=math.ceil(options.warmup_ratio * total_steps),
                                       num_training_steps=max(1, total_steps))
        self.guard = guard if guard is not None else NonFiniteGuard()

    @property
    def learning_rate(self) -> float:
        return float(self.scheduler.get_last_lr()[0])

    def step(self, model: Any, step: int, advance_schedule: bool = True) -> dict:
        """Clip, drop non-finite gradients, step AdamW (and the schedule unless told not to:
        a trainer whose schedule counts epochs calls :meth:`advance` itself), clear the
        gradients. Returns the step's ``train/grad_norm`` and ``train/learning_rate``."""
        import torch
        limit = self.max_grad_norm if self.max_grad_norm > 0 else math.inf
        norm = float(torch.nn.utils.clip_grad_norm_(self.params, limit))
        metrics = {"train/grad_norm": norm, "train/learning_rate": self.learning_rate}
        self.guard.check(model, step)  # NaN/inf gradients: dropped, AdamW then leaves the weights
        self.optimizer.step()
        if advance_schedule:
            self.advance()
        self.optimizer.zero_grad(set_to_none=True)
        return metrics

    def advance(self, steps: int = 1) -> None:
        """Move the schedule on by `steps`."""
        for _ in range(steps):
            self.scheduler.step()

    def state_dict(self) -> dict:
        return {"optimizer": self.optimizer.state_dict(), "scheduler": self.scheduler.state_dict()}

    def load_state_dict(self, state: dict, schedule: bool = True) -> None:
        """AdamW's state (and, with `schedule`, the schedule's position) from :meth:`state_dict`."""
        self.optimizer.load_state_dict(state["optimizer"])
        if schedule:
            self.scheduler.load_state_dict(state["scheduler"])

    def save(self, folder: str | Path, name: str = OPTIMIZER_FILE) -> None:
        import torch
        torch.save(self.state_dict(), Path(folder) / name)

    def load(self, folder: str | Path, name: str = OPTIMIZER_FILE) -> None:
        import torch
        self.load_state_dict(torch.load(Path(folder) / name, map_location="cpu"))
