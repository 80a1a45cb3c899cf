"""`playpen run`: load a trainer file, parse its options, resolve and load the models, call ``learn()``."""
from __future__ import annotations

import dataclasses
import importlib.util
import inspect
import sys
import traceback
import typing
from pathlib import Path

import click

from playpen import registry
from playpen.cli import remote_options, set_remote_limits
from playpen.envs.turns import DEFAULT_MAX_TURNS, check_max_turns, turn_limit
from playpen.errors import Interrupted, PlaypenError, TrainerFileError


# ----------------------------------------------------------------------------- trainer file

def load_trainer_class(file: str | Path):
    """Import `file` and return its single concrete BasePlayPen subclass."""
    from playpen.training.base import BasePlayPen
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
        raise TrainerFileError(f"{_user_frame(file, e)}: import failed: {e}") from e
    except Exception as e:  # noqa: BLE001 - the user's code raised: its own line, in one line
        raise TrainerFileError(f"{_user_frame(file, e)}: {type(e).__name__} while importing the trainer "
                               f"file: {e}") from e
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


def _user_frame(file: str | Path, error: BaseException) -> str:
    """``file:line`` of the last frame of the trainer file in `error`'s traceback."""
    path = Path(file).resolve()
    lines = [frame.lineno for frame in traceback.extract_tb(error.__traceback__)
             if Path(frame.filename).resolve() == path]
    return f"{file}:{lines[-1]}" if lines else str(file)


def _option_name(field: dataclasses.Field) -> str:
    return "--" + field.name.replace("_", "-")


def trainer_help(file: str | Path) -> str:
    cls = load_trainer_class(file)
    from playpen.training.base import config_fields, field_help
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
    from playpen.training.base import config_fields
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


# ----------------------------------------------------------------------------- running

@click.command("run", context_settings={"ignore_unknown_options": True, "allow_extra_args": True},
             add_help_option=False)
@click.argument("file", required=False)
@click.option("-l", "--learner", help="Model name of the learner (a huggingface_local model).")
@click.option("-t", "--teacher", default=None, help="Model name of the teacher/partner (any backend).")
@click.option("-T", "--temperature", type=float, default=0.0, show_default=True,
              help="Sampling temperature for generation.")
@click.option("-L", "--max-tokens", type=int, default=300, show_default=True,
              help="Maximum new tokens per generated turn.")
@click.option("--seed", type=int, default=42, show_default=True, help="Global seed.")
@click.option("--max-turns", type=int, default=DEFAULT_MAX_TURNS, show_default=True,
              help="An episode of the trainer's rollouts still running after this many turns ends as "
                   "aborted (a game that never ends with the model); 0: no limit.")
@click.option("-o", "--output-dir", type=click.Path(), default="playpen-records",
              show_default=True, help="Root folder for records and run outputs.")
@remote_options
@click.option("--num-processes", type=int, default=None,
              help="Data-parallel training on N processes of this machine (accelerate launch: one per GPU, "
                   "or CPU processes; default 1); docs/distributed.md.")
@click.option("--accelerate-config", default=None,
              help="Launch with this `accelerate config` file (DeepSpeed ZeRO-3, several machines, ...; "
                   "examples/accelerate/).")
@click.option("-h", "--help", "show_help", is_flag=True,
              help="Show this help; with FILE, also the trainer's own options.")
