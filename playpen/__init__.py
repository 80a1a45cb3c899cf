"""playpen: train language models by learning in interaction (dialogue games)."""

__version__ = "0.1.0"
