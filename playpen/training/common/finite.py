"""Training steps that keep the weights finite.

A step whose gradients hold NaN or inf (a loss term that overflowed, a reward that was
NaN) would, once the optimizer applies it, turn every trained weight into NaN: every later
step and every saved checkpoint would be garbage, and on a GPU the next sampling step dies
in a device-side assert. :class:`NonFiniteGuard` checks a step's gradients right before the
optimizer step and drops them when they are not finite, so that the weights stay as the
last finite step left them. The console names each such step, ``train/skipped_steps``
counts them, and ``limit`` of them in a row stop training (the adapter intact), since a run
whose every step is NaN learns nothing. playpen's trainer callback
(:func:`playpen.training.common.trainer_callback.make_trainer_callback`) applies it to every TRL
trainer; the own loops (SPAG, populations) through
:class:`~playpen.training.common.optimization.Optimization`.
"""
from __future__ import annotations

import math
from typing import Any


class NonFiniteGuard:
    """Drops the gradients of steps whose gradients are not finite; see the module."""

    def __init__(self, limit: int = 3):
        self.limit = limit
        self.skipped = 0
        self.in_a_row = 0

    @property
    def stop(self) -> bool:
        """True once ``limit`` steps in a row were dropped."""
        return self.in_a_row >= self.limit

    def check(self, model: Any, step: int) -> bool:
        """Drop ``model``'s gradients when any of them is NaN or inf (the optimizer skips
        parameters without a gradient). True when the step's gradients were dropped."""
        import torch
        grads = [p.grad for p in model.parameters() if p.grad is not None]
        if not grads:
            return False
        norm = float(torch.nn.utils.get_total_norm(grads))  # the step's 2-norm (NaN or inf when any is)
        if math.isfinite(norm):
            self.in_a_row = 0
            return False
        for parameter in model.parameters():
            parameter.grad = None
        self.skipped += 1
        self.in_a_row += 1
        print(f"[playpen] step {step}: the gradient norm is {norm}; the step's gradients were dropped "
              f"(the weights did not change)", flush=True)
        if self.stop:
            print(f"[playpen] {self.in_a_row} steps in a row had non-finite gradients: training stops here, "
                  f"the adapter as the last finite step left it; lower --learning-rate (or --beta), or check "
                  f"the rewards", flush=True)
        return True

    def metrics(self) -> dict:
        """``train/skipped_steps`` once a step was dropped (nothing before)."""
        return {"train/skipped_steps": self.skipped} if self.skipped else {}
