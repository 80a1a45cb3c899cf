"""The learning protocol's forgetting stage: what each final configuration lost outside the games it plays.

Most LM Playschool entries gained clemscore on their games while losing out-of-domain
clemscore or statscore. For the base model and each final configuration — the warm-up
(``sft``) and each method's last adapter, per seed — this stage measures, with the code
``playpen eval`` uses (:func:`playpen.evaluation.suite.evaluate_suite`):

- the clemscore of the out-of-domain set of playpen's sets file (``--forgetting-set``), over
  its games that no protocol method trains (taboo, privateshared, arith_solver and
  referencegame are left out, for every configuration alike), ``--forgetting-instances``
  instances per experiment, the learner greedy in every role;
- the statscore of the sets file's static tasks (lm-evaluation-harness, offline:
  ``playpen_word_clues``), ``--forgetting-static-limit`` questions per task.

It is a stage of its own, beside the test results and never changing them: it reads the
adapters the methods saved (``work/seed-N/models/METHOD/.../checkpoint-N``, the last one, as
the test split played it; a failed method: the warm-up's) and writes
``forgetting--METHOD--seedN.json`` (``forgetting--base.json`` for the base model), each keyed
by its own fingerprint: the adapter, the configuration's test-result fingerprint and the
evaluation settings. So it can run after the fact on the seeds that finished
(``protocol.py --forgetting-only``) or after each seed (``--forgetting``); a changed setting or
a retrained method measures again. The report's forgetting table: ``protocol_report.py``.
"""
from __future__ import annotations

import json
import math
import shutil
import time
from pathlib import Path

from harness import fingerprint, run_dir_of  # the benchmarks' shared module (this folder is on sys.path)
from protocol_report import BASE, WARM_UP, forgetting_file

from playpen.envs.turns import max_turns
from playpen.errors import GameLoadError, PlaypenError
from playpen.evaluation.game_sets import DEFAULT_SETS_FILE, GameSets, load_game_sets, table_names
from playpen.evaluation.static_suite import load_tasks
from playpen.evaluation.suite import evaluate_suite
from playpen.files import write_json
from playpen.models import load_model_by_name
from playpen.training.common.checkpoints import latest_checkpoint


def forgetting_games(args, protocol_games) -> tuple[object, list[str], list[str]]:
    """(the sets file, the games measured, the static tasks); PlaypenError (one line) when the
    set is unknown, has no game left, or lm-eval or a task cannot be loaded."""
    sets = load_game_sets(args.forgetting_sets_file or DEFAULT_SETS_FILE)
    members = table_names(sets.resolve([args.forgetting_set]))[args.forgetting_set]
    games = [g for g in members if g not in protocol_games]
    if not games:
        raise PlaypenError(f"set '{args.forgetting_set}' of {sets.path} has no game the protocol does not train")
    tasks = list(sets.static_tasks)
    if tasks:
        load_tasks(tasks)
    return sets, games, tasks


def final_configurations(seed: int, names, out: Path, work: Path) -> list[tuple[str, Path, str, bool]]:
    """(method, adapter, its test results' fingerprint, whether it failed) of the seed's
    finished configurations: those whose test results exist (the warm-up's adapter: its
    marker's, when it is the one its test played)."""
    marker = work / f"seed-{seed}" / "warm-up.json"
    tested = final_results(out, WARM_UP, seed)
    if not marker.exists() or not tested:
        return []
    warm = json.loads(marker.read_text(encoding="utf-8"))
    if Path(warm["adapter"]).name != f"checkpoint-{tested[0]['steps']}":
        print(f"== forgetting: seed {seed}'s warm-up changed since its test ({warm['adapter']}); skipped", flush=True)
        return []
    found = [(WARM_UP, Path(warm["adapter"]), tested[0]["fingerprint"], False)]
    for name in names:
        if name == WARM_UP:
            continue
        results = final_results(out, name, seed)
        if not results:
            continue  # not finished (or not run) for this seed
        failed = any(r.get("failed") for r in results)
        if failed:  # its policy stayed the warm-up's, as its test played it
            adapter = Path(warm["adapter"])
        else:
            run_dir = run_dir_of(work / f"seed-{seed}" / "models" / name)
            adapter = latest_checkpoint(run_dir) if run_dir else None
            if adapter is None:
                print(f"== forgetting: {name} seed {seed} has test results but no saved adapter; skipped", flush=True)
                continue
        found.append((name, adapter, results[0]["fingerprint"], failed))
    return found


