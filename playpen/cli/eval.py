"""`playpen eval`: the clemscore table, a clemscore per game set, the static suite's statscore,
and `--compare` of two evaluations."""
from __future__ import annotations

import json
from pathlib import Path

import click

from playpen.cli import check_engine_choice, check_engine_options, engine_options, learner_engine, remote_options, \
    set_remote_limits, split_values
from playpen.cli.run import check_generation_options, check_output_folder
from playpen.envs.turns import MAX_TURNS_HELP, check_max_turns, turn_limit
from playpen.errors import EvaluationError, GameLoadError
from playpen.evaluation.game_sets import load_game_sets
from playpen.evaluation.splits import split_items
from playpen.evaluation.static_suite import load_tasks
from playpen.evaluation.suite import SUITES, check_no_earlier_static, evaluate_suite, suite_games
from playpen.registry import all_game_entries, game_specs, resolve_game


@click.command("eval")
@click.option("-m", "--model", "model_name", default=None,
              help="Registered model name (see `playpen list models`); `programmatic` works too.")
@click.option("-g", "--game", "games", multiple=True,
              help="Game(s) to evaluate, repeatable or comma-separated [default: the games of every game set].")
@click.option("-s", "--set", "set_names", multiple=True,
              help="Game set(s) of the sets file to evaluate, each with its own clemscore, repeatable or "
                   "comma-separated [default: every set, unless -g is given].")
@click.option("--sets-file", type=click.Path(), default=None,
              help="The game sets file [default: ./game_sets.json, else playpen's: in_domain, out_of_domain].")
@click.option("--suite", type=click.Choice(SUITES), default="clem", show_default=True,
              help="clem: play the games; static: lm-evaluation-harness tasks (statscore); all: both.")
@click.option("--task", "tasks", multiple=True,
              help="Static suite: lm-eval task or group name, or task YAML file, repeatable or comma-separated "
                   "[default: the sets file's static_tasks: playpen_word_clues, offline].")
@click.option("--include-path", "include_paths", multiple=True, type=click.Path(),
              help="Static suite: a folder of lm-eval task YAML files to find --task names in (repeatable).")
@click.option("--limit", type=click.IntRange(min=1), default=None,
              help="Static suite: at most N questions per task [default: all].")
@click.option("--compare", nargs=2, type=click.Path(), default=None, metavar="BEFORE AFTER",
              help="Print what changed between two evaluations (results folders or their JSON files): each set's "
                   "clemscore and the statscore, before -> after; nothing is evaluated.")
@click.option("--adapter", type=click.Path(), default=None,
              help="A PEFT adapter folder (e.g. models/sft+lora/<model>/checkpoint-N) loaded on top of MODEL.")
@click.option("-t", "--partner", default=None,
              help="Model playing the other roles of multi-player games [default: MODEL itself].")
@click.option("-i", "--instances", default=None,
              help="Instances file stem (in/STEM.json) for every game; refused when a game lacks it "
                   "[default: each game's own, as clemgame.json names it: the held-out set].")
@click.option("--split", default=None, metavar="dev|test",
              help="Play only this split's items of each game, as --splits FILE lists them (see docs/evaluation.md).")
@click.option("--splits", "splits_file", type=click.Path(), default=None, metavar="FILE",
              help="A splits file: {\"games\": {GAME: {\"instances\": STEM, \"dev\": [ITEMS], \"test\": [ITEMS]}}}, "
                   "an item '<experiment>/<game_id>' (e.g. benchmarks/protocol-splits.json).")
@click.option("-r", "--results-dir", type=click.Path(), default="results", show_default=True,
              help="Root of the results folders (one sub-folder per model/adapter).")
@click.option("--name", "run_name", default=None,
              help="Name of the results sub-folder [default: MODEL, MODEL+<adapter tag>, MODEL--PARTNER].")
@click.option("--overwrite", is_flag=True,
              help="Replace the run folder's earlier episodes of the games [default: refuse].")
@click.option("-n", "--max-instances", type=int, default=None,
              help="Play at most N instances per experiment [default: all].")
@click.option("-b", "--batch-size", type=int, default=8, show_default=True,
              help="Episodes generated together (batched generation); static suite: lm-eval's batch size.")
