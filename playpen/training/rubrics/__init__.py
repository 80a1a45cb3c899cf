"""Rubrics: weighted terms over an episode (:mod:`~playpen.training.rubrics.rubric`), rubric
files (:mod:`~playpen.training.rubrics.files`) and judges with their prompts
(:mod:`~playpen.training.rubrics.judging`, ``judge_prompts/``).
"""
