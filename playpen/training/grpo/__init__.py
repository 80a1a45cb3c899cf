"""GRPO over games: the options and their checks (:mod:`~playpen.training.grpo.options`), the groups
and the rollout function handed to TRL (:mod:`~playpen.training.grpo.rollout_bridge`), what a run
builds from its options (:mod:`~playpen.training.grpo.assembly`), the step in micro-batches
(:mod:`~playpen.training.grpo.steps`), advantages and baselines (:mod:`~playpen.training.grpo.advantages`),
partners against collapse (:mod:`~playpen.training.grpo.mixes`, :mod:`~playpen.training.grpo.past`),
stale rows (:mod:`~playpen.training.grpo.offpolicy`) and the trainers (:mod:`~playpen.training.grpo.trainer`).
"""
