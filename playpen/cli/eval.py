"""`playpen eval`: play the held-out instances, score them, print the clemscore table."""
from __future__ import annotations

import json
from pathlib import Path

import click

from playpen.cli import remote_options, set_remote_limits, split_values
from playpen.envs.turns import DEFAULT_MAX_TURNS, check_max_turns, turn_limit


@click.command("eval")
@click.option("-m", "--model", "model_name", required=True,
              help="Registered model name (see `playpen list models`); `programmatic` works too.")
@click.option("-g", "--game", "games", multiple=True,
              help="Game(s) to evaluate, repeatable or comma-separated [default: all playpen games].")
@click.option("--adapter", type=click.Path(), default=None,
              help="A PEFT adapter folder (e.g. models/sft+lora/<model>/checkpoint-N) loaded on top of MODEL.")
@click.option("-t", "--partner", default=None,
              help="Model playing the other roles of multi-player games [default: MODEL itself].")
@click.option("-i", "--instances", default=None,
              help="Instances file stem (in/STEM.json) for every game; refused when a game lacks it "
                   "[default: each game's own, as clemgame.json names it: the held-out set].")
@click.option("-r", "--results-dir", type=click.Path(), default="results", show_default=True,
              help="Root of the results folders (one sub-folder per model/adapter).")
@click.option("--name", "run_name", default=None,
              help="Name of the results sub-folder [default: MODEL, MODEL+<adapter tag>, MODEL--PARTNER].")
@click.option("--overwrite", is_flag=True,
              help="Replace the run folder's earlier episodes of the games [default: refuse].")
@click.option("-n", "--max-instances", type=int, default=None,
              help="Play at most N instances per experiment [default: all].")
@click.option("-b", "--batch-size", type=int, default=8, show_default=True,
              help="Episodes generated together (batched generation).")
@click.option("-T", "--temperature", type=float, default=0.0, show_default=True)
@click.option("-L", "--max-tokens", type=int, default=300, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print the table as JSON.")
@click.option("--threads", type=click.IntRange(min=0), default=None,
              help="torch CPU threads while playing; 0 = torch's default [default: 1 for a local model on "
                   "the CPU, torch's default otherwise; see benchmarks/README.md].")
@click.option("--max-turns", type=int, default=DEFAULT_MAX_TURNS, show_default=True,
              help="An episode still running after this many turns ends as aborted, with a note naming the "
                   "game (a game that never ends with this model); 0: no limit.")
@remote_options
def eval_command(model_name, games, adapter, partner, instances, results_dir, run_name, overwrite,
                 max_instances, batch_size, temperature, max_tokens, as_json, threads, max_turns, connect_timeout,
                 read_timeout, retries, retry_budget):
    """Evaluate MODEL (optionally with --adapter) on the games' held-out instances.

    Prints the clemscore table (% played, quality, clemscore per game and overall): the
    numbers `clem run`, `clem score` and `clem eval` give for the same episodes. Episodes
    and tables go to RESULTS_DIR/<model[+adapter]>/ (clemcore layout, results.csv,
    playpen-eval.json). Earlier episodes of a game there are kept: pass --name NEW for a
    new folder, or --overwrite to replace them. A remote model whose server does not
    answer stops the command before anything is written.

    \b
    Examples:
      playpen eval -m smol-135m -g referencegame
      playpen eval -m smol-135m --adapter models/sft+lora/smol-135m/checkpoint-8 -g referencegame
    """
    from playpen.errors import EvaluationError, GameLoadError
    from playpen.evaluation import evaluate
    from playpen.models import check_adapter, check_model_name, load_model_by_name
    from playpen.registry import game_specs
    if max_instances is not None and max_instances < 1:
        raise EvaluationError("--max-instances must be at least 1")
    if batch_size < 1:
        raise EvaluationError("--batch-size must be at least 1")
    from playpen.cli.run import check_generation_options, check_output_folder
    check_generation_options(temperature, max_tokens)
    check_output_folder(results_dir, "-r/--results-dir")
    if run_name is not None and (not run_name.strip() or Path(run_name).name != run_name or run_name in (".", "..")):
        raise EvaluationError(f"option --name: {run_name!r} is not valid; expected a folder name (no '/', "
                              f"not '..'): the sub-folder of -r/--results-dir the results go to")
    set_remote_limits(connect_timeout, read_timeout, retries, retry_budget)
    check_max_turns(max_turns)
    if adapter is not None:
        check_adapter(adapter)
    # fail on names before loading any weights
    check_model_name(model_name)
    if partner:
        check_model_name(partner, "partner")
    names = split_values(games) or None
    game_specs(names, instances)
    for name in names or []:
        note = shadow_note(name)
        if note:
            click.echo(f"playpen: note: {note}", err=True)
    gen = dict(temperature=temperature, max_tokens=max_tokens)
    model = load_model_by_name(model_name, adapter=adapter, gen_args=gen)
    models = [model]
    if partner:
        models.append(load_model_by_name(partner, gen_args=gen, role="partner"))
    try:
        with turn_limit(max_turns):
            table = evaluate(models, names, results_dir=Path(results_dir), instances=instances,
                             batch_size=batch_size, max_instances=max_instances, run_name=run_name,
                             overwrite=overwrite, threads=threads,
                             extra={"model": model_name, "adapter": str(adapter) if adapter else None,
                                    "partner": partner})
    except GameLoadError as e:  # the games that did play still get their table
        if getattr(e, "table", None) is not None:
            click.echo(e.table.to_text())
            click.echo(f"results: {e.table.run_dir}")
        raise
    if as_json:
        click.echo(json.dumps(table.to_dict(), indent=1))
    else:
        click.echo(table.to_text())
        click.echo(f"results: {table.run_dir}")


def shadow_note(name: str):
    """For a plain game name with several copies: which copy it picks, and the others."""
    from playpen.registry import all_game_entries, resolve_game
    if ":" in name or "/" in name:
        return None
    entry = resolve_game(name)
    others = [e.qualified_name for e in all_game_entries() if e.name == entry.name and e.shadowed]
    if not others:
        return None
    return f"'{name}' is {entry.qualified_name} ({entry.path}); shadowed: {', '.join(others)}"
