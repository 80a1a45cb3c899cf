"""Rubrics: weighted terms over an episode (:mod:`~playpen.training.rubrics.rubric`), rubric
files (:mod:`~playpen.training.rubrics.files`) and judges with their prompts
(:mod:`~playpen.training.rubrics.judging`, ``judge_prompts/``).

The names of the former module ``playpen/training/rubrics.py`` are re-exported here for one release (issue 29);
import them from :mod:`playpen.training.rubrics.rubric`.
"""
from playpen.old_paths import former_names
from playpen.training.rubrics import rubric as _former
from playpen.training.rubrics.rubric import *  # noqa: F401,F403

__getattr__ = former_names(__name__, _former)
