"""`playpen plot`: draw a run's learning curve."""
from __future__ import annotations

import click


@click.command("plot")
@click.argument("run_dir", type=click.Path())
@click.option("-o", "--out", type=click.Path(dir_okay=False), default=None,
              help="PNG to write [default: RUN_DIR/learning-curve.png].")
@click.option("--title", default=None, help="Figure title [default: the run folder's name].")
def plot(run_dir, out, title):
    """Draw the learning curve (reward, % played, loss over steps) of RUN_DIR.

    RUN_DIR is a trainer's run folder (e.g. models/grpo+lora/smol-135m/selfplay) holding
    playpen-log.jsonl, or the log file itself.
    """
    from playpen.training.common.plotting import plot_run
    path = plot_run(run_dir, out=out, title=title)
    click.echo(str(path))
