"""Rewards from game outcomes: what a finished episode is worth to each player.

A reward function is any callable ``(outcome: EpisodeOutcome, player_name, role) -> float``.
The default, :class:`OutcomeReward`, orders outcomes strictly (aborted < lose < success)
and grades lose and success by the game's Main Score, so that a better success is worth
more without ever outranking the next outcome class.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

from playpen.outcomes import EpisodeOutcome

RewardFunction = Callable[[EpisodeOutcome, str, str], float]


@dataclass(frozen=True)
class OutcomeReward:
    """aborted -> ``aborted``; lose -> in ``lose`` range; success -> in ``success`` range.

    Within a range the reward grows linearly with Main Score (0-100, clamped; NaN counts
    as 0). The ranges must not overlap, so the outcome order always wins over the grade.
    """

    aborted: float = -1.0
    lose: tuple[float, float] = (0.0, 0.4)
    success: tuple[float, float] = (0.6, 1.0)

    def __post_init__(self):
        if not (self.aborted < self.lose[0] <= self.lose[1] < self.success[0] <= self.success[1]):
            raise ValueError(f"OutcomeReward needs aborted < lose range < success range, got "
                             f"aborted={self.aborted}, lose={self.lose}, success={self.success}")

    def __call__(self, outcome: EpisodeOutcome, player_name: str = "", role: str = "") -> float:
        if outcome.outcome == "aborted":
            return self.aborted
        low, high = self.success if outcome.outcome == "success" else self.lose
        score = outcome.main_score
        grade = 0.0 if score is None or math.isnan(score) else min(max(score, 0.0), 100.0) / 100.0
        return low + (high - low) * grade


@dataclass(frozen=True)
class BinaryReward:
    """1 on success, 0 otherwise (``aborted`` configurable): the simplest GRPO signal."""

    aborted: float = 0.0

    def __call__(self, outcome: EpisodeOutcome, player_name: str = "", role: str = "") -> float:
        if outcome.outcome == "aborted":
            return self.aborted
        return 1.0 if outcome.outcome == "success" else 0.0

