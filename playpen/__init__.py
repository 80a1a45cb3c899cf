"""playpen: train language models by learning in interaction (dialogue games).

Public API only; importing playpen has no side effects and imports no heavy module.
"""

__version__ = "0.1.0"

__all__ = ["BasePlayPen", "BaseCallback", "EpisodeSummary", "__version__"]


def __getattr__(name):
    if name == "BasePlayPen":
        from playpen.base import BasePlayPen
        return BasePlayPen
    if name in ("BaseCallback", "EpisodeSummary"):
        from playpen import callbacks
        return getattr(callbacks, name)
    raise AttributeError(f"module 'playpen' has no attribute {name!r}")
