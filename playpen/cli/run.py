"""`playpen run`: find the trainer (a packaged one by name, or a file), parse its options, resolve
and load the models, call ``learn()``."""
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
from playpen.cli import check_engine_options, engine_options, learner_engine, remote_options, set_remote_limits
from playpen.distributed import check_groups
from playpen.envs.turns import MAX_TURNS_HELP, check_max_turns, turn_limit
from playpen.errors import Interrupted, PlaypenError, TrainerFileError, TrainingSetupError
from playpen.training import catalog
from playpen.training.common.base import BasePlayPen, config_fields, field_help, option_name, parse_config


# ----------------------------------------------------------------------------- trainer file

def trainer_class(trainer: str | Path):
    """The BasePlayPen subclass of TRAINER: a packaged trainer's name (``sft``, see
    ``playpen run --list``) or a trainer file (``my_trainer.py``)."""
    text = str(trainer)
    if text in catalog.TRAINERS:
        return catalog.trainer_class(text)
    if text.endswith(".py") or "/" in text or "\\" in text or Path(text).exists():
        return load_trainer_class(trainer)
    return catalog.trainer_class(text)  # one line: the unknown name and the valid ones


def load_trainer_class(file: str | Path):
    """Import `file` and return its single concrete BasePlayPen subclass (the one it defines,
    or else the one it imports)."""
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
    concrete = [obj for _, obj in inspect.getmembers(module, inspect.isclass)
                if issubclass(obj, BasePlayPen) and obj is not BasePlayPen and not inspect.isabstract(obj)]
    # the class the file defines; else the one it imports (an example file runs a packaged trainer)
    classes = [obj for obj in concrete if obj.__module__ == module_name] or list(dict.fromkeys(concrete))
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


def trainer_help(trainer: str | Path) -> str:
    """The trainer's class docstring in full (what it trains, its commands and outputs: the
    trainer's documentation, as TRL keeps it in its configs) and its options."""
    cls = trainer_class(trainer)
    doc = inspect.getdoc(cls) or ""
    out = [f"Trainer {cls.__name__} ({trainer})"]
    if doc:
        out.append("\n".join(f"  {line}" if line else "" for line in doc.splitlines()))
    fields = config_fields(cls.config_class)
    if not fields:
        out.append("  (no trainer options)")
        return "\n".join(out)
    out.append("\nTrainer options:")
    hints = typing.get_type_hints(cls.config_class)
    for f in fields:
        default = f.default if f.default is not dataclasses.MISSING else (
            f.default_factory() if f.default_factory is not dataclasses.MISSING else None)
        kind = getattr(hints.get(f.name), "__name__", str(hints.get(f.name)))
        out.append(f"  {option_name(f):<28} {kind:<6} {field_help(f)} [default: {default}]")
    return "\n".join(out)


# ----------------------------------------------------------------------------- running

@click.command("run", context_settings={"ignore_unknown_options": True, "allow_extra_args": True},
             add_help_option=False)
@click.argument("trainer", required=False)
@click.option("-l", "--learner", help="Model name of the learner (a huggingface_local model).")
@click.option("-t", "--teacher", default=None, help="Model name of the teacher/partner (any backend).")
@click.option("-T", "--temperature", type=float, default=0.0, show_default=True,
              help="Sampling temperature for generation.")
@click.option("-L", "--max-tokens", type=int, default=300, show_default=True,
              help="Maximum new tokens per generated turn.")
@engine_options
@click.option("--seed", type=int, default=42, show_default=True, help="Global seed.")
@click.option("--max-turns", type=int, default=None, help=MAX_TURNS_HELP)
@click.option("-o", "--output-dir", type=click.Path(), default="playpen-records",
              show_default=True, help="Root folder for records and run outputs.")
@remote_options
@click.option("--num-processes", type=int, default=None,
              help="Data-parallel training on N processes of this machine (accelerate launch: one per GPU, "
                   "or CPU processes; default 1); docs/distributed.md.")
@click.option("--accelerate-config", default=None,
              help="Launch with this `accelerate config` file (DeepSpeed ZeRO-3, several machines, ...; "
                   "examples/accelerate/).")
@click.option("--list", "show_list", is_flag=True, help="List the packaged trainers' names and stop.")
@click.option("-h", "--help", "show_help", is_flag=True,
              help="Show this help; with TRAINER, also the trainer's own options.")
