"""The `playpen` command line: the click group, one module per command (``list``,
``setup``, ``run``, ``eval``, ``dataset``, ``plot``, ``check``, ``tournament``, ``serve``).
Commands parse, dispatch and print; the work happens in the library.

A command's module is imported only when the command runs (or ``--help`` lists it), and
heavy modules (torch, transformers, trl, clemcore) only inside the commands that need
them, so `playpen --help` stays instant.
"""
from __future__ import annotations

import importlib
import importlib.util
import signal

import click

from playpen import __version__
from playpen.errors import WRITE_ERRNOS, Interrupted, PlaypenError, write_error
from playpen.inference.engine import ENGINE_DTYPES, ENGINES
from playpen.remote import RemoteLimits, set_remote_limits as set_limits


def split_values(values) -> list[str]:
    """A repeatable, comma-separable option (``-g a -g b,c``) as one list."""
    return [v.strip() for value in values for v in value.split(",") if v.strip()]


class UserError(click.ClickException):
    """A PlaypenError as click shows it: one line on stderr, exit code 2."""

    def __init__(self, message: str, exit_code: int = 2):
        super().__init__(message)
        self.exit_code = exit_code

    def show(self, file=None):
        click.echo(f"playpen: error: {self.format_message()}", err=True, file=file)


class LazyGroup(click.Group):
    """Subcommands living in other modules are imported only when invoked."""

    lazy_commands = {
        "list": ("playpen.cli.listing", "list_command"),
        "setup": ("playpen.cli.setup", "setup_command"),
        "run": ("playpen.cli.run", "run_command"),
        "eval": ("playpen.cli.eval", "eval_command"),
        "dataset": ("playpen.cli.dataset", "dataset"),
        "plot": ("playpen.cli.plot", "plot"),
        "check": ("playpen.cli.check", "check_command"),
        "tournament": ("playpen.cli.tournament", "tournament_command"),
        "serve": ("playpen.cli.serve", "serve_command"),
        "register": ("playpen.cli.register", "register_command"),
    }

    def list_commands(self, ctx):
        return sorted(set(super().list_commands(ctx)) | set(self.available_lazy()))

    def available_lazy(self):
        return [name for name, (module, _) in self.lazy_commands.items()
                if importlib.util.find_spec(module) is not None]

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except PlaypenError as e:
            if (ctx.obj or {}).get("debug"):
                raise
            raise UserError(str(e), e.exit_code) from e
        except OSError as e:  # a full disk, no permission, a read-only file system: one line
            if (ctx.obj or {}).get("debug") or e.errno not in WRITE_ERRNOS:
                raise
            raise UserError(str(write_error(e)), 2) from e
        except click.UsageError as e:  # a subcommand's bad option or argument: one line too
            if (ctx.obj or {}).get("debug"):
                raise
            command = " ".join(["playpen", *(e.ctx.command_path.split()[1:] if e.ctx is not None else [])])
            hint = f" (see `{command} --help`)"
            raise UserError(e.format_message() + hint, e.exit_code) from e
        except KeyboardInterrupt as e:  # click would make it "Aborted!" and exit code 1
            if (ctx.obj or {}).get("debug"):
                raise
            raise interrupted_exit(getattr(e, "signum", signal.SIGINT), str(e)) from e

    def resolve_command(self, ctx, args):
        # upstream playpen's TL;DR form `playpen TRAINER.py -l MODEL` lacks `run`
        if args and args[0] not in self.list_commands(ctx) and args[0].endswith(".py"):
            raise click.UsageError(f"no command '{args[0]}': did you mean `playpen run {args[0]}`?", ctx)
        return super().resolve_command(ctx, args)

    def get_command(self, ctx, name):
        if name in self.lazy_commands and name in self.available_lazy():
            module, attr = self.lazy_commands[name]
            return getattr(importlib.import_module(module), attr)
        return super().get_command(ctx, name)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="playpen")
@click.option("--debug", is_flag=True, help="Show full tracebacks for errors.")
@click.pass_context
def cli(ctx, debug):
    """playpen: train language models by playing dialogue games.

    \b
    Typical use:
      playpen list games
      playpen run --list
      playpen run sft -l smol-135m
      playpen eval -m smol-135m -g taboo
    """
    ctx.ensure_object(dict)
    ctx.obj["debug"] = debug


def interrupted_exit(signum: int, detail: str = "") -> click.exceptions.Exit:
    """Say in one line that a signal stopped the command; the exit to raise (128 + signum)."""
    name = signal.Signals(signum).name
    click.echo(f"playpen: interrupted by {name}" + (f": {detail}" if detail else ""), err=True)
    return click.exceptions.Exit(128 + signum)


