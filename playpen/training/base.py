"""BasePlayPen: what a trainer file subclasses and `playpen run` calls."""
from __future__ import annotations

import abc
import dataclasses
from pathlib import Path
from typing import Any, ClassVar, Optional

from playpen.callbacks import BaseCallback, CallbackList, ProgressCallback


class BasePlayPen(abc.ABC):
    """A learning procedure: plays games with `learner` (and `teacher`) and trains it.

    Subclasses implement :meth:`learn`. Options of a trainer live in a dataclass named by
    ``config_class``; ``playpen run FILE --help`` lists its fields and
    ``playpen run FILE -l L --field value`` sets them.

    Args:
        learner: the model being trained (a clemcore ``HuggingfaceLocalModel``: ``.model``,
            ``.tokenizer``, ``generate_batch_response``).
        teacher: an optional frozen partner (any clemcore model: HF, programmatic, API).
        config: an instance of ``config_class`` (defaults are used when None).
        output_dir: root for records and run folders (default ``playpen-records``).
        seed: global seed for sampling, shuffling and training.
        callbacks: extra callbacks; a progress bar is always added unless disabled.
    """

    config_class: ClassVar[Optional[type]] = None

    def __init__(self, learner: Any, teacher: Any = None, *, config: Any = None,
                 output_dir: str | Path = "playpen-records", seed: int = 42,
                 callbacks: Optional[list[BaseCallback]] = None, progress: bool = True):
        self.learner = learner
        self.teacher = teacher
        if config is None and self.config_class is not None:
            config = self.config_class()
        self.config = config
        self.output_dir = Path(output_dir)
        self.seed = seed
        self.callbacks = CallbackList(callbacks or [])
        self.interrupted_by: Optional[int] = None
        """The signal (SIGINT, SIGTERM) that stopped :meth:`learn` early after saving, if any."""
        if progress:
            self.callbacks.append(ProgressCallback())

    @property
    def name(self) -> str:
        return type(self).__name__

    def add_callback(self, callback: BaseCallback) -> None:
        self.callbacks.append(callback)

    @classmethod
    def check(cls, config: Any, learner: str, teacher: Optional[str] = None) -> None:
        """Checks of the options that need the model names but no model (e.g. that an
        adapter fits the learner's base model): `playpen run` calls it once the names have
        resolved and before any model loads. Raise a PlaypenError; by default nothing."""

    @abc.abstractmethod
    def learn(self, game_registry) -> None:
        """Play and train. `game_registry` is a clemcore ``GameRegistry`` holding playpen's
        games, ``./game_registry.json`` entries and games found in the working directory."""


def config_fields(config_class: type) -> list[dataclasses.Field]:
    if config_class is None:
        return []
    if not dataclasses.is_dataclass(config_class):
        raise TypeError(f"config_class {config_class!r} must be a dataclass")
    return list(dataclasses.fields(config_class))


def field_help(f: dataclasses.Field) -> str:
    return f.metadata.get("help", "")