@click.pass_context
def run_command(ctx, trainer, learner, teacher, temperature, max_tokens, engine, vllm_url, engine_dtype, seed,
                max_turns, output_dir, connect_timeout, read_timeout, retries, retry_budget, num_processes, accelerate_config,
                show_list, show_help):
    """Run TRAINER with LEARNER (and TEACHER): a packaged trainer's name (`playpen run sft
    -l smol-135m`; `playpen run --list` names them) or a file defining a BasePlayPen subclass.

    Options after the known ones (e.g. --max-steps 10) set fields of the trainer's
    config dataclass; `playpen run TRAINER --help` lists them. Ctrl-C or SIGTERM: the run
    saves a checkpoint after the current step and exits with 130 / 143 (`--resume`
    continues); a second signal stops at once.
    """
    if show_list:
        click.echo(catalog.listing())
        return
    if show_help:
        click.echo(ctx.get_help())
        if trainer:
            click.echo("\n" + trainer_help(trainer))
        return
    if not trainer:
        raise PlaypenError("missing TRAINER: `playpen run NAME -l MODEL` (names: `playpen run --list`) "
                           "or `playpen run TRAINER.py -l MODEL`")
    if not learner:
        raise PlaypenError("missing learner: pass -l/--learner MODEL (see `playpen list models`)")
    check_generation_options(temperature, max_tokens)
    check_engine_options(engine, vllm_url, engine_dtype)
    check_output_folder(output_dir, "-o/--output-dir")
    set_remote_limits(connect_timeout, read_timeout, retries, retry_budget)
    check_max_turns(max_turns)
    from playpen.launch import check_num_processes
    check_num_processes(num_processes, accelerate_config)
    if (num_processes or 1) > 1 or accelerate_config:
        # every option checked here first (one line, before N processes start), then each rank runs it
        prepare(trainer, learner=learner, teacher=teacher, extra_args=ctx.args, num_processes=num_processes or 1)
        from playpen.launch import launch
        args = ["run", trainer, "-l", learner, *(["-t", teacher] if teacher else []), "-T", repr(temperature),
                "-L", str(max_tokens), "--engine", engine, *(["--vllm-url", vllm_url] if vllm_url else []),
                "--engine-dtype", engine_dtype,
                "--seed", str(seed), "-o", str(output_dir),
                *(["--max-turns", str(max_turns)] if max_turns is not None else []),
                "--connect-timeout", repr(connect_timeout), "--read-timeout", repr(read_timeout),
                "--retries", str(retries), "--retry-budget", repr(retry_budget), *ctx.args]
        debug = (ctx.find_root().obj or {}).get("debug")
        code = launch(["--debug", *args] if debug else args, num_processes, accelerate_config)
        if code:
            ctx.exit(code)
        return
    with turn_limit(max_turns):
        run(trainer, learner=learner, teacher=teacher, temperature=temperature, max_tokens=max_tokens, seed=seed,
            output_dir=Path(output_dir), extra_args=ctx.args, engine=engine, vllm_url=vllm_url,
            engine_dtype=engine_dtype)


def check_games(config) -> None:
    """Every game of ``--games`` is registered (one line with close matches, before clemcore
    or a model loads, so that a refused run writes nothing). Not checked for a run that only
    filters a dataset or records folder by game name and does not evaluate."""
    games = getattr(config, "game_list", None)
    only_filters = not getattr(config, "evaluate", True) and (getattr(config, "dataset", "")
                                                               or getattr(config, "records", ""))
    if not isinstance(games, list) or only_filters:
        return
    for game in games:
        registry.resolve_game(game)


def prepare(trainer, *, learner: str, teacher: str | None, extra_args: list[str], num_processes: int = 1):
    """The trainer class and its config, every name and option checked (no model loads)."""
    cls = trainer_class(trainer)
    config = parse_config(cls.config_class, extra_args)
    from playpen.models import check_model_name
    # check both names before loading anything: a typo in -t must not cost a model load
    check_model_name(learner, "learner")
    if teacher:
        check_model_name(teacher, "teacher")
    check_games(config)
    cls.check(config, learner, teacher)
    if num_processes > 1 and not cls.data_parallel:
        raise TrainingSetupError(f"{cls.__name__} runs on one process (its training loop is its own, not "
                                 f"accelerate's): run it without --num-processes")
    if num_processes > 1 and hasattr(config, "groups_per_step"):  # GRPO: whole groups on every rank
        check_groups(config.groups_per_step, num_processes)
    return cls, config


def run(trainer, *, learner: str, teacher: str | None, temperature: float, max_tokens: int,
        seed: int, output_dir: Path, extra_args: list[str], engine: str = "auto", vllm_url: str | None = None,
        engine_dtype: str = "auto"):
    cls, config = prepare(trainer, learner=learner, teacher=teacher, extra_args=extra_args)
    from playpen.models import load_model_by_name
    game_registry = registry.clem_game_registry()
    gen_args = dict(temperature=temperature, max_tokens=max_tokens)
    from transformers import set_seed
    set_seed(seed)  # python, numpy, torch (every device)
    # the engine rides in the learner's generation arguments: SamplingConfig.from_gen_args reads it
    learner_model = load_model_by_name(learner, gen_args={**gen_args, **learner_engine(engine, vllm_url, engine_dtype)},
                                       role="learner")
    teacher_model = load_model_by_name(teacher, gen_args=gen_args, role="teacher") if teacher else None
    trainer = cls(learner_model, teacher_model, config=config, output_dir=output_dir, seed=seed)
    try:
        trainer.learn(game_registry)
    except PlaypenError:
        for training_run in trainer.runs:
            training_run.abandon()
        raise
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
