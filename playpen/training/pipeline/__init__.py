"""Stage pipelines: the stages and their state (:mod:`~playpen.training.pipeline.stages`) and the
trainer (:mod:`~playpen.training.pipeline.trainer`).

The names of the former module ``playpen/training/pipeline.py`` are re-exported here for one release (issue 29);
import them from :mod:`playpen.training.pipeline.stages`.
"""
from playpen.old_paths import former_names
from playpen.training.pipeline import stages as _former
from playpen.training.pipeline.stages import *  # noqa: F401,F403

__getattr__ = former_names(__name__, _former)
