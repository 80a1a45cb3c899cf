"""SPAG (self-play of adversarial language games): its options, rewards, losses and data
(:mod:`~playpen.training.spag.objective`), the phases of a run
(:mod:`~playpen.training.spag.phases`) and the trainer (:mod:`~playpen.training.spag.trainer`).

The names of the former module ``playpen/training/spag.py`` are re-exported here for one release (issue 29);
import them from :mod:`playpen.training.spag.objective`.
"""
from playpen.old_paths import former_names
from playpen.training.spag import objective as _former
from playpen.training.spag.objective import *  # noqa: F401,F403

__getattr__ = former_names(__name__, _former)
