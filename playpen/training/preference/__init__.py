"""Preference training, rounds of DPO with LoRA: the rounds and TRL's DPO trainer
(:mod:`~playpen.training.preference.rounds`), the pair sources of DPO
(:mod:`~playpen.training.preference.dpo`), SPIN (:mod:`~playpen.training.preference.spin`),
self-rewarding (:mod:`~playpen.training.preference.self_rewarding`) and the trainers
(:mod:`~playpen.training.preference.trainers`).

The names of the former module ``playpen/training/preference.py`` are re-exported here for one release (issue 29);
import them from :mod:`playpen.training.preference.rounds`.
"""
from playpen.training.preference import rounds as _former
from playpen.training.preference.rounds import *  # noqa: F401,F403


def __getattr__(name: str):
    """The former module's other names (its private helpers), for one release."""
    try:
        return getattr(_former, name)
    except AttributeError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
