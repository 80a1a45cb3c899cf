"""GRPO over games: the groups and the parts handed to TRL (:mod:`~playpen.training.grpo.parts`),
the step in micro-batches (:mod:`~playpen.training.grpo.steps`), advantages and baselines
(:mod:`~playpen.training.grpo.advantages`), the options against collapse
(:mod:`~playpen.training.grpo.anticollapse`, :mod:`~playpen.training.grpo.mixes`,
:mod:`~playpen.training.grpo.past`), stale rows (:mod:`~playpen.training.grpo.offpolicy`) and the
trainers (:mod:`~playpen.training.grpo.trainers`).
"""
