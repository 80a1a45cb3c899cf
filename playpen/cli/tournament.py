"""`playpen tournament`: a round robin between players, both seatings, with ratings."""
from __future__ import annotations

from datetime import datetime
from pathlib import Path

import click

from playpen.cli import check_engine_options, engine_options, learner_engine, remote_options, \
    set_remote_limits, split_values
from playpen.cli.run import check_generation_options, check_output_folder
from playpen.errors import PlaypenError


@click.command("tournament")
@click.option("-m", "--player", "players", multiple=True, required=True,
              help="A player: a registered model (`programmatic` and remote models too) or MODEL+ADAPTER_FOLDER; "
                   "repeatable, at least two.")
@click.option("-g", "--game", required=True, help="A two-player game (e.g. adversarial_taboo).")
@click.option("-n", "--num-instances", type=int, default=None,
              help="Held-out instances each seating plays (a seeded draw) [default: all].")
@click.option("-i", "--instances", default=None,
              help="Instances file stem (in/STEM.json) [default: the game's own: the held-out set].")
@click.option("-o", "--out", "out_dir", type=click.Path(), default=None,
              help="New folder for the records and ratings [default: playpen-records/tournament-<game>-<time>].")
@click.option("-T", "--temperature", type=float, default=0.0, show_default=True)
@click.option("-L", "--max-tokens", type=int, default=300, show_default=True)
@click.option("--seed", type=int, default=0, show_default=True, help="Instances drawn, sampling, bootstrap.")
@click.option("--bootstrap-samples", type=int, default=1000, show_default=True,
              help="Resamples of the matches for the 95% intervals.")
@click.option("-b", "--batch-size", type=int, default=16, show_default=True,
              help="Episodes generated together.")
@engine_options
@remote_options
def tournament_command(players, game, num_instances, instances, out_dir, temperature, max_tokens, seed,
                       bootstrap_samples, batch_size, engine, vllm_url, engine_dtype, connect_timeout, read_timeout,
                       retries, retry_budget):
    """Play every pair of PLAYERS against each other in both seatings on held-out instances.

    Players on one local model share one copy of it (each adapter by name, the bare
    model as its base), answered in one batched generate per step; with --engine vllm,
    vLLM answers that batch, each player's adapter served by name (docs/engines.md). Every episode is
    written in clemcore's layout into OUT (`clem score -r OUT` works); OUT also gets
    ratings.md (Bradley–Terry ratings on the Elo scale with 95% bootstrap intervals,
    OpenSkill, wins/draws/losses; Elo's bootstrap too in ratings.json),
    ratings.json, ratings.png and matches.jsonl. Bad input (one player, a game without
    two players, a missing adapter or one trained on another base) stops with one line
    before anything is written.

    \b
    Examples:
      playpen tournament -m smol-135m -m smol-135m+models/fsp+lora/smol-135m/population/adapters/learner-3 \\
          -m programmatic -g adversarial_taboo -n 10
    """
    from playpen.population.tournament import run_tournament
    from playpen.rollouts.types import SamplingConfig
    check_generation_options(temperature, max_tokens)
    if num_instances is not None and num_instances < 1:
        raise PlaypenError(f"option -n/--num-instances: {num_instances} is not valid; expected an integer >= 1")
    if bootstrap_samples < 1:
        raise PlaypenError(f"option --bootstrap-samples: {bootstrap_samples} is not valid; expected an integer >= 1")
    if batch_size < 1:
        raise PlaypenError(f"option -b/--batch-size: {batch_size} is not valid; expected an integer >= 1")
    check_engine_options(engine, vllm_url, engine_dtype)
    set_remote_limits(connect_timeout, read_timeout, retries, retry_budget)
    if out_dir is None:
        out_dir = Path("playpen-records") / f"tournament-{game}-{datetime.now():%Y%m%d-%H%M%S}"
    check_output_folder(out_dir, "-o/--out")
    specs = [p for value in players for p in ([value] if "+" in value else split_values([value]))]
    result = run_tournament(specs, game, out_dir=Path(out_dir), num_instances=num_instances, instances=instances,
                            sampling=SamplingConfig(temperature=temperature, max_new_tokens=max_tokens,
                                                    **learner_engine(engine, vllm_url, engine_dtype)),
                            seed=seed, num_samples=bootstrap_samples, max_concurrent_episodes=batch_size,
                            echo=lambda line: click.echo(line, err=True))
    click.echo(result.table)
    click.echo(f"\nrecords and ratings: {result.out_dir}  (clem score -g {game} -r {result.out_dir}; "
               f"ratings.md, ratings.png)")
