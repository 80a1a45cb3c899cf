"""Supervised fine-tuning: demonstrations and their tokenisation
(:mod:`~playpen.training.sft.demonstrations`), the supervised anchor other trainers mix in
(:mod:`~playpen.training.sft.anchor`) and the trainers (:mod:`~playpen.training.sft.trainers`).

The names of the former module ``playpen/training/sft.py`` are re-exported here for one release (issue 29);
import them from :mod:`playpen.training.sft.demonstrations`.
"""
from playpen.training.sft import demonstrations as _former
from playpen.training.sft.demonstrations import *  # noqa: F401,F403


def __getattr__(name: str):
    """The former module's other names (its private helpers), for one release."""
    try:
        return getattr(_former, name)
    except AttributeError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
