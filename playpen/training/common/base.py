"""BasePlayPen: what a trainer file subclasses and `playpen run` calls."""
from __future__ import annotations

import abc
import dataclasses
import typing
from pathlib import Path
from typing import Any, ClassVar, Optional

from playpen.callbacks import BaseCallback, CallbackList, ProgressCallback
from playpen.errors import PlaypenError


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
    data_parallel: ClassVar[bool] = True
    """False for a trainer whose loop is its own, not accelerate's (SPAG, the populations):
    ``playpen run --num-processes N`` refuses it in one line (docs/distributed.md)."""

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
        self.runs: list = []
        """The :class:`~playpen.training.common.lifecycle.TrainingRun` frames :meth:`learn`
        opened: ``playpen run`` abandons those that never trained when learn() stops at a
        user mistake, so that a refused run leaves nothing behind."""
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


# ----------------------------------------------------------------------------- options on the command line

def option_name(field: dataclasses.Field) -> str:
    return "--" + field.name.replace("_", "-")


def _convert(value: str, kind, name: str):
    origin = typing.get_origin(kind)
    args = typing.get_args(kind)
    if origin is typing.Union or str(origin) == "types.UnionType":
        non_none = [a for a in args if a is not type(None)]
        if value.lower() in ("none", "null", ""):
            return None
        kind = non_none[0] if non_none else str
        origin, args = typing.get_origin(kind), typing.get_args(kind)
    try:
        if kind is bool:
            lowered = value.lower()
            if lowered in ("1", "true", "yes", "on"):
                return True
            if lowered in ("0", "false", "no", "off"):
                return False
            raise ValueError(value)
        if origin in (list, tuple):
            inner = args[0] if args else str
            return [_convert(v.strip(), inner, name) for v in value.split(",") if v.strip()]
        if kind in (int, float, str):
            return kind(value)
        if kind is Path:
            return Path(value)
        return value
    except ValueError as e:
        raise PlaypenError(f"option --{name.replace('_', '-')}: '{value}' is not a valid "
                           f"{getattr(kind, '__name__', kind)}") from e


def parse_config(config_class, extra_args: list[str]):
    """Turn `--field value` / `--field=value` / `--flag` / `--no-flag` into the config."""
    fields = {f.name: f for f in config_fields(config_class)}
    if config_class is None:
        if extra_args:
            raise PlaypenError(f"unexpected arguments {' '.join(extra_args)}: this trainer has no options")
        return None
    hints = typing.get_type_hints(config_class)
    values = {}
    args = list(extra_args)
    valid = ", ".join(option_name(f) for f in fields.values())
    while args:
        token = args.pop(0)
        if not token.startswith("--"):
            raise PlaypenError(f"unexpected argument '{token}'; trainer options are: {valid}")
        key, _, inline = token[2:].partition("=")
        name = key.replace("-", "_")
        negated = name.startswith("no_") and name[3:] in fields and hints.get(name[3:]) is bool
        if negated:
            values[name[3:]] = False
            continue
        if name not in fields:
            raise PlaypenError(f"unknown option '--{key}' for this trainer; valid: {valid}")
        if hints.get(name) is bool and not inline and (not args or args[0].startswith("--")):
            values[name] = True
            continue
        if not inline:
            if not args:
                raise PlaypenError(f"option '--{key}' needs a value")
            inline = args.pop(0)
        values[name] = _convert(inline, hints.get(name, str), name)
    return config_class(**values)
