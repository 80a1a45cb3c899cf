"""SPAG (self-play of adversarial language games): its options, rewards, losses and data
(:mod:`~playpen.training.spag.objective`), the phases of a run
(:mod:`~playpen.training.spag.phases`) and the trainer (:mod:`~playpen.training.spag.trainer`).

The names of the former module ``playpen/training/spag.py`` are re-exported here for one release (issue 29);
import them from :mod:`playpen.training.spag.objective`.
"""
from playpen.training.spag import objective as _former
from playpen.training.spag.objective import *  # noqa: F401,F403


def __getattr__(name: str):
    """The former module's other names (its private helpers), for one release."""
    try:
        return getattr(_former, name)
    except AttributeError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
