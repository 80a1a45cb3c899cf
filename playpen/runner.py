"""`playpen run`: load a trainer file, resolve models, call ``learn()``."""
from __future__ import annotations

import dataclasses
import importlib.util
import inspect
import sys
import typing
from pathlib import Path

from playpen.errors import PlaypenError, TrainerFileError
from playpen import registry


# ----------------------------------------------------------------------------- trainer file

def load_trainer_class(file: str | Path):
    """Import `file` and return its single concrete BasePlayPen subclass."""
    from playpen.base import BasePlayPen
    path = Path(file)
    if not path.exists():
        raise TrainerFileError(f"trainer file '{file}' does not exist")
    if path.suffix != ".py" or not path.is_file():
        raise TrainerFileError(f"trainer file '{file}' must be a Python file (.py)")
    module_name = f"playpen_trainer_{path.stem}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    sys.path.insert(0, str(path.resolve().parent))
    try:
        spec.loader.exec_module(module)
    except SyntaxError as e:
        raise TrainerFileError(f"{file}:{e.lineno}: syntax error: {e.msg}") from e
    except ImportError as e:
        raise TrainerFileError(f"{file}: import failed: {e}") from e
    finally:
        sys.path.remove(str(path.resolve().parent))
    classes = [obj for _, obj in inspect.getmembers(module, inspect.isclass)
               if issubclass(obj, BasePlayPen) and obj is not BasePlayPen
               and obj.__module__ == module_name and not inspect.isabstract(obj)]
    if not classes:
        raise TrainerFileError(f"{file}: defines no BasePlayPen subclass (subclass "
                               f"playpen.BasePlayPen and implement learn())")
    if len(classes) > 1:
        names = ", ".join(sorted(c.__name__ for c in classes))
        raise TrainerFileError(f"{file}: defines several BasePlayPen subclasses ({names}); keep exactly one")
    return classes[0]


def _option_name(field: dataclasses.Field) -> str:
    return "--" + field.name.replace("_", "-")


def trainer_help(file: str | Path) -> str:
    cls = load_trainer_class(file)
    from playpen.base import config_fields, field_help
    doc = inspect.getdoc(cls) or ""
    out = [f"Trainer {cls.__name__} ({file})"]
    if doc:
        out.append("  " + doc.splitlines()[0])
    fields = config_fields(cls.config_class)
    if not fields:
        out.append("  (no trainer options)")
        return "\n".join(out)
    out.append("Trainer options:")
    hints = typing.get_type_hints(cls.config_class)
    for f in fields:
        default = f.default if f.default is not dataclasses.MISSING else (
            f.default_factory() if f.default_factory is not dataclasses.MISSING else None)
        kind = getattr(hints.get(f.name), "__name__", str(hints.get(f.name)))
        out.append(f"  {_option_name(f):<28} {kind:<6} {field_help(f)} [default: {default}]")
    return "\n".join(out)


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
    from playpen.base import config_fields
    fields = {f.name: f for f in config_fields(config_class)}
    if config_class is None:
        if extra_args:
            raise PlaypenError(f"unexpected arguments {' '.join(extra_args)}: this trainer has no options")
        return None
    hints = typing.get_type_hints(config_class)
    values = {}
    args = list(extra_args)
    valid = ", ".join(_option_name(f) for f in fields.values())
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


# ----------------------------------------------------------------------------- models and games

def resolve_and_load(name: str, gen_args: dict, role: str):
    """Resolve a model name (registry entry, key check, default-model preparation) and load it."""
    from playpen.models import ensure_local_model
    from playpen.clem import clemcore, load_model
    entry = registry.resolve_model(name)
    if role == "learner" and entry.backend != "huggingface_local":
        raise PlaypenError(f"the learner must be a huggingface_local model; '{name}' uses "
                           f"backend '{entry.backend}'")
    registry.check_key_for(entry)
    ensure_local_model(entry)
    spec = clemcore().backends.ModelSpec.from_dict(entry.spec)
    return load_model(spec, gen_args)


def build_game_registry(cwd: Path | None = None):
    """A clemcore GameRegistry with playpen's view of the games (deduplicated by name)."""
    from playpen.clem import clemgame
    cg = clemgame()
    specs = [cg.GameSpec.from_dict(dict(entry.spec)) for entry in registry.game_entries(cwd)]
    return cg.GameRegistry(specs)


def run(file, *, learner: str, teacher: str | None, temperature: float, max_tokens: int,
        seed: int, output_dir: Path, extra_args: list[str]):
    cls = load_trainer_class(file)
    config = parse_config(cls.config_class, extra_args)
    # resolve both names before loading anything: a typo in -t must not cost a model load
    registry.resolve_model(learner)
    if teacher:
        registry.check_key_for(registry.resolve_model(teacher))
    game_registry = build_game_registry()
    gen_args = dict(temperature=temperature, max_tokens=max_tokens)
    from playpen.seeding import seed_everything
    seed_everything(seed)
    learner_model = resolve_and_load(learner, gen_args, role="learner")
    teacher_model = resolve_and_load(teacher, gen_args, role="teacher") if teacher else None
    trainer = cls(learner_model, teacher_model, config=config, output_dir=output_dir, seed=seed)
    trainer.learn(game_registry)
