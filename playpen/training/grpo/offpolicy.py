"""The off-policy guard: rows an older policy produced are dropped or importance-clipped.

Every :class:`~playpen.rollouts.Trajectory` carries ``policy_version``, the optimizer step
of the policy that played it (0 before the first step). When a trainer uses a row at step
``s``, its lag is ``s - policy_version``: 0 for GRPO's generate-once-use-once rows, more
for rows that are reused, replayed or played asynchronously. A row whose lag exceeds
``--max-policy-lag`` is

- ``drop`` (``--off-policy drop``, the default): kept out of the update — its advantage is
  exactly 0 (TRL's batch keeps its rows; a zero advantage gives no policy gradient);
- ``clip`` (``--off-policy clip``): trained with the importance ratio between the current
  policy and the policy that produced it, clipped as PPO clips it (TRL's ``epsilon``):
  the old log-probs of the batch are the sampling log-probs the rollout recorded, not
  the current policy's. (Rows within the lag get their recorded log-probs too: their
  ratio is 1 up to the numerics of generation against a training forward.)

Each step logs ``offpolicy/stale`` (rows over the lag), ``offpolicy/dropped``,
``offpolicy/clipped`` and ``offpolicy/max_lag``.
"""
from __future__ import annotations

from typing import Any, Optional, Sequence

MODES = ("drop", "clip")


class PolicyLagGuard:
    """Drop or clip rows produced more than ``max_lag`` optimizer steps ago."""

    def __init__(self, max_lag: int = 0, mode: str = "drop"):
        if mode not in MODES:
            raise ValueError(f"off-policy mode must be one of {', '.join(MODES)}, got {mode!r}")
        if max_lag < 0:
            raise ValueError(f"max policy lag must be >= 0, got {max_lag}")
        self.max_lag, self.mode = int(max_lag), mode
        self.metrics: dict[str, float] = {}

    def lags(self, versions: Optional[Sequence[int]], step: int, n: int) -> list[int]:
        """Each row's lag (rows without a version: produced by the current policy)."""
        if versions is None:
            return [0] * n
        if len(versions) != n:
            raise ValueError(f"{len(versions)} policy versions for {n} rows")
        out = []
        for version in versions:
            if version > step:
                raise ValueError(f"a row of policy version {version} at step {step}: versions come from the past")
            out.append(step - int(version))
        return out

    def apply(self, advantages: Sequence[float], versions: Optional[Sequence[int]], step: int,
              logprobs: Optional[Sequence[Sequence[float]]] = None) -> tuple[list[float], Optional[list]]:
        """The advantages to train on and, for ``clip`` with stale rows, the behaviour
        log-probs per row (None: TRL's own, i.e. the current policy's). Sets :attr:`metrics`."""
        stale = self._stale(self.lags(versions, step, len(advantages)))
        if self.mode == "drop":
            return [0.0 if s else float(a) for a, s in zip(advantages, stale)], None
        if not any(stale):
            return list(advantages), None
        if logprobs is None or len(logprobs) != len(advantages):
            raise ValueError("off-policy clip needs the sampling log-probs of every row")
        return list(advantages), [list(row) for row in logprobs]

    def keep(self, trajectories: Sequence[Any], step: int) -> list[Any]:
        """For trainers of their own: the trajectories to train on at ``step`` — those within
        the lag (``drop``), or all (``clip``: weigh them by the clipped ratio). Sets :attr:`metrics`."""
        stale = self._stale(self.lags([t.policy_version for t in trajectories], step, len(trajectories)))
        return [t for t, s in zip(trajectories, stale) if self.mode == "clip" or not s]

    def _stale(self, lags: list[int]) -> list[bool]:
        stale = [lag > self.max_lag for lag in lags]
        count = float(sum(stale))
        self.metrics = {"offpolicy/stale": count, "offpolicy/max_lag": float(max(lags, default=0)),
                        "offpolicy/dropped": count if self.mode == "drop" else 0.0,
                        "offpolicy/clipped": count if self.mode == "clip" else 0.0}
        return stale

    @staticmethod
    def padded(rows: Sequence[Sequence[float]], shape: tuple, device: Any = None):
        """Per-row log-probs as TRL's right-padded ``(rows, tokens)`` tensor (0 in the padding)."""
        import torch
        out = torch.zeros(shape, dtype=torch.float32, device=device)
        for i, row in enumerate(rows):
            values = list(row)[:shape[1]]
            out[i, :len(values)] = torch.tensor(values, dtype=torch.float32)
        return out

