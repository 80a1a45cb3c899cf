"""`playpen dataset`: results folders -> a conversational JSON-lines dataset."""
from __future__ import annotations

import click

from playpen.cli import split_values


@click.command("dataset")
@click.argument("results_dir", type=click.Path())
@click.option("-o", "--output", "output", required=True, type=click.Path(dir_okay=False),
              help="The JSON-lines file to write (one record per episode and model player).")
@click.option("-g", "--game", "games", multiple=True, help="Keep only these games (repeatable, or a,b).")
@click.option("-r", "--role", "roles", multiple=True, help="Keep only these game roles (e.g. WordGuesser).")
@click.option("-m", "--model", "models", multiple=True, help="Keep only these models.")
@click.option("--outcome", "outcomes", multiple=True,
              help="Keep only these outcomes: success, failure (lose), aborted.")
@click.option("--include-programmatic", is_flag=True,
              help="Also write the programmatic players' conversations (demonstrations for SFT).")
def dataset(results_dir, output, games, roles, models, outcomes, include_programmatic):
    """Convert the episodes under RESULTS_DIR into conversational records for training.

    Reads clemcore 3.x results (clem run, playpen rollouts) and the older 2.x layout
    of clembench-runs. Each line is {"messages": [...], "meta": {game, experiment,
    game_id, player_name, game_role, model, outcome}}; load it with
    datasets.load_dataset("json", data_files=OUT). Programmatic players are skipped
    unless --include-programmatic is given. Malformed or partial episode folders are
    skipped and reported.
    """
    from playpen.data import DatasetFilter, build_dataset
    keep = DatasetFilter(games=tuple(split_values(games)), roles=tuple(split_values(roles)), models=tuple(split_values(models)),
                         outcomes=tuple(split_values(outcomes)))
    report = build_dataset(results_dir, output, keep, include_programmatic=include_programmatic)
    lines = report.lines()
    click.echo(f"wrote {lines[0]} to {output}")
    for line in lines[1:]:
        click.echo(line, err=True)
