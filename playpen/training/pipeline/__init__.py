"""Stage pipelines: the stages and their state (:mod:`~playpen.training.pipeline.stages`) and the
trainer (:mod:`~playpen.training.pipeline.trainer`).

The names of the former module ``playpen/training/pipeline.py`` are re-exported here for one release (issue 29);
import them from :mod:`playpen.training.pipeline.stages`.
"""
from playpen.training.pipeline import stages as _former
from playpen.training.pipeline.stages import *  # noqa: F401,F403


def __getattr__(name: str):
    """The former module's other names (its private helpers), for one release."""
    try:
        return getattr(_former, name)
    except AttributeError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
