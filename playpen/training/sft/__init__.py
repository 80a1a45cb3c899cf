"""Supervised fine-tuning: demonstrations and their tokenisation
(:mod:`~playpen.training.sft.demonstrations`), the supervised anchor other trainers mix in
(:mod:`~playpen.training.sft.anchor`) and the trainers (:mod:`~playpen.training.sft.trainers`).

The names of the former module ``playpen/training/sft.py`` are re-exported here for one release (issue 29);
import them from :mod:`playpen.training.sft.demonstrations`.
"""
from playpen.old_paths import former_names
from playpen.training.sft import demonstrations as _former
from playpen.training.sft.demonstrations import *  # noqa: F401,F403

__getattr__ = former_names(__name__, _former)
