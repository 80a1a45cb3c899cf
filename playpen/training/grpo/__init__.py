"""GRPO over games: the groups and the parts handed to TRL (:mod:`~playpen.training.grpo.parts`),
the step in micro-batches (:mod:`~playpen.training.grpo.steps`), advantages and baselines
(:mod:`~playpen.training.grpo.advantages`), the options against collapse
(:mod:`~playpen.training.grpo.anticollapse`, :mod:`~playpen.training.grpo.mixes`,
:mod:`~playpen.training.grpo.past`), stale rows (:mod:`~playpen.training.grpo.offpolicy`) and the
trainers (:mod:`~playpen.training.grpo.trainers`).

The names of the former module ``playpen/training/grpo.py`` are re-exported here for one release (issue 29);
import them from :mod:`playpen.training.grpo.parts`.
"""
from playpen.training.grpo import parts as _former
from playpen.training.grpo.parts import *  # noqa: F401,F403


def __getattr__(name: str):
    """The former module's other names (its private helpers), for one release."""
    try:
        return getattr(_former, name)
    except AttributeError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