@click.pass_context
def run_command(ctx, file, learner, teacher, temperature, max_tokens, seed, max_turns, output_dir, connect_timeout,
                read_timeout, retries, retry_budget, num_processes, accelerate_config, show_help):
    """Run the BasePlayPen trainer defined in FILE with LEARNER (and TEACHER).

    Options after the known ones (e.g. --max-steps 10) set fields of the trainer's
    config dataclass; `playpen run FILE --help` lists them. Ctrl-C or SIGTERM: the run
    saves a checkpoint after the current step and exits with 130 / 143 (`--resume`
    continues); a second signal stops at once.
    """
    if show_help:
        click.echo(ctx.get_help())
        if file:
            click.echo("\n" + trainer_help(file))
        return
    if not file:
        raise PlaypenError("missing trainer FILE: `playpen run TRAINER.py -l MODEL` "
                           "(see examples/trl/)")
    if not learner:
        raise PlaypenError("missing learner: pass -l/--learner MODEL (see `playpen list models`)")
    check_generation_options(temperature, max_tokens)
    check_output_folder(output_dir, "-o/--output-dir")
    set_remote_limits(connect_timeout, read_timeout, retries, retry_budget)
    check_max_turns(max_turns)
    from playpen.launch import check_num_processes
    check_num_processes(num_processes, accelerate_config)
    if (num_processes or 1) > 1 or accelerate_config:
        # every option checked here first (one line, before N processes start), then each rank runs it
        prepare(file, learner=learner, teacher=teacher, extra_args=ctx.args, num_processes=num_processes or 1)
        from playpen.launch import launch
        args = ["run", file, "-l", learner, *(["-t", teacher] if teacher else []), "-T", repr(temperature),
                "-L", str(max_tokens), "--seed", str(seed), "--max-turns", str(max_turns), "-o", str(output_dir),
                "--connect-timeout", repr(connect_timeout), "--read-timeout", repr(read_timeout),
                "--retries", str(retries), "--retry-budget", repr(retry_budget), *ctx.args]
        debug = (ctx.find_root().obj or {}).get("debug")
        code = launch(["--debug", *args] if debug else args, num_processes, accelerate_config)
        if code:
            ctx.exit(code)
        return
    with turn_limit(max_turns):
        run(file, learner=learner, teacher=teacher, temperature=temperature, max_tokens=max_tokens, seed=seed,
            output_dir=Path(output_dir), extra_args=ctx.args)


def prepare(file, *, learner: str, teacher: str | None, extra_args: list[str], num_processes: int = 1):
    """The trainer class and its config, every name and option checked (no model loads)."""
    cls = load_trainer_class(file)
    config = parse_config(cls.config_class, extra_args)
    from playpen.models import check_model_name
    # check both names before loading anything: a typo in -t must not cost a model load
    check_model_name(learner, "learner")
    if teacher:
        check_model_name(teacher, "teacher")
    cls.check(config, learner, teacher)
    if num_processes > 1 and hasattr(config, "groups_per_step"):  # GRPO: whole groups on every rank
        from playpen.distributed import check_groups
        check_groups(config.groups_per_step, num_processes)
    return cls, config


def run(file, *, learner: str, teacher: str | None, temperature: float, max_tokens: int,
        seed: int, output_dir: Path, extra_args: list[str]):
    cls, config = prepare(file, learner=learner, teacher=teacher, extra_args=extra_args)
    from playpen.models import load_model_by_name
    game_registry = registry.clem_game_registry()
    gen_args = dict(temperature=temperature, max_tokens=max_tokens)
    from playpen.seeding import seed_everything
    seed_everything(seed)
    learner_model = load_model_by_name(learner, gen_args=gen_args, role="learner")
    teacher_model = load_model_by_name(teacher, gen_args=gen_args, role="teacher") if teacher else None
    trainer = cls(learner_model, teacher_model, config=config, output_dir=output_dir, seed=seed)
    trainer.learn(game_registry)
    if trainer.interrupted_by is not None:  # saved and stopped: `playpen run ... && next` must stop
        raise Interrupted(trainer.interrupted_by, "checkpoint saved; continue with --resume")


def check_generation_options(temperature: float, max_tokens: int) -> None:
    """-T/-L before any model loads (a negative temperature once became greedy silently)."""
    if not temperature >= 0:
        raise PlaypenError(f"option -T/--temperature: {temperature!r} is not valid; expected a number >= 0 "
                           f"(0 = greedy)")
    if max_tokens < 1:
        raise PlaypenError(f"option -L/--max-tokens: {max_tokens!r} is not valid; expected an integer >= 1")


def check_output_folder(path: str | Path, option: str) -> None:
    """A folder option must not name an existing file, nor a folder under one."""
    if Path(path).exists() and not Path(path).is_dir():
        raise PlaypenError(f"option {option}: '{path}' is a file, not a folder")
    blocking = next((p for p in Path(path).parents if p.exists() and not p.is_dir()), None)
    if blocking is not None:
        raise PlaypenError(f"option {option}: '{path}' is under '{blocking}', a file, not a folder")