def _on_sigterm(signum, frame):
    raise Interrupted(signum)


def main(argv=None):
    """Console entry point (`playpen`). SIGTERM stops a command like Ctrl-C does (a training
    run saves a checkpoint first); an interrupted command exits with 130 (SIGINT) or 143
    (SIGTERM)."""
    signal.signal(signal.SIGTERM, _on_sigterm)
    cli.main(args=argv, prog_name="playpen")


def remote_options(command):
    """``--connect-timeout``, ``--read-timeout``, ``--retries``, ``--retry-budget`` for the
    calls to remote (API) models (see :class:`playpen.remote.RemoteLimits`)."""
    default = RemoteLimits()
    options = [
        click.option("--connect-timeout", type=float, default=default.connect_timeout, show_default=True,
                     help="Remote models: seconds to wait for a connection."),
        click.option("--read-timeout", type=float, default=default.read_timeout, show_default=True,
                     help="Remote models: seconds to wait for an answer."),
        click.option("--retries", type=int, default=default.retries, show_default=True,
                     help="Remote models: retries of a call failing with no answer, a timeout or a 5xx/429."),
        click.option("--retry-budget", type=float, default=default.retry_budget, show_default=True,
                     help="Remote models: no retry starts after this many seconds since the call began."),
    ]
    for option in reversed(options):
        command = option(command)
    return command


def engine_options(command):
    """``--engine``, ``--vllm-url`` and ``--engine-dtype``: who generates the learner's turns
    (docs/engines.md)."""
    command = click.option("--engine-dtype", type=click.Choice(ENGINE_DTYPES), default="auto", show_default=True,
                           help="With --engine vllm in this process: the dtype vLLM computes in; auto = bfloat16 "
                                "for sampled turns where the hardware has native bf16, the model's own for greedy "
                                "turns (evaluation).")(command)
    command = click.option("--vllm-url", default=None,
                           help="With --engine vllm: a running `vllm serve MODEL --enable-lora` (e.g. "
                                "http://127.0.0.1:8000) generates, instead of vLLM in this process.")(command)
    return click.option("--engine", type=click.Choice(ENGINES), default="auto", show_default=True,
                        help="Who generates the learner's turns: playpen's engine (auto, static, dynamic) or "
                             "vllm (pip install 'playpen[vllm]'; docs/engines.md).")(command)


def check_engine_choice(engine: str, vllm_url: str | None, engine_dtype: str = "auto") -> None:
    """The engine options agree: --vllm-url only with --engine vllm, and a URL; --engine-dtype
    only for vLLM in this process (nothing imported or reached: a check before anything else)."""
    if vllm_url and engine != "vllm":
        raise PlaypenError("option --vllm-url: needs --engine vllm")
    if engine_dtype != "auto" and (engine != "vllm" or vllm_url):
        raise PlaypenError("option --engine-dtype: needs --engine vllm without --vllm-url (a server computes in "
                           "the dtype it was started with)")
    if vllm_url and not vllm_url.startswith(("http://", "https://")):
        raise PlaypenError(f"option --vllm-url: {vllm_url!r} is not valid; expected http://HOST:PORT")


def check_engine_options(engine: str, vllm_url: str | None, engine_dtype: str = "auto") -> None:
    """:func:`check_engine_choice`, then the chosen engine is there: the server answers, vllm imports."""
    check_engine_choice(engine, vllm_url, engine_dtype)
    # one line and exit 2 now, not after the models load
    from playpen.inference import vllm_engine
    if vllm_url:
        vllm_engine.Server(vllm_url, timeout=10.0)
    elif engine == "vllm":
        vllm_engine.import_vllm()


def learner_engine(engine: str, vllm_url: str | None, engine_dtype: str = "auto") -> dict:
    """The learner's generation arguments that choose its engine (none for the default)."""
    if engine == "auto" and not vllm_url:
        return {}
    chosen = dict(engine=engine, vllm_url=vllm_url)
    return {**chosen, "engine_dtype": engine_dtype} if engine_dtype != "auto" else chosen


def set_remote_limits(connect_timeout: float, read_timeout: float, retries: int, retry_budget: float) -> None:
    """Check the remote options and make them the limits of remote models loaded from now on."""
    set_limits(RemoteLimits(connect_timeout=connect_timeout, read_timeout=read_timeout, retries=retries,
                            retry_budget=retry_budget))


if __name__ == "__main__":
    main()
