"""Training one adapter player on its experiences: GRPO's clipped policy gradient.

Advantages are those of :class:`playpen.training.grpo.advantages.Advantages` (the group's mean
reward as baseline, divided by its std; a group of equal rewards is dropped), one group per
``Experience.group`` (a player's episodes of one instance, seat and opponent). The loss is
GRPO's with ``beta = 0`` (:func:`playpen.training.common.losses.clipped_policy_loss`): per trajectory
the mean over its model tokens of ``-min(r A, clip(r, 1 - eps, 1 + eps) A)``,
``r = exp(logp - logp_old)``; ``logp_old`` are
the sampling logprobs the rollout recorded (without them ``r = 1``: plain REINFORCE with a
group baseline). Logprobs use ``log_softmax(logits / T)``, as the rollout samples.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Optional, Sequence

from playpen.inference.logprobs import sequence_logprobs
from playpen.training.common.losses import clipped_policy_loss
from playpen.training.grpo.advantages import Advantages


@dataclass(frozen=True)
class Experience:
    """One trajectory of one player: what it saw and generated, and its reward.

    ``env_mask`` marks the player's own tokens (1) among ``completion_ids``; ``logprobs``
    (optional) are their sampling logprobs (0.0 elsewhere). Experiences with the same
    ``group`` share a baseline.
    """

    player: str
    prompt_ids: tuple[int, ...]
    completion_ids: tuple[int, ...]
    env_mask: tuple[int, ...]
    reward: float
    group: str = ""
    logprobs: Optional[tuple[float, ...]] = None

    @classmethod
    def from_trajectory(cls, trajectory: Any, group: str = "") -> "Experience":
        """From a rollout :class:`~playpen.rollouts.Trajectory` (its model name is the player)."""
        return cls(trajectory.model, tuple(trajectory.prompt_ids), tuple(trajectory.completion_ids),
                   tuple(trajectory.env_mask), float(trajectory.reward), group or trajectory.group_id,
                   tuple(trajectory.logprobs))


def advantages(experiences: Sequence[Experience]) -> list[float]:
    """One advantage per experience (see the module docstring); NaN rewards get 0."""
    out = [0.0] * len(experiences)
    groups: dict[str, list[int]] = {}
    for i, e in enumerate(experiences):
        groups.setdefault(e.group, []).append(i)
    for key, rows in groups.items():
        if len(rows) < 2:
            continue
        computer = Advantages("group", group_size=len(rows), echo=lambda line: None)
        values = computer.compute([experiences[i].reward for i in rows], [key] * len(rows), [key] * len(rows))
        for i, value in zip(rows, values):
            out[i] = 0.0 if value is None or math.isnan(value) else float(value)
    return out


def train_player(model: Any, optimization: Any, experiences: Sequence[Experience], *, temperature: float = 1.0,
                 rows_per_step: int = 8, clip: float = 0.2, on_step: Optional[Callable[[dict], bool]] = None
                 ) -> dict[str, float]:
    """Optimizer steps of ``optimization`` (an :class:`~playpen.training.common.optimization.Optimization`
    over the player's adapter, active in ``model``) on ``experiences`` in chunks of
    ``rows_per_step`` rows; ``on_step(metrics)`` after each step, False to stop there (a
    signal, a callback). Returns the player's metrics."""
    adv = advantages(experiences)
    rows = [(e, a) for e, a in zip(experiences, adv) if a != 0.0 and any(e.env_mask)]
    metrics = {"train/rows": float(len(experiences)), "train/rows_with_signal": float(len(rows)),
               "train/steps": 0.0, "train/loss": 0.0}
    if not rows or not optimization.params:
        return metrics
    t = temperature if temperature and temperature > 0 else 1.0
    was_training = model.training
    model.train()
    losses = []
    try:
        for start in range(0, len(rows), max(1, rows_per_step)):
            chunk = rows[start:start + rows_per_step]
            total = 0.0
            for experience, advantage in chunk:
                loss = _row_loss(model, experience, advantage, t, clip) / len(chunk)
                loss.backward()
                total += float(loss.detach())
            step = optimization.step(model, len(losses) + 1, advance_schedule=False)
            losses.append(total)
            if on_step is not None and not on_step({**step, "train/loss": total}):
                break
    finally:
        optimization.optimizer.zero_grad(set_to_none=True)
        if not was_training:
            model.eval()
    metrics.update({"train/steps": float(len(losses)), "train/loss": sum(losses) / len(losses)})
    return metrics


def _row_loss(model, experience: Experience, advantage: float, temperature: float, clip: float):
    import torch
    prompt, completion = list(experience.prompt_ids), list(experience.completion_ids)
    mask = [0] * len(prompt) + list(experience.env_mask)
    logps = sequence_logprobs(model, prompt + completion, mask, temperature)
    mine = [i for i, m in enumerate(experience.env_mask) if m and len(prompt) + i > 0]  # as sequence_logprobs
    old = logps.detach() if experience.logprobs is None else \
        torch.tensor([experience.logprobs[i] for i in mine], dtype=logps.dtype)
    return clipped_policy_loss(logps, old, advantage, clip)
