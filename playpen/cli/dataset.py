"""`playpen dataset`: results folders -> a conversational JSON-lines dataset, or preference pairs."""
from __future__ import annotations

from pathlib import Path

import click

from playpen.cli import split_values
from playpen.errors import DatasetError


@click.command("dataset")
@click.argument("results_dir", type=click.Path())
@click.option("-o", "--output", "output", required=True, type=click.Path(dir_okay=False),
              help="The JSON-lines file to write (one record per episode and model player, or per pair).")
@click.option("-g", "--game", "games", multiple=True, help="Keep only these games (repeatable, or a,b).")
@click.option("-r", "--role", "roles", multiple=True, help="Keep only these game roles (e.g. WordGuesser).")
@click.option("-m", "--model", "models", multiple=True, help="Keep only these models.")
@click.option("--outcome", "outcomes", multiple=True,
              help="Keep only these outcomes: success, failure (lose), aborted.")
@click.option("--include-programmatic", is_flag=True,
              help="Also use the programmatic players' conversations (demonstrations for SFT).")
@click.option("--pairs", is_flag=True,
              help="Write preference pairs in TRL's format ({prompt, chosen, rejected} messages + meta): a won "
                   "and a lost or aborted episode of the same instance and role, at the first turn of that role "
                   "where their conversations part.")
@click.option("--overwrite", is_flag=True, help="Replace OUTPUT when it exists [default: refuse].")
def dataset(results_dir, output, games, roles, models, outcomes, include_programmatic, pairs, overwrite):
    """Convert the episodes under RESULTS_DIR into conversational records for training.

    Reads clemcore 3.x results (clem run, playpen rollouts) and the older 2.x layout
    of clembench-runs. Each line is {"messages": [...], "meta": {game, experiment,
    game_id, player_name, game_role, model, outcome}}; load it with
    datasets.load_dataset("json", data_files=OUT). Programmatic players are skipped
    unless --include-programmatic is given. Malformed or partial episode folders are
    skipped and reported. With --pairs, each line is a preference pair for DPO
    (`playpen run dpo --source pairs --pairs-file OUT`, or TRL's DPOTrainer directly).
    """
    from playpen.data import DatasetFilter, build_dataset
    if Path(output).exists() and not overwrite:
        raise DatasetError(f"'{output}' exists: pass --overwrite to replace it, or -o another file")
    if pairs and outcomes:
        raise DatasetError("--outcome does not apply to --pairs: a pair takes a won and a lost or aborted episode")
    keep = DatasetFilter(games=tuple(split_values(games)), roles=tuple(split_values(roles)),
                         models=tuple(split_values(models)), outcomes=tuple(split_values(outcomes)))
    if pairs:
        from playpen.pairs import pairs_from_results, write_pairs
        found, report = pairs_from_results(results_dir, keep, include_programmatic=include_programmatic)
        if not found:
            raise DatasetError(f"no preference pairs in {results_dir} ({report.num_episodes} episodes): a pair "
                               f"needs a won and a lost or aborted episode of the same instance and role that "
                               f"part at that role's turn; nothing written")
        write_pairs(found, output)
        click.echo(f"wrote {len(found)} preference pairs from {report.num_episodes} episodes to {output}")
        lines = report.lines()
    else:
        report = build_dataset(results_dir, output, keep, include_programmatic=include_programmatic)
        lines = report.lines()
        click.echo(f"wrote {lines[0]} to {output}")
    for line in lines[1:]:
        click.echo(line, err=True)