@click.option("-T", "--temperature", type=float, default=0.0, show_default=True)
@click.option("-L", "--max-tokens", type=int, default=300, show_default=True)
@engine_options
@click.option("--json", "as_json", is_flag=True, help="Print the table as JSON.")
@click.option("--threads", type=click.IntRange(min=0), default=None,
              help="torch CPU threads while playing; 0 = torch's default [default: 1 for a local model on "
                   "the CPU, torch's default otherwise; see benchmarks/README.md].")
@click.option("--max-turns", type=int, default=None, help=MAX_TURNS_HELP)
@remote_options
def eval_command(model_name, games, set_names, sets_file, suite, tasks, include_paths, limit, compare, adapter,
                 partner, instances, split, splits_file, results_dir, run_name, overwrite, max_instances, batch_size,
                 temperature, max_tokens, engine, vllm_url, engine_dtype, as_json, threads, max_turns,
                 connect_timeout, read_timeout, retries, retry_budget):
    """Evaluate MODEL (optionally with --adapter) on game sets and static benchmarks.

    Prints the clemscore table (% played, quality, clemscore per game and overall), the
    clemscore of each game set (in-domain, out-of-domain: see --sets-file), and with
    --suite static|all the statscore (mean of lm-evaluation-harness tasks' primary
    metrics). The game numbers are the ones `clem run`, `clem score` and `clem eval` give
    for the same episodes. Everything goes to RESULTS_DIR/<model[+adapter]>/ (clemcore
    layout, results.csv, playpen-eval.json, playpen-static.json). Earlier results there
    are kept: pass --name NEW for a new folder, or --overwrite to replace them. A remote
    model whose server does not answer stops the command before anything is written.

    \b
    Examples:
      playpen eval -m smol-135m -g referencegame
      playpen eval -m smol-135m --set in_domain --suite all
      playpen eval -m smol-135m --adapter models/sft+lora/smol-135m/checkpoint-8 --suite all
      playpen eval -m smol-135m -g taboo --split dev --splits benchmarks/protocol-splits.json
      playpen eval --compare results/smol-135m results/smol-135m+sft+lora-checkpoint-8
    """
    if compare:
        from playpen.evaluation.compare import compare_runs
        comparison = compare_runs(*compare)
        click.echo(json.dumps(comparison.to_dict(), indent=1) if as_json else comparison.to_text())
        return
    if not model_name:
        raise click.UsageError("Missing option '-m' / '--model' (or --compare BEFORE AFTER).")
    from playpen.models import adapter_tag, check_adapter, check_model_name, load_model_by_name
    if max_instances is not None and max_instances < 1:
        raise EvaluationError("--max-instances must be at least 1")
    if batch_size < 1:
        raise EvaluationError("--batch-size must be at least 1")
    check_generation_options(temperature, max_tokens)
    check_engine_choice(engine, vllm_url, engine_dtype)
    if learner_engine(engine, vllm_url, engine_dtype) and suite != "clem":
        raise EvaluationError("--engine/--vllm-url choose who generates the games' turns: they need --suite clem "
                              "(the static suite scores log-likelihoods with transformers)")
    check_output_folder(results_dir, "-r/--results-dir")
    if run_name is not None and (not run_name.strip() or Path(run_name).name != run_name or run_name in (".", "..")):
        raise EvaluationError(f"option --name: {run_name!r} is not valid; expected a folder name (no '/', "
                              f"not '..'): the sub-folder of -r/--results-dir the results go to")
    check_max_turns(max_turns)
    set_remote_limits(connect_timeout, read_timeout, retries, retry_budget)
    if adapter is not None:
        check_adapter(adapter)
    # fail on names before loading any weights
    entry = check_model_name(model_name)
    if partner:
        check_model_name(partner, "partner")
    if learner_engine(engine, vllm_url, engine_dtype):
        if entry.backend != "huggingface_local":
            raise EvaluationError(f"--engine generates with a huggingface_local model; '{model_name}' uses "
                                  f"backend '{entry.backend}'")
        check_engine_options(engine, vllm_url, engine_dtype)
    names, set_names, tasks = split_values(games), split_values(set_names), split_values(tasks)
    if suite == "static" and (names or set_names):
        raise EvaluationError("-g/--set choose games: they need --suite clem or all (--suite static plays none)")
    if suite == "clem" and (tasks or include_paths or limit):
        raise EvaluationError("--task, --include-path and --limit are for the static suite: add --suite static or all")
    wants_sets = (suite != "static" and (set_names or not names)) or (suite != "clem" and not tasks)
    game_sets = load_game_sets(sets_file) if wants_sets or sets_file or set_names else None
    items = None
    if split is not None or splits_file is not None:
        if split is None or splits_file is None:
            raise EvaluationError("--split and --splits go together: --split dev|test --splits FILE")
        if suite == "static":
            raise EvaluationError("--split chooses game instances: it needs --suite clem or all")
    if suite != "static":
        play, _ = suite_games(game_sets, set_names, names)
        if split is not None:
            items, split_instances = split_items(splits_file, split, [s.game_name for s in game_specs(play)])
            instances = instances or split_instances
        game_specs(play, instances)
        for name in names:
            note = shadow_note(name)
            if note:
                click.echo(f"playpen: note: {note}", err=True)
    if suite != "clem":
        tasks = tasks or list(game_sets.static_tasks)
        if entry.backend != "huggingface_local":
            raise EvaluationError(f"the static suite needs a huggingface_local model (lm-eval scores its "
                                  f"log-likelihoods); '{model_name}' uses backend '{entry.backend}'")
        load_tasks(tasks, include_paths)
        if not overwrite:  # the folder evaluate_suite will write to, before any weights load
            label = f"{model_name}+{adapter_tag(adapter, model_name)}" if adapter else model_name
            folder = run_name or "--".join([label, partner] if partner else [label])
            check_no_earlier_static(Path(results_dir) / folder)
    gen = dict(temperature=temperature, max_tokens=max_tokens)
    model = load_model_by_name(model_name, adapter=adapter, gen_args=gen)
    if learner_engine(engine, vllm_url, engine_dtype):  # the games' turns through playpen.inference.generate
        from playpen.rollouts import Learner, SamplingConfig
        from playpen.rollouts.partners import engine_player
        sampling = SamplingConfig.from_gen_args({**gen, **learner_engine(engine, vllm_url, engine_dtype)},
                                                max_batch_size=batch_size)
        model = engine_player(Learner.from_clem(model, sampling))
    models = [model]
    if partner:
        models.append(load_model_by_name(partner, gen_args=gen, role="partner"))
    try:
        with turn_limit(max_turns):
            result = evaluate_suite(models, suite=suite, game_sets=game_sets, set_names=set_names, games=names,
                                    tasks=tasks, include_paths=include_paths, results_dir=Path(results_dir),
                                    run_name=run_name, instances=instances, batch_size=batch_size,
                                    max_instances=max_instances, limit=limit, overwrite=overwrite, threads=threads,
                                    items=items,
                                    extra={"model": model_name, "adapter": str(adapter) if adapter else None,
                                           "partner": partner,
                                           **({"split": split, "splits_file": str(splits_file)} if split else {})})
    except GameLoadError as e:  # the games that did play still get their tables
        if getattr(e, "suite", None) is not None:
            click.echo(e.suite.to_text())
            click.echo(f"results: {e.suite.run_dir}")
        raise
    if as_json:
        table = result.table.to_dict() if result.table is not None else {"run_dir": str(result.run_dir)}
        extra = result.to_dict()
        click.echo(json.dumps({**table, **{k: extra[k] for k in ("sets", "static") if k in extra}}, indent=1))
    else:
        click.echo(result.to_text())
        click.echo(f"results: {result.run_dir}")


def shadow_note(name: str):
    """For a plain game name with several copies: which copy it picks, and the others."""
    if ":" in name or "/" in name:
        return None
    entry = resolve_game(name)
    others = [e.qualified_name for e in all_game_entries() if e.name == entry.name and e.shadowed]
    if not others:
        return None
    return f"'{name}' is {entry.qualified_name} ({entry.path}); shadowed: {', '.join(others)}"
