"""Rubrics: weighted terms over an episode (:mod:`~playpen.training.rubrics.rubric`), rubric
files (:mod:`~playpen.training.rubrics.files`) and judges with their prompts
(:mod:`~playpen.training.rubrics.judging`, ``judge_prompts/``).

The names of the former module ``playpen/training/rubrics.py`` are re-exported here for one release (issue 29);
import them from :mod:`playpen.training.rubrics.rubric`.
"""
from playpen.training.rubrics import rubric as _former
from playpen.training.rubrics.rubric import *  # noqa: F401,F403


def __getattr__(name: str):
    """The former module's other names (its private helpers), for one release."""
    try:
        return getattr(_former, name)
    except AttributeError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
