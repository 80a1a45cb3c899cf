"""Outcome rewards: aborted < lose < success, graded by Main Score."""
import math

import pytest

from playpen.rewards import BinaryReward, EpisodeOutcome, OutcomeReward


def test_outcome_order_always_wins_over_the_grade():
    reward = OutcomeReward()
    aborted = reward(EpisodeOutcome("aborted", math.nan))
    best_lose = reward(EpisodeOutcome("failure", 100.0))
    worst_success = reward(EpisodeOutcome("success", 0.0))
    assert aborted < reward(EpisodeOutcome("failure", 0.0)) <= best_lose < worst_success
    assert reward(EpisodeOutcome("success", 50.0)) < reward(EpisodeOutcome("success", 100.0)) == 1.0
    assert reward(EpisodeOutcome("failure", math.nan)) == 0.0
    assert reward(EpisodeOutcome("success", 250.0)) == 1.0  # clamped


def test_bad_ranges_are_rejected():
    with pytest.raises(ValueError, match="aborted < lose range < success range"):
        OutcomeReward(lose=(0.0, 0.8), success=(0.5, 1.0))


def test_binary_reward():
    assert BinaryReward()(EpisodeOutcome("success", 33.0)) == 1.0
    assert BinaryReward(aborted=-1.0)(EpisodeOutcome("aborted", math.nan)) == -1.0
