"""Preference training, rounds of DPO with LoRA: the rounds and TRL's DPO trainer
(:mod:`~playpen.training.preference.rounds`), the pair sources of DPO
(:mod:`~playpen.training.preference.dpo`), SPIN (:mod:`~playpen.training.preference.spin`),
self-rewarding (:mod:`~playpen.training.preference.self_rewarding`) and the trainers
(:mod:`~playpen.training.preference.trainers`).

The names of the former module ``playpen/training/preference.py`` are re-exported here for one release (issue 29);
import them from :mod:`playpen.training.preference.rounds`.
"""
from playpen.old_paths import former_names
from playpen.training.preference import rounds as _former
from playpen.training.preference.rounds import *  # noqa: F401,F403

__getattr__ = former_names(__name__, _former)
