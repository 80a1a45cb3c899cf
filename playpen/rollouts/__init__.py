"""Batched multi-episode rollouts: the hot loop between clemcore games and trainers.

One call of :func:`rollout` plays N episodes (instances x repeats, plus branches) of
one or more games in lock-step. At each step every running episode that waits for
a player is asked who must answer; the pending turns are grouped by responder
(the learner, an HF teacher, a programmatic player, an API model) and each group is
answered by ONE batched call (API models: concurrently, bounded). Then every game
master is advanced. Finished episodes leave the batch and queued ones take their
slots (continuous batching).

For every (episode, player) played by the learner a :class:`Trajectory` records the
exact tokens the model saw and produced, ready for TRL's ``rollout_func``::

    result = rollout(["taboo"], Learner(model, tokenizer, name="smol-135m"),
                     partners={"WordGuesser": "programmatic"}, num_repeats=4)
    batch = result.as_trl_rollout()        # prompt_ids, completion_ids, logprobs, env_mask, ...

Records are written as clemcore 3.x results (``clem score``/``eval``/``transcribe``
work on them) into a new run folder under ``records_dir`` (see :mod:`playpen.rollouts.records`).
"""
from __future__ import annotations

from playpen.rollouts.loop import rollout
from playpen.rollouts.types import (LEARNER, BranchPoint, Branching, EpisodeResult, InstanceRef,
                                    InstanceSelector, Learner, PartnerLike, RolloutResult, RolloutStats,
                                    SamplingConfig, Trajectory, TurnRecord)

__all__ = ["rollout", "LEARNER", "BranchPoint", "Branching", "EpisodeResult", "InstanceRef",
           "InstanceSelector", "Learner", "PartnerLike", "RolloutResult", "RolloutStats",
           "SamplingConfig", "Trajectory", "TurnRecord"]
