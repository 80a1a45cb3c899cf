"""The `playpen` command line. Parses, dispatches, prints; the work happens elsewhere.

Heavy modules (torch, transformers, trl, clemcore) are imported inside the commands
that need them, so `playpen --help` stays instant.
"""
from __future__ import annotations

import importlib
import importlib.util
import json
import sys
from pathlib import Path

import click

from playpen import __version__
from playpen.errors import PlaypenError


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
        "dataset": ("playpen.commands.dataset", "dataset"),
        "eval": ("playpen.commands.evaluate", "eval_command"),
        "plot": ("playpen.commands.plot", "plot"),
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
      playpen run examples/trl/sft_trainer_lora.py -l smol-135m
      playpen eval -m smol-135m -g taboo
    """
    ctx.ensure_object(dict)
    ctx.obj["debug"] = debug


# ----------------------------------------------------------------------------- list

@cli.command("list")
@click.argument("what", type=click.Choice(["games", "models", "backends"]))
@click.option("-v", "--verbose", is_flag=True, help="Show the whole entries.")
@click.option("-s", "--selector", default="all",
              help="Filter: a name, or JSON like \"{'benchmark':['2.0']}\" (games only).")
def list_command(what, verbose, selector):
    """List the games, models or backends playpen can use from this directory."""
    from playpen import listing
    for line in listing.lines(what, verbose=verbose, selector=selector):
        click.echo(line)


# ----------------------------------------------------------------------------- setup

@cli.command("setup")
@click.option("--force", is_flag=True, help="Rebuild the default model even if it looks complete.")
@click.option("--verify/--no-verify", default=True, help="Hash-check the prepared model files.")
def setup_command(force, verify):
    """Prepare the workspace: the embedded default model and registry files."""
    from playpen import workspace
    for line in workspace.setup(force=force, verify=verify):
        click.echo(line)


# ----------------------------------------------------------------------------- run

@cli.command("run", context_settings={"ignore_unknown_options": True, "allow_extra_args": True},
             add_help_option=False)
@click.argument("file", required=False)
@click.option("-l", "--learner", help="Model name of the learner (a huggingface_local model).")
@click.option("-t", "--teacher", default=None, help="Model name of the teacher/partner (any backend).")
@click.option("-T", "--temperature", type=float, default=0.0, show_default=True,
              help="Sampling temperature for generation.")
@click.option("-L", "--max-tokens", type=int, default=300, show_default=True,
              help="Maximum new tokens per generated turn.")
@click.option("--seed", type=int, default=42, show_default=True, help="Global seed.")
@click.option("-o", "--output-dir", type=click.Path(file_okay=False), default="playpen-records",
              show_default=True, help="Root folder for records and run outputs.")
@click.option("-h", "--help", "show_help", is_flag=True,
              help="Show this help; with FILE, also the trainer's own options.")
@click.pass_context
def run_command(ctx, file, learner, teacher, temperature, max_tokens, seed, output_dir, show_help):
    """Run the BasePlayPen trainer defined in FILE with LEARNER (and TEACHER).

    Options after the known ones (e.g. --max-steps 10) set fields of the trainer's
    config dataclass; `playpen run FILE --help` lists them.
    """
    from playpen import runner
    if show_help:
        click.echo(ctx.get_help())
        if file:
            click.echo("\n" + runner.trainer_help(file))
        return
    if not file:
        raise PlaypenError("missing trainer FILE: `playpen run TRAINER.py -l MODEL` "
                           "(see examples/trl/)")
    if not learner:
        raise PlaypenError("missing learner: pass -l/--learner MODEL (see `playpen list models`)")
    runner.run(file, learner=learner, teacher=teacher, temperature=temperature,
               max_tokens=max_tokens, seed=seed, output_dir=Path(output_dir), extra_args=ctx.args)


def main(argv=None):
    """Console entry point (`playpen`)."""
    cli.main(args=argv, prog_name="playpen")


if __name__ == "__main__":
    main()
