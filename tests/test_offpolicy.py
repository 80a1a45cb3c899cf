"""The off-policy guard: rows older than --max-policy-lag are dropped (advantage exactly 0)
or trained with the PPO-clipped ratio to the policy that produced them (TRL's old
log-probs = the recorded sampling log-probs); counts logged."""
import pytest

from playpen.training.grpo.offpolicy import PolicyLagGuard


def test_lags_from_versions():
    guard = PolicyLagGuard(1)
    assert guard.lags([5, 4, 3], 5, 3) == [0, 1, 2]
    assert guard.lags(None, 7, 2) == [0, 0]
    with pytest.raises(ValueError, match="from the past"):
        guard.lags([6], 5, 1)
    with pytest.raises(ValueError, match="2 policy versions for 3 rows"):
        guard.lags([1, 2], 5, 3)


def test_drop_zeroes_exactly_the_stale_rows():
    guard = PolicyLagGuard(max_lag=1, mode="drop")
    out, behaviour = guard.apply([0.5, -0.5, 1.5, -1.5], [10, 9, 8, 2], 10)
    assert out == [0.5, -0.5, 0.0, 0.0] and behaviour is None
    assert guard.metrics == {"offpolicy/stale": 2.0, "offpolicy/max_lag": 8.0, "offpolicy/dropped": 2.0,
                             "offpolicy/clipped": 0.0}


def test_lag_zero_keeps_fresh_rows_only():
    guard = PolicyLagGuard()
    out, _ = guard.apply([1.0, 2.0], [3, 2], 3)
    assert out == [1.0, 0.0]


def test_clip_hands_the_recorded_logprobs_to_the_loss():
    guard = PolicyLagGuard(max_lag=0, mode="clip")
    logprobs = [[-0.1, -0.2], [-1.0], [-0.5, -0.25, -0.125]]
    out, behaviour = guard.apply([1.0, -1.0, 0.5], [4, 3, 4], 4, logprobs)
    assert out == [1.0, -1.0, 0.5]  # clipped, not dropped: the advantages stay
    assert behaviour == logprobs
    assert guard.metrics["offpolicy/clipped"] == 1.0 and guard.metrics["offpolicy/dropped"] == 0.0
    padded = PolicyLagGuard.padded(behaviour, (3, 4))
    expected = [[-0.1, -0.2, 0, 0], [-1.0, 0, 0, 0], [-0.5, -0.25, -0.125, 0]]
    assert [v for row in padded.tolist() for v in row] == pytest.approx([v for row in expected for v in row])
    # nothing stale: TRL's own old log-probs (the current policy's)
    assert guard.apply([1.0], [4], 4, [[-0.1]])[1] is None
    with pytest.raises(ValueError, match="sampling log-probs"):
        guard.apply([1.0], [0], 4)


def test_keep_filters_trajectories_by_version():
    from playpen.rollouts.types import Trajectory
    rows = [Trajectory("e", "g", "x", 0, 0, "P1", "A", "m", (1,), (2,), (1,), (-0.5,), 1, "success", 100.0, 1.0,
                       "grp", policy_version=v) for v in (5, 3, 1)]
    guard = PolicyLagGuard(max_lag=2)
    assert [t.policy_version for t in guard.keep(rows, 5)] == [5, 3]
    assert guard.metrics["offpolicy/dropped"] == 1.0
    assert len(PolicyLagGuard(0, "clip").keep(rows, 5)) == 3


def test_bad_guard_arguments():
    with pytest.raises(ValueError, match="drop, clip"):
        PolicyLagGuard(0, "keep")
    with pytest.raises(ValueError, match=">= 0"):
        PolicyLagGuard(-1)
