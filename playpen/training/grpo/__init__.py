"""GRPO over games: the groups and the parts handed to TRL (:mod:`~playpen.training.grpo.parts`),
the step in micro-batches (:mod:`~playpen.training.grpo.steps`), advantages and baselines
(:mod:`~playpen.training.grpo.advantages`), the options against collapse
(:mod:`~playpen.training.grpo.anticollapse`, :mod:`~playpen.training.grpo.mixes`,
:mod:`~playpen.training.grpo.past`), stale rows (:mod:`~playpen.training.grpo.offpolicy`) and the
trainers (:mod:`~playpen.training.grpo.trainers`).

The names of the former module ``playpen/training/grpo.py`` are re-exported here for one release (issue 29);
import them from :mod:`playpen.training.grpo.parts`.
"""
from playpen.old_paths import former_names
from playpen.training.grpo import parts as _former
from playpen.training.grpo.parts import *  # noqa: F401,F403

__getattr__ = former_names(__name__, _former)