def final_results(out: Path, name: str, seed: int) -> list[dict]:
    """The test results of one configuration (``<method>--seed<S>--<game>--<role>.json``; with
    the settings added after its selection)."""
    return [json.loads(p.read_text(encoding="utf-8")) for p in sorted(out.glob(f"{name}--seed{seed}--*.json"))]


def settings_of(args, games: list[str], tasks: list[str]) -> dict:
    return {"learner": args.learner, "set": args.forgetting_set, "games": games,
            "instances_per_experiment": args.forgetting_instances, "static_tasks": tasks,
            "static_limit": args.forgetting_static_limit, "max_tokens": args.max_tokens, "max_turns": max_turns()}


def measure(adapter: Path | None, label: str, sets, games: list[str], tasks: list[str], args, work: Path) -> dict:
    """The set's clemscore and the statscore of the learner (+ `adapter`), greedy."""
    name = args.forgetting_set
    learner = load_model_by_name(args.learner, gen_args=dict(temperature=0.0, max_tokens=args.max_tokens),
                                 role="learner", adapter=adapter, run_name=label)
    only = GameSets(sets.path, {name: tuple(games)}, tuple(tasks))
    results, run_name = work / "results", f"forgetting--{label}"
    shutil.rmtree(results / run_name, ignore_errors=True)  # the folder holds exactly this measurement
    notes = []
    try:
        clem = evaluate_suite([learner], suite="clem", game_sets=only, set_names=[name], results_dir=results,
                              run_name=run_name, max_instances=args.forgetting_instances or None, batch_size=16,
                              overwrite=True)
    except GameLoadError as e:  # the games that played still count; the note says which did not
        if getattr(e, "suite", None) is None:
            raise
        clem, notes = e.suite, [str(e)]
    score = clem.sets[name]
    out = {"clemscore": score.clemscore, "num_episodes": score.num_episodes, "percent_played": score.percent_played,
           "quality": None if math.isnan(score.quality) else score.quality, "missing_games": list(score.missing),
           "per_game": [{**g.__dict__, "quality": None if math.isnan(g.quality) else g.quality,
                         "clemscore": g.clemscore} for g in clem.table.games],
           "results_dir": str(clem.run_dir), "notes": notes}
    if tasks:
        static = evaluate_suite([learner], suite="static", tasks=tasks, results_dir=results, run_name=run_name,
                                limit=args.forgetting_static_limit or None, batch_size=16, overwrite=True).static
        out.update(statscore=static.statscore, static=static.to_dict()["tasks"],
                   num_questions=sum(t.num_samples or 0 for t in static.tasks))
    del learner
    return out


def run_forgetting(seeds, names, args, out: Path, work: Path, protocol_games) -> None:
    """The base model once, then every finished final configuration of `seeds`; each cached."""
    sets, games, tasks = forgetting_games(args, protocol_games)
    settings = settings_of(args, games, tasks)
    jobs = [(BASE, None, None, "", False)]
    for seed in seeds:
        jobs += [(name, seed, adapter, key, failed)
                 for name, adapter, key, failed in final_configurations(seed, names, out, work)]
    for name, seed, adapter, config_key, failed in jobs:
        adapter_id = None if adapter is None else _relative(adapter, work)
        key = fingerprint(("forgetting", name, seed, adapter_id, config_key, settings))
        path = out / forgetting_file(name, seed)
        if path.exists() and json.loads(path.read_text(encoding="utf-8")).get("fingerprint") == key:
            continue
        print(f"== forgetting: {name}{'' if seed is None else f' seed {seed}'} ({adapter_id or 'no adapter'})",
              flush=True)
        started = time.time()
        label = BASE if seed is None else f"seed{seed}-{name}"
        measured = measure(adapter, label, sets, games, tasks, args, work)
        write_json(path, {"method": name, "seed": seed, "adapter": adapter_id, "fingerprint": key,
                          "config_fingerprint": config_key, "failed": failed, **settings, **measured,
                          "seconds": round(time.time() - started, 1)}, indent=1)


def _relative(adapter: Path, work: Path) -> str:
    """The adapter as the fingerprint names it: below the work folder, so a moved checkout keeps its keys."""
    try:
        return str(Path(adapter).resolve().relative_to(work.resolve()))
    except ValueError:
        return str(adapter)

